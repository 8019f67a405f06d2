/**
 * Property tests of the pure rules behind the wire: subscription ids and canonical JSON
 * (docs/contract/events.md Identity), TTL grants (docs/contract: events, limits) and the message byte limit (docs/contract/mcp.md), each
 * checked against an independent oracle. Fixed seed by default; FC_SEED=<n> overrides it.
 */
import fc from 'fast-check';
import { canonicalJson, principalOf, subscriptionIdOf } from '../../../lambda/core/identity';
import { Limits } from '../../../lambda/core/protocol';
import { checkMessage, grantTtlMs, parseSubscribeParams } from '../../../lambda/core/validation';
import { ProtocolFault } from '../../../lambda/core/errors';
import { fuzzParams, SECRET } from '../../support/app';

const DAY = 24 * 60 * 60 * 1000;

/** A deep copy of a JSON value with every object's keys in a shuffled order. */
function reorder(value: unknown, order: (keys: string[]) => string[]): unknown {
  if (Array.isArray(value)) return value.map((v) => reorder(v, order));
  if (value === null || typeof value !== 'object') return value;
  const entries = order(Object.keys(value)).map((key) => [key, reorder((value as Record<string, unknown>)[key], order)] as const);
  return Object.fromEntries(entries);
}

/**
 * Whether every object in the JSON text lists its keys in strictly increasing UTF-16 order, read
 * in the order they appear in the text (JSON.parse would move integer-like keys first).
 */
function keysSortedInText(text: string): boolean {
  let i = 0;
  let ok = true;
  const string = (): string => {
    const start = i;
    i++;
    while (text[i] !== '"') i += text[i] === '\\' ? 2 : 1;
    i++;
    return JSON.parse(text.slice(start, i)) as string;
  };
  const value = (): void => {
    const c = text[i];
    if (c === '{') {
      i++;
      let previous: string | undefined;
      while (text[i] !== '}') {
        if (text[i] === ',') i++;
        const key = string();
        if (previous !== undefined && !(previous < key)) ok = false;
        previous = key;
        i++; // ':'
        value();
      }
      i++;
    } else if (c === '[') {
      i++;
      while (text[i] !== ']') {
        if (text[i] === ',') i++;
        value();
      }
      i++;
    } else if (c === '"') {
      string();
    } else {
      while (i < text.length && !',]}'.includes(text[i]!)) i++;
    }
  };
  value();
  return ok && i === text.length;
}

const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/** The canonical text with every string literal removed: what is left must hold no whitespace. */
function outsideStrings(text: string): string {
  return text.replace(/"(?:[^"\\]|\\.)*"/g, '""');
}

const jsonValue = fc.jsonValue({ maxDepth: 4 });
const argumentsObject = fc.dictionary(fc.string({ unit: 'binary', maxLength: 12 }), jsonValue, { maxKeys: 8 });
const shuffler = fc.func(fc.integer()).map((rank) => (keys: string[]) => [...keys].sort((a, b) => rank(a) - rank(b) || (a < b ? -1 : a > b ? 1 : 0)));

describe('EV-ID-2: subscription ids and canonical JSON', () => {
  test('the id does not depend on the key order of `arguments`', () => {
    fc.assert(
      fc.property(fc.string({ minLength: 1 }), fc.webUrl(), argumentsObject, shuffler, shuffler, (key, url, args, orderA, orderB) => {
        const principal = principalOf(key);
        const a = subscriptionIdOf(principal, url, 'message.created', reorder(args, orderA) as Record<string, unknown>);
        const b = subscriptionIdOf(principal, url, 'message.created', reorder(args, orderB) as Record<string, unknown>);
        expect(a).toBe(b);
        expect(a).toMatch(/^sub_[0-9a-f]{32}$/);
      }),
      fuzzParams(500),
    );
  });

  test('the id changes with the key, the url and the arguments', () => {
    fc.assert(
      fc.property(fc.string({ minLength: 1 }), fc.string({ minLength: 1 }), fc.webUrl(), fc.webUrl(), (k1, k2, u1, u2) => {
        fc.pre(k1 !== k2 && u1 !== u2);
        const id = (k: string, u: string, args: Record<string, unknown> = {}) => subscriptionIdOf(principalOf(k), u, 'message.created', args);
        expect(id(k1, u1)).not.toBe(id(k2, u1));
        expect(id(k1, u1)).not.toBe(id(k1, u2));
        expect(id(k1, u1)).not.toBe(id(k1, u1, { a: 1 }));
        expect(id(k1, u1)).toBe(id(k1, u1));
      }),
      fuzzParams(300),
    );
  });

  test('canonical JSON is whitespace-free, key-sorted, order-independent and parses back to the same value', () => {
    fc.assert(
      fc.property(jsonValue, shuffler, (value, order) => {
        const text = canonicalJson(value);
        // The same value as JSON sees it (RFC 8785 writes -0 as 0, as JSON.stringify does).
        expect(JSON.parse(text)).toEqual(JSON.parse(JSON.stringify(value)));
        expect(outsideStrings(text)).not.toMatch(/\s/);
        expect(canonicalJson(reorder(value, order))).toBe(text);
        expect(canonicalJson(JSON.parse(text))).toBe(text);
        // Every object's keys come out sorted by UTF-16 code units, read in text order.
        expect(keysSortedInText(text)).toBe(true);
      }),
      fuzzParams(1000),
    );
  });

  test('canonical JSON keeps odd Unicode keys and strings exact (lone surrogates, U+FFFE, RTL, NUL)', () => {
    const odd = fc.string({ unit: fc.constantFrom('\ud800', '\udfff', '\ufffe', '\uffff', '\u202e', '\u0000', '\u2028', '😀', 'a', '"', '\\'), maxLength: 20 });
    fc.assert(
      fc.property(fc.dictionary(odd, odd, { maxKeys: 6 }), (value) => {
        const text = canonicalJson(value);
        expect(JSON.parse(text)).toEqual(value);
        // Well-formed: no raw lone surrogate survives in the canonical text (they are escaped).
        expect(LONE_SURROGATE.test(text)).toBe(false);
      }),
      fuzzParams(500),
    );
  });
});

test('the key-order reader used above sees unsorted and duplicate keys', () => {
  expect(keysSortedInText('{"a":1,"b":{"c":[{"d":1,"e":"}"}]}}')).toBe(true);
  expect(keysSortedInText('{"b":1,"a":2}')).toBe(false);
  expect(keysSortedInText('[{"x":{"2":1,"10":2}}]')).toBe(false);
  expect(keysSortedInText('{"a":1,"a":2}')).toBe(false);
});

describe('TTL grant', () => {
  const validTtl = fc.oneof(
    fc.integer({ min: Limits.ttlMinMs, max: Number.MAX_SAFE_INTEGER }),
    fc.integer({ min: Limits.ttlMinMs, max: 8 * DAY }),
    fc.constantFrom(Limits.ttlMinMs, 7 * DAY - 1, 7 * DAY, 7 * DAY + 1, 1e21, Number.MAX_VALUE),
  );

  test('EV-SUB-9, LIM-5: a valid ttlMs is accepted and granted min(ttlMs, 7 days), always within [60 s, 7 days]', () => {
    fc.assert(
      fc.property(fc.oneof(validTtl, fc.constant(null), fc.constant(undefined)), (ttlMs) => {
        const request = parseSubscribeParams(
          {
            name: 'message.created',
            delivery: { mode: 'webhook', url: 'https://dot.example/hook', secret: SECRET },
            ...(ttlMs === undefined ? {} : { ttlMs }),
          },
          { allowLoopbackCallbacks: false },
        );
        const granted = grantTtlMs(request.ttlMs);
        expect(granted).toBeGreaterThanOrEqual(60_000);
        expect(granted).toBeLessThanOrEqual(7 * DAY);
        expect(Number.isSafeInteger(granted)).toBe(true);
        expect(granted).toBe(ttlMs === null || ttlMs === undefined ? 7 * DAY : Math.min(ttlMs, 7 * DAY));
      }),
      fuzzParams(1000),
    );
  });

  test('EV-SUB-8: anything else is refused with -32602 naming ttlMs', () => {
    const invalid = fc.oneof(
      fc.integer({ min: Number.MIN_SAFE_INTEGER, max: Limits.ttlMinMs - 1 }),
      fc.double({ noInteger: true }),
      fc.constantFrom(Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY, -0.5, 59_999.999),
      fc.string(),
      fc.boolean(),
      fc.array(fc.integer(), { maxLength: 2 }),
      fc.object({ maxDepth: 1 }),
    );
    fc.assert(
      fc.property(invalid, (ttlMs) => {
        let thrown: unknown;
        try {
          parseSubscribeParams(
            { name: 'message.created', delivery: { mode: 'webhook', url: 'https://dot.example/hook', secret: SECRET }, ttlMs },
            { allowLoopbackCallbacks: false },
          );
        } catch (error) {
          thrown = error;
        }
        expect(thrown).toBeInstanceOf(ProtocolFault);
        expect((thrown as ProtocolFault).code).toBe(-32602);
        expect((thrown as ProtocolFault).message).toMatch(/^ttlMs /);
      }),
      fuzzParams(1000),
    );
  });
});

describe('message byte limit', () => {
  // Characters of every UTF-8 width, lone surrogates (3 bytes as U+FFFD) and whitespace JS trims.
  const unit = fc.constantFrom('a', 'é', '€', '😀', '\ud800', '\udfff', '\ufffe', '\u202e', '\u0000', ' ', '\n', '\t', '\u00a0', '\u3000', '\ufeff', '\u2028');
  const whitespace = fc.string({ unit: fc.constantFrom(' ', '\n', '\t', '\r', '\u00a0', '\u2003', '\u3000', '\ufeff', '\u2029'), maxLength: 8 });
  /** Strings whose byte length lands near 0, near the limit, or anywhere. */
  const message = fc.oneof(
    fc.string({ unit, maxLength: 40 }),
    fc.string({ unit: 'binary', maxLength: 200 }),
    fc
      .tuple(whitespace, fc.constantFrom('a', 'é', '€', '😀', '\ud800'), fc.integer({ min: -6, max: 6 }), fc.string({ unit, maxLength: 4 }), whitespace)
      .map(([lead, ch, delta, tail, trail]) => {
        const width = Buffer.byteLength(ch);
        const count = Math.max(0, Math.floor(Limits.messageMaxBytes / width) + delta);
        return lead + ch.repeat(count) + tail + trail;
      }),
  );

  test('LIM-1, TOOL-7: checkMessage accepts exactly the well-formed strings whose trimmed UTF-8 byte length is 1..16,384', () => {
    fc.assert(
      fc.property(message, (raw) => {
        const bytes = Buffer.byteLength(raw.trim(), 'utf8');
        const checked = checkMessage({ message: raw });
        // A lone surrogate cannot be encoded in UTF-8: such text is refused whatever its length.
        expect(checked.ok).toBe(raw.isWellFormed() && bytes >= 1 && bytes <= 16_384);
        if (checked.ok) expect(checked.message).toBe(raw.trim());
        else expect(checked.error).toMatch(/^Invalid input: .*\.$/s);
      }),
      fuzzParams(2000),
    );
  });

  test('TOOL-7: checkMessage refuses every non-string message and every extra argument', () => {
    fc.assert(
      fc.property(
        fc.oneof(
          fc
            .anything()
            .filter((v) => typeof v !== 'string')
            .map((v) => ({ message: v })),
          fc
            .tuple(
              fc.string({ minLength: 1 }),
              fc.string().filter((k) => k !== 'message'),
              fc.anything(),
            )
            .map(([m, k, v]) => ({ message: m, [k]: v })),
          fc.anything().filter((v) => v === null || typeof v !== 'object' || Array.isArray(v)),
        ),
        (args) => {
          const checked = checkMessage(args);
          expect(checked.ok).toBe(false);
          if (!checked.ok) expect(checked.error).toMatch(/^Invalid input: /);
        },
      ),
      fuzzParams(1000),
    );
  });
});
