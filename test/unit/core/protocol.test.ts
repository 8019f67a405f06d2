/**
 * The wire constants (docs/contract: mcp, events, limits) and the error types of the core.
 */
import { callbackEndpointError, DependencyUnavailable, guardDependency, invalidParams, ProtocolFault } from '../../../lambda/core/errors';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  ErrorCodes,
  EventsProfiles,
  FailureReasons,
  Limits,
  MESSAGE_CREATED_DEFINITION,
  SERVER_CAPABILITIES,
  WebhookHeaders,
} from '../../../lambda/core/protocol';

describe('protocol constants', () => {
  test('EV-2: error codes match docs/contract/http.md-4', () => {
    expect(ErrorCodes).toMatchObject({
      parseError: -32700,
      methodNotFound: -32601,
      invalidParams: -32602,
      internalError: -32603,
      subscriptionConflict: -32000,
      callbackEndpointError: -32015,
      headerMismatch: -32020,
      unsupportedProtocolVersion: -32022,
    });
  });

  test('EV-CHAL-9: the failure categories are exactly those of docs/contract/events.md', () => {
    expect([...FailureReasons].sort()).toEqual(['challenge_failed', 'connection_refused', 'http_4xx', 'http_5xx', 'timeout', 'tls_error']);
  });

  test('EV-LIST-1, EV-LIST-2: events/list describes message.created exactly as docs/contract/events.md', () => {
    expect(JSON.parse(JSON.stringify(MESSAGE_CREATED_DEFINITION))).toEqual({
      name: 'message.created',
      description: 'A new message addressed to the single configured dot.',
      delivery: ['webhook'],
      inputSchema: { type: 'object', properties: {}, additionalProperties: false },
      payloadSchema: { type: 'object', properties: { message: { type: 'string' } }, required: ['message'], additionalProperties: false },
    });
  });

  test('MCP-12, MCP-13: capabilities announce events both ways and never listChanged: true', () => {
    expect(JSON.parse(JSON.stringify(SERVER_CAPABILITIES))).toEqual({
      tools: { listChanged: false },
      events: {},
      extensions: { 'io.modelcontextprotocol/events': {} },
    });
  });

  test('header names are the Standard Webhooks and MCP ones, lower case', () => {
    expect(WebhookHeaders).toEqual({
      id: 'webhook-id',
      timestamp: 'webhook-timestamp',
      signature: 'webhook-signature',
      subscriptionId: 'x-mcp-subscription-id',
    });
  });

  test('LIM-1, LIM-2, LIM-3, LIM-4, LIM-5, LIM-6, LIM-7, LIM-8, LIM-9, LIM-11: limits match docs/contract/limits.md', () => {
    expect(Limits).toMatchObject({
      messageMaxBytes: 16_384,
      requestBodyMaxBytes: 1_048_576,
      outboundBodyMaxBytes: 262_144,
      outboundDeadlineMs: 5_000,
      outboundResponseMaxBytes: 1_048_576,
      callbackUrlMaxChars: 2_048,
      secretMinBytes: 24,
      secretMaxBytes: 64,
      ttlMinMs: 60_000,
      ttlDefaultMs: 604_800_000,
      ttlMaxMs: 604_800_000,
      rotationOverlapMs: 600_000,
      verificationCacheMs: 86_400_000,
      inboundSignatureToleranceS: 300,
      replayMemoryMs: 600_000,
      deliveryWaitDefaultMs: 3_000,
      deadLetterRetentionDays: 14,
    });
  });

  test('DEL-PIPE-9: the delivery wait cap keeps a request under 5 s', () => {
    expect(Limits.deliveryWaitMaxMs).toBeLessThan(5_000);
  });
});

describe('errors', () => {
  test('invalidParams is a -32602 ProtocolFault with the given message', () => {
    const fault = invalidParams('ttlMs must be null');
    expect(fault).toBeInstanceOf(ProtocolFault);
    expect(fault).toMatchObject({ code: -32602, message: 'ttlMs must be null', data: undefined });
  });

  test('callbackEndpointError is -32015 CallbackEndpointError with data.reason', () => {
    expect(callbackEndpointError('timeout')).toMatchObject({ code: -32015, message: 'CallbackEndpointError', data: { reason: 'timeout' } });
  });

  test('guardDependency passes a result through', async () => {
    await expect(guardDependency('storage', async () => 42)).resolves.toBe(42);
  });

  test('guardDependency turns any failure into DependencyUnavailable, keeping the cause', async () => {
    const cause = new Error('ProvisionedThroughputExceededException');
    const error = await guardDependency('queue', async () => {
      throw cause;
    }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(DependencyUnavailable);
    expect(error).toMatchObject({ dependency: 'queue', cause });
    expect((error as Error).message).toBe('queue unavailable');
  });

  test('guardDependency keeps an inner DependencyUnavailable as it is', async () => {
    const inner = new DependencyUnavailable('storage');
    await expect(guardDependency('queue', async () => Promise.reject(inner))).rejects.toBe(inner);
  });
});

describe('MCP-CODE-1: no JSON-RPC code in -32020..-32099 that the specification does not define', () => {
  // -32020..-32022: MCP 2026-07-28; -32023..-32027: the SEP-3415 events profile.
  const DEFINED = new Set([-32020, -32021, -32022, -32023, -32024, -32025, -32026, -32027]);
  const reserved = (code: number) => code <= -32020 && code >= -32099;

  test('MCP-CODE-1: every code in ErrorCodes and in both events profiles is defined where it is reserved', () => {
    const codes = [...Object.values(ErrorCodes), ...Object.values(EventsProfiles).flatMap((profile) => Object.values(profile.codes))];
    expect(codes.filter((code) => reserved(code) && !DEFINED.has(code))).toEqual([]);
  });

  test('MCP-CODE-1: no source file under lambda/ names a code of the reserved range the specification does not define', () => {
    const lambdaDir = join(__dirname, '..', '..', '..', 'lambda');
    const files = (readdirSync(lambdaDir, { recursive: true }) as string[]).filter((file) => file.endsWith('.ts'));
    expect(files.length).toBeGreaterThan(50);
    const found = files.flatMap((file) => {
      const codes = [...readFileSync(join(lambdaDir, file), 'utf8').matchAll(/-320[2-9]\d\b/g)].map((m) => Number(m[0]));
      return codes.filter((code) => !DEFINED.has(code)).map((code) => `${file}: ${code}`);
    });
    expect(found).toEqual([]);
  });
});
