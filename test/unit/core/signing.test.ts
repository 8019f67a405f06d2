/**
 * Standard Webhooks signing (docs/contract: events, delivery). Production signs with node:crypto's HMAC;
 * these tests check it against an HMAC computed here, independently, and against the
 * `standardwebhooks` library's own verifier. Inbound verification: core-inbound.test.ts.
 */
import { createHmac, randomBytes } from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import { constantTimeEqual, decodeSecret, sign, signatureHeader } from '../../../lambda/core/signing';

const utf8 = new TextEncoder();

function newSecret(bytes = 32): { secret: string; key: Uint8Array } {
  const raw = randomBytes(bytes);
  return { secret: `whsec_${raw.toString('base64')}`, key: new Uint8Array(raw) };
}

const MSG_ID = 'evt_0123456789abcdef0123456789abcdef';
const BODY_TEXT = '{"eventId":"evt_0123456789abcdef0123456789abcdef","name":"message.created","data":{"message":"héllo 😀"},"cursor":null}';
const BODY = utf8.encode(BODY_TEXT);

function independentSignature(key: Uint8Array, id: string, ts: number, body: Uint8Array): string {
  const mac = createHmac('sha256', key)
    .update(Buffer.concat([Buffer.from(`${id}.${ts}.`), body]))
    .digest('base64');
  return `v1,${mac}`;
}

function headersFor(signature: string, ts: number, id = MSG_ID): Record<string, string> {
  return { 'webhook-id': id, 'webhook-timestamp': String(ts), 'webhook-signature': signature };
}

describe('EV-CHAL-5: sign', () => {
  test('equals an independently computed HMAC-SHA256 over id.timestamp.body, prefixed v1,', () => {
    const { key } = newSecret();
    const ts = 1_790_000_000;
    expect(sign(key, MSG_ID, ts, BODY)).toBe(independentSignature(key, MSG_ID, ts, BODY));
  });

  test('is verified by the standardwebhooks Webhook class', () => {
    const { secret, key } = newSecret();
    const ts = Math.floor(Date.now() / 1000);
    const verified = new Webhook(secret).verify(Buffer.from(BODY), headersFor(sign(key, MSG_ID, ts, BODY), ts));
    expect(verified).toEqual(JSON.parse(BODY_TEXT));
  });
});

describe('signatureHeader', () => {
  test('one key gives one v1 signature', () => {
    const { key } = newSecret();
    const header = signatureHeader([key], MSG_ID, 1_790_000_000, BODY);
    expect(header).toBe(independentSignature(key, MSG_ID, 1_790_000_000, BODY));
    expect(header.split(' ')).toHaveLength(1);
  });

  test('EV-REF-2: two keys give two space-separated signatures in the order given (new first)', () => {
    const current = newSecret();
    const previous = newSecret();
    const ts = 1_790_000_000;
    expect(signatureHeader([current.key, previous.key], MSG_ID, ts, BODY)).toBe(
      `${independentSignature(current.key, MSG_ID, ts, BODY)} ${independentSignature(previous.key, MSG_ID, ts, BODY)}`,
    );
  });

  test('EV-REF-2: each key of a two-key header verifies with the standardwebhooks Webhook class', () => {
    const current = newSecret();
    const previous = newSecret();
    const ts = Math.floor(Date.now() / 1000);
    const headers = headersFor(signatureHeader([current.key, previous.key], MSG_ID, ts, BODY), ts);
    expect(new Webhook(current.secret).verify(Buffer.from(BODY), headers)).toEqual(JSON.parse(BODY_TEXT));
    expect(new Webhook(previous.secret).verify(Buffer.from(BODY), headers)).toEqual(JSON.parse(BODY_TEXT));
  });

  test('a key that is in neither signature does not verify with the standardwebhooks Webhook class', () => {
    const ts = Math.floor(Date.now() / 1000);
    const headers = headersFor(signatureHeader([newSecret().key, newSecret().key], MSG_ID, ts, BODY), ts);
    expect(() => new Webhook(newSecret().secret).verify(Buffer.from(BODY), headers)).toThrow();
  });

  test('no key is a programming error', () => {
    expect(() => signatureHeader([], MSG_ID, 1, BODY)).toThrow();
  });
});

describe('EV-SUB-7, LIM-6: decodeSecret', () => {
  const of = (bytes: number) => `whsec_${Buffer.alloc(bytes, 0x5a).toString('base64')}`;

  test('returns the decoded bytes as the HMAC key', () => {
    const { secret, key } = newSecret();
    expect(Buffer.from(decodeSecret(secret)!).equals(Buffer.from(key))).toBe(true);
  });

  test('23 bytes are refused', () => {
    expect(decodeSecret(of(23))).toBeUndefined();
  });

  test('24 bytes are accepted', () => {
    expect(decodeSecret(of(24))?.byteLength).toBe(24);
  });

  test('64 bytes are accepted', () => {
    expect(decodeSecret(of(64))?.byteLength).toBe(64);
  });

  test('65 bytes are refused', () => {
    expect(decodeSecret(of(65))).toBeUndefined();
  });

  test('padding may be omitted', () => {
    expect(decodeSecret(of(32).replace(/=+$/, ''))?.byteLength).toBe(32);
  });

  test('a missing whsec_ prefix is refused', () => {
    expect(decodeSecret(of(32).slice('whsec_'.length))).toBeUndefined();
  });

  test('the URL-safe alphabet is refused', () => {
    const raw = Buffer.alloc(24, 0xff);
    expect(decodeSecret(`whsec_${raw.toString('base64')}`)?.byteLength).toBe(24);
    expect(decodeSecret(`whsec_${raw.toString('base64url')}`)).toBeUndefined();
  });

  test('whitespace inside the base64 is refused', () => {
    const secret = of(32);
    expect(decodeSecret(`${secret.slice(0, 20)} ${secret.slice(20)}`)).toBeUndefined();
  });

  test('stray bits in the last character are refused (one secret, one spelling)', () => {
    const secret = of(25); // 34 base64 characters + '==': the last character carries 4 unused bits
    const last = secret.at(-3)!;
    const stray = String.fromCharCode(last.charCodeAt(0) + 1);
    expect(decodeSecret(`${secret.slice(0, -3)}${stray}==`)).toBeUndefined();
  });

  test('a length that no base64 text can have is refused', () => {
    expect(decodeSecret(`whsec_${'A'.repeat(33)}`)).toBeUndefined();
  });

  test('a non-string is refused', () => {
    expect(decodeSecret(42 as unknown as string)).toBeUndefined();
  });
});

describe('sign: exact bytes', () => {
  const { key } = newSecret();
  const ts = 1_790_000_000;

  test.each([
    ['multibyte text', utf8.encode('{"m":"日本語 ☃ 😀"}')],
    ['a leading byte order mark (kept, not stripped)', Uint8Array.from([0xef, 0xbb, 0xbf, ...utf8.encode('{}')])],
    ['U+FFFD and noncharacters written raw', utf8.encode('{"m":"\ufffd\ufffe\uffff"}')],
    ['an empty body', new Uint8Array()],
    ['bytes that are not UTF-8 (signed as they are, never as replaced text)', Uint8Array.from([0x7b, 0xff, 0x7d])],
  ])('%s: equals the node:crypto HMAC over the same bytes', (_label, body) => {
    expect(sign(key, MSG_ID, ts, body)).toBe(independentSignature(key, MSG_ID, ts, body));
  });

  test('a timestamp that is not whole seconds is a programming error', () => {
    expect(() => sign(key, MSG_ID, 1.5, BODY)).toThrow(/whole seconds/);
  });
});

describe('constantTimeEqual', () => {
  test('equal strings are equal', () => {
    expect(constantTimeEqual('nonce-abc', 'nonce-abc')).toBe(true);
  });

  test('a one-character difference is unequal', () => {
    expect(constantTimeEqual('nonce-abc', 'nonce-abd')).toBe(false);
  });

  test('a prefix is unequal', () => {
    expect(constantTimeEqual('nonce-abc', 'nonce-ab')).toBe(false);
  });

  test('the empty string equals only itself', () => {
    expect(constantTimeEqual('', '')).toBe(true);
    expect(constantTimeEqual('', 'x')).toBe(false);
  });
});

describe('decodeSecret spelling is canonical', () => {
  const bytes24 = Buffer.alloc(25, 7); // 25 bytes: base64 needs one '=' of padding
  const padded = bytes24.toString('base64');
  test('correct padding is accepted', () => expect(decodeSecret(`whsec_${padded}`)).toBeDefined());
  test('no padding is accepted', () => expect(decodeSecret(`whsec_${padded.replace(/=+$/, '')}`)).toBeDefined());
  test('too much padding is refused', () => expect(decodeSecret(`whsec_${padded}=`)).toBeUndefined());
});
