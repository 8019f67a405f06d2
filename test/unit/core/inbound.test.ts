/**
 * The inbound verifier (docs/contract/pup.md), against signature vectors computed here with node:crypto, and
 * against the `standardwebhooks` library in both directions. One valid fixture; each test breaks
 * exactly one thing and is named after the rule it pins.
 */
import { createHmac, randomBytes } from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import {
  acceptedSecrets,
  checkInboundHeaders,
  createInboundVerifier,
  inboundSecretsProblem,
  verifyInbound,
  type InboundHeaders,
  type InboundSecrets,
} from '../../../lambda/core/inbound';

const utf8 = new TextEncoder();
const MINUTE = 60_000;

function newSecret(bytes = 32): { secret: string; key: Buffer } {
  const key = randomBytes(bytes);
  return { secret: `whsec_${key.toString('base64')}`, key };
}

/** Standard Webhooks, written from the spec with node:crypto: v1,base64(HMAC-SHA256(key, id.ts.body)). */
function independentSignature(key: Buffer, id: string, ts: number, body: Uint8Array): string {
  return `v1,${createHmac('sha256', key)
    .update(Buffer.concat([Buffer.from(`${id}.${ts}.`, 'utf8'), body]))
    .digest('base64')}`;
}

// A fixed instant far from the wall clock: a verifier that consulted Date.now() would fail here.
const NOW = Date.UTC(2031, 4, 6, 7, 8, 9);
const NOW_S = NOW / 1000;
const ID = 'msg_2Lq0mNvYd7xBqGJ5o8pQmHcZtA1';
const BODY = utf8.encode('{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"send_to_dot","arguments":{"message":"héllo 😀"}}}');
const current = newSecret();
const previous = newSecret();
const ONE: InboundSecrets = { secrets: [current.secret] };

function headers(overrides: Partial<InboundHeaders> = {}, ts = NOW_S, key = current.key, body = BODY): InboundHeaders {
  return { id: ID, timestamp: String(ts), signature: independentSignature(key, ID, ts, body), ...overrides };
}

describe('PUP-7: verifyInbound: signature vectors computed with node:crypto', () => {
  test('the valid fixture verifies and names its webhook-id', () => {
    expect(verifyInbound(ONE, headers(), BODY, NOW)).toEqual({ ok: true, webhookId: ID });
  });

  test('a wrong secret is invalid_signature', () => {
    expect(verifyInbound(ONE, headers({}, NOW_S, newSecret().key), BODY, NOW)).toEqual({ ok: false, refusal: 'invalid_signature' });
  });

  test('one byte of the body changed is invalid_signature', () => {
    const tampered = Uint8Array.from(BODY);
    const at = tampered.length - 3;
    tampered[at] = tampered[at]! ^ 0x01;
    expect(verifyInbound(ONE, headers(), tampered, NOW)).toEqual({ ok: false, refusal: 'invalid_signature' });
  });

  test('re-serialized JSON (same value, other bytes) is invalid_signature: the exact bytes are signed', () => {
    const reserialized = utf8.encode(JSON.stringify(JSON.parse(new TextDecoder().decode(BODY)), null, 1));
    expect(verifyInbound(ONE, headers(), reserialized, NOW)).toEqual({ ok: false, refusal: 'invalid_signature' });
  });

  test('a changed webhook-id is invalid_signature (the id is signed)', () => {
    expect(verifyInbound(ONE, { ...headers(), id: `${ID}x` }, BODY, NOW)).toEqual({ ok: false, refusal: 'invalid_signature' });
  });

  test.each(['id', 'timestamp', 'signature'] as const)('a missing webhook-%s is invalid_signature', (name) => {
    expect(verifyInbound(ONE, headers({ [name]: null }), BODY, NOW)).toEqual({ ok: false, refusal: 'invalid_signature' });
    expect(verifyInbound(ONE, headers({ [name]: '' }), BODY, NOW)).toEqual({ ok: false, refusal: 'invalid_signature' });
  });

  test.each([
    ['299 s old', NOW_S - 299, true],
    ['300 s old (the edge, inclusive)', NOW_S - 300, true],
    ['301 s old', NOW_S - 301, false],
    ['299 s ahead', NOW_S + 299, true],
    ['300 s ahead (the edge, inclusive)', NOW_S + 300, true],
    ['301 s ahead', NOW_S + 301, false],
  ])('PUP-8: a timestamp %s: %s', (_label, ts, accepted) => {
    const verdict = verifyInbound(ONE, headers({}, ts), BODY, NOW);
    expect(verdict).toEqual(accepted ? { ok: true, webhookId: ID } : { ok: false, refusal: 'stale_timestamp' });
  });

  test('PUP-8: a stale timestamp is stale_timestamp even when the signature is also wrong (the window is checked first)', () => {
    expect(verifyInbound(ONE, headers({}, NOW_S - 3600, newSecret().key), BODY, NOW)).toEqual({ ok: false, refusal: 'stale_timestamp' });
  });

  test.each([`${NOW_S}.5`, `-${NOW_S}`, `${NOW_S}abc`, ' 1', '0x10', '1e9'])('a timestamp %j that is not whole seconds is invalid_signature', (ts) => {
    expect(verifyInbound(ONE, headers({ timestamp: ts }), BODY, NOW)).toEqual({ ok: false, refusal: 'invalid_signature' });
  });

  test('several signatures in one header: a match anywhere is enough', () => {
    const others = [independentSignature(newSecret().key, ID, NOW_S, BODY), independentSignature(newSecret().key, ID, NOW_S, BODY)];
    const signature = [others[0], independentSignature(current.key, ID, NOW_S, BODY), others[1]].join(' ');
    expect(verifyInbound(ONE, headers({ signature }), BODY, NOW)).toEqual({ ok: true, webhookId: ID });
  });

  test('several signatures, none matching, is invalid_signature', () => {
    const signature = [newSecret(), newSecret(), newSecret()].map((s) => independentSignature(s.key, ID, NOW_S, BODY)).join(' ');
    expect(verifyInbound(ONE, headers({ signature }), BODY, NOW)).toEqual({ ok: false, refusal: 'invalid_signature' });
  });

  test('a signature under another version (v2,) is not accepted', () => {
    const signature = independentSignature(current.key, ID, NOW_S, BODY).replace(/^v1,/, 'v2,');
    expect(verifyInbound(ONE, headers({ signature }), BODY, NOW)).toEqual({ ok: false, refusal: 'invalid_signature' });
  });

  test('a body that is not UTF-8 is invalid_signature, even with an HMAC over its raw bytes', () => {
    const body = Uint8Array.from([0x7b, 0x22, 0xff, 0x22, 0x7d]);
    expect(verifyInbound(ONE, headers({}, NOW_S, current.key, body), body, NOW)).toEqual({ ok: false, refusal: 'invalid_signature' });
  });

  test('a leading byte order mark is part of the signed bytes (not stripped before verifying)', () => {
    const body = Uint8Array.from([0xef, 0xbb, 0xbf, ...BODY]);
    expect(verifyInbound(ONE, headers({}, NOW_S, current.key, body), body, NOW)).toEqual({ ok: true, webhookId: ID });
    expect(verifyInbound(ONE, headers({}, NOW_S, current.key, BODY), body, NOW)).toEqual({ ok: false, refusal: 'invalid_signature' });
  });

  test('an empty body verifies when it was signed empty', () => {
    const empty = new Uint8Array();
    expect(verifyInbound(ONE, headers({}, NOW_S, current.key, empty), empty, NOW)).toEqual({ ok: true, webhookId: ID });
  });

  test('no secret configured accepts nothing', () => {
    expect(verifyInbound({ secrets: [] }, headers(), BODY, NOW)).toEqual({ ok: false, refusal: 'invalid_signature' });
  });
});

describe('PUP-9: verifyInbound: rotation (current first, previous until rotatedAt + 10 min)', () => {
  const ROTATED_AT = NOW - 5 * MINUTE;
  const TWO: InboundSecrets = { secrets: [current.secret, previous.secret], rotatedAt: ROTATED_AT };
  const signedBy = (key: Buffer, now: number) => headers({}, Math.floor(now / 1000), key);

  test('inside the overlap both secrets are accepted', () => {
    expect(verifyInbound(TWO, signedBy(current.key, NOW), BODY, NOW).ok).toBe(true);
    expect(verifyInbound(TWO, signedBy(previous.key, NOW), BODY, NOW).ok).toBe(true);
  });

  test('one millisecond before the overlap ends the previous secret still verifies; at its end it does not', () => {
    const end = ROTATED_AT + 10 * MINUTE;
    expect(verifyInbound(TWO, signedBy(previous.key, end - 1), BODY, end - 1).ok).toBe(true);
    expect(verifyInbound(TWO, signedBy(previous.key, end), BODY, end)).toEqual({ ok: false, refusal: 'invalid_signature' });
  });

  test('after the overlap (clock moved) the previous secret is refused and the current one still accepted', () => {
    const later = ROTATED_AT + 11 * MINUTE;
    expect(verifyInbound(TWO, signedBy(previous.key, later), BODY, later)).toEqual({ ok: false, refusal: 'invalid_signature' });
    expect(verifyInbound(TWO, signedBy(current.key, later), BODY, later).ok).toBe(true);
  });

  test('a rotation time in the future keeps the previous secret until 10 minutes after it', () => {
    const scheduled: InboundSecrets = { secrets: [current.secret, previous.secret], rotatedAt: NOW + 60 * MINUTE };
    expect(verifyInbound(scheduled, signedBy(previous.key, NOW), BODY, NOW).ok).toBe(true);
  });

  test('acceptedSecrets lists the current secret first', () => {
    expect(acceptedSecrets(TWO, NOW)).toEqual([current.secret, previous.secret]);
    expect(acceptedSecrets(TWO, ROTATED_AT + 10 * MINUTE)).toEqual([current.secret]);
    expect(acceptedSecrets({ secrets: [] }, NOW)).toEqual([]);
  });
});

describe('inboundSecretsProblem', () => {
  test('one or two valid secrets (two with a rotation time) are fine', () => {
    expect(inboundSecretsProblem(ONE)).toBeUndefined();
    expect(inboundSecretsProblem({ secrets: [current.secret, previous.secret], rotatedAt: NOW })).toBeUndefined();
    expect(inboundSecretsProblem({ secrets: [] })).toBeUndefined();
  });

  test('two secrets without a rotation time are refused', () => {
    expect(inboundSecretsProblem({ secrets: [current.secret, previous.secret] })).toMatch(/rotation time is required/);
  });

  test('three secrets are refused', () => {
    expect(inboundSecretsProblem({ secrets: [current.secret, previous.secret, newSecret().secret], rotatedAt: NOW })).toMatch(/at most 2/);
  });

  test('a malformed secret is refused by position, never quoted', () => {
    const bad = 'whsec_not-base64!';
    const problem = inboundSecretsProblem({ secrets: [current.secret, bad], rotatedAt: NOW });
    expect(problem).toMatch(/secret 2 is not whsec_/);
    expect(problem).not.toContain(bad);
    expect(problem).not.toContain(current.secret);
  });

  test('a secret of 16 bytes is refused (Standard Webhooks secrets are 24..64 bytes)', () => {
    expect(inboundSecretsProblem({ secrets: [newSecret(16).secret] })).toMatch(/secret 1/);
  });

  test('a rotation time that is not a number is refused', () => {
    expect(inboundSecretsProblem({ secrets: [current.secret], rotatedAt: Number.NaN })).toMatch(/rotation time/);
  });
});

describe('the verifier against the standardwebhooks library, both ways', () => {
  test('a request the library signs verifies here', () => {
    const webhook = new Webhook(current.secret);
    const at = new Date(NOW);
    const signature = webhook.sign(ID, at, new TextDecoder().decode(BODY));
    expect(verifyInbound(ONE, { id: ID, timestamp: String(NOW_S), signature }, BODY, NOW)).toEqual({ ok: true, webhookId: ID });
  });

  test('what this verifier accepts, the library accepts too (on its own clock)', () => {
    const nowS = Math.floor(Date.now() / 1000);
    const signature = independentSignature(current.key, ID, nowS, BODY);
    expect(verifyInbound(ONE, { id: ID, timestamp: String(nowS), signature }, BODY, nowS * 1000)).toEqual({ ok: true, webhookId: ID });
    expect(() =>
      new Webhook(current.secret).verify(Buffer.from(BODY), { 'webhook-id': ID, 'webhook-timestamp': String(nowS), 'webhook-signature': signature }),
    ).not.toThrow();
  });
});

describe('checkInboundHeaders: refusals made before the body is read', () => {
  test.each([
    ['no signature of version v1', 'v2,abc'],
    ['a v1 signature that is not 32 bytes of base64', 'v1,c2hvcnQ='],
    ['garbage', 'not a signature at all'],
  ])('%s is invalid_signature', (_label, signature) => {
    expect(checkInboundHeaders(ONE, { id: ID, timestamp: String(NOW_S), signature }, NOW)).toEqual({ ok: false, refusal: 'invalid_signature' });
  });

  test('PUP-8: a timestamp outside the window is stale_timestamp from the headers alone', () => {
    expect(checkInboundHeaders(ONE, headers({}, NOW_S - 301), NOW)).toEqual({ ok: false, refusal: 'stale_timestamp' });
  });

  test('a well-formed request passes the header check; its body is judged as it streams in', () => {
    const checked = checkInboundHeaders(ONE, headers(), NOW);
    expect(checked.ok).toBe(true);
    if (!checked.ok) return;
    const verifier = createInboundVerifier(checked);
    // Split inside a multibyte character: the UTF-8 check still sees one character.
    const cut = BODY.indexOf(0xf0) + 2;
    verifier.update(BODY.subarray(0, cut));
    verifier.update(BODY.subarray(cut));
    expect(verifier.verdict()).toEqual({ ok: true, webhookId: ID });
  });
});
