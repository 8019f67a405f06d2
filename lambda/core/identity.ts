/**
 * Identity: canonical JSON, the hash a principal is made from, subscription ids, event ids and the
 * random values the challenge needs. Ids are pure functions of their inputs so they are stable
 * across restarts and deploys; the principal itself is the deployment's, kept in its DEPLOYMENT
 * item (core/access.ts), so a key rotation changes no subscription id.
 *
 * Deliberately not here: storage of any id, and comparison of secrets (see signing.ts).
 */
import { createHash, randomBytes, randomFillSync } from 'node:crypto';
import { EVENT_ID_PREFIX, SUBSCRIPTION_ID_PREFIX, VERIFICATION_ID_PREFIX } from './protocol';

/**
 * RFC 8785 style canonical JSON: object keys sorted by UTF-16 code units, no whitespace, numbers
 * and strings as ECMAScript serializes them (which is what RFC 8785 specifies).
 */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== 'object') {
    if (typeof value === 'number' && !Number.isFinite(value)) throw new Error('canonicalJson: non-finite number');
    if (value === undefined || typeof value === 'function' || typeof value === 'symbol' || typeof value === 'bigint') {
      throw new Error(`canonicalJson: ${typeof value} is not JSON`);
    }
    return JSON.stringify(value);
  }
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  const entries = Object.keys(value)
    .filter((key) => (value as Record<string, unknown>)[key] !== undefined)
    .sort()
    .map((key) => `${JSON.stringify(key)}:${canonicalJson((value as Record<string, unknown>)[key])}`);
  return `{${entries.join(',')}}`;
}

export function sha256Hex(input: string | Uint8Array): string {
  return createHash('sha256').update(input).digest('hex');
}

/** The principal a deployment gets when its DEPLOYMENT item is created: what every id was made from before it existed. */
export function principalOf(apiKey: string): string {
  return sha256Hex(apiKey);
}

export function subscriptionIdOf(principal: string, url: string, name: string, args: Record<string, unknown>): string {
  return SUBSCRIPTION_ID_PREFIX + sha256Hex(canonicalJson([principal, url, name, args])).slice(0, 32);
}

/** The verification cache key of (principal, url, secret): a new secret is a new key, challenged before it signs anything. */
export function verificationKeyOf(principal: string, url: string, secret: string): string {
  return sha256Hex(canonicalJson([principal, url, sha256Hex(secret)]));
}

export function newGeneration(): string {
  return randomBytes(8).toString('hex');
}

/** An event id as newEventId makes them. */
export const EVENT_ID_PATTERN = new RegExp(`^${EVENT_ID_PREFIX}[0-9a-f]{32}$`);

/**
 * Random bytes drawn a page at a time, each byte used once: a `randomBytes` call per event id was
 * 1.5% of the local server's busy time under load (node's randomUUID keeps a cache the same way).
 */
const pool = Buffer.alloc(4096);
let used = pool.length;

export function newEventId(): string {
  if (used + 16 > pool.length) {
    randomFillSync(pool);
    used = 0;
  }
  used += 16;
  return EVENT_ID_PREFIX + pool.toString('hex', used - 16, used);
}

export function newVerificationMessageId(): string {
  return VERIFICATION_ID_PREFIX + randomBytes(24).toString('base64url');
}

export function newChallengeNonce(): string {
  return randomBytes(32).toString('base64url');
}
