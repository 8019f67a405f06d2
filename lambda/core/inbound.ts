/**
 * The one verifier of signed inbound requests (docs/contract/pup.md: every pup POST): Standard
 * Webhooks, `v1,<base64 HMAC-SHA256(secret, id.timestamp.body)>` over the exact body bytes, with
 * node:crypto's native HMAC (a 1 MiB body never holds the event loop). Rules, in this order:
 * 1. the three headers present, the timestamp whole seconds, at least one well-formed `v1,`
 *    signature, else `invalid_signature` (never saying which part was missing);
 * 2. the timestamp within 5 minutes of `now`, either way, else `stale_timestamp`;
 *    (1 and 2 need only the headers, so the route refuses before reading the body)
 * 3. a signature by the current secret, or the previous one until `rotatedAt` + 10 minutes, else
 *    `invalid_signature`; the HMAC is computed as the body streams in;
 * 4. the body is UTF-8 (pup signs JSON text), else `invalid_signature`.
 *
 * Deliberately not here: the replay guard and stored answers (lambda/http/pup.ts adds `replayed`),
 * parsing the body, and reading settings (the caller hands in validated secrets).
 */
import { createHmac, type Hmac } from 'node:crypto';
import { Limits, PUP_MAX_SECRETS, PupRefusals, SIGNATURE_VERSION, type PupRefusal } from './protocol';
import { constantTimeEqual, decodeSecret } from './signing';

/** The configured secrets: `whsec_` texts, current first; the previous one ends at `rotatedAt` + 10 min. */
export interface InboundSecrets {
  secrets: readonly string[];
  /** Epoch ms of the rotation; required when there are two secrets. */
  rotatedAt?: number;
}

export type InboundHeaders = Record<'id' | 'timestamp' | 'signature', string | null | undefined>;

export type InboundVerdict = { ok: true; webhookId: string } | { ok: false; refusal: Exclude<PupRefusal, 'replayed'> };

/** Why a secrets configuration is unusable, naming no secret; undefined when it is fine. */
export function inboundSecretsProblem(config: InboundSecrets): string | undefined {
  if (config.secrets.length > PUP_MAX_SECRETS) return `at most ${PUP_MAX_SECRETS} secrets (current, previous), got ${config.secrets.length}`;
  for (const [index, secret] of config.secrets.entries()) {
    if (!decodeSecret(secret)) return `secret ${index + 1} is not whsec_ + standard base64 of ${Limits.secretMinBytes}..${Limits.secretMaxBytes} bytes`;
  }
  if (config.rotatedAt !== undefined && !Number.isFinite(config.rotatedAt)) return 'the rotation time is not a valid time';
  if (config.secrets.length === 2 && config.rotatedAt === undefined) {
    return 'a rotation time is required with two secrets (the previous one is accepted until 10 minutes after it)';
  }
  return undefined;
}

const ISO_TIME = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2})(?:\.\d{1,9})?)?(?:Z|[+-](\d{2}):(\d{2}))$/;

/** A rotation time as written in settings: ISO 8601 with a time and a zone; impossible dates are refused, not rolled over. */
export function parseRotationTime(text: string): number | undefined {
  const match = ISO_TIME.exec(text);
  if (!match) return undefined;
  const [y, mo, d, h, mi, s, oh, om] = match.slice(1).map((part) => Number(part ?? 0)) as [number, number, number, number, number, number, number, number];
  const calendar = new Date(Date.UTC(y, mo - 1, d));
  if (calendar.getUTCFullYear() !== y || calendar.getUTCMonth() !== mo - 1 || calendar.getUTCDate() !== d) return undefined;
  if (h > 23 || mi > 59 || s > 59 || oh > 23 || om > 59) return undefined;
  const ms = Date.parse(text);
  return Number.isNaN(ms) ? undefined : ms;
}

/** Secrets from their texts, checked; `fail` words the caller's error (`problem` absent: the rotation time is not ISO 8601 with a zone). */
export function inboundSecretsOf(secrets: readonly string[], rotatedAt: string | undefined, fail: (problem?: string) => Error): InboundSecrets {
  const config: InboundSecrets = { secrets };
  if (rotatedAt !== undefined) {
    const at = parseRotationTime(rotatedAt);
    if (at === undefined) throw fail();
    config.rotatedAt = at;
  }
  const problem = inboundSecretsProblem(config);
  if (problem) throw fail(problem);
  return config;
}

/** The secrets accepted at `now`, current first. */
export function acceptedSecrets(config: InboundSecrets, now: number): string[] {
  const [current, previous] = config.secrets;
  if (current === undefined) return [];
  const previousLive = previous !== undefined && config.rotatedAt !== undefined && now < config.rotatedAt + Limits.rotationOverlapMs;
  return previousLive ? [current, previous] : [current];
}

const WHOLE_SECONDS = /^\d{1,12}$/;
const SIGNATURE = /^[A-Za-z0-9+/]{43}=$/;

/** What the headers alone allow: a request that may be verified once its body has been read. */
export type HeaderCheck =
  | { ok: true; webhookId: string; timestampS: number; signatures: Buffer[]; keys: Uint8Array[] }
  | { ok: false; refusal: Exclude<PupRefusal, 'replayed'> };

/** Rules 1 and 2: everything that can be judged before the body is read. */
export function checkInboundHeaders(config: InboundSecrets, headers: InboundHeaders, now: number): HeaderCheck {
  const invalid = { ok: false, refusal: PupRefusals.invalidSignature } as const;
  const { id, timestamp, signature } = headers;
  if (!id || !timestamp || !signature || !WHOLE_SECONDS.test(timestamp)) return invalid;
  const signatures: Buffer[] = [];
  for (const part of signature.split(' ')) {
    const comma = part.indexOf(',');
    if (comma < 0 || part.slice(0, comma) !== SIGNATURE_VERSION) continue;
    const encoded = part.slice(comma + 1);
    if (SIGNATURE.test(encoded)) signatures.push(Buffer.from(encoded, 'base64'));
  }
  if (signatures.length === 0) return invalid;
  const timestampS = Number(timestamp);
  if (Math.abs(now / 1000 - timestampS) > Limits.inboundSignatureToleranceS) return { ok: false, refusal: PupRefusals.staleTimestamp };
  const keys = acceptedSecrets(config, now)
    .map(decodeSecret)
    .filter((key): key is Uint8Array => key !== undefined);
  if (keys.length === 0) return invalid;
  return { ok: true, webhookId: id, timestampS, signatures, keys };
}

/** Rules 3 and 4, fed the body as it arrives. */
export function createInboundVerifier(checked: Extract<HeaderCheck, { ok: true }>) {
  const prefix = Buffer.from(`${checked.webhookId}.${checked.timestampS}.`, 'utf8');
  const macs: Hmac[] = checked.keys.map((key) => createHmac('sha256', key).update(prefix));
  // Fatal and streaming: a sequence split across two chunks is still judged as one.
  const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
  let utf8Ok = true;
  // Without a chunk: the end of the body, where a sequence left open is judged.
  const decode = (chunk?: Uint8Array) => {
    try {
      if (utf8Ok) utf8.decode(chunk, { stream: chunk !== undefined });
    } catch {
      utf8Ok = false;
    }
  };
  return {
    update(chunk: Uint8Array): void {
      for (const mac of macs) mac.update(chunk);
      decode(chunk);
    },
    /** Call once, after the last chunk. */
    verdict(): InboundVerdict {
      decode();
      // Every digest is computed and compared, so the time taken does not tell which secret matched.
      const matched = macs.map((mac) => mac.digest()).map((digest) => checked.signatures.some((offered) => constantTimeEqual(offered, digest)));
      return utf8Ok && matched.some(Boolean) ? { ok: true, webhookId: checked.webhookId } : { ok: false, refusal: PupRefusals.invalidSignature };
    },
  };
}

/** The whole check for a body already in hand. */
export function verifyInbound(config: InboundSecrets, headers: InboundHeaders, body: Uint8Array, now: number): InboundVerdict {
  const checked = checkInboundHeaders(config, headers, now);
  if (!checked.ok) return checked;
  const verifier = createInboundVerifier(checked);
  verifier.update(body);
  return verifier.verdict();
}
