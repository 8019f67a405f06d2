/**
 * Fuzzing of the whole HTTP surface in-process (`createApp` over the in-memory fakes): over 10,000
 * generated requests with broken JSON, wrong types in every field, odd and huge Unicode, header and
 * body disagreements, unknown versions, batches, missing `_meta`, wrong content types, bodies
 * around 1 MiB and wrong methods. Invariants:
 *
 * - `handle` never throws and never answers 5xx (the key is configured and the fakes are healthy),
 *   never logs an internal error, and no answer carries a stack trace or the API key;
 * - every 4xx answer has a JSON body; every non-empty body is JSON (or SSE whose data is JSON);
 * - POST /mcp with a valid key and a JSON content type always answers JSON-RPC responses (an
 *   error or a result), or 202 with an empty body for notifications and responses;
 * - the checks before the body is parsed (Origin, key, method, Content-Type, size) follow docs/contract/http.md.
 *
 * Fixed seed by default; FC_SEED=<n> overrides it. A failure names the seed and path to replay;
 * FC_SHRINK=1 shrinks counterexamples (slow with 100 KB strings); FUZZ_STATS=1 prints the outcomes.
 */
import fc from 'fast-check';
import { checkMessage } from '../../../lambda/core/validation';
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
  type TestApp,
} from '../../support/app';
import {
  ABSENT,
  b64,
  headerValue,
  hugeString,
  KNOWN_VERSIONS,
  methodArb,
  oddChar,
  oddOrHugeString,
  oddString,
  rarely,
  rpcMessage,
  versionArb,
  wrongValue,
} from '../../support/fuzz-values';

const MiB = 1024 * 1024;
const ALLOWED_ORIGIN = 'https://inspector.example';

let requestsSent = 0;

// ---------------------------------------------------------------------------------------------
// Value generators

/** Percent-encodes every UTF-8 byte (lone surrogates become EF BF BD, as a client would send). */
function pct(value: string): string {
  return [...Buffer.from(value, 'utf8')].map((b) => `%${b.toString(16).padStart(2, '0').toUpperCase()}`).join('');
}

const MATCH = Symbol('match');
const headerChoice = (others: fc.Arbitrary<string>) =>
  fc.oneof(
    { weight: 6, arbitrary: fc.constant(MATCH) as fc.Arbitrary<string | symbol> },
    { weight: 1, arbitrary: fc.constant(ABSENT) as fc.Arbitrary<string | symbol> },
    { weight: 2, arbitrary: others as fc.Arbitrary<string | symbol> },
  );

const JSON_CONTENT_TYPES = [
  'application/json',
  'application/json; charset=utf-8',
  'Application/JSON',
  'application/json ;charset=UTF-16',
  'application/json; profile="x"',
];
const ACCEPTS = [
  'application/json, text/event-stream',
  'text/event-stream, application/json',
  'application/json',
  'text/event-stream',
  '*/*',
  'text/html',
  'application/*;q=0.1, text/*',
];

interface McpCase {
  headers: Record<string, string>;
  body: string | Uint8Array;
  /** The JSON value of the body when it is valid JSON. */
  parsed: unknown;
  framing: string;
}

/** Bytes a client might send instead of the serialized message. */
const framing = fc.oneof(
  { weight: 12, arbitrary: fc.constant('single' as const) },
  { weight: 2, arbitrary: fc.constant('batch' as const) },
  { weight: 3, arbitrary: fc.constant('broken' as const) },
  { weight: 1, arbitrary: fc.constant('json-value' as const) },
  { weight: 1, arbitrary: fc.constant('bytes' as const) },
  { weight: 1, arbitrary: fc.constant('padded' as const) },
);

const mcpCase: fc.Arbitrary<McpCase> = fc
  .record({
    first: rpcMessage,
    more: fc.array(rpcMessage, { minLength: 0, maxLength: 2 }),
    framing,
    cut: fc.nat(),
    junk: fc.string({ unit: oddChar, minLength: 1, maxLength: 3 }),
    breakOp: fc.constantFrom('truncate', 'insert', 'delete', 'quote', 'trail', 'lead', 'double'),
    jsonValue: fc.jsonValue({ maxDepth: 2 }),
    bytes: fc.uint8Array({ maxLength: 64 }),
    pad: fc.constantFrom('\ufeff', ' \n\t', '\u00a0', '\u0000'),
    contentType: fc.constantFrom(...JSON_CONTENT_TYPES),
    strictHeaders: fc.oneof({ weight: 3, arbitrary: fc.constant(true) }, { weight: 2, arbitrary: fc.constant(false) }),
    accept: fc.oneof(
      { weight: 8, arbitrary: fc.constant(ACCEPTS[0]!) },
      { weight: 2, arbitrary: fc.constantFrom(...ACCEPTS) },
      { weight: 1, arbitrary: fc.constant(ABSENT) },
    ),
    version: headerChoice(versionArb),
    mcpMethod: headerChoice(
      fc.oneof(
        methodArb.filter((m) => typeof m === 'string'),
        oddString,
      ),
    ),
    mcpName: headerChoice(oddString),
    extraHeader: rarely(
      fc.tuple(fc.constantFrom('mcp-session-id', 'last-event-id', 'mcp-protocol-version', 'x-forwarded-for', 'content-length'), oddString),
      8,
    ),
  })
  .map((c) => {
    const message = c.first.message;
    const serialized = JSON.stringify(message);
    let body: string | Uint8Array;
    switch (c.framing) {
      case 'single':
        body = serialized;
        break;
      case 'batch':
        body = JSON.stringify([message, ...c.more.map((m) => m.message)]);
        break;
      case 'json-value':
        body = JSON.stringify(c.jsonValue);
        break;
      case 'bytes':
        body = c.bytes;
        break;
      case 'padded':
        body = c.pad + serialized + c.pad;
        break;
      case 'broken': {
        const at = serialized.length === 0 ? 0 : c.cut % serialized.length;
        body = {
          truncate: serialized.slice(0, at),
          insert: serialized.slice(0, at) + c.junk + serialized.slice(at),
          delete: serialized.slice(0, at) + serialized.slice(at + 1),
          quote: serialized.replace(/"/g, "'"),
          trail: serialized + c.junk,
          lead: c.junk + serialized,
          double: serialized + serialized,
        }[c.breakOp];
        break;
      }
    }
    // What the server will parse: the UTF-8 bytes of the body (a broken body may hold a lone
    // surrogate, which goes out as U+FFFD).
    let parsed: unknown;
    try {
      const bytes = typeof body === 'string' ? new TextEncoder().encode(body) : body;
      parsed = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(bytes));
    } catch {
      parsed = ABSENT;
    }
    const params = message.params as Record<string, unknown> | undefined;
    const metaVersion = (params?._meta as Record<string, unknown> | undefined)?.['io.modelcontextprotocol/protocolVersion'];
    if (c.strictHeaders) {
      c.version = MATCH;
      c.mcpMethod = MATCH;
      c.mcpName = MATCH;
      c.accept = ACCEPTS[0]!;
      c.extraHeader = null;
    }
    const headers: Record<string, string> = { 'content-type': c.contentType };
    if (c.accept !== ABSENT) headers.accept = c.accept;
    const pick = (choice: string | symbol, match: unknown): string | undefined =>
      choice === ABSENT ? undefined : choice === MATCH ? (typeof match === 'string' ? match : undefined) : (choice as string);
    const version = pick(c.version, metaVersion);
    const method = pick(c.mcpMethod, message.method);
    const name = pick(c.mcpName, params?.name);
    if (version !== undefined) headers['mcp-protocol-version'] = headerValue(version);
    if (method !== undefined) headers['mcp-method'] = headerValue(method);
    if (name !== undefined && (message.method === 'tools/call' || c.mcpName !== MATCH)) headers['mcp-name'] = headerValue(name);
    if (c.extraHeader) headers[c.extraHeader[0]] = headerValue(c.extraHeader[1]);
    return { headers, body, parsed, framing: c.framing };
  });

// ---------------------------------------------------------------------------------------------
// Sending and invariants

/** Outcome histogram (HTTP status and JSON-RPC or REST code), printed with FUZZ_STATS=1. */
const outcomes = new Map<string, number>();

async function handle(t: TestApp, request: Request): Promise<Answer> {
  requestsSent++;
  let response: Response;
  try {
    response = await t.app.handle(request);
  } catch (error) {
    throw new Error(`app.handle threw: ${String(error)}`);
  }
  const answer = await readAnswer(response);
  const values = Array.isArray(answer.json) ? answer.json : [answer.json];
  const codes = values.map(
    (v) =>
      rpcErrorCode(v) ??
      (v as { error?: { code?: unknown } } | undefined)?.error?.code ??
      ((v as { result?: { isError?: boolean } } | undefined)?.result?.isError
        ? 'tool-error'
        : (v as { result?: unknown } | undefined)?.result !== undefined
          ? 'result'
          : '-'),
  );
  const key = `${answer.status} ${[...new Set(codes)].join(',')}`;
  outcomes.set(key, (outcomes.get(key) ?? 0) + 1);
  return answer;
}

afterAll(() => {
  if (process.env.FUZZ_STATS === '1') {
    const rows = [...outcomes.entries()].sort((a, b) => b[1] - a[1]).map(([k, n]) => `${String(n).padStart(6)}  ${k}`);
    process.stdout.write(`\nfuzz-http outcomes (${requestsSent} requests; ${sdkSchemaAnswers} were the SDK schema-error answer):\n${rows.join('\n')}\n`);
  }
});

function mcpRequest(c: { headers: Record<string, string>; body: string | Uint8Array | ReadableStream<Uint8Array> }, query = `key=${API_KEY}`): Request {
  return new Request(`${BASE}/mcp?${query}`, {
    method: 'POST',
    headers: c.headers,
    body: c.body as BodyInit,
    ...(c.body instanceof ReadableStream ? { duplex: 'half' } : {}),
  } as RequestInit);
}

const VALID_SECRETS = [SECRET, `whsec_${b64(24)}`, `whsec_${b64(64)}`];
let sdkSchemaAnswers = 0;

/** Invariants every answer keeps, whatever was sent. */
function expectSane(t: TestApp, answer: Answer): void {
  expect(answer.status).toBeGreaterThanOrEqual(200);
  expect(answer.status).toBeLessThan(500);
  expect(hasStackTrace(answer.text)).toBe(false);
  expect(answer.text).not.toContain(API_KEY);
  const logText = JSON.stringify(t.logs);
  expect(logText).not.toContain(API_KEY);
  for (const secret of VALID_SECRETS) {
    expect(answer.text).not.toContain(secret);
    expect(logText).not.toContain(secret);
  }
  expect(answer.unreadable).toBe(false);
  sdkSchemaAnswers += expectGenericInternalErrors(answer, '[0-9a-f-]{36}');
  if (answer.status >= 400) {
    expect(answer.headers.get('content-type')).toMatch(/^application\/json/);
    expect(() => JSON.parse(answer.text)).not.toThrow();
  }
  if (answer.text === '') expect([202, 204]).toContain(answer.status);
  const faults = t.logs.filter((line) => line.level === 'error');
  expect(faults).toEqual([]);
}

/** POST /mcp with a valid key and a JSON content type: sane, and JSON-RPC responses or 202 and nothing. */
function expectRpcAnswer(t: TestApp, answer: Answer, parsed: unknown): void {
  expectSane(t, answer);
  expectRpcResponses(answer, parsed);
}

function resetState(t: TestApp): void {
  t.logs.length = 0;
  t.store.calls.length = 0;
  t.store.events.clear();
  t.queue.jobs.length = 0;
}

// ---------------------------------------------------------------------------------------------
// Properties

const RUNS = {
  anyRequest: 2_440,
  mcpModern: 2_200,
  mcpMixed: 2_200,
  toolMessage: 900,
  restMessage: 700,
  size: 60,
  methodMismatch: 500,
  versionUnknown: 500,
  versionMismatch: 500,
};

describe('fuzz: POST /mcp with a valid key and a JSON content type', () => {
  let t: TestApp;
  beforeAll(() => {
    t = buildApp({}, { webhook: echoingWebhook });
  });
  afterAll(() => t.app.close());

  test(`HTTP-19, MCP-3, MCP-7: ${RUNS.mcpModern} requests shaped for the 2026-07-28 era answer JSON-RPC`, async () => {
    await fc.assert(
      fc.asyncProperty(mcpCase, async (c) => {
        resetState(t);
        expectRpcAnswer(t, await handle(t, mcpRequest(c)), c.parsed);
      }),
      fuzzParams(RUNS.mcpModern),
    );
  }, 120_000);

  test(`MCP-7: ${RUNS.mcpMixed} requests of either era (legacy headers, no headers, mixed) answer JSON-RPC`, async () => {
    const legacyish = fc
      .tuple(mcpCase, fc.constantFrom('legacy', 'bare', 'as-is'), fc.constantFrom('2025-03-26', '2025-06-18', '2025-11-25'))
      .map(([c, era, version]) => {
        const headers = { ...c.headers };
        if (era !== 'as-is') {
          delete headers['mcp-method'];
          delete headers['mcp-name'];
          delete headers['mcp-protocol-version'];
          if (era === 'legacy') headers['mcp-protocol-version'] = version;
        }
        let { body, parsed } = c;
        // Legacy clients send no _meta: strip it from a single message most of the time.
        if (era !== 'as-is' && parsed !== ABSENT && parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed)) {
          const p = (parsed as { params?: unknown }).params;
          if (p !== null && typeof p === 'object' && !Array.isArray(p)) delete (p as Record<string, unknown>)._meta;
          body = JSON.stringify(parsed);
          parsed = JSON.parse(body);
        }
        return { ...c, headers, body, parsed };
      });
    await fc.assert(
      fc.asyncProperty(legacyish, async (c) => {
        resetState(t);
        expectRpcAnswer(t, await handle(t, mcpRequest(c)), c.parsed);
      }),
      fuzzParams(RUNS.mcpMixed),
    );
  }, 120_000);

  test(`MCP-4: ${RUNS.methodMismatch} Mcp-Method headers that disagree with the body answer -32020`, async () => {
    const modernMethods = ['tools/list', 'events/list', 'server/discover', 'ping', 'events/unsubscribe', 'events/subscribe'];
    const arb = fc.tuple(
      fc.constantFrom(...modernMethods),
      fc.oneof(
        fc.constantFrom(...modernMethods, 'tools/call', 'initialize'),
        oddString.filter((s) => s.length > 0),
      ),
    );
    await fc.assert(
      fc.asyncProperty(arb, async ([bodyMethod, headerMethod]) => {
        const header = headerValue(headerMethod);
        fc.pre(header.trim() !== bodyMethod && header.trim() !== '');
        resetState(t);
        const body = JSON.stringify({
          jsonrpc: '2.0',
          id: 7,
          method: bodyMethod,
          params: { _meta: { 'io.modelcontextprotocol/protocolVersion': MODERN, 'io.modelcontextprotocol/clientCapabilities': {} } },
        });
        const answer = await handle(
          t,
          mcpRequest({ headers: { 'content-type': 'application/json', accept: ACCEPTS[0]!, 'mcp-protocol-version': MODERN, 'mcp-method': header }, body }),
        );
        expectRpcAnswer(t, answer, JSON.parse(body));
        expect(answer.status).toBe(400);
        expect(rpcErrorCode(answer.json)).toBe(-32020);
      }),
      fuzzParams(RUNS.methodMismatch),
    );
  }, 120_000);

  test(`MCP-5: ${RUNS.versionUnknown} unknown protocol versions in _meta answer -32022`, async () => {
    const unknown = fc.oneof(
      fc.string({ unit: 'grapheme-ascii', minLength: 1, maxLength: 20 }),
      fc.date({ noInvalidDate: true }).map((d) => d.toISOString().slice(0, 10)),
      oddString.filter((s) => s.length > 0),
    );
    const arb = fc.tuple(unknown, fc.boolean(), fc.constantFrom('tools/list', 'events/list', 'server/discover', 'ping'));
    await fc.assert(
      fc.asyncProperty(arb, async ([version, withHeader, method]) => {
        // The header must carry exactly the _meta value (Headers trim surrounding whitespace).
        fc.pre(!KNOWN_VERSIONS.includes(version) && (!withHeader || (headerValue(version) === version && version.trim() === version)));
        resetState(t);
        const body = JSON.stringify({
          jsonrpc: '2.0',
          id: 3,
          method,
          params: { _meta: { 'io.modelcontextprotocol/protocolVersion': version, 'io.modelcontextprotocol/clientCapabilities': {} } },
        });
        const headers: Record<string, string> = { 'content-type': 'application/json', accept: ACCEPTS[0]!, 'mcp-method': method };
        if (withHeader) headers['mcp-protocol-version'] = version;
        const answer = await handle(t, mcpRequest({ headers, body }));
        expectRpcAnswer(t, answer, JSON.parse(body));
        expect(answer.status).toBe(400);
        expect(rpcErrorCode(answer.json)).toBe(-32022);
      }),
      fuzzParams(RUNS.versionUnknown),
    );
  }, 120_000);

  test(`MCP-4: ${RUNS.versionMismatch} MCP-Protocol-Version headers that disagree with _meta answer -32020`, async () => {
    const other = fc.oneof(
      fc.constantFrom(...KNOWN_VERSIONS.filter((v) => v !== MODERN), '2099-01-01'),
      fc.string({ unit: 'grapheme-ascii', minLength: 1, maxLength: 20 }),
    );
    const arb = fc.tuple(other, fc.constantFrom('tools/list', 'events/list', 'server/discover', 'ping'));
    await fc.assert(
      fc.asyncProperty(arb, async ([header, method]) => {
        fc.pre(header.trim() !== MODERN && header.trim() !== '');
        resetState(t);
        const body = JSON.stringify({
          jsonrpc: '2.0',
          id: 'a',
          method,
          params: { _meta: { 'io.modelcontextprotocol/protocolVersion': MODERN, 'io.modelcontextprotocol/clientCapabilities': {} } },
        });
        const answer = await handle(
          t,
          mcpRequest({ headers: { 'content-type': 'application/json', accept: ACCEPTS[0]!, 'mcp-method': method, 'mcp-protocol-version': header }, body }),
        );
        expectRpcAnswer(t, answer, JSON.parse(body));
        expect(answer.status).toBe(400);
        expect(rpcErrorCode(answer.json)).toBe(-32020);
      }),
      fuzzParams(RUNS.versionMismatch),
    );
  }, 120_000);
});

describe('fuzz: send_to_dot and POST /v1/messages with odd messages', () => {
  let t: TestApp;
  beforeAll(() => {
    t = buildApp({}, { webhook: echoingWebhook });
  });
  afterAll(() => t.app.close());

  const message = fc.oneof(
    { weight: 8, arbitrary: oddString },
    { weight: 2, arbitrary: fc.string({ unit: oddChar, minLength: 16_370, maxLength: 16_400 }) },
    { weight: 1, arbitrary: hugeString },
    { weight: 1, arbitrary: wrongValue },
  );

  test(`LIM-1, TOOL-7: ${RUNS.toolMessage} tool calls: queued exactly when the trimmed message is 1..16,384 UTF-8 bytes, else a tool error sentence`, async () => {
    const arb = fc.tuple(message, fc.boolean(), fc.boolean());
    await fc.assert(
      fc.asyncProperty(arb, async ([msg, modern, subscribed]) => {
        resetState(t);
        t.store.subscription = subscribed ? liveSubscription(t.clock.now()) : undefined;
        const args = { message: msg };
        const body = modern
          ? JSON.stringify({
              jsonrpc: '2.0',
              id: 1,
              method: 'tools/call',
              params: {
                name: 'send_to_dot',
                arguments: args,
                _meta: { 'io.modelcontextprotocol/protocolVersion': MODERN, 'io.modelcontextprotocol/clientCapabilities': {} },
              },
            })
          : JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'send_to_dot', arguments: args } });
        const headers: Record<string, string> = modern
          ? { 'content-type': 'application/json', accept: ACCEPTS[0]!, 'mcp-protocol-version': MODERN, 'mcp-method': 'tools/call', 'mcp-name': 'send_to_dot' }
          : { 'content-type': 'application/json', accept: ACCEPTS[0]!, 'mcp-protocol-version': '2025-06-18' };
        const answer = await handle(t, mcpRequest({ headers, body }));
        expectRpcAnswer(t, answer, JSON.parse(body));
        expect(answer.status).toBe(200);
        const result = (answer.json as { result: { isError: boolean; content: { text: string }[]; structuredContent?: { status: string; eventId: string } } })
          .result;
        // A lone surrogate travels as a JSON escape, parses, and is refused: not UTF-8 text.
        const valid =
          typeof msg === 'string' && msg.isWellFormed() && Buffer.byteLength(msg.trim(), 'utf8') >= 1 && Buffer.byteLength(msg.trim(), 'utf8') <= 16_384;
        expect(valid).toBe(checkMessage(args).ok);
        const text = result.content[0]!.text;
        if (valid && subscribed) {
          expect(result.isError).toBe(false);
          expect(result.structuredContent?.status).toBe('queued');
          expect(text).toContain(result.structuredContent!.eventId);
          expect(t.queue.jobs).toHaveLength(1);
          const event = JSON.parse(t.queue.jobs[0]!.body) as { data: { message: string } };
          expect(event.data.message).toBe((msg as string).trim());
        } else {
          expect(result.isError).toBe(true);
          expect(text).toMatch(valid ? /^No dot is subscribed/ : /^Invalid input: /);
          expect(text).toMatch(/^[A-Z][^\n]*\.$/);
          expect(t.queue.jobs).toHaveLength(0);
        }
      }),
      fuzzParams(RUNS.toolMessage),
    );
  }, 120_000);

  test(`DEL-REST-1, TOOL-7: ${RUNS.restMessage} REST sends: 202 exactly when the trimmed message is 1..16,384 UTF-8 bytes, else 400 invalid_input or 409`, async () => {
    const arb = fc.tuple(message, fc.boolean(), rarely(fc.dictionary(oddString, wrongValue, { minKeys: 1, maxKeys: 2 }), 5));
    await fc.assert(
      fc.asyncProperty(arb, async ([msg, subscribed, extra]) => {
        resetState(t);
        t.store.subscription = subscribed ? liveSubscription(t.clock.now()) : undefined;
        const args: Record<string, unknown> = { ...(extra ?? {}), message: msg };
        const request = new Request(`${BASE}/v1/messages`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', authorization: `Bearer ${API_KEY}` },
          body: JSON.stringify(args),
        });
        const answer = await handle(t, request);
        expectSane(t, answer);
        const json = JSON.parse(answer.text) as { eventId?: string; status?: string; error?: { code: string; message: string } };
        // JSON has no undefined: compare with what the server actually parsed.
        const valid = checkMessage(JSON.parse(JSON.stringify(args))).ok;
        if (valid && subscribed) {
          expect(answer.status).toBe(202);
          expect(json).toEqual({ eventId: expect.stringMatching(/^evt_[0-9a-f]{32}$/), status: 'queued' });
        } else if (valid) {
          expect(answer.status).toBe(409);
          expect(json.error?.code).toBe('no_subscription');
        } else {
          expect(answer.status).toBe(400);
          expect(json.error?.code).toBe('invalid_input');
        }
      }),
      fuzzParams(RUNS.restMessage),
    );
  }, 120_000);
});

describe('fuzz: bodies near and over 1 MiB', () => {
  let t: TestApp;
  beforeAll(() => {
    t = buildApp();
  });
  afterAll(() => t.app.close());

  test(`HTTP-16, LIM-2: ${RUNS.size} bodies around 1 MiB: 413 exactly when over, declared or streamed, on /mcp and /v1/messages`, async () => {
    const arb = fc.record({
      size: fc.oneof(fc.integer({ min: MiB - 64, max: MiB + 64 }), fc.constantFrom(MiB, MiB + 1, 2 * MiB, 100)),
      how: fc.constantFrom('declared', 'streamed', 'understated', 'garbage-length'),
      route: fc.constantFrom('/mcp', '/v1/messages'),
      chunk: fc.constantFrom(1, 1000, 16 * 1024, 64 * 1024, MiB),
    });
    await fc.assert(
      fc.asyncProperty(arb, async ({ size, how, route, chunk }) => {
        resetState(t);
        const core = route === '/mcp' ? '{"jsonrpc":"2.0","id":1,"method":"ping"}' : '{"message":"hi"}';
        const text = core + ' '.repeat(Math.max(0, size - core.length));
        const headers: Record<string, string> = { 'content-type': 'application/json', accept: ACCEPTS[0]!, authorization: `Bearer ${API_KEY}` };
        let body: BodyInit;
        if (how === 'streamed') {
          const bytes = new TextEncoder().encode(text);
          let offset = 0;
          body = new ReadableStream<Uint8Array>({
            pull(controller) {
              if (offset >= bytes.length) return controller.close();
              controller.enqueue(bytes.subarray(offset, offset + chunk * 37));
              offset += chunk * 37;
            },
          });
        } else {
          body = text;
          if (how === 'declared') headers['content-length'] = String(size);
          if (how === 'understated') headers['content-length'] = String(Math.min(size, 100));
          if (how === 'garbage-length') headers['content-length'] = 'lots';
        }
        const request = new Request(`${BASE}${route}`, { method: 'POST', headers, body, ...(how === 'streamed' ? { duplex: 'half' } : {}) } as RequestInit);
        const answer = await handle(t, request);
        expectSane(t, answer);
        if (size > MiB) {
          expect(answer.status).toBe(413);
          if (route === '/mcp') expect(rpcErrorCode(answer.json)).toBe(-32600);
          else expect((answer.json as { error: { code: string } }).error.code).toBe('payload_too_large');
        } else if (route === '/mcp') {
          expectRpcAnswer(t, answer, JSON.parse(core));
          expect((answer.json as { result?: unknown }).result).toEqual({});
        } else {
          expect(answer.status).toBe(409);
        }
      }),
      fuzzParams(RUNS.size),
    );
  }, 120_000);

  test('HTTP-16: a streamed body far over 1 MiB is cut off after reading a little over the limit', async () => {
    let pulled = 0;
    const body = new ReadableStream<Uint8Array>({
      pull(controller) {
        pulled += 64 * 1024;
        controller.enqueue(new Uint8Array(64 * 1024).fill(0x20));
      },
    });
    const answer = await handle(t, mcpRequest({ headers: { 'content-type': 'application/json', accept: ACCEPTS[0]! }, body }));
    expect(answer.status).toBe(413);
    expect(pulled).toBeLessThan(MiB + 4 * 64 * 1024);
  });
});

describe('fuzz: any method, path, key, origin, content type and body', () => {
  let t: TestApp;
  beforeAll(() => {
    t = buildApp({ allowedOrigins: [ALLOWED_ORIGIN] }, { webhook: echoingWebhook });
  });
  afterAll(() => t.app.close());

  type KeyWay = { label: string; valid: boolean; query: string; authorization?: string };
  const wrong = 'not-the-key';
  const KEY_WAYS: KeyWay[] = [
    { label: 'query', valid: true, query: `key=${encodeURIComponent(API_KEY)}` },
    { label: 'bearer', valid: true, query: '', authorization: `Bearer ${API_KEY}` },
    { label: 'bearer lower-case scheme', valid: true, query: '', authorization: `bearer   ${API_KEY}` },
    { label: 'a wrong bearer does not hide a valid query', valid: true, query: `key=${API_KEY}`, authorization: `Bearer ${wrong}` },
    { label: 'first of two query keys', valid: true, query: `key=${API_KEY}&key=${wrong}` },
    { label: 'none', valid: false, query: '' },
    { label: 'wrong query', valid: false, query: `key=${wrong}` },
    { label: 'empty query', valid: false, query: 'key=' },
    { label: 'wrong bearer', valid: false, query: '', authorization: `Bearer ${wrong}` },
    // Either credential that matches authenticates.
    { label: 'a wrong query does not hide a valid bearer', valid: true, query: `key=${wrong}`, authorization: `Bearer ${API_KEY}` },
    { label: 'an empty query does not hide a valid bearer', valid: true, query: 'key=', authorization: `Bearer ${API_KEY}` },
    { label: 'key with a suffix', valid: false, query: `key=${API_KEY}x` },
    { label: 'key prefix', valid: false, query: `key=${API_KEY.slice(0, -1)}` },
    { label: 'Basic scheme', valid: false, query: '', authorization: `Basic ${Buffer.from(`x:${API_KEY}`).toString('base64')}` },
    { label: 'Bearer without a token', valid: false, query: '', authorization: 'Bearer ' },
    { label: 'odd unicode key', valid: false, query: `key=${pct('\u202e\ud800é')}%ED%A0%80%FF` },
    { label: 'KEY in upper case', valid: false, query: `KEY=${API_KEY}` },
  ];

  const OTHER_PATHS = [
    '/',
    '/mcp/',
    '/MCP',
    '/v1/messages/',
    '/mcp/x',
    '//mcp',
    '/%6dcp',
    '/healthz/',
    '/.well-known/oauth-protected-resource',
    '/v1/messages%00',
    '/mcp;x',
    '/v1/Messages',
  ];
  const anyCase = fc.record({
    method: fc.constantFrom('GET', 'POST', 'POST', 'POST', 'PUT', 'DELETE', 'PATCH', 'HEAD', 'OPTIONS', 'PROPFIND'),
    path: fc.oneof(
      { weight: 12, arbitrary: fc.constantFrom('/mcp', '/v1/messages') },
      { weight: 1, arbitrary: fc.constant('/healthz') },
      { weight: 2, arbitrary: fc.constantFrom(...OTHER_PATHS) },
      { weight: 1, arbitrary: oddString.map((s) => `/${pct(s)}`) },
    ),
    key: fc.oneof({ weight: 4, arbitrary: fc.constant(KEY_WAYS[0]!) }, { weight: 4, arbitrary: fc.constantFrom(...KEY_WAYS) }),
    origin: rarely(
      fc.constantFrom(
        ALLOWED_ORIGIN,
        ALLOWED_ORIGIN,
        'https://evil.example',
        'null',
        'HTTPS://INSPECTOR.EXAMPLE',
        `${ALLOWED_ORIGIN}/`,
        'https://inspector.example.evil',
      ),
      5,
    ),
    contentType: fc.option(
      fc.oneof(
        { weight: 4, arbitrary: fc.constantFrom(...JSON_CONTENT_TYPES) },
        fc.constantFrom(
          'text/plain',
          'application/x-www-form-urlencoded',
          'multipart/form-data; boundary=x',
          'application/jsonx',
          'application/json-patch+json',
          'text/json',
          'application/ json',
          '',
        ),
        oddString.map(headerValue),
      ),
      { freq: 5 },
    ),
    body: fc.option(
      fc.oneof(
        fc.constantFrom('{"jsonrpc":"2.0","id":1,"method":"ping"}', '{"message":"hello"}', '{}', '[]', 'null'),
        oddOrHugeString,
        fc.jsonValue({ maxDepth: 3 }).map((v) => JSON.stringify(v)),
        fc.uint8Array({ maxLength: 256 }),
      ),
      { freq: 6 },
    ),
    headers: fc.oneof(
      { weight: 2, arbitrary: fc.constant({ accept: ACCEPTS[0]! }) },
      fc.dictionary(
        fc.constantFrom(
          'mcp-method',
          'mcp-protocol-version',
          'mcp-name',
          'mcp-session-id',
          'last-event-id',
          'accept',
          'x-forwarded-for',
          'content-length',
          'cookie',
        ),
        oddString.map(headerValue),
        { minKeys: 1, maxKeys: 3 },
      ),
    ),
  });

  const isJsonType = (value: string | null) => (value ?? '').split(';')[0]!.trim().toLowerCase() === 'application/json';

  test(`HTTP-2, HTTP-4, HTTP-5, HTTP-6, HTTP-9, HTTP-11, HTTP-17, HTTP-19, RCPT-3: ${RUNS.anyRequest} requests: no 5xx, JSON bodies, and the checks of docs/contract/http.md in order`, async () => {
    await fc.assert(
      fc.asyncProperty(anyCase, async (c) => {
        resetState(t);
        const headers: Record<string, string> = { ...c.headers };
        if (c.key.authorization !== undefined) headers.authorization = c.key.authorization;
        if (c.origin !== null) headers.origin = c.origin;
        if (c.contentType !== null) headers['content-type'] = c.contentType;
        const withBody = c.body !== null && c.method !== 'GET' && c.method !== 'HEAD';
        const url = `${BASE}${c.path}${c.key.query ? `?${c.key.query}` : ''}`;
        const request = new Request(url, { method: c.method, headers, ...(withBody ? { body: c.body as BodyInit } : {}) });
        const answer = await handle(t, request);
        expectSane(t, answer);

        // A model of the checks made before the body is read.
        const path = new URL(url).pathname;
        const sentType = request.headers.get('content-type');
        const originRefused = c.origin !== null && c.origin.toLowerCase() !== ALLOWED_ORIGIN;
        if (path === '/healthz') {
          if (c.method === 'GET' || c.method === 'HEAD') {
            expect(answer.status).toBe(200);
            expect(answer.json).toEqual({ ok: true });
          } else {
            expect(answer.status).toBe(405);
            expect(answer.headers.get('allow')).toBe('GET');
          }
        } else if (path !== '/mcp' && path !== '/v1/messages' && !path.startsWith('/v1/messages/')) {
          expect(answer.status).toBe(404);
        } else if (originRefused) {
          expect(answer.status).toBe(403);
        } else if (c.method === 'OPTIONS' && c.origin !== null) {
          expect(answer.status).toBe(204);
          expect(answer.headers.get('access-control-allow-origin')).toBe(c.origin);
        } else if (!c.key.valid) {
          expect(answer.status).toBe(401);
          expect(answer.headers.get('www-authenticate')).toBe('Bearer');
        } else if (path.startsWith('/v1/messages/')) {
          // A read receipt (RCPT-2, RCPT-3): GET only; no event of these fuzzed ids exists.
          expect(answer.status).toBe(c.method === 'GET' || c.method === 'HEAD' ? 404 : 405);
          if (answer.status === 405) expect(answer.headers.get('allow')).toBe('GET');
        } else if (c.method !== 'POST') {
          expect(answer.status).toBe(405);
          expect(answer.headers.get('allow')).toBe('POST');
        } else if (!isJsonType(sentType)) {
          expect(answer.status).toBe(415);
        } else if (path === '/mcp') {
          let parsed: unknown = ABSENT;
          try {
            parsed = JSON.parse(await new Request(url, { method: 'POST', ...(withBody ? { body: c.body as BodyInit } : {}) }).text());
          } catch {
            // not JSON: any JSON-RPC error will do
          }
          expectRpcAnswer(t, answer, parsed);
        } else {
          expect([202, 400, 409, 413]).toContain(answer.status);
        }
        if (path === '/mcp' && answer.status >= 400 && answer.status !== 404) expect(isRpcResponse(answer.json)).toBe(true);
      }),
      fuzzParams(RUNS.anyRequest),
    );
  }, 120_000);
});

test('at least 10,000 requests were sent in this file', () => {
  const total = Object.values(RUNS).reduce((a, b) => a + b, 0);
  expect(total).toBeGreaterThanOrEqual(10_000);
  expect(requestsSent).toBeGreaterThanOrEqual(10_000);
});
