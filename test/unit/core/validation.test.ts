/**
 * Validation rules of docs/contract/mcp.md (message) and 4.2/4.3 (subscribe/unsubscribe params): one valid
 * fixture per function, then exactly one thing broken per test.
 */
import { ProtocolFault } from '../../../lambda/core/errors';
import { ErrorCodes, Limits } from '../../../lambda/core/protocol';
import {
  checkMessage,
  grantTtlMs,
  parseSubscribeParams,
  parseUnsubscribeParams,
  ttlPolicyProblem,
  DEFAULT_TTL_POLICY,
  type UrlPolicy,
} from '../../../lambda/core/validation';

const STRICT: UrlPolicy = { allowLoopbackCallbacks: false };
const LOOPBACK: UrlPolicy = { allowLoopbackCallbacks: true };
const DAY_MS = 24 * 60 * 60 * 1000;

function secretOf(bytes: number, fill = 7): string {
  return `whsec_${Buffer.alloc(bytes, fill).toString('base64')}`;
}

const SECRET = secretOf(32);
const URL_WITH_QUERY = 'https://dot.example.com/hooks/dm?b=2&a=1&x=%2F';

interface Params {
  name?: unknown;
  arguments?: unknown;
  delivery?: Record<string, unknown> | unknown;
  ttlMs?: unknown;
  cursor?: unknown;
  [extra: string]: unknown;
}

function validParams(): Params & { delivery: Record<string, unknown> } {
  return {
    name: 'message.created',
    arguments: {},
    delivery: { mode: 'webhook', url: URL_WITH_QUERY, secret: SECRET },
    ttlMs: 3_600_000,
    cursor: null,
  };
}

function withDelivery(changes: Record<string, unknown>, remove: string[] = []): Params {
  const params = validParams();
  const delivery: Record<string, unknown> = { ...params.delivery, ...changes };
  for (const key of remove) delete delivery[key];
  return { ...params, delivery };
}

function faultOf(fn: () => unknown): ProtocolFault {
  try {
    fn();
  } catch (error) {
    if (error instanceof ProtocolFault) return error;
    throw new Error(`expected a ProtocolFault, got ${String(error)}`);
  }
  throw new Error('expected a ProtocolFault, nothing was thrown');
}

/** Asserts -32602 with a message that starts with the field it names. */
function expectInvalid(params: unknown, field: string, policy: UrlPolicy = STRICT): ProtocolFault {
  const fault = faultOf(() => parseSubscribeParams(params, policy));
  expect(fault.code).toBe(ErrorCodes.invalidParams);
  expect(fault.code).toBe(-32602);
  expect(fault.message.startsWith(field)).toBe(true);
  return fault;
}

describe('LIM-1, TOOL-7: checkMessage', () => {
  const bytes = (text: string) => Buffer.byteLength(text, 'utf8');

  test('the valid fixture passes and returns the message', () => {
    expect(checkMessage({ message: 'hello dot' })).toEqual({ ok: true, message: 'hello dot' });
  });

  test('16,384 ASCII bytes pass', () => {
    const message = 'a'.repeat(16_384);
    expect(checkMessage({ message })).toEqual({ ok: true, message });
  });

  test('16,385 ASCII bytes fail', () => {
    const result = checkMessage({ message: 'a'.repeat(16_385) });
    expect(result.ok).toBe(false);
  });

  test('bytes are counted, not characters: 8,192 two-byte characters (16,384 bytes) pass', () => {
    const message = 'é'.repeat(8_192);
    expect(bytes(message)).toBe(16_384);
    expect(checkMessage({ message })).toEqual({ ok: true, message });
  });

  test('bytes are counted, not characters: 8,192 two-byte characters and one ASCII (16,385 bytes) fail', () => {
    const message = `${'é'.repeat(8_192)}a`;
    expect(message.length).toBe(8_193);
    expect(bytes(message)).toBe(16_385);
    expect(checkMessage({ message }).ok).toBe(false);
  });

  test('four-byte characters: 4,096 emoji (16,384 bytes) pass', () => {
    const message = '😀'.repeat(4_096);
    expect(bytes(message)).toBe(16_384);
    expect(checkMessage({ message })).toEqual({ ok: true, message });
  });

  test('four-byte characters: 4,096 emoji and one ASCII (16,385 bytes) fail', () => {
    const message = `${'😀'.repeat(4_096)}a`;
    expect(bytes(message)).toBe(16_385);
    expect(checkMessage({ message }).ok).toBe(false);
  });

  test('a multibyte character straddling the limit fails (16,383 bytes + a 2-byte character)', () => {
    const message = `${'a'.repeat(16_383)}é`;
    expect(bytes(message)).toBe(16_385);
    expect(checkMessage({ message }).ok).toBe(false);
  });

  test('three-byte characters up to exactly 16,384 bytes pass', () => {
    const message = `${'€'.repeat(5_461)}a`;
    expect(bytes(message)).toBe(16_384);
    expect(checkMessage({ message })).toEqual({ ok: true, message });
  });

  test('surrounding whitespace is trimmed before counting', () => {
    const core = 'a'.repeat(16_384);
    expect(checkMessage({ message: `  \n\t${core} \r\n ` })).toEqual({ ok: true, message: core });
  });

  test('the trimmed message is what is returned; inner whitespace is kept', () => {
    expect(checkMessage({ message: '  two  words \n' })).toEqual({ ok: true, message: 'two  words' });
  });

  test('an empty message fails', () => {
    expect(checkMessage({ message: '' }).ok).toBe(false);
  });

  test('a whitespace-only message fails', () => {
    expect(checkMessage({ message: ' \n\t\r  ' }).ok).toBe(false);
  });

  test.each([
    ['a number', 42],
    ['null', null],
    ['an array', ['hi']],
    ['an object', { text: 'hi' }],
    ['a boolean', true],
  ])('a non-string message (%s) fails', (_label, message) => {
    const result = checkMessage({ message });
    expect(result.ok).toBe(false);
  });

  test('a missing message fails', () => {
    expect(checkMessage({}).ok).toBe(false);
  });

  test('an extra property fails, even next to a valid message', () => {
    const result = checkMessage({ message: 'hi', to: 'someone' });
    expect(result.ok).toBe(false);
    if (!result.ok) expect(result.error).toContain('"to"');
  });

  test.each([
    ['null', null],
    ['undefined', undefined],
    ['a string', 'hi'],
    ['an array', [{ message: 'hi' }]],
    ['a number', 1],
  ])('non-object arguments (%s) fail', (_label, args) => {
    const result = checkMessage(args);
    expect(result.ok).toBe(false);
    if (!result.ok) expect(result.error.length).toBeGreaterThan(0);
  });
});

describe('EV-SUB-1: parseSubscribeParams', () => {
  test('the valid fixture passes, returning url, secret, the decoded key and ttlMs', () => {
    const result = parseSubscribeParams(validParams(), STRICT);
    expect(result.url).toBe(URL_WITH_QUERY);
    expect(result.secret).toBe(SECRET);
    expect(Buffer.from(result.key).equals(Buffer.alloc(32, 7))).toBe(true);
    expect(result.ttlMs).toBe(3_600_000);
  });

  describe('params', () => {
    test.each([
      ['null', null],
      ['an array', []],
      ['a string', 'events/subscribe'],
      ['undefined', undefined],
    ])('params that are not an object (%s) fail naming params', (_label, params) => {
      expectInvalid(params, 'params');
    });

    test('maxAgeMs is ignored', () => {
      expect(parseSubscribeParams({ ...validParams(), maxAgeMs: 5 }, STRICT).url).toBe(URL_WITH_QUERY);
    });
  });

  describe('EV-SUB-3: name', () => {
    test('an unknown event name fails naming name', () => {
      expectInvalid({ ...validParams(), name: 'message.deleted' }, 'name');
    });

    test('a missing name fails naming name', () => {
      const { name: _omit, ...params } = validParams();
      expectInvalid(params, 'name');
    });
  });

  describe('EV-SUB-4: arguments', () => {
    test('absent arguments pass', () => {
      const { arguments: _omit, ...params } = validParams();
      expect(parseSubscribeParams(params, STRICT).url).toBe(URL_WITH_QUERY);
    });

    test.each([
      ['a filter', { channel: 'general' }],
      ['null', null],
      ['an array', []],
      ['a string', 'x'],
    ])('non-empty arguments (%s) fail naming arguments', (_label, args) => {
      expectInvalid({ ...validParams(), arguments: args }, 'arguments');
    });
  });

  describe('delivery', () => {
    test('a missing delivery fails naming delivery', () => {
      const { delivery: _omit, ...params } = validParams();
      expectInvalid(params, 'delivery');
    });

    test('a delivery that is not an object fails naming delivery', () => {
      expectInvalid({ ...validParams(), delivery: 'https://dot.example.com/' }, 'delivery');
    });

    test('EV-LIST-2, EV-SUB-5: a mode other than webhook fails naming delivery.mode', () => {
      expectInvalid(withDelivery({ mode: 'poll' }), 'delivery.mode');
    });

    test('EV-SUB-5: a missing mode fails naming delivery.mode', () => {
      expectInvalid(withDelivery({}, ['mode']), 'delivery.mode');
    });
  });

  describe('EV-SUB-6: delivery.url', () => {
    const url = (value: unknown, policy: UrlPolicy = STRICT) => parseSubscribeParams(withDelivery({ url: value }), policy).url;

    test('the query string is kept byte-exact', () => {
      expect(url('https://dot.example.com/cb?b=2&a=1&x=%2F')).toBe('https://dot.example.com/cb?b=2&a=1&x=%2F');
    });

    test('the URL is kept exactly as given, not normalized by the URL parser', () => {
      const given = 'https://Dot.Example.COM:443/a/./b/../c?q=%7e&empty=&&z';
      expect(url(given)).toBe(given);
    });

    test('a missing url fails naming delivery.url', () => {
      expectInvalid(withDelivery({}, ['url']), 'delivery.url');
    });

    test('a non-string url fails naming delivery.url', () => {
      expectInvalid(withDelivery({ url: 42 }), 'delivery.url');
    });

    test('a url that does not parse fails naming delivery.url', () => {
      expectInvalid(withDelivery({ url: 'not a url' }), 'delivery.url');
    });

    test('a relative url fails naming delivery.url', () => {
      expectInvalid(withDelivery({ url: '/hooks/dm' }), 'delivery.url');
    });

    test('http: to a public host fails', () => {
      expectInvalid(withDelivery({ url: 'http://dot.example.com/cb' }), 'delivery.url');
    });

    test('GUARD-13: http: to a public host fails even with the loopback switch', () => {
      expectInvalid(withDelivery({ url: 'http://dot.example.com/cb' }), 'delivery.url', LOOPBACK);
    });

    test.each(['ftp://dot.example.com/cb', 'ws://dot.example.com/cb', 'file:///etc/passwd', 'data:text/plain,hi'])(
      'a scheme other than https: (%s) fails',
      (value) => {
        expectInvalid(withDelivery({ url: value }), 'delivery.url', LOOPBACK);
      },
    );

    test('GUARD-13: http://127.0.0.1 passes with the loopback switch', () => {
      expect(url('http://127.0.0.1:8787/cb?x=1', LOOPBACK)).toBe('http://127.0.0.1:8787/cb?x=1');
    });

    test('GUARD-13: http://[::1] passes with the loopback switch', () => {
      expect(url('http://[::1]:8787/cb', LOOPBACK)).toBe('http://[::1]:8787/cb');
    });

    test('https://127.0.0.1 passes with the loopback switch', () => {
      expect(url('https://127.0.0.1:8443/cb', LOOPBACK)).toBe('https://127.0.0.1:8443/cb');
    });

    test('http://127.0.0.1 fails without the loopback switch', () => {
      expectInvalid(withDelivery({ url: 'http://127.0.0.1:8787/cb' }), 'delivery.url', STRICT);
    });

    test('http://[::1] fails without the loopback switch', () => {
      expectInvalid(withDelivery({ url: 'http://[::1]:8787/cb' }), 'delivery.url', STRICT);
    });

    test('GUARD-13: http://localhost fails even with the loopback switch (only the literals are allowed)', () => {
      expectInvalid(withDelivery({ url: 'http://localhost:8787/cb' }), 'delivery.url', LOOPBACK);
    });

    test('GUARD-13: http: to another loopback address (127.0.0.2) fails even with the loopback switch', () => {
      expectInvalid(withDelivery({ url: 'http://127.0.0.2:8787/cb' }), 'delivery.url', LOOPBACK);
    });

    test('http: to a private address fails even with the loopback switch', () => {
      expectInvalid(withDelivery({ url: 'http://10.0.0.1/cb' }), 'delivery.url', LOOPBACK);
    });

    test.each(['https://user:pass@dot.example.com/cb', 'https://user@dot.example.com/cb', 'https://:pass@dot.example.com/cb', 'https://@dot.example.com/cb'])(
      'user info (%s) fails naming delivery.url',
      (value) => {
        const fault = expectInvalid(withDelivery({ url: value }), 'delivery.url');
        expect(fault.message).toMatch(/user info/);
      },
    );

    test('an @ in the query string is not user info', () => {
      expect(url('https://dot.example.com/cb?from=a@b')).toBe('https://dot.example.com/cb?from=a@b');
    });

    test('a fragment fails naming delivery.url', () => {
      const fault = expectInvalid(withDelivery({ url: 'https://dot.example.com/cb#part' }), 'delivery.url');
      expect(fault.message).toMatch(/fragment/);
    });

    test('a bare trailing # (empty fragment) fails', () => {
      const fault = expectInvalid(withDelivery({ url: 'https://dot.example.com/cb?x=1#' }), 'delivery.url');
      expect(fault.message).toMatch(/fragment/);
    });

    test('2,048 characters pass', () => {
      const base = 'https://dot.example.com/cb?pad=';
      const value = base + 'a'.repeat(2_048 - base.length);
      expect(value.length).toBe(2_048);
      expect(url(value)).toBe(value);
    });

    test('2,049 characters fail', () => {
      const base = 'https://dot.example.com/cb?pad=';
      const value = base + 'a'.repeat(2_049 - base.length);
      expect(value.length).toBe(2_049);
      expectInvalid(withDelivery({ url: value }), 'delivery.url');
    });

    test('a space inside the url fails rather than being re-encoded', () => {
      expectInvalid(withDelivery({ url: 'https://dot.example.com/a b' }), 'delivery.url');
    });
  });

  describe('EV-SUB-7, LIM-6: delivery.secret', () => {
    const secretPassing = (secret: string) => parseSubscribeParams(withDelivery({ secret }), STRICT);

    /** Bytes whose standard base64 is '++//' repeated: the URL-safe alphabet would spell them '--__'. */
    const plusSlash = Buffer.from(Array.from({ length: 24 }, (_, i) => [0xfb, 0xef, 0xff][i % 3]!));

    test('a missing secret fails naming delivery.secret', () => {
      expectInvalid(withDelivery({}, ['secret']), 'delivery.secret');
    });

    test('a non-string secret fails naming delivery.secret', () => {
      expectInvalid(withDelivery({ secret: 12345 }), 'delivery.secret');
    });

    test('a secret without the whsec_ prefix fails', () => {
      expectInvalid(withDelivery({ secret: Buffer.alloc(32, 7).toString('base64') }), 'delivery.secret');
    });

    test('a secret with a differently cased prefix fails', () => {
      expectInvalid(withDelivery({ secret: `WHSEC_${Buffer.alloc(32, 7).toString('base64')}` }), 'delivery.secret');
    });

    test('standard base64 with + and / passes', () => {
      const secret = `whsec_${plusSlash.toString('base64')}`;
      expect(secret).toContain('+');
      expect(secret).toContain('/');
      expect(Buffer.from(secretPassing(secret).key).equals(plusSlash)).toBe(true);
    });

    test('URL-safe base64 (- instead of +) fails', () => {
      expectInvalid(withDelivery({ secret: `whsec_${plusSlash.toString('base64').replaceAll('+', '-')}` }), 'delivery.secret');
    });

    test('URL-safe base64 (_ instead of /) fails', () => {
      expectInvalid(withDelivery({ secret: `whsec_${plusSlash.toString('base64').replaceAll('/', '_')}` }), 'delivery.secret');
    });

    test('characters outside base64 fail', () => {
      expectInvalid(withDelivery({ secret: `whsec_${'A'.repeat(31)}!` }), 'delivery.secret');
    });

    test('23 decoded bytes fail', () => {
      expectInvalid(withDelivery({ secret: secretOf(23) }), 'delivery.secret');
    });

    test('24 decoded bytes pass', () => {
      expect(secretPassing(secretOf(24)).key.byteLength).toBe(24);
    });

    test('64 decoded bytes pass', () => {
      expect(secretPassing(secretOf(64)).key.byteLength).toBe(64);
    });

    test('65 decoded bytes fail', () => {
      expectInvalid(withDelivery({ secret: secretOf(65) }), 'delivery.secret');
    });

    test('padding is optional: the unpadded spelling decodes to the same key', () => {
      const padded = secretOf(32);
      expect(padded.endsWith('=')).toBe(true);
      const unpadded = padded.replace(/=+$/, '');
      expect(Buffer.from(secretPassing(unpadded).key).equals(Buffer.from(secretPassing(padded).key))).toBe(true);
    });

    test('padding is optional: two padding characters may be omitted too', () => {
      const padded = secretOf(25);
      expect(padded.endsWith('==')).toBe(true);
      expect(secretPassing(padded.replace(/=+$/, '')).key.byteLength).toBe(25);
    });

    test.each([
      ['too short', secretOf(23, 0x41)],
      ['too long', secretOf(65, 0x41)],
      ['URL-safe', `whsec_${Buffer.alloc(24, 0xff).toString('base64url')}`],
      ['no prefix', Buffer.alloc(32, 0x41).toString('base64')],
      ['garbage', 'whsec_this is my $ecret value!!'],
    ])('EV-SUB-2: the error message never contains the secret (%s)', (_label, secret) => {
      const fault = expectInvalid(withDelivery({ secret }), 'delivery.secret');
      const encoded = secret.replace(/^whsec_/, '');
      expect(fault.message).not.toContain(secret);
      expect(fault.message).not.toContain(encoded);
      expect(JSON.stringify({ message: fault.message, data: fault.data })).not.toContain(encoded);
    });

    test('an error in a later field does not echo the valid secret either', () => {
      const fault = expectInvalid({ ...validParams(), ttlMs: 1 }, 'ttlMs');
      expect(fault.message).not.toContain(SECRET.slice('whsec_'.length));
    });
  });

  describe('EV-SUB-8: ttlMs', () => {
    const ttl = (value: unknown) => parseSubscribeParams({ ...validParams(), ttlMs: value }, STRICT).ttlMs;

    test('absent ttlMs passes as null', () => {
      const { ttlMs: _omit, ...params } = validParams();
      expect(parseSubscribeParams(params, STRICT).ttlMs).toBeNull();
    });

    test('null ttlMs passes as null', () => {
      expect(ttl(null)).toBeNull();
    });

    test('LIM-5: 59,999 fails naming ttlMs', () => {
      expectInvalid({ ...validParams(), ttlMs: 59_999 }, 'ttlMs');
    });

    test('60,000 passes', () => {
      expect(ttl(60_000)).toBe(60_000);
    });

    test('more than 7 days passes validation (the grant caps it)', () => {
      expect(ttl(30 * DAY_MS)).toBe(30 * DAY_MS);
    });

    test('an integer beyond 2^53 is still an integer and passes (the grant caps it)', () => {
      expect(ttl(1e20)).toBe(1e20);
    });

    test('a non-integer fails naming ttlMs', () => {
      expectInvalid({ ...validParams(), ttlMs: 60_000.5 }, 'ttlMs');
    });

    test('a numeric string fails naming ttlMs', () => {
      expectInvalid({ ...validParams(), ttlMs: '60000' }, 'ttlMs');
    });

    test.each([
      ['zero', 0],
      ['negative', -60_000],
      ['Infinity', Infinity],
      ['NaN', NaN],
      ['a boolean', true],
    ])('ttlMs %s fails', (_label, value) => {
      expectInvalid({ ...validParams(), ttlMs: value }, 'ttlMs');
    });
  });

  describe('cursor', () => {
    test('an absent cursor passes', () => {
      const { cursor: _omit, ...params } = validParams();
      expect(parseSubscribeParams(params, STRICT).url).toBe(URL_WITH_QUERY);
    });

    test.each([
      ['a string', 'evt_123'],
      ['zero', 0],
      ['an object', {}],
      ['false', false],
    ])('a non-null cursor (%s) fails naming cursor', (_label, cursor) => {
      expectInvalid({ ...validParams(), cursor }, 'cursor');
    });
  });

  describe('EV-SUB-2: order of checks (docs/contract/events.md): a request broken in two fields reports the earlier one', () => {
    const breakers: Array<[string, (p: ReturnType<typeof validParams>) => void]> = [
      ['name', (p) => void (p.name = 'message.deleted')],
      ['arguments', (p) => void (p.arguments = { channel: 'general' })],
      ['delivery.mode', (p) => void (p.delivery.mode = 'poll')],
      ['delivery.url', (p) => void (p.delivery.url = 'http://dot.example.com/cb')],
      ['delivery.secret', (p) => void (p.delivery.secret = 'whsec_short')],
      ['ttlMs', (p) => void (p.ttlMs = 59_999)],
      ['cursor', (p) => void (p.cursor = 'evt_1')],
    ];
    const pairs = breakers.flatMap((earlier, i) => breakers.slice(i + 1).map((later) => [earlier[0], later[0], earlier[1], later[1]] as const));

    test.each(pairs)('%s before %s', (earlierField, laterField, breakEarlier, breakLater) => {
      const params = validParams();
      params.delivery = { ...params.delivery };
      breakEarlier(params);
      breakLater(params);
      const fault = expectInvalid(params, earlierField);
      expect(fault.message.startsWith(laterField)).toBe(false);
    });

    test.each(breakers)('%s alone is reported', (field, breakIt) => {
      const params = validParams();
      params.delivery = { ...params.delivery };
      breakIt(params);
      expectInvalid(params, field);
    });
  });
});

describe('EV-UNSUB-1: parseUnsubscribeParams', () => {
  const valid = () => ({ name: 'message.created', arguments: {}, delivery: { mode: 'webhook', url: URL_WITH_QUERY } });
  const faultCode = (params: unknown) => faultOf(() => parseUnsubscribeParams(params));

  test('the valid fixture passes and returns the url byte-exact', () => {
    expect(parseUnsubscribeParams(valid())).toEqual({ url: URL_WITH_QUERY });
  });

  test('no secret is needed and mode is optional', () => {
    expect(parseUnsubscribeParams({ name: 'message.created', delivery: { url: URL_WITH_QUERY } })).toEqual({ url: URL_WITH_QUERY });
  });

  test('an unknown event name fails naming name', () => {
    const fault = faultCode({ ...valid(), name: 'other' });
    expect(fault.code).toBe(-32602);
    expect(fault.message.startsWith('name')).toBe(true);
  });

  test('non-empty arguments fail naming arguments', () => {
    const fault = faultCode({ ...valid(), arguments: { a: 1 } });
    expect(fault.code).toBe(-32602);
    expect(fault.message.startsWith('arguments')).toBe(true);
  });

  test('a mode other than webhook fails naming delivery.mode', () => {
    const fault = faultCode({ ...valid(), delivery: { mode: 'poll', url: URL_WITH_QUERY } });
    expect(fault.code).toBe(-32602);
    expect(fault.message.startsWith('delivery.mode')).toBe(true);
  });

  test('a missing url fails naming delivery.url', () => {
    const fault = faultCode({ ...valid(), delivery: { mode: 'webhook' } });
    expect(fault.code).toBe(-32602);
    expect(fault.message.startsWith('delivery.url')).toBe(true);
  });

  test('a missing delivery fails naming delivery', () => {
    const fault = faultCode({ name: 'message.created' });
    expect(fault.code).toBe(-32602);
    expect(fault.message.startsWith('delivery')).toBe(true);
  });

  test('params that are not an object fail', () => {
    expect(faultCode(null).code).toBe(-32602);
  });
});

describe('EV-SUB-9, LIM-5: grantTtlMs', () => {
  test('absent grants 7 days', () => {
    expect(grantTtlMs(undefined)).toBe(7 * DAY_MS);
  });

  test('null grants 7 days (always finite)', () => {
    expect(grantTtlMs(null)).toBe(7 * DAY_MS);
  });

  test('60,000 grants 60,000', () => {
    expect(grantTtlMs(60_000)).toBe(60_000);
  });

  test('exactly 7 days grants 7 days', () => {
    expect(grantTtlMs(7 * DAY_MS)).toBe(7 * DAY_MS);
  });

  test('over 7 days is capped at 7 days', () => {
    expect(grantTtlMs(7 * DAY_MS + 1)).toBe(7 * DAY_MS);
  });

  test('a huge integer is capped at 7 days', () => {
    expect(grantTtlMs(1e20)).toBe(Limits.ttlMaxMs);
  });
});

describe('operator TTL policy (DMDOT_TTL_DEFAULT_MS / DMDOT_TTL_MAX_MS)', () => {
  const policy = { defaultMs: 3_600_000, maxMs: 86_400_000 };
  test('absent or null ttlMs gets the configured default', () => {
    expect(grantTtlMs(undefined, policy)).toBe(3_600_000);
    expect(grantTtlMs(null, policy)).toBe(3_600_000);
  });
  test('a longer request is capped at the configured cap', () => expect(grantTtlMs(7 * 86_400_000, policy)).toBe(86_400_000));
  test('a shorter request is granted as asked', () => expect(grantTtlMs(120_000, policy)).toBe(120_000));
  test('a cap over 7 days is refused', () => expect(ttlPolicyProblem({ defaultMs: 60_000, maxMs: 7 * 86_400_000 + 1 })).toMatch(/cap/));
  test('a cap under 60 s is refused', () => expect(ttlPolicyProblem({ defaultMs: 59_999, maxMs: 59_999 })).toMatch(/cap/));
  test('a default above the cap is refused', () => expect(ttlPolicyProblem({ defaultMs: 7_200_000, maxMs: 3_600_000 })).toMatch(/default/));
  test('the built-in policy is 7 days for both', () => expect(DEFAULT_TTL_POLICY).toEqual({ defaultMs: 604_800_000, maxMs: 604_800_000 }));
});
