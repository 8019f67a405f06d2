/**
 * Identity (docs/contract/events.md): canonical JSON, principal, subscription ids and the random ids. Expected
 * values are computed independently with node:crypto over canonical strings written out by hand.
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { resolve } from 'node:path';
import {
  canonicalJson,
  newChallengeNonce,
  newEventId,
  newVerificationMessageId,
  principalOf,
  sha256Hex,
  subscriptionIdOf,
  verificationKeyOf,
} from '../../../lambda/core/identity';

const sha256 = (text: string) => createHash('sha256').update(text, 'utf8').digest('hex');

const API_KEY = 'test-api-key-0123456789';
const PRINCIPAL = sha256(API_KEY);
const URL_A = 'https://dot.example.com/cb?b=2&a=1&x=%2F';

describe('EV-ID-2: canonicalJson', () => {
  test('sorts object keys recursively and writes no spaces', () => {
    const value = { b: 1, a: { d: [{ z: 1, y: 'two words' }], c: 'x' } };
    expect(canonicalJson(value)).toBe('{"a":{"c":"x","d":[{"y":"two words","z":1}]},"b":1}');
  });

  test('keeps array order', () => {
    expect(canonicalJson([3, 1, 2])).toBe('[3,1,2]');
  });

  test('sorts keys by UTF-16 code units, not by code points', () => {
    // U+20AC < U+D83D (high surrogate of U+1F600) < U+FB33, although U+FB33 < U+1F600 as code points.
    expect(canonicalJson({ '\ufb33': 1, '😀': 2, '€': 3 })).toBe('{"€":3,"😀":2,"\ufb33":1}');
  });

  test('serializes an empty object and empty array compactly', () => {
    expect(canonicalJson({ a: {}, b: [] })).toBe('{"a":{},"b":[]}');
  });

  test('omits undefined properties like JSON.stringify', () => {
    expect(canonicalJson({ a: undefined, b: null })).toBe('{"b":null}');
  });

  test('escapes strings as JSON does', () => {
    expect(canonicalJson({ s: 'quote " backslash \\ newline \n' })).toBe('{"s":"quote \\" backslash \\\\ newline \\n"}');
  });

  test('refuses non-finite numbers', () => {
    expect(() => canonicalJson({ n: Infinity })).toThrow();
    expect(() => canonicalJson(NaN)).toThrow();
  });

  test('refuses values that are not JSON', () => {
    expect(() => canonicalJson(undefined)).toThrow();
    expect(() => canonicalJson(() => 1)).toThrow();
    expect(() => canonicalJson(10n)).toThrow();
  });
});

describe('principalOf', () => {
  test('EV-ID-1: is the hex SHA-256 of the API key', () => {
    expect(principalOf(API_KEY)).toBe(PRINCIPAL);
    expect(principalOf(API_KEY)).toMatch(/^[0-9a-f]{64}$/);
  });

  test('sha256Hex hashes bytes and text alike', () => {
    expect(sha256Hex(new TextEncoder().encode('abc'))).toBe(sha256('abc'));
  });
});

describe('subscriptionIdOf', () => {
  test('EV-ID-2: is sub_ followed by 32 lower-case hex characters', () => {
    expect(subscriptionIdOf(PRINCIPAL, URL_A, 'message.created', {})).toMatch(/^sub_[0-9a-f]{32}$/);
  });

  test('EV-CHAL-6, EV-ID-2: equals the first 32 hex of SHA-256 over the canonical [principal, url, name, arguments]', () => {
    const canonical = `["${PRINCIPAL}","https://dot.example.com/cb?b=2&a=1&x=%2F","message.created",{}]`;
    expect(subscriptionIdOf(PRINCIPAL, URL_A, 'message.created', {})).toBe(`sub_${sha256(canonical).slice(0, 32)}`);
  });

  test('EV-ID-2: is stable under the key order of the arguments', () => {
    const canonical = `["${PRINCIPAL}","${URL_A}","message.created",{"a":{"x":1,"y":2},"b":1}]`;
    const expected = `sub_${sha256(canonical).slice(0, 32)}`;
    expect(subscriptionIdOf(PRINCIPAL, URL_A, 'message.created', { b: 1, a: { y: 2, x: 1 } })).toBe(expected);
    expect(subscriptionIdOf(PRINCIPAL, URL_A, 'message.created', { a: { x: 1, y: 2 }, b: 1 })).toBe(expected);
  });

  test('EV-ID-3: is the same in another process (stable across restarts)', () => {
    const root = resolve(__dirname, '../../..');
    const script = [
      "const { subscriptionIdOf, principalOf } = require('./lambda/core/identity.ts');",
      'const [key, url] = JSON.parse(process.env.DMDOT_TEST_INPUT);',
      "process.stdout.write(subscriptionIdOf(principalOf(key), url, 'message.created', { b: 1, a: 2 }));",
    ].join('\n');
    const child = execFileSync(process.execPath, ['--import', 'tsx', '-e', script], {
      cwd: root,
      encoding: 'utf8',
      env: { ...process.env, DMDOT_TEST_INPUT: JSON.stringify([API_KEY, URL_A]) },
    });
    expect(child).toMatch(/^sub_[0-9a-f]{32}$/);
    expect(child).toBe(subscriptionIdOf(principalOf(API_KEY), URL_A, 'message.created', { a: 2, b: 1 }));
  });

  test('EV-ID-2: changing the API key changes the id', () => {
    const other = principalOf(`${API_KEY}-rotated`);
    expect(subscriptionIdOf(other, URL_A, 'message.created', {})).not.toBe(subscriptionIdOf(PRINCIPAL, URL_A, 'message.created', {}));
  });

  test('EV-SUB-6: the url counts byte-exact: reordering the query string changes the id', () => {
    const reordered = 'https://dot.example.com/cb?a=1&b=2&x=%2F';
    expect(subscriptionIdOf(PRINCIPAL, reordered, 'message.created', {})).not.toBe(subscriptionIdOf(PRINCIPAL, URL_A, 'message.created', {}));
  });
});

describe('verificationKeyOf', () => {
  const SECRET = `whsec_${Buffer.alloc(32, 3).toString('base64')}`;

  test('STORE-8: is the hex SHA-256 of the canonical [principal, url, sha256(secret)]: the secret itself never enters the key', () => {
    expect(verificationKeyOf(PRINCIPAL, URL_A, SECRET)).toBe(sha256(`["${PRINCIPAL}","${URL_A}","${sha256(SECRET)}"]`));
  });

  test('STORE-8: differs per url, per principal and per secret', () => {
    const base = verificationKeyOf(PRINCIPAL, URL_A, SECRET);
    expect(verificationKeyOf(PRINCIPAL, `${URL_A}&y=1`, SECRET)).not.toBe(base);
    expect(verificationKeyOf(principalOf('another key'), URL_A, SECRET)).not.toBe(base);
    expect(verificationKeyOf(PRINCIPAL, URL_A, `whsec_${Buffer.alloc(32, 4).toString('base64')}`)).not.toBe(base);
  });
});

describe('random ids', () => {
  test('event ids are evt_ followed by 32 hex characters, fresh each time', () => {
    const a = newEventId();
    const b = newEventId();
    expect(a).toMatch(/^evt_[0-9a-f]{32}$/);
    expect(b).toMatch(/^evt_[0-9a-f]{32}$/);
    expect(a).not.toBe(b);
  });

  test('event ids stay distinct across many pages of the random pool (each byte used once)', () => {
    const ids = Array.from({ length: 1000 }, () => newEventId());
    expect(new Set(ids).size).toBe(ids.length);
    for (const id of ids) expect(id).toMatch(/^evt_[0-9a-f]{32}$/);
  });

  test('EV-CHAL-3: verification message ids are msg_verification_ + 24 random bytes in base64url', () => {
    const id = newVerificationMessageId();
    expect(id).toMatch(/^msg_verification_[A-Za-z0-9_-]{32}$/);
    expect(Buffer.from(id.slice('msg_verification_'.length), 'base64url').byteLength).toBe(24);
    expect(newVerificationMessageId()).not.toBe(id);
  });

  test('EV-CHAL-7: challenge nonces are fresh each time', () => {
    const nonce = newChallengeNonce();
    expect(nonce.length).toBeGreaterThanOrEqual(32);
    expect(newChallengeNonce()).not.toBe(nonce);
  });
});
