/**
 * Standard Webhooks signing, `v1,<base64 HMAC-SHA256(key, id.timestamp.body)>` with one key or two
 * during a rotation, over the body's exact bytes; also `whsec_` decoding and the one constant-time
 * comparison. The HMAC is node:crypto's, not the `standardwebhooks` library's (docs/decisions.md,
 * "Outgoing webhooks are signed with node:crypto's HMAC"); its own verifier checks this signer in the tests.
 *
 * Deliberately not here: verification of inbound requests (core/inbound.ts), other headers, and any clock.
 */
import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import { Limits, SECRET_PREFIX, WebhookHeaders } from './protocol';

const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

/**
 * Decodes `whsec_` + standard base64 into the HMAC key bytes, or undefined when the text is not
 * canonical standard base64 of 24..64 bytes. Padding may be omitted; URL-safe characters,
 * whitespace and stray bits are refused so that one secret has exactly one spelling.
 */
export function decodeSecret(secret: string): Uint8Array | undefined {
  if (typeof secret !== 'string' || !secret.startsWith(SECRET_PREFIX)) return undefined;
  const encoded = secret.slice(SECRET_PREFIX.length);
  if (!BASE64.test(encoded) || encoded.length % 4 === 1) return undefined;
  const bytes = Buffer.from(encoded, 'base64');
  const canonical = bytes.toString('base64');
  if (encoded !== canonical && encoded !== canonical.replace(/=+$/, '')) return undefined;
  if (bytes.length < Limits.secretMinBytes || bytes.length > Limits.secretMaxBytes) return undefined;
  return new Uint8Array(bytes);
}

/** One `v1,<base64>` signature of `id.timestamp.body` with the HMAC key `key`. */
export function sign(key: Uint8Array, msgId: string, timestampS: number, body: Uint8Array): string {
  if (!Number.isSafeInteger(timestampS)) throw new Error('sign: the timestamp must be whole seconds');
  return `v1,${createHmac('sha256', key).update(`${msgId}.${timestampS}.`).update(body).digest('base64')}`;
}

/** The `webhook-signature` value for one or more keys, in the order given (current key first). */
export function signatureHeader(keys: readonly Uint8Array[], msgId: string, timestampS: number, body: Uint8Array): string {
  if (keys.length === 0) throw new Error('signatureHeader: at least one key is required');
  return keys.map((key) => sign(key, msgId, timestampS, body)).join(' ');
}

/** The headers of a signed POST to a callback (an event or a challenge), one spelling for both. */
export function signedHeaders(
  keys: readonly Uint8Array[],
  msgId: string,
  timestampS: number,
  body: Uint8Array,
  subscriptionId: string,
): Record<string, string> {
  return {
    'content-type': 'application/json',
    [WebhookHeaders.id]: msgId,
    [WebhookHeaders.timestamp]: String(timestampS),
    [WebhookHeaders.signature]: signatureHeader(keys, msgId, timestampS, body),
    [WebhookHeaders.subscriptionId]: subscriptionId,
  };
}

/**
 * Compares two strings (UTF-8) or byte strings in time independent of where they differ, length
 * differences included: both sides are hashed first. The one constant-time comparison of dm-dot.
 */
export function constantTimeEqual(a: string | Uint8Array, b: string | Uint8Array): boolean {
  return constantTimeMatcher(b)(a);
}

/**
 * `constantTimeEqual(candidate, expected)` with `expected` hashed once, for a value every request
 * is compared with (the configured API key): half the hashing on the request path.
 */
export function constantTimeMatcher(expected: string | Uint8Array): (candidate: string | Uint8Array) => boolean {
  const hashed = createHash('sha256').update(expected).digest();
  return (candidate) => timingSafeEqual(createHash('sha256').update(candidate).digest(), hashed) && candidate.length === expected.length;
}
