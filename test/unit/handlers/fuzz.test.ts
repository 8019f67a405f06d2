/**
 * Fuzzing of the MCP Lambda: over 3,000 generated payload 2.0 events sent straight into
 * `createMcpLambda` (over the in-memory fakes and a fake key loader), the way API Gateway invokes
 * it. test/unit/http/fuzz.test.ts fuzzes the app behind it with web Requests; this file adds what only the
 * Lambda sees: the event itself. Header names in any case (and the same name twice in different
 * cases), no `headers` object at all, `cookies` arrays, `rawQueryString` with repeated, empty or
 * bare `key`, `isBase64Encoded` bodies that are not base64, base64 bodies over 1 MiB, odd methods,
 * paths, request ids and domain names. Invariants:
 *
 * - the handler never throws and never answers 5xx; every result is a well-formed structured
 *   result (integer status, string headers, string body, boolean isBase64Encoded, no cookies);
 * - every body is JSON (or SSE whose data is JSON); empty only for 202 and 204; 4xx always JSON;
 * - no stack trace, and neither the API key nor a webhook secret in an answer or a log line, no
 *   internal error logged, -32603 only with the generic sentence (or the SDK's known schema-error answer, see test/support/app.ts);
 * - `x-request-id` is the event's request id when that is a usable token, else a fresh UUID;
 * - a model of the checks before the body is read (route, Origin, key, method, Content-Type,
 *   size) holds, and POST /mcp with a valid key and a JSON content type answers JSON-RPC;
 * - differential: for any web Request, the Lambda behind the local API Gateway and the local app
 *   answer the same (status, headers but `x-request-id` and hop-by-hop ones, JSON body).
 *
 * The value and JSON-RPC generators are the HTTP fuzz's (test/support/fuzz-values.ts); the events,
 * their framing and the invariants are this file's.
 *
 * Fixed seed by default; FC_SEED=<n> overrides it; FUZZ_STATS=1 prints the outcomes.
 */
import type { APIGatewayProxyEventV2, APIGatewayProxyStructuredResultV2 } from 'aws-lambda';
import fc from 'fast-check';
import {
  API_KEY,
  BASE,
  buildApp,
  echoingWebhook,
  expectGenericInternalErrors,
  expectRpcResponses,
  fuzzParams,
  hasStackTrace,
  isRpcResponse,
  liveSubscription,
  MODERN,
  readAnswer,
  rpcErrorCode,
  SECRET,
  type Answer,
  type LogLine,
} from '../../support/app';
import { asApp, buildLambda, resultText, type TestLambda } from '../../support/lambda';
import { ABSENT, b64, headerValue, hugeString, oddChar, oddString, rarely, rpcMessage, secretArb, urlArb } from '../../support/fuzz-values';

const MiB = 1024 * 1024;
const ALLOWED_ORIGIN = 'https://inspector.example';
const WRONG = 'not-the-key';
const VALID_SECRETS = [SECRET, `whsec_${b64(24)}`, `whsec_${b64(64)}`];
const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

const RUNS = { mcpEvents: 1_300, anyEvent: 1_200, differential: 600, size: 80 };
let eventsSent = 0;

// ---------------------------------------------------------------------------------------------
// Generators

/** The bytes of a /mcp body: one message, a batch, broken JSON, any JSON value, raw bytes, or padded. */
const mcpBody = fc
  .record({
    first: rpcMessage,
    more: fc.array(rpcMessage, { maxLength: 2 }),
    framing: fc.oneof(
      { weight: 12, arbitrary: fc.constant('single') },
      { weight: 2, arbitrary: fc.constant('batch') },
      { weight: 3, arbitrary: fc.constant('broken') },
      { weight: 1, arbitrary: fc.constant('value') },
      { weight: 1, arbitrary: fc.constant('bytes') },
      { weight: 1, arbitrary: fc.constant('padded') },
    ),
    cut: fc.nat(),
    value: fc.jsonValue({ maxDepth: 2 }),
    bytes: fc.uint8Array({ maxLength: 64 }),
    pad: fc.constantFrom('\ufeff', ' \n\t', '\u0000'),
  })
  .map((c) => {
    const serialized = JSON.stringify(c.first.message);
    const text =
      c.framing === 'single'
        ? serialized
        : c.framing === 'batch'
          ? JSON.stringify([c.first.message, ...c.more.map((m) => m.message)])
          : c.framing === 'broken'
            ? serialized.slice(0, c.cut % Math.max(1, serialized.length))
            : c.framing === 'value'
              ? JSON.stringify(c.value)
              : c.framing === 'padded'
                ? c.pad + serialized + c.pad
                : undefined;
    const bytes = text === undefined ? Buffer.from(c.bytes) : Buffer.from(text, 'utf8');
    return { method: String(c.first.method), message: c.first.message, bytes };
  });

/** A well-formed request of the 2026-07-28 era (its values may still be refused), for answers past the envelope checks. */
const cleanBody = fc
  .record({
    method: fc.constantFrom('ping', 'server/discover', 'tools/list', 'tools/call', 'tools/call', 'events/list', 'events/subscribe', 'events/unsubscribe'),
    id: fc.oneof(fc.integer({ min: 0, max: 1_000_000 }), fc.string({ maxLength: 8 })),
    message: fc.oneof({ weight: 6, arbitrary: oddString }, { weight: 1, arbitrary: hugeString }),
    url: fc.oneof({ weight: 3, arbitrary: fc.constant('https://dot.example/hook') }, { weight: 1, arbitrary: urlArb }),
    secret: secretArb,
  })
  .map((c) => {
    const params: Record<string, unknown> =
      c.method === 'tools/call'
        ? { name: 'send_to_dot', arguments: { message: c.message } }
        : c.method === 'events/subscribe'
          ? { name: 'message.created', arguments: {}, delivery: { mode: 'webhook', url: c.url, secret: c.secret } }
          : c.method === 'events/unsubscribe'
            ? { name: 'message.created', arguments: {}, delivery: { mode: 'webhook', url: c.url } }
            : {};
    const message = {
      jsonrpc: '2.0',
      id: c.id,
      method: c.method,
      params: { ...params, _meta: { 'io.modelcontextprotocol/protocolVersion': MODERN, 'io.modelcontextprotocol/clientCapabilities': {} } },
    };
    return { method: c.method, message: message as Record<string, unknown>, bytes: Buffer.from(JSON.stringify(message), 'utf8') };
  });

/** Random upper/lower case of a header name (API Gateway sends lower case; the handler must not care). */
const casing = (name: string) =>
  fc
    .constantFrom<(s: string) => string>(
      (s) => s,
      (s) => s.toUpperCase(),
      (s) => s.replace(/(^|-)([a-z])/g, (_, d: string, c: string) => d + c.toUpperCase()),
    )
    .map((f) => f(name));

// ---------------------------------------------------------------------------------------------
// Events and invariants

interface EventParts {
  method?: string | typeof ABSENT;
  rawPath?: string | typeof ABSENT;
  rawQueryString?: string;
  headers?: Record<string, string> | typeof ABSENT;
  cookies?: string[];
  body?: string;
  isBase64Encoded?: boolean;
  requestId?: string | typeof ABSENT;
  domainName?: string;
}

let counter = 0;
function makeEvent(p: EventParts): APIGatewayProxyEventV2 {
  const requestId = p.requestId === undefined ? `fuzz-${++counter}` : p.requestId;
  const method = p.method === undefined ? 'POST' : p.method;
  const event = {
    version: '2.0',
    routeKey: '$default',
    rawPath: p.rawPath === undefined ? '/mcp' : p.rawPath,
    rawQueryString: p.rawQueryString ?? '',
    headers: p.headers === undefined ? {} : p.headers,
    requestContext: {
      accountId: '000000000000',
      apiId: 'fuzz',
      domainName: p.domainName ?? 'abc.execute-api.eu-west-1.amazonaws.com',
      domainPrefix: 'abc',
      http: method === ABSENT ? undefined : { method, path: '/', protocol: 'HTTP/1.1', sourceIp: '203.0.113.9', userAgent: 'fuzz' },
      requestId: requestId === ABSENT ? undefined : requestId,
      routeKey: '$default',
      stage: '$default',
      time: '01/Jan/2026:00:00:00 +0000',
      timeEpoch: 0,
    },
    isBase64Encoded: p.isBase64Encoded ?? false,
  } as Record<string, any>;
  if (p.rawPath === ABSENT) delete event.rawPath;
  if (p.headers === ABSENT) delete event.headers;
  if (method === ABSENT) delete event.requestContext.http;
  if (requestId === ABSENT) delete event.requestContext.requestId;
  if (p.cookies) event.cookies = p.cookies;
  if (p.body !== undefined) event.body = p.body;
  return event as APIGatewayProxyEventV2;
}

const outcomes = new Map<string, number>();
let sdkSchemaAnswers = 0;

/** Invokes the Lambda; a throw fails the property with the cause. */
async function invoke(t: TestLambda, event: APIGatewayProxyEventV2): Promise<{ result: APIGatewayProxyStructuredResultV2; answer: Answer }> {
  eventsSent++;
  let result: APIGatewayProxyStructuredResultV2;
  try {
    result = await t.lambda(event);
  } catch (error) {
    throw new Error(`the MCP Lambda threw: ${error instanceof Error ? `${error.name}: ${error.message}` : String(error)}`);
  }
  const answer = await readAnswer(
    new Response(resultText(result), {
      status: result.statusCode === 204 ? 200 : (result.statusCode ?? 200),
      headers: result.headers as Record<string, string>,
    }),
  );
  answer.status = result.statusCode ?? 0;
  const values = Array.isArray(answer.json) ? answer.json : [answer.json];
  const codes = values.map(
    (v) =>
      rpcErrorCode(v) ??
      (v as { error?: { code?: unknown } } | undefined)?.error?.code ??
      ((v as { result?: unknown } | undefined)?.result !== undefined ? 'result' : '-'),
  );
  const key = `${answer.status} ${[...new Set(codes)].join(',')}`;
  outcomes.set(key, (outcomes.get(key) ?? 0) + 1);
  return { result, answer };
}

afterAll(() => {
  if (process.env.FUZZ_STATS === '1') {
    const rows = [...outcomes.entries()].sort((a, b) => b[1] - a[1]).map(([k, n]) => `${String(n).padStart(6)}  ${k}`);
    process.stdout.write(`\nfuzz-lambda outcomes (${eventsSent} events; ${sdkSchemaAnswers} were the SDK schema-error answer):\n${rows.join('\n')}\n`);
  }
});

const SAFE_REQUEST_ID = /^[\x21-\x7e]{1,128}$/;

/** What every result keeps, whatever the event. */
function expectSane(t: TestLambda, event: APIGatewayProxyEventV2, result: APIGatewayProxyStructuredResultV2, answer: Answer): void {
  expect(Number.isInteger(result.statusCode)).toBe(true);
  expect(answer.status).toBeGreaterThanOrEqual(200);
  expect(answer.status).toBeLessThan(500);
  expect(typeof result.body).toBe('string');
  expect(typeof result.isBase64Encoded).toBe('boolean');
  expect(result.cookies).toBeUndefined();
  for (const value of Object.values(result.headers ?? {})) expect(typeof value).toBe('string');
  if (result.body !== '') expect(result.headers?.['content-type']).toMatch(/^(application\/json|text\/event-stream)/);
  // JSON and SSE answers are text: never base64 (API Gateway would pass base64 through as is).
  expect(result.isBase64Encoded).toBe(false);

  expect(answer.unreadable).toBe(false);
  expect(hasStackTrace(answer.text)).toBe(false);
  expect(answer.text).not.toContain(API_KEY);
  const logText = JSON.stringify(t.logs);
  expect(logText).not.toContain(API_KEY);
  for (const secret of VALID_SECRETS) {
    expect(answer.text).not.toContain(secret);
    expect(logText).not.toContain(secret);
  }
  if (answer.status >= 400) {
    expect(result.headers?.['content-type']).toMatch(/^application\/json/);
    expect(() => JSON.parse(answer.text)).not.toThrow();
  }
  if (answer.text === '') expect([202, 204]).toContain(answer.status);
  sdkSchemaAnswers += expectGenericInternalErrors(answer, '[^)]+');
  expect(t.logs.filter((line: LogLine) => line.level === 'error')).toEqual([]);

  // The malformed-event answer (400 bad_request) is the handler's own and carries no request id.
  const isBadEvent = answer.status === 400 && (answer.json as { error?: { code?: unknown } } | undefined)?.error?.code === 'bad_request';
  if (!isBadEvent) {
    const sent = event.requestContext?.requestId;
    const got = result.headers?.['x-request-id'];
    if (typeof sent === 'string' && SAFE_REQUEST_ID.test(sent)) expect(got).toBe(sent);
    else expect(got).toMatch(UUID_RE);
  }
}

/** POST /mcp, valid key, JSON content type: JSON-RPC responses, or 202 and nothing. */
function expectRpcAnswer(answer: Answer, bytes: Buffer): void {
  let parsed: unknown = ABSENT;
  try {
    parsed = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(bytes));
  } catch {
    // not JSON: any JSON-RPC error will do
  }
  expectRpcResponses(answer, parsed);
}

function reset(t: TestLambda): void {
  t.logs.length = 0;
  t.store.calls.length = 0;
  t.store.events.clear();
  t.queue.jobs.length = 0;
}

// ---------------------------------------------------------------------------------------------
// Properties

describe('fuzz: MCP events with a valid key and a JSON content type answer JSON-RPC', () => {
  let t: TestLambda;
  beforeAll(() => {
    t = buildLambda({ allowedOrigins: [ALLOWED_ORIGIN] }, { webhook: echoingWebhook });
  });

  /** Ways to carry the valid key in an event: each must authenticate. */
  const validKey = fc.oneof(
    fc.constant({ query: `key=${encodeURIComponent(API_KEY)}` }),
    fc.constant({ query: `key=${API_KEY}&key=${WRONG}` }),
    fc.constant({ query: `x=1&key=${API_KEY}&key=` }),
    fc.constant({ query: `key=${API_KEY}&key` }),
    fc.constant({ query: `a=%ZZ&key=${API_KEY}` }),
    casing('authorization').map((name) => ({ query: '', header: [name, `Bearer ${API_KEY}`] as const })),
    casing('authorization').map((name) => ({ query: `k=${WRONG}`, header: [name, `bearer   ${API_KEY}`] as const })),
  );

  const arb = fc.record({
    body: mcpBody,
    key: validKey,
    ctName: casing('content-type'),
    contentType: fc.constantFrom('application/json', 'application/json; charset=utf-8', 'Application/JSON'),
    era: fc.constantFrom('modern', 'modern', 'legacy', 'bare'),
    headerCase: fc.array(fc.nat(), { minLength: 4, maxLength: 4 }),
    accept: fc.oneof(
      { weight: 6, arbitrary: fc.constant('application/json, text/event-stream') },
      { weight: 1, arbitrary: fc.constantFrom('application/json', 'text/event-stream', '*/*', 'text/html') },
      { weight: 1, arbitrary: fc.constant(ABSENT) },
    ),
    base64: fc.boolean(),
    cookies: rarely(fc.array(fc.oneof(fc.constantFrom('a=1', '', 'key=x', `key=${WRONG}`), oddString), { minLength: 1, maxLength: 3 }), 4),
    origin: rarely(fc.constant(ALLOWED_ORIGIN), 6),
    extra: rarely(
      fc.tuple(fc.constantFrom('mcp-session-id', 'last-event-id', 'x-forwarded-for', 'x-amzn-trace-id', 'content-length'), oddString.map(headerValue)),
      6,
    ),
    requestId: fc.oneof(
      { weight: 20, arbitrary: fc.constant(undefined) },
      { weight: 1, arbitrary: fc.constant(ABSENT) as fc.Arbitrary<typeof ABSENT> },
      { weight: 1, arbitrary: oddString },
    ),
  });

  test(`${RUNS.mcpEvents} events: JSON-RPC answers, whatever the encoding, header case or key placement`, async () => {
    await fc.assert(
      fc.asyncProperty(arb, async (c) => {
        reset(t);
        const headers: Record<string, string> = { [c.ctName]: c.contentType };
        const pick = <T>(i: number, names: T[]) => names[c.headerCase[i]! % names.length]!;
        if (c.accept !== ABSENT) headers[pick(0, ['accept', 'Accept', 'ACCEPT'])] = c.accept;
        const params = (c.body.message.params ?? {}) as Record<string, unknown>;
        const metaVersion = (params._meta as Record<string, unknown> | undefined)?.['io.modelcontextprotocol/protocolVersion'];
        if (c.era === 'modern') {
          if (typeof metaVersion === 'string') headers[pick(1, ['mcp-protocol-version', 'MCP-Protocol-Version'])] = headerValue(metaVersion);
          headers[pick(2, ['mcp-method', 'Mcp-Method'])] = headerValue(c.body.method);
          if (c.body.method === 'tools/call' && typeof params.name === 'string') headers[pick(3, ['mcp-name', 'Mcp-Name'])] = headerValue(params.name);
        } else if (c.era === 'legacy') {
          headers['mcp-protocol-version'] = '2025-11-25';
        }
        if ('header' in c.key) headers[c.key.header[0]] = c.key.header[1];
        if (c.origin) headers[pick(0, ['origin', 'Origin'])] = c.origin;
        if (c.extra) headers[c.extra[0]] = c.extra[1];
        const event = makeEvent({
          rawQueryString: c.key.query,
          headers,
          ...(c.cookies ? { cookies: c.cookies } : {}),
          body: c.base64 ? c.body.bytes.toString('base64') : c.body.bytes.toString('utf8'),
          isBase64Encoded: c.base64,
          ...(c.requestId !== undefined ? { requestId: c.requestId } : {}),
        });
        const { result, answer } = await invoke(t, event);
        expectSane(t, event, result, answer);
        // A text body is what the handler gets: compare with its UTF-8 bytes, as the app does.
        expectRpcAnswer(answer, c.base64 ? c.body.bytes : Buffer.from(c.body.bytes.toString('utf8'), 'utf8'));
      }),
      fuzzParams(RUNS.mcpEvents),
    );
  }, 120_000);
});

describe('fuzz: any event (method, path, query, headers, cookies, encoding, body, request context)', () => {
  let t: TestLambda;
  beforeAll(() => {
    t = buildLambda({ allowedOrigins: [ALLOWED_ORIGIN] }, { webhook: echoingWebhook });
  });

  const queryArb = fc.oneof(
    {
      weight: 4,
      arbitrary: fc.constantFrom(
        `key=${API_KEY}`,
        `key=${API_KEY}&key=${WRONG}`,
        `key=&key=${API_KEY}`,
        `key=${WRONG}&key=${API_KEY}`,
        'key=',
        'key',
        `KEY=${API_KEY}`,
        `key=${API_KEY}x`,
        '',
        `key=${API_KEY}#frag`,
        `key=${encodeURIComponent(API_KEY)}&key=`,
        `%6Bey=${API_KEY}`,
        `key=${API_KEY};x`,
      ),
    },
    { weight: 1, arbitrary: oddString },
  );
  const methodArb2 = fc.oneof(
    { weight: 10, arbitrary: fc.constantFrom('POST', 'POST', 'POST', 'GET', 'HEAD', 'OPTIONS', 'DELETE', 'PUT', 'PATCH', 'post', 'Get') },
    { weight: 2, arbitrary: fc.constantFrom('TRACE', 'TRACK', 'CONNECT', '', 'GE T', 'PROPFIND', 'M\u00e9THOD') },
    { weight: 1, arbitrary: fc.constant(ABSENT) as fc.Arbitrary<typeof ABSENT> },
  );
  const pathArb = fc.oneof(
    { weight: 12, arbitrary: fc.constantFrom('/mcp', '/v1/messages') },
    { weight: 1, arbitrary: fc.constant('/healthz') },
    {
      weight: 3,
      arbitrary: fc.constantFrom('/', 'mcp', '/mcp/', '/MCP', '//mcp', '/%6dcp', '/mcp?key=x', '/mcp#x', '/./mcp', '/a/../mcp', '\\mcp', '/v1/messages%00', ''),
    },
    { weight: 1, arbitrary: fc.constant(ABSENT) as fc.Arbitrary<typeof ABSENT> },
    { weight: 1, arbitrary: oddString.map((s) => `/${s}`) },
  );
  const headerEntry = fc.tuple(
    fc.oneof(
      {
        weight: 6,
        arbitrary: fc
          .constantFrom(
            'content-type',
            'authorization',
            'origin',
            'accept',
            'mcp-protocol-version',
            'mcp-method',
            'content-length',
            'cookie',
            'host',
            'transfer-encoding',
          )
          .chain(casing),
      },
      { weight: 1, arbitrary: oddString },
    ),
    fc.oneof(
      {
        weight: 6,
        arbitrary: fc.constantFrom(
          'application/json',
          'application/json; charset=utf-8',
          'text/plain',
          `Bearer ${API_KEY}`,
          `Bearer ${WRONG}`,
          ALLOWED_ORIGIN,
          'https://evil.example',
          'null',
          '2026-07-28',
          'ping',
          '5',
          '99999999',
          'chunked',
          '',
        ),
      },
      { weight: 2, arbitrary: oddString },
    ),
  );
  const headersArb = fc.oneof(
    { weight: 8, arbitrary: fc.array(headerEntry, { maxLength: 6 }).map((entries) => Object.fromEntries(entries)) },
    { weight: 2, arbitrary: fc.constant({ 'content-type': 'application/json', 'Content-Type': 'application/json', authorization: `Bearer ${API_KEY}` }) },
    { weight: 1, arbitrary: fc.constant(ABSENT) as fc.Arbitrary<typeof ABSENT> },
  );
  const bodyArb = fc.oneof(
    { weight: 3, arbitrary: fc.constant(undefined) },
    {
      weight: 4,
      arbitrary: fc
        .constantFrom('{"jsonrpc":"2.0","id":1,"method":"ping"}', '{"message":"hi"}', '{}', '[]', 'null', '')
        .map((text) => ({ text, base64: false })),
    },
    { weight: 3, arbitrary: mcpBody.map((b) => ({ text: b.bytes.toString('base64'), base64: true })) },
    { weight: 2, arbitrary: fc.uint8Array({ maxLength: 128 }).map((bytes) => ({ text: Buffer.from(bytes).toString('base64'), base64: true })) },
    { weight: 2, arbitrary: oddString.map((text) => ({ text, base64: true })) }, // isBase64Encoded, but not base64
    { weight: 2, arbitrary: oddString.map((text) => ({ text, base64: false })) },
    { weight: 1, arbitrary: fc.constantFrom(MiB + 1, MiB + 3, 2 * MiB).map((n) => ({ text: Buffer.alloc(n, 0x20).toString('base64'), base64: true })) },
  );

  const arb = fc.record({
    method: methodArb2,
    path: pathArb,
    query: queryArb,
    headers: headersArb,
    cookies: rarely(fc.array(fc.oneof(fc.constantFrom('a=1', '', `key=${API_KEY}`, 'k=v; other=w'), oddString), { maxLength: 3 }), 4),
    body: bodyArb,
    requestId: fc.oneof(
      { weight: 10, arbitrary: fc.constant(undefined) },
      { weight: 1, arbitrary: fc.constant(ABSENT) as fc.Arbitrary<typeof ABSENT> },
      { weight: 1, arbitrary: oddString },
      { weight: 1, arbitrary: fc.constant('x'.repeat(200)) },
    ),
    domainName: rarely(
      fc.oneof(fc.constantFrom('evil.example/@x', 'a b', '', '[::1]', 'host:99999999', 'h:65535'), fc.string({ unit: oddChar, maxLength: 20 })),
      6,
    ),
  });

  test(`HTTP-6, HTTP-19: ${RUNS.anyEvent} events: never a throw or a 5xx, JSON answers, and the checks of docs/contract/http.md in order`, async () => {
    await fc.assert(
      fc.asyncProperty(arb, async (c) => {
        reset(t);
        const event = makeEvent({
          method: c.method,
          rawPath: c.path,
          rawQueryString: c.query,
          headers: c.headers,
          ...(c.cookies ? { cookies: c.cookies } : {}),
          ...(c.body ? { body: c.body.text, isBase64Encoded: c.body.base64 } : {}),
          ...(c.requestId !== undefined ? { requestId: c.requestId } : {}),
          ...(c.domainName !== null ? { domainName: c.domainName } : {}),
        });
        const { result, answer } = await invoke(t, event);
        expectSane(t, event, result, answer);
        expectModel(event, answer);
      }),
      fuzzParams(RUNS.anyEvent),
    );
  }, 120_000);
});

/**
 * A model of what is decided before the body is parsed, from the event as API Gateway defines it:
 * header names are case-insensitive (repeats joined with ", "), the URL is rawPath + "?" +
 * rawQueryString, the first `key` wins, a body's size is its decoded size.
 */
function expectModel(event: APIGatewayProxyEventV2, answer: Answer): void {
  const rawMethod = event.requestContext?.http?.method ?? 'GET';
  const method = rawMethod.toUpperCase();
  let methodUsable = true;
  try {
    new Request('https://x/', { method });
  } catch {
    methodUsable = false;
  }
  if (!methodUsable) {
    expect(answer.status).toBe(400);
    expect((answer.json as { error: { code: string } }).error.code).toBe('bad_request');
    return;
  }
  const folded = new Map<string, string>();
  for (const [name, value] of Object.entries(event.headers ?? {})) {
    const lower = name.toLowerCase();
    folded.set(lower, folded.has(lower) ? `${folded.get(lower)}, ${value}` : value!);
  }
  /** A header as the app reads it; undefined when absent or not carriable (then dropped). */
  const header = (name: string): string | undefined => {
    const value = folded.get(name);
    if (value === undefined) return undefined;
    try {
      return new Headers([[name, value]]).get(name) ?? undefined;
    } catch {
      return name === 'origin' ? 'dropped-origin' : undefined; // Origin: kept as its bytes or `null`, never allowed
    }
  };
  const rawPath = event.rawPath || '/';
  const url = new URL(`https://h${rawPath.startsWith('/') ? rawPath : `/${rawPath}`}${event.rawQueryString ? `?${event.rawQueryString}` : ''}`);
  const path = url.pathname;
  const origin = header('origin');
  const bearer = /^Bearer\s+(.+)$/i.exec(header('authorization') ?? '')?.[1]?.trim();
  // Either credential that matches authenticates: a wrong ?key= does not hide a valid Bearer.
  const keyValid = url.searchParams.get('key') === API_KEY || bearer === API_KEY;
  const contentType = header('content-type') ?? '';
  const canHaveBody = method !== 'GET' && method !== 'HEAD';
  const size =
    !canHaveBody || event.body === undefined ? 0 : event.isBase64Encoded ? Buffer.byteLength(event.body, 'base64') : Buffer.byteLength(event.body, 'utf8');

  if (path === '/healthz') {
    expect(answer.status).toBe(method === 'GET' || method === 'HEAD' ? 200 : 405);
  } else if (path !== '/mcp' && path !== '/v1/messages') {
    expect(answer.status).toBe(404);
  } else if (origin !== undefined && origin.toLowerCase() !== ALLOWED_ORIGIN) {
    expect(answer.status).toBe(403);
  } else if (method === 'OPTIONS' && origin !== undefined) {
    expect(answer.status).toBe(204);
  } else if (!keyValid) {
    expect(answer.status).toBe(401);
    expect(answer.headers.get('www-authenticate')).toBe('Bearer');
  } else if (method !== 'POST') {
    expect(answer.status).toBe(405);
  } else if (contentType.split(';')[0]!.trim().toLowerCase() !== 'application/json') {
    expect(answer.status).toBe(415);
  } else if (size > MiB) {
    expect(answer.status).toBe(413);
  } else if (path === '/mcp') {
    const body = event.body === undefined ? Buffer.alloc(0) : event.isBase64Encoded ? Buffer.from(event.body, 'base64') : Buffer.from(event.body, 'utf8');
    expectRpcAnswer(answer, body);
  } else {
    expect([202, 400, 409]).toContain(answer.status);
  }
  if (path === '/mcp' && answer.status >= 400 && answer.status !== 404 && !(answer.status === 400 && (answer.json as any)?.error?.code === 'bad_request')) {
    expect(isRpcResponse(answer.json)).toBe(true);
  }
}

describe('fuzz: the Lambda behind API Gateway answers as the local app does', () => {
  const UUIDS = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g;
  /** Equal between the two: status, headers but per-request ids and hop-by-hop ones, the JSON. */
  const comparable = (answer: Answer) => ({
    status: answer.status,
    headers: Object.fromEntries([...answer.headers].filter(([name]) => !['x-request-id', 'date', 'connection', 'keep-alive'].includes(name))),
    body:
      answer.json === undefined
        ? answer.text
        : JSON.stringify(answer.json)
            .replace(UUIDS, '<uuid>')
            .replace(/evt_[0-9a-f]{32}/g, 'evt_<id>'),
  });

  const keyWay = fc.oneof(
    {
      weight: 8,
      arbitrary: fc.constantFrom<{ query: string; authorization?: string }>(
        { query: `key=${encodeURIComponent(API_KEY)}` },
        { query: '', authorization: `Bearer ${API_KEY}` },
        { query: `key=${API_KEY}&key=${WRONG}` },
      ),
    },
    { weight: 1, arbitrary: fc.constantFrom<{ query: string; authorization?: string }>({ query: '' }, { query: `key=${WRONG}` }, { query: 'key=' }) },
  );
  const arb = fc.record({
    method: fc.oneof({ weight: 12, arbitrary: fc.constant('POST') }, { weight: 1, arbitrary: fc.constantFrom('GET', 'DELETE', 'OPTIONS', 'HEAD', 'PUT') }),
    path: fc.oneof(
      { weight: 8, arbitrary: fc.constantFrom('/mcp', '/mcp', '/v1/messages') },
      { weight: 1, arbitrary: fc.constantFrom('/healthz', '/', '/mcp/', '/x') },
    ),
    key: keyWay,
    origin: rarely(fc.constantFrom(ALLOWED_ORIGIN, 'https://evil.example'), 8),
    contentType: fc.oneof(
      { weight: 12, arbitrary: fc.constantFrom('application/json', 'application/json; charset=utf-8') },
      { weight: 1, arbitrary: fc.constantFrom('text/plain', 'application/octet-stream', '') },
    ),
    era: fc.constantFrom('modern', 'modern', 'legacy', 'bare'),
    body: fc.oneof(
      { weight: 4, arbitrary: mcpBody },
      { weight: 4, arbitrary: cleanBody },
      {
        weight: 2,
        arbitrary: fc
          .oneof(
            oddString,
            hugeString,
            fc.jsonValue({ maxDepth: 2 }).map((v) => JSON.stringify(v)),
          )
          .map((m) => ({ method: 'rest', message: {} as Record<string, unknown>, bytes: Buffer.from(JSON.stringify({ message: m }), 'utf8') })),
      },
    ),
    subscribed: fc.boolean(),
  });

  test(`CON-1, LOCAL-1: ${RUNS.differential} requests answered by both: the same status, headers and JSON`, async () => {
    const local = buildApp({ allowedOrigins: [ALLOWED_ORIGIN] }, { webhook: echoingWebhook });
    const t = buildLambda({ allowedOrigins: [ALLOWED_ORIGIN] }, { webhook: echoingWebhook });
    // Text bodies go as text, anything else base64: either way the Lambda gets the exact bytes.
    const textGateway = asApp(t.lambda);
    const binaryGateway = asApp(t.lambda, { encoding: 'base64' });
    await fc.assert(
      fc.asyncProperty(arb, async (c) => {
        reset(t);
        local.logs.length = 0;
        local.store.events.clear();
        local.queue.jobs.length = 0;
        local.store.subscription = c.subscribed ? liveSubscription(local.clock.now()) : undefined;
        t.store.subscription = c.subscribed ? liveSubscription(t.clock.now()) : undefined;
        const headers: Record<string, string> = { accept: 'application/json, text/event-stream' };
        if (c.contentType) headers['content-type'] = c.contentType;
        if (c.key.authorization) headers.authorization = c.key.authorization;
        if (c.origin) headers.origin = c.origin;
        if (c.era === 'modern' && c.body.method !== 'rest') {
          headers['mcp-protocol-version'] = MODERN;
          headers['mcp-method'] = headerValue(c.body.method);
          const name = (c.body.message.params as { name?: unknown } | undefined)?.name;
          if (c.body.method === 'tools/call' && typeof name === 'string') headers['mcp-name'] = headerValue(name);
        } else if (c.era === 'legacy') headers['mcp-protocol-version'] = '2025-11-25';
        const make = () =>
          new Request(`${BASE}${c.path}${c.key.query ? `?${c.key.query}` : ''}`, {
            method: c.method,
            headers,
            ...(c.method !== 'GET' && c.method !== 'HEAD' ? { body: new Uint8Array(c.body.bytes) } : {}),
          });
        let utf8 = true;
        try {
          new TextDecoder('utf-8', { fatal: true }).decode(c.body.bytes);
        } catch {
          utf8 = false;
        }
        eventsSent++;
        const fromLambda = await readAnswer(await (utf8 ? textGateway : binaryGateway).handle(make()));
        const fromApp = await readAnswer(await local.app.handle(make()));
        expect(comparable(fromLambda)).toEqual(comparable(fromApp));
        const code = rpcErrorCode(fromLambda.json) ?? (fromLambda.json as { error?: { code?: unknown } } | undefined)?.error?.code ?? '';
        const key = `differential ${fromLambda.status} ${String(code)}`;
        outcomes.set(key, (outcomes.get(key) ?? 0) + 1);
        expect(t.queue.jobs.length).toBe(local.queue.jobs.length);
        expect(t.logs.filter((l) => l.level === 'error')).toEqual([]);
      }),
      fuzzParams(RUNS.differential),
    );
    await local.app.close();
  }, 120_000);
});

describe('fuzz: bodies near and over 1 MiB, as text and as base64', () => {
  let t: TestLambda;
  beforeAll(() => {
    t = buildLambda();
  });

  test(`HTTP-16: ${RUNS.size} bodies around 1 MiB: 413 exactly when the decoded body is over, on /mcp and /v1/messages`, async () => {
    const arb = fc.record({
      size: fc.oneof(fc.integer({ min: MiB - 16, max: MiB + 16 }), fc.constantFrom(MiB, MiB + 1, 2 * MiB, 100)),
      encoding: fc.constantFrom('text', 'base64', 'base64-unpadded'),
      route: fc.constantFrom('/mcp', '/v1/messages'),
      declared: fc.constantFrom(undefined, '5', '99999999', 'lots'),
    });
    await fc.assert(
      fc.asyncProperty(arb, async ({ size, encoding, route, declared }) => {
        reset(t);
        const core = route === '/mcp' ? '{"jsonrpc":"2.0","id":1,"method":"ping"}' : '{"message":"hi"}';
        const bytes = Buffer.from(core + ' '.repeat(Math.max(0, size - core.length)), 'utf8');
        const headers: Record<string, string> = {
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          authorization: `Bearer ${API_KEY}`,
        };
        // A client's Content-Length is not the event's business: the body is measured.
        if (declared) headers['content-length'] = declared;
        const body =
          encoding === 'text' ? bytes.toString('utf8') : encoding === 'base64' ? bytes.toString('base64') : bytes.toString('base64').replace(/=+$/, '');
        const event = makeEvent({ rawPath: route, headers, body, isBase64Encoded: encoding !== 'text' });
        const { result, answer } = await invoke(t, event);
        expectSane(t, event, result, answer);
        if (size > MiB) {
          expect(answer.status).toBe(413);
          if (route === '/mcp') expect(rpcErrorCode(answer.json)).toBe(-32600);
          else expect((answer.json as { error: { code: string } }).error.code).toBe('payload_too_large');
        } else if (route === '/mcp') {
          expectRpcAnswer(answer, bytes);
          expect((answer.json as { result?: unknown }).result).toEqual({});
        } else {
          expect(answer.status).toBe(409);
        }
      }),
      fuzzParams(RUNS.size),
    );
  }, 120_000);
});

test('at least 3,000 events were sent in this file', () => {
  expect(Object.values(RUNS).reduce((a, b) => a + b, 0)).toBeGreaterThanOrEqual(3_000);
  expect(eventsSent).toBeGreaterThanOrEqual(3_000);
});
