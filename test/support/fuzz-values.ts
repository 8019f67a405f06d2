/**
 * The fuzzers' value generators, shared by the HTTP surface's fuzz (test/unit/http/fuzz.test.ts)
 * and the MCP Lambda's (test/unit/handlers/fuzz.test.ts): odd and huge strings, values of the
 * wrong type, loose and strict objects, protocol versions, secrets, callback URLs, and JSON-RPC
 * messages (strict: a well-formed envelope around params that may still be wrong; loose: anything
 * in the envelope may be missing or mistyped).
 *
 * Deliberately not here: request framing, headers and invariants, which each fuzzer owns.
 */
import fc from 'fast-check';
import { MODERN, SECRET } from './app';

const DAY = 24 * 60 * 60 * 1000;
export const KNOWN_VERSIONS = ['2026-07-28', '2025-11-25', '2025-06-18', '2025-03-26', '2024-11-05', '2024-10-07'];
export const ABSENT = Symbol('absent');

const ODD_CHARS = [
  '\u0000',
  '\u0001',
  '\u001f',
  '\u007f',
  '\ud800',
  '\udbff',
  '\udc00',
  '\udfff',
  '\ufffe',
  '\uffff',
  '\ufffd',
  '\u202e',
  '\u202b',
  '\u200f',
  '\u061c',
  '\u2066',
  '\u200b',
  '\u2028',
  '\u2029',
  '\ufeff',
  '\u0301',
  '\u00a0',
  '😀',
  '\u{10ffff}',
  '\u{e0001}',
  'é',
  'ß',
  'İ',
  '"',
  '\\',
  '/',
  '\n',
  '\r',
  '\t',
  ' ',
  'a',
  'Z',
  '0',
  '{',
  '}',
  '[',
  ']',
  ':',
  ',',
  '%',
  '?',
  '#',
  '@',
  '&',
  '=',
  '+',
  '<',
  '>',
  "'",
  '`',
];
export const oddChar = fc.constantFrom(...ODD_CHARS);
/** Rarely: strings of 1 KB to 100 KB made of one odd character. */
export const hugeString = fc.tuple(oddChar, fc.constantFrom(1_000, 16_384, 16_385, 50_000, 100_000)).map(([c, n]) => c.repeat(n));
export const oddString: fc.Arbitrary<string> = fc.oneof(
  { weight: 6, arbitrary: fc.string({ unit: oddChar, maxLength: 24 }) },
  { weight: 3, arbitrary: fc.string({ unit: 'binary', maxLength: 24 }) },
  { weight: 2, arbitrary: fc.string({ maxLength: 24 }) },
  { weight: 1, arbitrary: fc.constantFrom('', ' ', '\u0000', 'null', 'undefined', '__proto__', 'constructor', 'toString', '-1', 'NaN', '💩'.repeat(3)) },
);
export const oddOrHugeString = fc.oneof({ weight: 40, arbitrary: oddString }, { weight: 1, arbitrary: hugeString });
/** Any JSON-ish value of the wrong type for whatever field it lands in. */
export const wrongValue: fc.Arbitrary<unknown> = fc.oneof(
  oddString,
  fc.integer(),
  fc.double(),
  fc.boolean(),
  fc.constant(null),
  fc.constantFrom({}, [], [null], { '': null }, 1e308, -0, 2 ** 53 + 1, -1, 0.5),
  fc.jsonValue({ maxDepth: 2 }),
);

/** `arb` once in `n` times, else null (fc.option's `freq` is the odds of null, not of a value). */
export const rarely = <T>(arb: fc.Arbitrary<T>, n: number): fc.Arbitrary<T | null> =>
  fc.oneof({ weight: 1, arbitrary: arb }, { weight: n - 1, arbitrary: fc.constant(null) });

/** Usually the valid value, sometimes absent, sometimes of a wrong type; always valid when strict. */
const field = (valid: fc.Arbitrary<unknown>, loose: boolean): fc.Arbitrary<unknown> =>
  loose ? fc.oneof({ weight: 8, arbitrary: valid }, { weight: 1, arbitrary: fc.constant(ABSENT) }, { weight: 2, arbitrary: wrongValue }) : valid;

/**
 * An object built from `fields`. Loose: each field may be absent or of a wrong type, and extra
 * keys may appear. Strict: exactly the fields (whose values may still be invalid for the server).
 */
function objectOf(fields: Record<string, fc.Arbitrary<unknown>>, loose: boolean): fc.Arbitrary<Record<string, unknown>> {
  const keys = Object.keys(fields);
  const extras = loose ? rarely(fc.dictionary(oddString, wrongValue, { minKeys: 1, maxKeys: 2 }), 6) : fc.constant(null);
  return fc.tuple(fc.tuple(...keys.map((k) => field(fields[k]!, loose))), extras).map(([values, extra]) => {
    const out: Record<string, unknown> = { ...(extra ?? {}) };
    keys.forEach((k, i) => {
      if (values[i] !== ABSENT) out[k] = values[i];
    });
    return out;
  });
}

export const versionArb = fc.oneof(
  { weight: 6, arbitrary: fc.constantFrom(...KNOWN_VERSIONS) },
  { weight: 2, arbitrary: fc.constantFrom('2099-01-01', '2026-07-29', 'DRAFT-2026-v1', 'latest', '', ' 2026-07-28') },
  { weight: 1, arbitrary: oddString },
);
export const b64 = (n: number) => Buffer.alloc(n, 0xa5).toString('base64');
export const secretArb = fc.oneof(
  { weight: 4, arbitrary: fc.constantFrom(SECRET, `whsec_${b64(24)}`, `whsec_${b64(64)}`) },
  {
    weight: 3,
    arbitrary: fc.constantFrom(
      `whsec_${b64(23)}`,
      `whsec_${b64(65)}`,
      b64(32),
      'whsec_',
      'whsec_====',
      `whsec_${Buffer.alloc(32, 0xfb).toString('base64url')}`,
      `WHSEC_${b64(32)}`,
    ),
  },
  { weight: 1, arbitrary: oddOrHugeString },
);
export const urlArb = fc.oneof(
  {
    weight: 4,
    arbitrary: fc.constantFrom(
      'https://dot.example/hook',
      'https://dot.example/hook?a=1&b=%20&c=%E2%82%AC',
      'https://other.example/hook',
      'http://dot.example/hook',
      'https://127.0.0.1/hook',
      'https://[::1]:8443/x',
      'https://10.0.0.1/',
      'https://u:p@dot.example/',
      'https://dot.example/#',
      'javascript:alert(1)',
      'file:///etc/passwd',
      'https://ｅｘａｍｐｌｅ.com/',
      'https://xn--nxasmq6b.example/',
      'https://dot.example/ hook',
      `https://dot.example/${'a'.repeat(2100)}`,
    ),
  },
  { weight: 2, arbitrary: fc.webUrl({ withQueryParameters: true }) },
  { weight: 1, arbitrary: oddOrHugeString },
);
const ttlArb = fc.oneof(fc.integer(), fc.constant(null), fc.double(), fc.constantFrom(60_000, 59_999, 7 * DAY, 7 * DAY + 1, 1e300, Number.MAX_SAFE_INTEGER));
const messageArb = fc.oneof({ weight: 10, arbitrary: oddString }, { weight: 1, arbitrary: hugeString });
const toolNameArb = fc.oneof(
  { weight: 6, arbitrary: fc.constant('send_to_dot') },
  { weight: 1, arbitrary: fc.constantFrom('Send_To_Dot', 'send_to_dot ', 'send-to-dot', '') },
  { weight: 1, arbitrary: oddString },
);
const eventNameArb = fc.oneof({ weight: 6, arbitrary: fc.constant('message.created') }, { weight: 1, arbitrary: oddString });

function paramsArbs(loose: boolean): Record<string, fc.Arbitrary<Record<string, unknown>>> {
  const o = (fields: Record<string, fc.Arbitrary<unknown>>) => objectOf(fields, loose);
  return {
    initialize: o({ protocolVersion: versionArb, capabilities: fc.constant({}), clientInfo: o({ name: oddString, version: oddString }) }),
    ping: o({}),
    'server/discover': o({}),
    'tools/list': loose ? o({ cursor: oddString }) : o({}),
    'tools/call': o({ name: toolNameArb, arguments: o({ message: messageArb }) }),
    'events/list': o({}),
    'events/subscribe': o({
      name: eventNameArb,
      arguments: fc.constant({}),
      delivery: o({ mode: fc.constant('webhook'), url: urlArb, secret: secretArb }),
      ttlMs: ttlArb,
      cursor: fc.constant(null),
      maxAgeMs: fc.integer(),
    }),
    'events/unsubscribe': o({ name: eventNameArb, arguments: fc.constant({}), delivery: o({ url: urlArb, mode: fc.constant('webhook') }) }),
    'notifications/initialized': o({}),
    'notifications/cancelled': o({ requestId: fc.integer(), reason: oddString }),
    'notifications/progress': o({ progressToken: fc.integer(), progress: fc.double() }),
    'notifications/roots/list_changed': o({}),
  };
}
const PARAMS = { strict: paramsArbs(false), loose: paramsArbs(true) };

const KNOWN_METHODS = Object.keys(PARAMS.strict);
const NOTIFICATION_METHODS = KNOWN_METHODS.filter((m) => m.startsWith('notifications/'));
const OTHER_METHODS = [
  'resources/list',
  'resources/read',
  'prompts/list',
  'prompts/get',
  'completion/complete',
  'logging/setLevel',
  'subscriptions/listen',
  'tasks/get',
  'events/poll',
  'events/LIST',
  'Tools/List',
  'tools/list ',
  'rpc.discover',
  'notifications/unknown',
  '',
  '/',
  'initialize/',
];
export const methodArb = fc.oneof(
  { weight: 10, arbitrary: fc.constantFrom(...KNOWN_METHODS) },
  { weight: 2, arbitrary: fc.constantFrom(...OTHER_METHODS) },
  { weight: 1, arbitrary: oddOrHugeString },
);

const metaArb = (loose: boolean) =>
  objectOf(
    {
      'io.modelcontextprotocol/protocolVersion': loose
        ? fc.oneof({ weight: 3, arbitrary: fc.constant(MODERN) }, { weight: 1, arbitrary: versionArb })
        : fc.constant(MODERN),
      'io.modelcontextprotocol/clientCapabilities': loose
        ? fc.oneof({ weight: 4, arbitrary: fc.constant({}) }, { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 3 }) })
        : fc.constant({}),
      'io.modelcontextprotocol/clientInfo': fc.oneof(objectOf({ name: oddString, version: oddString }, loose), fc.constant(ABSENT)),
    },
    loose,
  ).map((meta) => Object.fromEntries(Object.entries(meta).filter(([, v]) => v !== ABSENT)));

const idArb: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 6, arbitrary: fc.integer({ min: 0, max: 1_000_000 }) },
  { weight: 2, arbitrary: oddOrHugeString },
  { weight: 1, arbitrary: wrongValue },
);

interface RpcMessage {
  method: unknown;
  message: Record<string, unknown>;
}

/**
 * One JSON-RPC message: a request, a notification, or something only shaped like one. Strict: a
 * well-formed envelope (jsonrpc, method, integer id, params with a valid `_meta`) around params
 * whose values may still be wrong; loose: anything in the envelope may be missing or mistyped.
 */
const rpcMessageOf = (loose: boolean): fc.Arbitrary<RpcMessage> =>
  (loose
    ? methodArb
    : fc.oneof({ weight: 12, arbitrary: fc.constantFrom(...KNOWN_METHODS) }, { weight: 1, arbitrary: fc.constantFrom(...OTHER_METHODS) })
  ).chain((method) => {
    const params = Object.hasOwn(PARAMS.strict, method) ? (loose ? PARAMS.loose : PARAMS.strict)[method]! : objectOf({ x: oddString }, loose);
    const notification = NOTIFICATION_METHODS.includes(method);
    const always = <T>(value: T) => fc.constant(value) as fc.Arbitrary<unknown>;
    return fc
      .record({
        params: loose
          ? fc.oneof({ weight: 12, arbitrary: params as fc.Arbitrary<unknown> }, { weight: 1, arbitrary: always(ABSENT) }, { weight: 1, arbitrary: wrongValue })
          : params,
        meta: loose
          ? fc.oneof(
              { weight: 6, arbitrary: metaArb(true) as fc.Arbitrary<unknown> },
              { weight: 3, arbitrary: always(ABSENT) },
              { weight: 1, arbitrary: wrongValue },
            )
          : metaArb(false),
        id: notification
          ? loose
            ? fc.oneof({ weight: 8, arbitrary: always(ABSENT) }, { weight: 1, arbitrary: idArb })
            : always(ABSENT)
          : loose
            ? fc.oneof({ weight: 12, arbitrary: idArb }, { weight: 1, arbitrary: always(ABSENT) })
            : fc.oneof(fc.integer({ min: 0, max: 1_000_000 }), fc.string({ maxLength: 8 })),
        jsonrpc: loose
          ? fc.oneof({ weight: 20, arbitrary: always('2.0') }, { weight: 1, arbitrary: always(ABSENT) }, { weight: 1, arbitrary: wrongValue })
          : always('2.0'),
        methodField: loose
          ? fc.oneof({ weight: 20, arbitrary: always(method) }, { weight: 1, arbitrary: always(ABSENT) }, { weight: 1, arbitrary: wrongValue })
          : always(method),
        extra: loose
          ? rarely(fc.constantFrom<Record<string, unknown>>({ result: {} }, { error: { code: -1, message: 'x' } }, { result: null, error: null }), 20)
          : fc.constant(null),
      })
      .map(({ params, meta, id, jsonrpc, methodField, extra }) => {
        const message: Record<string, unknown> = { ...(extra ?? {}) };
        if (jsonrpc !== ABSENT) message.jsonrpc = jsonrpc;
        if (id !== ABSENT) message.id = id;
        if (methodField !== ABSENT) message.method = methodField;
        if (params !== ABSENT) {
          const p = params !== null && typeof params === 'object' && !Array.isArray(params) ? { ...(params as object) } : params;
          if (meta !== ABSENT && p !== null && typeof p === 'object' && !Array.isArray(p)) (p as Record<string, unknown>)._meta = meta;
          message.params = p;
        } else if (meta !== ABSENT) {
          message.params = { _meta: meta };
        }
        return { method, message };
      });
  });
export const rpcMessage = fc.oneof({ weight: 3, arbitrary: rpcMessageOf(false) }, { weight: 2, arbitrary: rpcMessageOf(true) });

/** A header value as a client could send it: UTF-8 bytes read as Latin-1, no NUL, CR or LF. */
export function headerValue(value: string): string {
  return Buffer.from(value, 'utf8')
    .toString('latin1')
    .replace(/[\0\r\n]/g, '');
}
