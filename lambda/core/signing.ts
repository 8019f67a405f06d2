/**
 * Standard Webhooks signing: `v1,<base64 HMAC-SHA256(key, id.timestamp.body)>`, with one key or,
 * during a secret rotation, two (new first, space separated). Also verification, for inbound
 * requests and for tests, and the constant-time string comparison the rest of the core uses.
 *
 * Deliberately not here: parsing user input into keys beyond the `whsec_` decoding, headers other
 * than the signature, and any clock (callers pass the timestamp they sign or verify with).
 */
import { createHmac, timingSafeEqual, createHash } from 'node:crypto';
import { Limits, SECRET_PREFIX, SIGNATURE_VERSION } from './protocol';

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

function signedContent(msgId: string, timestampS: number, body: Uint8Array): Buffer {
  return Buffer.concat([Buffer.from(`${msgId}.${timestampS}.`, 'utf8'), body]);
}

export function sign(key: Uint8Array, msgId: string, timestampS: number, body: Uint8Array): string {
  const mac = createHmac('sha256', key).update(signedContent(msgId, timestampS, body)).digest('base64');
  return `${SIGNATURE_VERSION},${mac}`;
}

/** The `webhook-signature` value for one or more keys, in the order given (current key first). */
export function signatureHeader(keys: readonly Uint8Array[], msgId: string, timestampS: number, body: Uint8Array): string {
  if (keys.length === 0) throw new Error('signatureHeader: at least one key is required');
  return keys.map((key) => sign(key, msgId, timestampS, body)).join(' ');
}

export type VerifyFailure = 'missing_headers' | 'bad_timestamp' | 'timestamp_out_of_window' | 'bad_signature';

/**
 * Checks a Standard Webhooks signature header against any of `keys`, with the timestamp within
 * `toleranceS` of `nowS`. Returns undefined when valid, else why not.
 */
export function verifySignature(
  keys: readonly Uint8Array[],
  headers: { id?: string | null; timestamp?: string | null; signature?: string | null },
  body: Uint8Array,
  nowS: number,
  toleranceS: number = Limits.inboundSignatureToleranceS,
): VerifyFailure | undefined {
  const { id, timestamp, signature } = headers;
  if (!id || !timestamp || !signature) return 'missing_headers';
  if (!/^\d{1,12}$/.test(timestamp)) return 'bad_timestamp';
  const ts = Number(timestamp);
  if (Math.abs(nowS - ts) > toleranceS) return 'timestamp_out_of_window';
  const offered = signature.split(' ').filter((part) => part.startsWith(`${SIGNATURE_VERSION},`));
  for (const key of keys) {
    const expected = sign(key, id, ts, body);
    if (offered.some((candidate) => constantTimeEqual(candidate, expected))) return undefined;
  }
  return 'bad_signature';
}

/** Compares two strings in time independent of where they differ (length differences included). */
export function constantTimeEqual(a: string, b: string): boolean {
  const ha = createHash('sha256').update(a, 'utf8').digest();
  const hb = createHash('sha256').update(b, 'utf8').digest();
  return timingSafeEqual(ha, hb) && a.length === b.length;
}
