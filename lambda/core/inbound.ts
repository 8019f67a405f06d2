/**
 * The one verifier of signed inbound requests (SPEC 8: every pup POST, MCP, challenge and events
 * alike): Standard Webhooks over the exact body bytes, through the `standardwebhooks` library.
 *
 * Rules, in this order:
 * 1. `webhook-id`, `webhook-timestamp` and `webhook-signature` present, the timestamp whole
 *    seconds, the body UTF-8: otherwise `invalid_signature` (a request that cannot be verified is
 *    an unsigned one; the answer never says which part was missing).
 * 2. The timestamp within 5 minutes of `now`, either way (inclusive): otherwise `stale_timestamp`.
 *    Checked on the caller's clock rather than the library's `Date.now()`, so the window is
 *    testable in-process and a stale request is told apart from a forged one.
 * 3. A `v1` signature made with the current secret, or with the previous one while it is still
 *    accepted (until `rotatedAt` + 10 minutes; the end is exclusive): otherwise
 *    `invalid_signature`. The current secret is tried first. Any number of signatures may be
 *    offered, space separated; one match is enough.
 *
 * Deliberately not here: the replay guard and the stored event answers (they need the store: the
 * route layer, lambda/http/pup.ts, adds `replayed`), parsing the body, and reading settings: the
 * caller hands in already-validated secrets (`inboundSecretsProblem` says what is wrong with a
 * configuration, without ever quoting a secret).
 */
import { Webhook, WebhookVerificationError } from 'standardwebhooks';
import { Limits, PUP_MAX_SECRETS, PupRefusals, type PupRefusal } from './protocol';
import { decodeSecret, utf8Text } from './signing';

/** The configured secrets: `whsec_` texts, current first; the previous one ends at `rotatedAt` + 10 min. */
export interface InboundSecrets {
  secrets: readonly string[];
  /** Epoch ms of the rotation; required when there are two secrets. */
  rotatedAt?: number;
}

export interface InboundHeaders {
  id: string | null | undefined;
  timestamp: string | null | undefined;
  signature: string | null | undefined;
}

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

/**
 * A rotation time as written in settings: ISO 8601 with a time and a zone (`Z` or an offset).
 * Impossible dates (Feb 31st, hour 24) are refused rather than rolled over as `Date.parse` does.
 */
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

/** The secrets accepted at `now`, current first. */
export function acceptedSecrets(config: InboundSecrets, now: number): string[] {
  const [current, previous] = config.secrets;
  if (current === undefined) return [];
  const previousLive = previous !== undefined && config.rotatedAt !== undefined && now < config.rotatedAt + Limits.rotationOverlapMs;
  return previousLive ? [current, previous] : [current];
}

const WHOLE_SECONDS = /^\d{1,12}$/;

export function verifyInbound(config: InboundSecrets, headers: InboundHeaders, body: Uint8Array, now: number): InboundVerdict {
  const invalid: InboundVerdict = { ok: false, refusal: PupRefusals.invalidSignature };
  const { id, timestamp, signature } = headers;
  if (!id || !timestamp || !signature || !WHOLE_SECONDS.test(timestamp)) return invalid;
  const text = utf8Text(body);
  if (text === undefined) return invalid;
  const timestampS = Number(timestamp);
  if (Math.abs(now / 1000 - timestampS) > Limits.inboundSignatureToleranceS) return { ok: false, refusal: PupRefusals.staleTimestamp };

  const libraryHeaders = { 'webhook-id': id, 'webhook-timestamp': timestamp, 'webhook-signature': signature };
  for (const secret of acceptedSecrets(config, now)) {
    const key = decodeSecret(secret);
    if (!key) continue;
    try {
      verifierAt(key, timestampS).verify(text, libraryHeaders, { jsonParse: false });
      return { ok: true, webhookId: id };
    } catch (error) {
      // Only the library's "does not verify" error means "try the next secret"; anything else is a bug.
      if (!(error instanceof WebhookVerificationError)) throw error;
    }
  }
  return invalid;
}

/**
 * The library's verifier, with its own timestamp check answered by the one already made above on
 * the caller's clock: `Webhook.verify` reads `Date.now()` itself, which would make the window
 * untestable in-process and would judge it twice on two clocks. `verifyTimestamp` is a private
 * method of standardwebhooks 1.1.1 (pinned); test/unit/core/inbound.test.ts verifies a request far
 * from the wall clock, so an upgrade that renames it fails a test instead of silently using
 * `Date.now()`.
 */
function verifierAt(key: Uint8Array, timestampS: number): Webhook {
  const webhook = new Webhook(key, { format: 'raw' });
  Object.defineProperty(webhook, 'verifyTimestamp', { value: () => new Date(timestampS * 1000) });
  return webhook;
}
