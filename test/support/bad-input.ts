/**
 * The bad-input rows: one per malformed-request class of docs/contract: http, mcp, events,
 * delivery, pup (the pup door), each answered with its own status and error code, always as JSON
 * and never with a stack trace, with the checks every answer must meet. Run against the HTTP app by
 * test/unit/http/bad-input.test.ts and replayed through the MCP Lambda by
 * test/unit/handlers/bad-input.test.ts; `badInputMarkdown` is the table of docs/http-and-errors.md.
 *
 * Pinned behaviour of the SDK where the contract is silent: on the legacy era, malformed JSON is also
 * HTTP 400 -32700 (plain JSON), and an unknown method is HTTP 200 with -32601 in an SSE event.
 */
import type { App, HttpConfig } from '../../lambda/http/app';
import {
  API_KEY,
  hasStackTrace,
  keyQuery,
  legacyHeaders,
  MODERN,
  MODERN_META,
  modernBody,
  modernHeaders,
  rpcErrorCode,
  rpcLegacy,
  rpcModern,
  SECRET,
  send,
  streamOf,
  type Answer,
} from './app';
import { T0 } from './fakes';
import { envelope, mcpBody, mcpHeaders, newPupSecret, pupSignature } from './pup-suite';

export const MiB = 1024 * 1024;
export const TOOL = 'send_to_dot';
const DELIVERY = { mode: 'webhook', url: 'https://dot.example/hook', secret: SECRET } as const;
const SUBSCRIBE = { name: 'message.created', arguments: {}, delivery: DELIVERY };
const b64 = (bytes: number) => Buffer.alloc(bytes, 0x5a).toString('base64');

/** What the error is: a JSON-RPC code, a REST `error.code`, or a tool result with `isError: true`. */
type Expected = { rpc: number } | { rest: string } | { toolError: true };

export interface BadInputRow {
  /** The malformed-request class, as docs/http-and-errors.md names it. */
  klass: string;
  /** What is sent, in a few words (markdown). */
  sent: string;
  status: number;
  error: Expected;
  /** Headers the answer must carry (lower-case names, exact values). */
  headers?: Record<string, string>;
  /** The error message (or tool text) must match. */
  message?: RegExp;
  /** The answer is an SSE stream whose `data:` line holds the JSON (legacy era). */
  sse?: boolean;
  config?: Partial<HttpConfig>;
  /** For `events/subscribe` rows: the params sent (also replayed on the legacy era). */
  params?: Record<string, unknown>;
  call: (app: App) => Promise<Answer>;
}

export const callTool = (app: App, args: unknown) => rpcModern(app, 'tools/call', { name: TOOL, arguments: args }, { 'mcp-name': TOOL });
const subscribeWith = (params: Record<string, unknown>) => (app: App) => rpcModern(app, 'events/subscribe', params);
export const rest =
  (body: string, extra: Record<string, string> = {}) =>
  (app: App) =>
    send(app, { path: '/v1/messages', headers: { 'content-type': 'application/json', ...extra }, body });
export const ping = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' });

// --- The pup door (docs/contract/pup.md): requests signed with node:crypto at the fake clock's now (T0).
const PUP = newPupSecret();
const PUP_CONFIG: Partial<HttpConfig> = { pup: { secrets: async () => ({ secrets: [PUP.secret] }) } };
const PUP_ID = 'msg_bad_input_0001';
const pupPost =
  (path: string, body: string, options: { key?: Buffer; ageS?: number; id?: string; headers?: Record<string, string> } = {}) =>
  async (app: App): Promise<Answer> => {
    const bytes = Buffer.from(body, 'utf8');
    const id = options.id ?? PUP_ID;
    const ts = Math.floor(T0 / 1000) - (options.ageS ?? 0);
    const headers = {
      'content-type': 'application/json',
      'webhook-id': id,
      'webhook-timestamp': String(ts),
      'webhook-signature': pupSignature(options.key ?? PUP.key, id, ts, bytes),
      ...options.headers,
    };
    return send(app, { path, query: '', headers, body: bytes });
  };

export const BAD_INPUT_ROWS: BadInputRow[] = [
  // --- Authentication and transport (docs/contract/http.md), checked before the body is parsed.
  {
    klass: 'No API key',
    sent: '`POST /mcp` without `?key=` or `Authorization`',
    status: 401,
    error: { rpc: -32600 },
    headers: { 'www-authenticate': 'Bearer' },
    // The hint an OAuth-minded client needs: this is an API key server.
    message: /this server takes an API key, not OAuth/,
    call: (app) => send(app, { query: '', headers: legacyHeaders(), body: ping }),
  },
  {
    klass: 'Wrong API key (query)',
    sent: '`POST /mcp?key=wrong`',
    status: 401,
    error: { rpc: -32600 },
    headers: { 'www-authenticate': 'Bearer' },
    call: (app) => send(app, { query: keyQuery('wrong'), headers: legacyHeaders(), body: ping }),
  },
  {
    klass: 'Wrong API key (Bearer)',
    sent: '`Authorization: Bearer wrong`',
    status: 401,
    error: { rpc: -32600 },
    headers: { 'www-authenticate': 'Bearer' },
    call: (app) => send(app, { query: '', headers: legacyHeaders({ authorization: 'Bearer wrong' }), body: ping }),
  },
  {
    klass: 'Wrong API key on the REST route',
    sent: '`POST /v1/messages?key=wrong`',
    status: 401,
    error: { rest: 'unauthorized' },
    headers: { 'www-authenticate': 'Bearer' },
    call: (app) => send(app, { path: '/v1/messages', query: keyQuery('wrong'), headers: { 'content-type': 'application/json' }, body: '{"message":"hi"}' }),
  },
  {
    klass: 'API key not configured',
    sent: 'any `POST /mcp` while the key is missing or unloadable',
    status: 503,
    error: { rpc: -32603 },
    message: /not configured/,
    config: { apiKey: undefined },
    call: (app) => send(app, { headers: legacyHeaders(), body: ping }),
  },
  {
    klass: 'API key not configured (REST)',
    sent: '`POST /v1/messages` while the key is missing',
    status: 503,
    error: { rest: 'not_configured' },
    config: { apiKey: undefined },
    call: rest('{"message":"hi"}'),
  },
  {
    klass: 'Origin not allowed',
    sent: '`Origin: https://evil.example` (not in `DMDOT_ALLOWED_ORIGINS`)',
    status: 403,
    error: { rpc: -32600 },
    message: /Origin not allowed/,
    call: (app) => send(app, { headers: legacyHeaders({ origin: 'https://evil.example' }), body: ping }),
  },
  {
    klass: 'GET /mcp',
    sent: '`GET /mcp` (no SSE stream)',
    status: 405,
    error: { rpc: -32600 },
    headers: { allow: 'POST' },
    call: (app) => send(app, { method: 'GET', headers: { accept: 'text/event-stream' } }),
  },
  {
    klass: 'DELETE /mcp',
    sent: '`DELETE /mcp` (no sessions)',
    status: 405,
    error: { rpc: -32600 },
    headers: { allow: 'POST' },
    call: (app) => send(app, { method: 'DELETE', headers: { 'mcp-session-id': 'abc' } }),
  },
  {
    klass: 'Wrong Content-Type',
    sent: '`Content-Type: text/plain`',
    status: 415,
    error: { rpc: -32600 },
    message: /application\/json/,
    call: (app) => send(app, { headers: legacyHeaders({ 'content-type': 'text/plain' }), body: ping }),
  },
  {
    klass: 'Body over 1 MiB (declared)',
    sent: '`Content-Length: 1048577`',
    status: 413,
    error: { rpc: -32600 },
    message: /1048576/,
    call: (app) => send(app, { headers: legacyHeaders({ 'content-length': String(MiB + 1) }), body: ' '.repeat(MiB + 1) }),
  },
  {
    klass: 'Body over 1 MiB (streamed)',
    sent: '1,048,577 bytes, chunked, no `Content-Length`',
    status: 413,
    error: { rpc: -32600 },
    call: (app) => send(app, { headers: legacyHeaders(), body: streamOf(MiB + 1) }),
  },
  {
    klass: 'Body over 1 MiB (REST)',
    sent: '`POST /v1/messages` with 1,048,577 bytes',
    status: 413,
    error: { rest: 'payload_too_large' },
    call: (app) => send(app, { path: '/v1/messages', headers: { 'content-type': 'application/json' }, body: streamOf(MiB + 1) }),
  },
  // --- JSON-RPC and MCP envelope (docs/contract: http, mcp).
  {
    klass: 'Malformed JSON (2026-07-28)',
    sent: '`{"jsonrpc":"2.0",` with the modern headers',
    status: 400,
    error: { rpc: -32700 },
    call: (app) => send(app, { headers: modernHeaders('tools/list'), body: '{"jsonrpc":"2.0",' }),
  },
  {
    klass: 'Malformed JSON (legacy)',
    sent: '`{"jsonrpc":"2.0",` without protocol headers',
    status: 400,
    error: { rpc: -32700 },
    call: (app) => send(app, { headers: legacyHeaders(), body: '{"jsonrpc":"2.0",' }),
  },
  {
    klass: 'Unknown method (2026-07-28)',
    sent: '`foo/bar` with `Mcp-Method: foo/bar`',
    status: 404,
    error: { rpc: -32601 },
    call: (app) => rpcModern(app, 'foo/bar'),
  },
  {
    klass: 'Unknown method (legacy)',
    sent: '`foo/bar` with `MCP-Protocol-Version: 2025-11-25`',
    status: 200,
    error: { rpc: -32601 },
    sse: true,
    call: (app) => rpcLegacy(app, 'foo/bar'),
  },
  {
    klass: 'Mcp-Method header mismatch',
    sent: 'body `events/list`, header `Mcp-Method: tools/list`',
    status: 400,
    error: { rpc: -32020 },
    message: /Mcp-Method/,
    call: (app) => send(app, { headers: modernHeaders('tools/list'), body: modernBody('events/list') }),
  },
  {
    klass: 'Mcp-Name header mismatch',
    sent: '`tools/call` of `send_to_dot` with `Mcp-Name: other`',
    status: 400,
    error: { rpc: -32020 },
    message: /Mcp-Name/,
    call: (app) => rpcModern(app, 'tools/call', { name: TOOL, arguments: { message: 'hi' } }, { 'mcp-name': 'other' }),
  },
  {
    klass: 'MCP-Protocol-Version header vs `_meta` mismatch',
    sent: 'header `2025-11-25`, `_meta` `2026-07-28`',
    status: 400,
    error: { rpc: -32020 },
    message: /MCP-Protocol-Version/,
    call: (app) => send(app, { headers: modernHeaders('tools/list', { 'mcp-protocol-version': '2025-11-25' }), body: modernBody('tools/list') }),
  },
  {
    klass: 'Unsupported protocol version',
    sent: '`2099-01-01` in the header and `_meta`',
    status: 400,
    error: { rpc: -32022 },
    message: /2099-01-01/,
    call: (app) =>
      send(app, {
        headers: modernHeaders('tools/list', { 'mcp-protocol-version': '2099-01-01' }),
        body: JSON.stringify({
          jsonrpc: '2.0',
          id: 1,
          method: 'tools/list',
          params: { _meta: { ...MODERN_META, 'io.modelcontextprotocol/protocolVersion': '2099-01-01' } },
        }),
      }),
  },
  {
    klass: 'JSON-RPC batch on a revision without batches',
    sent: 'an array of two `ping`s with `MCP-Protocol-Version: 2025-06-18` (MCP-15)',
    status: 400,
    error: { rpc: -32600 },
    message: /batches are not part of MCP 2025-06-18/,
    call: (app) =>
      send(app, {
        headers: legacyHeaders({ 'mcp-protocol-version': '2025-06-18' }),
        body: JSON.stringify([JSON.parse(ping), { ...JSON.parse(ping), id: 2 }]),
      }),
  },
  {
    klass: 'Missing `_meta` (2026-07-28)',
    sent: '`tools/list` with the modern headers and no `_meta`',
    status: 400,
    error: { rpc: -32602 },
    message: /_meta/,
    call: (app) => send(app, { headers: modernHeaders('tools/list'), body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} }) }),
  },
  {
    klass: 'Not a JSON-RPC message',
    sent: '`{"jsonrpc":"1.0","id":1,"method":"ping"}`',
    status: 400,
    error: { rpc: -32600 },
    call: (app) => send(app, { headers: legacyHeaders(), body: '{"jsonrpc":"1.0","id":1,"method":"ping"}' }),
  },
  // --- events/subscribe (docs/contract/events.md): each field, in order, -32602 naming it.
  ...(
    [
      ['name', 'unknown event', '`name: "message.deleted"`', { ...SUBSCRIBE, name: 'message.deleted' }, /^name: /],
      ['arguments', 'not empty', '`arguments: {"a":1}`', { ...SUBSCRIBE, arguments: { a: 1 } }, /^arguments: /],
      ['delivery', 'missing', 'no `delivery`', { name: SUBSCRIBE.name }, /^delivery is required/],
      ['delivery.mode', 'not webhook', '`mode: "poll"`', { ...SUBSCRIBE, delivery: { ...DELIVERY, mode: 'poll' } }, /^delivery\.mode /],
      ['delivery.url', 'missing', 'no `url`', { ...SUBSCRIBE, delivery: { mode: 'webhook', secret: SECRET } }, /^delivery\.url is required/],
      [
        'delivery.url',
        'not https:',
        '`http://dot.example/hook`',
        { ...SUBSCRIBE, delivery: { ...DELIVERY, url: 'http://dot.example/hook' } },
        /^delivery\.url must use https:/,
      ],
      [
        'delivery.url',
        'with user info',
        '`https://u:p@dot.example/hook`',
        { ...SUBSCRIBE, delivery: { ...DELIVERY, url: 'https://u:p@dot.example/hook' } },
        /^delivery\.url must not contain user info/,
      ],
      [
        'delivery.url',
        'with a fragment',
        '`https://dot.example/hook#x`',
        { ...SUBSCRIBE, delivery: { ...DELIVERY, url: 'https://dot.example/hook#x' } },
        /^delivery\.url must not contain a fragment/,
      ],
      [
        'delivery.url',
        'too long',
        '2,049 characters',
        { ...SUBSCRIBE, delivery: { ...DELIVERY, url: `https://dot.example/${'a'.repeat(2049 - 20)}` } },
        /^delivery\.url is longer than 2048/,
      ],
      ['delivery.url', 'not absolute', '`/hook`', { ...SUBSCRIBE, delivery: { ...DELIVERY, url: '/hook' } }, /^delivery\.url is not a valid absolute URL/],
      [
        'delivery.secret',
        'without prefix',
        'base64 of 32 bytes without `whsec_`',
        { ...SUBSCRIBE, delivery: { ...DELIVERY, secret: b64(32) } },
        /^delivery\.secret must be/,
      ],
      [
        'delivery.secret',
        'too short',
        '`whsec_` + base64 of 23 bytes',
        { ...SUBSCRIBE, delivery: { ...DELIVERY, secret: `whsec_${b64(23)}` } },
        /^delivery\.secret must be/,
      ],
      [
        'delivery.secret',
        'too long',
        '`whsec_` + base64 of 65 bytes',
        { ...SUBSCRIBE, delivery: { ...DELIVERY, secret: `whsec_${b64(65)}` } },
        /^delivery\.secret must be/,
      ],
      [
        'delivery.secret',
        'not base64',
        '`whsec_!!!!not-base64!!!!`',
        { ...SUBSCRIBE, delivery: { ...DELIVERY, secret: 'whsec_!!!!not-base64!!!!' } },
        /^delivery\.secret must be/,
      ],
      ['ttlMs', 'too small', '`ttlMs: 59999`', { ...SUBSCRIBE, ttlMs: 59_999 }, /^ttlMs /],
      ['ttlMs', 'not an integer', '`ttlMs: 60000.5`', { ...SUBSCRIBE, ttlMs: 60_000.5 }, /^ttlMs /],
      ['ttlMs', 'a string', '`ttlMs: "600000"`', { ...SUBSCRIBE, ttlMs: '600000' }, /^ttlMs /],
      ['cursor', 'not null', '`cursor: "c1"`', { ...SUBSCRIBE, cursor: 'c1' }, /^cursor /],
    ] as const
  ).map(
    ([field, what, sent, params, message]): BadInputRow => ({
      klass: `events/subscribe: \`${field}\` ${what}`,
      sent,
      status: 200,
      error: { rpc: -32602 },
      message,
      params: params as Record<string, unknown>,
      call: subscribeWith(params as Record<string, unknown>),
    }),
  ),
  {
    klass: 'events/unsubscribe: bad `delivery.url`',
    sent: '`delivery: {"mode":"webhook"}`',
    status: 200,
    error: { rpc: -32602 },
    message: /^delivery\.url is required/,
    call: (app) => rpcModern(app, 'events/unsubscribe', { name: 'message.created', arguments: {}, delivery: { mode: 'webhook' } }),
  },
  // --- send_to_dot (docs/contract/mcp.md): failures are tool results, never JSON-RPC errors.
  {
    klass: 'send_to_dot: empty message',
    sent: '`{"message":"  \\n "}`',
    status: 200,
    error: { toolError: true },
    message: /empty after trimming/,
    call: (app) => callTool(app, { message: '  \n ' }),
  },
  {
    klass: 'send_to_dot: oversized message',
    sent: '16,385 UTF-8 bytes',
    status: 200,
    error: { toolError: true },
    message: /16385 UTF-8 bytes.*limit is 16384/,
    call: (app) => callTool(app, { message: `${'é'.repeat(8192)}x` }),
  },
  {
    klass: 'send_to_dot: non-string message',
    sent: '`{"message":42}`',
    status: 200,
    error: { toolError: true },
    message: /must be a string/,
    call: (app) => callTool(app, { message: 42 }),
  },
  {
    klass: 'send_to_dot: extra argument',
    sent: '`{"message":"hi","to":"x"}`',
    status: 200,
    error: { toolError: true },
    message: /only argument/,
    call: (app) => callTool(app, { message: 'hi', to: 'x' }),
  },
  {
    klass: 'send_to_dot: no subscription',
    sent: 'a valid message, nobody subscribed',
    status: 200,
    error: { toolError: true },
    message: /No dot is subscribed/,
    call: (app) => callTool(app, { message: 'hi' }),
  },
  // --- POST /v1/messages (docs/contract/delivery.md) and the other routes.
  { klass: 'REST: malformed JSON', sent: '`{"message":`', status: 400, error: { rest: 'invalid_json' }, call: rest('{"message":') },
  {
    klass: 'REST: invalid UTF-8',
    sent: 'bytes `FF FE`',
    status: 400,
    error: { rest: 'invalid_json' },
    call: (app) => send(app, { path: '/v1/messages', headers: { 'content-type': 'application/json' }, body: new Uint8Array([0xff, 0xfe]) }),
  },
  { klass: 'REST: empty message', sent: '`{"message":""}`', status: 400, error: { rest: 'invalid_input' }, message: /empty/, call: rest('{"message":""}') },
  {
    klass: 'REST: oversized message',
    sent: '16,385 UTF-8 bytes',
    status: 400,
    error: { rest: 'invalid_input' },
    message: /16385/,
    call: rest(JSON.stringify({ message: 'x'.repeat(16_385) })),
  },
  {
    klass: 'REST: non-string message',
    sent: '`{"message":["hi"]}`',
    status: 400,
    error: { rest: 'invalid_input' },
    message: /string/,
    call: rest('{"message":["hi"]}'),
  },
  { klass: 'REST: body not an object', sent: '`"hi"`', status: 400, error: { rest: 'invalid_input' }, call: rest('"hi"') },
  {
    klass: 'REST: wrong Content-Type',
    sent: '`Content-Type: text/plain`',
    status: 415,
    error: { rest: 'unsupported_media_type' },
    call: rest('{"message":"hi"}', { 'content-type': 'text/plain' }),
  },
  {
    klass: 'REST: no subscription',
    sent: '`{"message":"hi"}`, nobody subscribed',
    status: 409,
    error: { rest: 'no_subscription' },
    call: rest('{"message":"hi"}'),
  },
  {
    klass: 'REST: GET /v1/messages',
    sent: '`GET /v1/messages`',
    status: 405,
    error: { rest: 'method_not_allowed' },
    headers: { allow: 'POST' },
    call: (app) => send(app, { method: 'GET', path: '/v1/messages' }),
  },
  {
    klass: 'Unknown route',
    sent: '`POST /v2/messages`',
    status: 404,
    error: { rest: 'not_found' },
    call: (app) => send(app, { path: '/v2/messages', headers: { 'content-type': 'application/json' }, body: '{}' }),
  },
  {
    klass: '/healthz with POST',
    sent: '`POST /healthz`',
    status: 405,
    error: { rest: 'method_not_allowed' },
    headers: { allow: 'GET' },
    call: (app) => send(app, { path: '/healthz', query: '', headers: { 'content-type': 'application/json' }, body: '{}' }),
  },
  // --- The pup door (docs/contract/pup.md): signature first; nothing else is said about a refusal.
  {
    klass: 'pup: API key instead of a signature',
    sent: '`POST /pup/mcp?key=KEY`, unsigned',
    status: 401,
    error: { rest: 'invalid_signature' },
    config: PUP_CONFIG,
    call: (app) => send(app, { path: '/pup/mcp', headers: { ...mcpHeaders('tools/list'), 'content-type': 'application/json' }, body: mcpBody('tools/list') }),
  },
  {
    klass: 'pup: wrong secret',
    sent: 'signed with another `whsec_` secret',
    status: 401,
    error: { rest: 'invalid_signature' },
    config: PUP_CONFIG,
    call: pupPost('/pup/challenge', '"n"', { key: newPupSecret().key }),
  },
  {
    klass: 'pup: stale timestamp',
    sent: '`webhook-timestamp` 301 s old',
    status: 401,
    error: { rest: 'stale_timestamp' },
    config: PUP_CONFIG,
    call: pupPost('/pup/challenge', '"n"', { ageS: 301 }),
  },
  {
    klass: 'pup: replayed webhook-id',
    sent: 'a signed `/pup/challenge`, then its `webhook-id` with other bytes (a retry of the same bytes gets the first answer)',
    status: 401,
    error: { rest: 'replayed' },
    config: PUP_CONFIG,
    call: async (app) => {
      await pupPost('/pup/challenge', '"n"')(app);
      return pupPost('/pup/challenge', '"other"')(app);
    },
  },
  {
    klass: 'pup: no secret configured',
    sent: 'any `POST /pup/*` with no pup secret',
    status: 503,
    error: { rest: 'not_configured' },
    call: pupPost('/pup/events', '{}'),
  },
  {
    klass: 'pup: wrong Content-Type',
    sent: '`Content-Type: text/plain`',
    status: 415,
    error: { rest: 'unsupported_media_type' },
    config: PUP_CONFIG,
    call: pupPost('/pup/challenge', '"n"', { headers: { 'content-type': 'text/plain' } }),
  },
  {
    klass: 'pup: body over 1 MiB',
    sent: '1 MiB + 2 bytes, signed',
    status: 413,
    error: { rest: 'payload_too_large' },
    config: PUP_CONFIG,
    call: pupPost('/pup/events', `"${'x'.repeat(MiB)}"`),
  },
  {
    klass: 'pup: GET /pup/mcp',
    sent: '`GET /pup/mcp`',
    status: 405,
    error: { rest: 'method_not_allowed' },
    headers: { allow: 'POST' },
    config: PUP_CONFIG,
    call: (app) => send(app, { method: 'GET', path: '/pup/mcp', query: '' }),
  },
  {
    klass: 'pup: challenge without a challenge',
    sent: '`{"nonce":"n"}`, signed',
    status: 400,
    error: { rest: 'invalid_challenge' },
    config: PUP_CONFIG,
    call: pupPost('/pup/challenge', '{"nonce":"n"}'),
  },
  {
    klass: 'pup: event body not JSON',
    sent: '`{oops`, signed',
    status: 400,
    error: { rest: 'invalid_json' },
    config: PUP_CONFIG,
    call: pupPost('/pup/events', '{oops'),
  },
  {
    klass: 'pup: event envelope field missing',
    sent: 'an envelope without `occurredAt`',
    status: 400,
    error: { rest: 'invalid_envelope' },
    message: /occurredAt/,
    config: PUP_CONFIG,
    call: pupPost('/pup/events', envelope(PUP_ID, 'member.joined', { occurredAt: undefined })),
  },
  {
    klass: 'pup: envelope id is not the webhook-id',
    sent: '`"id"` differs from `webhook-id`',
    status: 400,
    error: { rest: 'id_mismatch' },
    config: PUP_CONFIG,
    call: pupPost('/pup/events', envelope('msg_other', 'member.joined')),
  },
  {
    klass: 'pup: malformed invocation context',
    sent: '`_meta["io.puphq/context"].installationId` an object',
    status: 200,
    error: { rpc: -32602 },
    message: /installationId/,
    config: PUP_CONFIG,
    call: pupPost('/pup/mcp', mcpBody('tools/list', {}, { installationId: { x: 1 } }), { headers: mcpHeaders('tools/list') }),
  },
  {
    klass: 'pup: legacy era on /pup/mcp',
    sent: '`initialize` with 2025-11-25, signed',
    status: 400,
    error: { rpc: -32022 },
    config: PUP_CONFIG,
    call: pupPost(
      '/pup/mcp',
      JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'initialize',
        params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'x', version: '1' } },
      }),
      {
        headers: { accept: 'application/json, text/event-stream' },
      },
    ),
  },
  // --- Nesting deep enough to break recursive code, on every route: a generic 400, never a 5xx.
  {
    klass: 'Deep nesting (2026-07-28)',
    sent: '`tools/list` whose client capabilities nest 2,000 levels (12 KB)',
    status: 400,
    error: { rpc: -32602 },
    message: /deeper than 64 levels/,
    call: (app) =>
      send(app, {
        headers: modernHeaders('tools/list'),
        body: `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"${MODERN}","io.modelcontextprotocol/clientCapabilities":${'{"a":'.repeat(2000)}{}${'}'.repeat(2000)}}}}`,
      }),
  },
  {
    klass: 'Deep nesting (legacy initialize)',
    sent: '`initialize` whose capabilities nest 2,000 levels',
    status: 400,
    error: { rpc: -32602 },
    message: /deeper than 64 levels/,
    call: (app) =>
      send(app, {
        headers: legacyHeaders(),
        body: `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","clientInfo":{"name":"x","version":"1"},"capabilities":${'['.repeat(2000)}${']'.repeat(2000)}}}`,
      }),
  },
  {
    klass: 'REST: deep nesting',
    sent: '`{"message":[[[[…` 5,000 levels',
    status: 400,
    error: { rest: 'invalid_input' },
    message: /deeper than 64 levels/,
    call: rest(`{"message":${'['.repeat(5000)}${']'.repeat(5000)}}`),
  },
  {
    klass: 'pup: deep nesting',
    sent: 'a challenge nested 5,000 levels, signed',
    status: 400,
    error: { rest: 'invalid_challenge' },
    message: /deeper than 64 levels/,
    config: PUP_CONFIG,
    call: pupPost('/pup/challenge', `{"challenge":${'['.repeat(5000)}${']'.repeat(5000)}}`),
  },
  // --- Text that is not UTF-8: the same sentence on both send surfaces.
  {
    klass: 'Tool: message bytes not UTF-8',
    sent: '`message` holding the byte `0xFF`',
    status: 200,
    error: { toolError: true },
    message: /must be valid UTF-8 text/,
    call: (app) => {
      const body = Buffer.concat([Buffer.from(modernBody('tools/call', { name: TOOL, arguments: { message: 'a@b' } }).replace('a@b', 'a'), 'utf8')]);
      const at = body.indexOf('"a"') + 2;
      return send(app, {
        headers: modernHeaders('tools/call', { 'mcp-name': TOOL }),
        body: Buffer.concat([body.subarray(0, at), Buffer.from([0xff]), body.subarray(at)]),
      });
    },
  },
  {
    klass: 'Tool: message with a lone surrogate',
    sent: '`{"message":"a\\ud800"}`',
    status: 200,
    error: { toolError: true },
    message: /must be valid UTF-8 text/,
    call: (app) => callTool(app, { message: 'a\ud800' }),
  },
  {
    klass: 'REST: message bytes not UTF-8',
    sent: '`{"message":"a<0xFF>"}`',
    status: 400,
    error: { rest: 'invalid_input' },
    message: /must be valid UTF-8 text/,
    call: (app) =>
      send(app, {
        path: '/v1/messages',
        headers: { 'content-type': 'application/json' },
        body: Buffer.concat([Buffer.from('{"message":"a'), Buffer.from([0xff]), Buffer.from('"}')]),
      }),
  },
  {
    klass: 'REST: message with a lone surrogate',
    sent: '`{"message":"a\\ud800"}`',
    status: 400,
    error: { rest: 'invalid_input' },
    message: /must be valid UTF-8 text/,
    call: rest('{"message":"a\\ud800"}'),
  },
  // --- OAuth discovery: MCP clients look for it after a 401; the answer says to use the API key.
  ...[
    '/.well-known/oauth-protected-resource',
    '/.well-known/oauth-protected-resource/mcp',
    '/.well-known/oauth-authorization-server',
    '/.well-known/oauth-authorization-server/mcp',
  ].map(
    (path): BadInputRow => ({
      klass: `OAuth discovery: ${path}`,
      sent: `\`GET ${path}\``,
      status: 404,
      error: { rest: 'no_oauth' },
      message: /takes an API key, as \?key=… in the URL .* or as Authorization: Bearer/,
      call: (app) => send(app, { method: 'GET', path, query: '' }),
    }),
  ),
];
function errorLabel(error: Expected): string {
  if ('rpc' in error) return `JSON-RPC \`${error.rpc}\``;
  if ('rest' in error) return `\`${error.rest}\``;
  return 'tool result `isError: true`';
}

/** The rows as a markdown table (what docs/http-and-errors.md shows). */
export function badInputMarkdown(rows: readonly BadInputRow[] = BAD_INPUT_ROWS): string {
  const cell = (s: string) => s.replace(/\|/g, '\\|');
  const lines = ['| Malformed request | Example | HTTP | Error |', '|---|---|---|---|'];
  for (const row of rows) {
    const transport = row.sse ? ' (SSE)' : '';
    lines.push(`| ${cell(row.klass)} | ${cell(row.sent)} | ${row.status}${transport} | ${cell(errorLabel(row.error))} |`);
  }
  return `${lines.join('\n')}\n`;
}

/** The JSON value of the answer: the body itself, or the one SSE `data:` line for `sse` rows. */
function answerJson(row: BadInputRow, answer: Answer): unknown {
  if (row.sse) {
    expect(answer.headers.get('content-type')).toMatch(/^text\/event-stream/);
    expect(answer.unreadable).toBe(false);
    return answer.json;
  }
  expect(answer.headers.get('content-type')).toMatch(/^application\/json/);
  return JSON.parse(answer.text) as unknown;
}

/** The assertions every row's answer must meet (exported: the MCP Lambda replays the rows). */
export function expectBadInputAnswer(row: BadInputRow, answer: Answer): void {
  expect(answer.status).toBe(row.status);
  expect(hasStackTrace(answer.text)).toBe(false);
  expect(answer.text).not.toContain('    at ');
  expect(answer.text).not.toContain(API_KEY);
  expect(answer.text).not.toContain(SECRET.slice(6));
  for (const [name, value] of Object.entries(row.headers ?? {})) expect(answer.headers.get(name)).toBe(value);

  const json = answerJson(row, answer) as Record<string, any>;
  let message: string;
  if ('rpc' in row.error) {
    expect(json.jsonrpc).toBe('2.0');
    expect(rpcErrorCode(json)).toBe(row.error.rpc);
    expect(json.result).toBeUndefined();
    message = json.error.message;
  } else if ('rest' in row.error) {
    expect(json.error.code).toBe(row.error.rest);
    expect(typeof json.error.message).toBe('string');
    message = json.error.message;
  } else {
    // A tool failure is an ordinary result with one plain sentence, never a JSON-RPC error.
    expect(json.error).toBeUndefined();
    expect(json.result.isError).toBe(true);
    expect(json.result.content).toHaveLength(1);
    message = json.result.content[0].text;
    expect(message).toMatch(/^[A-Z][^\n{}]*[.]$/);
  }
  expect(typeof message).toBe('string');
  expect(message.length).toBeGreaterThan(0);
  if (row.message) expect(message).toMatch(row.message);
}
