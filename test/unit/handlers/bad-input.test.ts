/**
 * The bad-input table (test/support/bad-input.ts) replayed through the MCP Lambda: each row's request goes
 * through the local API Gateway as a payload 2.0 event into `createMcpLambda` (over the in-memory
 * fakes and a fake key loader), and the answer must meet the row's own checks and be the same as
 * the local app's answer to the same request: status, content type, the headers that matter, and
 * the JSON body. The only differences allowed are the ones API Gateway brings: `x-request-id` is
 * the event's `requestContext.requestId` (a fresh UUID locally), and no hop-by-hop `connection`
 * header on SSE answers.
 *
 * Rows that only apply to the local runtime are skipped: a row configured with `allowedHosts`
 * (the Host check is the local runtime's DNS rebinding protection, docs/contract/http.md; behind API Gateway the
 * Lambda has no Host allow-list). None of today's rows is such a row.
 *
 * Then a few classes that only exist on the Lambda: events API Gateway would not send but the
 * handler must still answer (never throw, never 5xx).
 */
import type { APIGatewayProxyEventV2 } from 'aws-lambda';
import type { App } from '../../../lambda/http/app';
import { eventFromRequest } from '../../support/apigw';
import { API_KEY, buildApp, hasStackTrace, keyQuery, legacyHeaders, readAnswer, rpcErrorCode, rpcLegacy, send, SECRET, type Answer } from '../../support/app';
import { BAD_INPUT_ROWS, expectBadInputAnswer, type BadInputRow } from '../../support/bad-input';
import { asApp, buildLambda, resultText } from '../../support/lambda';

const MiB = 1024 * 1024;
const ping = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' });

/** Rows whose answer depends on the local runtime's Host check (none today; see the header). */
const localOnly = (row: BadInputRow) => row.config?.allowedHosts !== undefined;
const ROWS = BAD_INPUT_ROWS.filter((row) => !localOnly(row));
const SKIPPED = BAD_INPUT_ROWS.filter(localOnly);

/**
 * Headers that may differ: `x-request-id` is API Gateway's request id on the Lambda, and the
 * hop-by-hop `connection: keep-alive` the SDK puts on SSE answers is the gateway's business (the
 * Lambda's translation drops it, as API Gateway manages its own connections).
 */
const NOT_COMPARED = new Set(['x-request-id', 'date', 'connection', 'keep-alive']);

const UUID = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g;

/** What must be equal between the local app and the Lambda (ids that are fresh per request masked). */
function comparable(answer: Answer) {
  const headers: Record<string, string> = {};
  for (const [name, value] of answer.headers) if (!NOT_COMPARED.has(name)) headers[name] = value;
  return {
    status: answer.status,
    headers,
    json:
      answer.json === undefined
        ? undefined
        : JSON.parse(
            JSON.stringify(answer.json)
              .replace(UUID, '<uuid>')
              .replace(/evt_[0-9a-f]{32}/g, 'evt_<id>'),
          ),
    empty: answer.text === '',
  };
}

/** One request answered by the local app and by the Lambda (each fresh, with the row's config). */
async function both(config: BadInputRow['config'], call: (app: App) => Promise<Answer>, requestId: string) {
  const local = buildApp(config);
  const localAnswer = await call(local.app);
  await local.app.close();

  const t = buildLambda({
    ...(config && 'apiKey' in config ? { apiKey: config.apiKey } : {}),
    allowedOrigins: config?.allowedOrigins ?? [],
    ...(config?.pup ? { pup: config.pup } : {}),
  });
  const app = asApp(t.lambda, { requestId });
  const lambdaAnswer = await call(app);
  expect(t.logs.filter((line) => line.level === 'error')).toEqual([]);
  expect(JSON.stringify(t.logs)).not.toContain(API_KEY);
  return { localAnswer, lambdaAnswer, event: app.lastEvent() };
}

describe('CON-1, HTTP-2, HTTP-16, HTTP-18, LOCAL-1, MCP-1: bad input through the MCP Lambda: one row per malformed-request class', () => {
  test('the local-only rows are the Host rows, and there are none today', () => {
    expect(SKIPPED.map((row) => row.klass)).toEqual([]);
    expect(ROWS.length).toBeGreaterThanOrEqual(50);
  });

  test.each(ROWS.map((row, i) => [row.klass, row, i] as const))('%s', async (_klass, row, i) => {
    const requestId = `bad-input-row-${i}`;
    const { localAnswer, lambdaAnswer, event } = await both(row.config, row.call, requestId);
    expectBadInputAnswer(row, lambdaAnswer);
    expect(comparable(lambdaAnswer)).toEqual(comparable(localAnswer));
    // The app answered with API Gateway's request id, not one of its own.
    expect(event?.requestContext.requestId).toBe(requestId);
    expect(lambdaAnswer.headers.get('x-request-id')).toBe(requestId);
  });
});

describe('EV-1, EV-SUB-2: the same subscribe checks on the legacy era, through the MCP Lambda', () => {
  const rows = ROWS.filter((row) => row.klass.startsWith('events/subscribe:'));
  test.each(rows.map((row) => [row.klass, row] as const))('%s', async (_klass, row) => {
    const { localAnswer, lambdaAnswer } = await both(undefined, (app) => rpcLegacy(app, 'events/subscribe', row.params!), 'legacy-subscribe');
    expect(lambdaAnswer.status).toBe(200);
    expect(lambdaAnswer.headers.get('content-type')).toMatch(/^text\/event-stream/);
    expect(rpcErrorCode(lambdaAnswer.json)).toBe(-32602);
    expect((lambdaAnswer.json as { error: { message: string } }).error.message).toMatch(row.message!);
    expect(lambdaAnswer.text).not.toContain(SECRET.slice(6));
    expect(comparable(lambdaAnswer)).toEqual(comparable(localAnswer));
  });
});

describe('the boundaries next to the bad rows, through the MCP Lambda', () => {
  test('HTTP-16: a body of exactly 1 MiB is read, as text and as base64; one byte more is 413', async () => {
    const padded = (n: number) => ping + ' '.repeat(n - ping.length);
    const t = buildLambda();
    const app = asApp(t.lambda);
    const text = await send(app, { headers: legacyHeaders(), body: padded(MiB) });
    const streamed = await send(app, { headers: legacyHeaders(), body: new Blob([padded(MiB)]).stream() });
    const base64App = asApp(t.lambda, { encoding: 'base64' });
    const base64 = await readAnswer(await post(base64App, padded(MiB)));
    for (const answer of [text, streamed, base64]) {
      expect(answer.status).toBe(200);
      expect((answer.json as { result?: unknown }).result).toEqual({});
    }
    const over = await readAnswer(await post(base64App, padded(MiB + 1)));
    expect(base64App.lastEvent()?.isBase64Encoded).toBe(true);
    expect(over.status).toBe(413);
    expect(rpcErrorCode(over.json)).toBe(-32600);
  });
});

/** POSTs `body` to /mcp with the valid key and the legacy headers. */
async function post(app: App, body: string): Promise<Response> {
  return app.handle(
    new Request(`https://dmdot.example/mcp?${keyQuery()}`, { method: 'POST', headers: legacyHeaders({ 'content-type': 'application/json' }), body }),
  );
}

// ---------------------------------------------------------------------------------------------
// Classes that only exist on the Lambda: events, not requests.

async function baseEvent(): Promise<APIGatewayProxyEventV2> {
  return eventFromRequest(new Request(`https://dmdot.example/mcp?${keyQuery()}`, { method: 'POST', headers: legacyHeaders(), body: ping }), {
    requestId: 'evt-row',
  });
}

interface EventRow {
  klass: string;
  change: (event: APIGatewayProxyEventV2) => APIGatewayProxyEventV2;
  status: number;
  /** JSON-RPC error code, REST `error.code`, or a JSON-RPC result. */
  answer: { rpc: number } | { rest: string } | 'result';
}

const withMethod = (method: string) => (e: APIGatewayProxyEventV2) => ({
  ...e,
  requestContext: { ...e.requestContext, http: { ...e.requestContext.http, method } },
});

const EVENT_ROWS: EventRow[] = [
  { klass: 'a method no web Request accepts (TRACE)', change: withMethod('TRACE'), status: 400, answer: { rest: 'bad_request' } },
  { klass: 'a method that is not a token', change: withMethod('GE T'), status: 400, answer: { rest: 'bad_request' } },
  { klass: 'a lower-case method (post)', change: withMethod('post'), status: 200, answer: 'result' },
  { klass: 'no headers object at all', change: (e) => ({ ...e, headers: undefined as never }), status: 415, answer: { rpc: -32600 } },
  {
    klass: 'isBase64Encoded with a body that is not base64',
    change: (e) => ({ ...e, isBase64Encoded: true, body: '{not base64!}' }),
    status: 400,
    answer: { rpc: -32700 },
  },
  { klass: 'isBase64Encoded with an empty body', change: (e) => ({ ...e, isBase64Encoded: true, body: '' }), status: 400, answer: { rpc: -32700 } },
  {
    klass: 'a base64 body of 1 MiB + 1 decoded bytes',
    change: (e) => ({ ...e, isBase64Encoded: true, body: Buffer.alloc(MiB + 1, 0x20).toString('base64') }),
    status: 413,
    answer: { rpc: -32600 },
  },
  { klass: 'a text body of 1 MiB + 1 UTF-8 bytes', change: (e) => ({ ...e, body: `${'é'.repeat(MiB / 2)}x` }), status: 413, answer: { rpc: -32600 } },
  {
    klass: 'mixed-case header names',
    change: (e) => ({ ...e, headers: { 'Content-Type': 'application/json', ACCEPT: 'application/json, text/event-stream' } }),
    status: 200,
    answer: 'result',
  },
  {
    klass: 'the same header twice in different case (joined, so not JSON)',
    change: (e) => ({ ...e, headers: { 'content-type': 'application/json', 'Content-Type': 'application/json' } }),
    status: 415,
    answer: { rpc: -32600 },
  },
  { klass: 'an empty `key` before the valid one', change: (e) => ({ ...e, rawQueryString: `key=&${keyQuery()}` }), status: 401, answer: { rpc: -32600 } },
  { klass: 'the valid `key` before a wrong one', change: (e) => ({ ...e, rawQueryString: `${keyQuery()}&key=wrong` }), status: 200, answer: 'result' },
  { klass: '`key` given as a bare flag', change: (e) => ({ ...e, rawQueryString: 'key' }), status: 401, answer: { rpc: -32600 } },
  { klass: 'a `cookies` array (ignored)', change: (e) => ({ ...e, cookies: ['a=1', '', 'key=x', `session=${'é'}`] }), status: 200, answer: 'result' },
  {
    klass: 'no requestContext.http',
    change: (e) => ({ ...e, requestContext: { ...e.requestContext, http: undefined as never } }),
    status: 405,
    answer: { rpc: -32600 },
  },
  { klass: 'no rawPath (the root)', change: (e) => ({ ...e, rawPath: undefined as never }), status: 404, answer: { rest: 'not_found' } },
  { klass: 'a rawPath without its leading slash', change: (e) => ({ ...e, rawPath: 'mcp' }), status: 200, answer: 'result' },
  {
    klass: 'a domain name that is not a host',
    change: (e) => ({ ...e, requestContext: { ...e.requestContext, domainName: 'evil.example/@x' } }),
    status: 200,
    answer: 'result',
  },
  // Regressions: both once made the handler fail open or throw.
  {
    klass: 'an Origin a web Request cannot carry (non-Latin-1) is still refused',
    change: (e) => ({ ...e, headers: { ...e.headers, origin: 'https://évil€.example' } }),
    status: 403,
    answer: { rpc: -32600 },
  },
  {
    klass: 'a request id that is not a header value (the app makes its own)',
    change: (e) => ({ ...e, requestContext: { ...e.requestContext, requestId: 'id\n€' } }),
    status: 200,
    answer: 'result',
  },
];

describe('HTTP-19: events only the Lambda sees: answered, never thrown', () => {
  test.each(EVENT_ROWS.map((row) => [row.klass, row] as const))('%s', async (_klass, row) => {
    const t = buildLambda();
    const event = row.change(await baseEvent());
    let result;
    try {
      result = await t.lambda(event);
    } catch (error) {
      throw new Error(`the Lambda threw: ${String(error)}`);
    }
    const text = resultText(result);
    expect(result.statusCode).toBe(row.status);
    // JSON, or (a legacy-era result) one SSE event whose data is JSON.
    expect(result.headers?.['content-type']).toMatch(/^(application\/json|text\/event-stream)/);
    expect(hasStackTrace(text)).toBe(false);
    expect(text).not.toContain(API_KEY);
    const answer = await readAnswer(new Response(text));
    expect(answer.unreadable).toBe(false);
    const json = answer.json as { jsonrpc?: string; result?: unknown; error?: { code: unknown; message: string } };
    if (row.answer === 'result') expect(json.result).toEqual({});
    else if ('rpc' in row.answer) {
      expect(json.jsonrpc).toBe('2.0');
      expect(json.error?.code).toBe(row.answer.rpc);
    } else expect(json.error?.code).toBe(row.answer.rest);
    expect(t.logs.filter((line) => line.level === 'error')).toEqual([]);
    // x-request-id: API Gateway's id when it is a usable token, else the app's own UUID; none on a malformed event.
    if (typeof row.answer === 'object' && 'rest' in row.answer && row.answer.rest === 'bad_request') return;
    const sent = event.requestContext?.requestId ?? '';
    if (/^[\x21-\x7e]{1,128}$/.test(sent)) expect(result.headers?.['x-request-id']).toBe(sent);
    else expect(result.headers?.['x-request-id']).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
  });
});
