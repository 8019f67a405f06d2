/**
 * Idempotency keys (docs/contract/http.md, idempotency keys): a send that carries a key makes at
 * most one event per caller and key within Limits.idempotencyMemoryMs, whatever number of times it
 * is sent. It wraps `sendMessage` and nothing else:
 *
 *   claim(key, new event id, hash of the message, in_progress until now + lease)
 *     ├─ claimed ──> sendMessage with that event id ──> an event exists: settle `done`
 *     │                                             └─> nothing made (400, 409, 503): release the key
 *     └─ held by another request:
 *          other message ─────────────────> key_reused (422)
 *          done ──────────────────────────> the event's current status, as the first request's answer
 *          in_progress, lease running ────> in_progress (409, Retry-After)
 *          in_progress, lease over: its event exists ──> its current status (the first request died after making it)
 *                                   no event ──────────> retaken: this request makes the event
 *
 * The key is scoped to the caller (`connector`, `pup` or a sender's name): two callers' same key
 * are two keys. The message is compared by a hash of its trimmed text, so a retry whose JSON
 * differs only in spacing is the same message.
 *
 * Deliberately not here: reading the header or pup's callId (the surfaces), the HTTP and tool
 * answers (core/answers.ts), and how the store makes its claim atomic (the IdempotencyStore port).
 */
import type { IdempotencyRecord, IdempotencyStore } from '../ports';
import { DependencyUnavailable, guardDependency } from './errors';
import { newEventId, sha256Hex } from './identity';
import { sendMessage, outcomeOfRecord, type MessageDeps, type SendOrigin, type SendOutcome } from './messages';
import { IDEMPOTENCY_LEASE_MS, Limits } from './protocol';
import { checkMessage } from './validation';

export interface IdempotencyDeps extends MessageDeps {
  /** Where keys are claimed. Absent (a store without it): a key is not honoured, and a warning says so. */
  idempotency?: IdempotencyStore;
}

/** What a send with a key came to: a send's outcome (the first one's, for a repeat), or why the key stopped it. */
export type IdempotentOutcome =
  | SendOutcome
  | { kind: 'invalid_key'; error: string }
  | { kind: 'key_reused' }
  | { kind: 'in_progress'; retryAfterSeconds: number };

export type KeyCheck = { ok: true; key: string } | { ok: false; error: string };

const PRINTABLE = /^[\x20-\x7e]+$/;

/**
 * An idempotency key as the header carries it: 1 to 255 printable ASCII characters (0x20..0x7E,
 * the characters of a Structured Field String, which the IETF draft makes the header). A value in
 * double quotes is read as that Structured Field String (`\"` and `\\` escapes), so `"abc"` and
 * `abc` are the same key; anything else is the key as written.
 */
export function checkIdempotencyKey(raw: string): KeyCheck {
  let key = raw;
  if (raw.length >= 2 && raw.startsWith('"') && raw.endsWith('"')) {
    const unquoted = unquote(raw.slice(1, -1));
    if (unquoted === undefined) {
      return { ok: false, error: 'Invalid Idempotency-Key: inside quotes, " and \\ must be escaped with a backslash, and nothing else may be.' };
    }
    key = unquoted;
  }
  if (key.length === 0) return { ok: false, error: 'Invalid Idempotency-Key: it is empty; send 1 to 255 printable ASCII characters.' };
  if (key.length > Limits.idempotencyKeyMaxChars) {
    return { ok: false, error: `Invalid Idempotency-Key: it has ${key.length} characters; the limit is ${Limits.idempotencyKeyMaxChars}.` };
  }
  if (!PRINTABLE.test(key)) return { ok: false, error: 'Invalid Idempotency-Key: only printable ASCII characters (space to ~) are allowed.' };
  return { ok: true, key };
}

/** The content of a Structured Field String (RFC 8941 3.3.3) between its quotes; undefined when malformed. */
function unquote(inner: string): string | undefined {
  let out = '';
  for (let i = 0; i < inner.length; i++) {
    const c = inner[i]!;
    if (c === '"') return undefined;
    if (c === '\\') {
      const next = inner[++i];
      if (next !== '"' && next !== '\\') return undefined;
      out += next;
    } else out += c;
  }
  return out;
}

/** How often a send tries to take a key that changes under it (a stale claim retaken by another request). */
const MAX_ROUNDS = 3;

/**
 * `sendMessage`, at most once per (caller, key). Without a key it is `sendMessage` itself. A failed
 * store throws DependencyUnavailable, as `sendMessage` does: nothing was claimed, or the claim
 * lapses with its lease.
 */
export async function sendOnce(
  deps: IdempotencyDeps,
  args: unknown,
  origin: SendOrigin & { sender: string },
  rawKey: string | undefined,
): Promise<IdempotentOutcome> {
  if (rawKey === undefined) return sendMessage(deps, args, origin);
  const keyCheck = checkIdempotencyKey(rawKey);
  if (!keyCheck.ok) return { kind: 'invalid_key', error: keyCheck.error };
  const store = deps.idempotency;
  if (!store) {
    deps.log?.warn('idempotency_unavailable', { sender: origin.sender });
    return sendMessage(deps, args, origin);
  }
  // An invalid message makes nothing and claims nothing: its retry is refused the same way.
  const checked = checkMessage(args);
  if (!checked.ok) return { kind: 'invalid', error: checked.error };
  const caller = origin.sender;
  const key = keyCheck.key;
  const messageHash = sha256Hex(checked.message);

  const fresh = (): IdempotencyRecord => {
    const now = deps.clock.now();
    const expiresAt = now + Limits.idempotencyMemoryMs;
    return { eventId: newEventId(), messageHash, state: 'in_progress', createdAt: now, expiresAt, leaseUntil: now + IDEMPOTENCY_LEASE_MS };
  };

  for (let round = 0; round < MAX_ROUNDS; round++) {
    const record = fresh();
    const claim = await guardDependency('storage', () => store.claimIdempotencyKey(caller, key, record, record.createdAt));
    if (claim.claimed) return makeEvent(deps, store, args, origin, key, record.eventId);
    const existing = claim.existing;
    if (existing.messageHash !== messageHash) return { kind: 'key_reused' };
    const now = deps.clock.now();
    if (existing.state === 'in_progress' && existing.leaseUntil !== undefined && now < existing.leaseUntil) {
      const seconds = Math.max(1, Math.ceil((existing.leaseUntil - now) / 1000));
      return { kind: 'in_progress', retryAfterSeconds: Math.min(seconds, Math.ceil(Limits.requestMs / 1000)) };
    }
    const event = await guardDependency('storage', () => deps.store.getEvent(existing.eventId, now));
    if (event) {
      deps.log?.info('idempotent_repeat', { sender: caller, eventId: event.eventId });
      // A first request that died after making its event never said `done`: say it now (best effort).
      if (existing.state === 'in_progress') await settle(deps, store, caller, key, event.eventId, 'done');
      return outcomeOfRecord(event);
    }
    if (existing.state === 'done') {
      // Its event is gone (records outlive keys, so only a store that lost it gets here): there is
      // nothing to report but that it ended without a delivery.
      deps.log?.warn('idempotent_event_missing', { sender: caller, eventId: existing.eventId });
      return { kind: 'failed', eventId: existing.eventId, reason: null };
    }
    // A stale claim whose request died before it made an event: take it over, with a new event id.
    const again = fresh();
    if (await guardDependency('storage', () => store.retakeIdempotencyKey(caller, key, existing.eventId, again, again.createdAt))) {
      deps.log?.info('idempotency_key_retaken', { sender: caller, staleEventId: existing.eventId });
      return makeEvent(deps, store, args, origin, key, again.eventId);
    }
  }
  throw new Error('sendOnce: the idempotency key kept changing under concurrent requests');
}

/** The claimed key's send: the event gets the id the claim names; the key is settled by what it made. */
async function makeEvent(
  deps: IdempotencyDeps,
  store: IdempotencyStore,
  args: unknown,
  origin: SendOrigin & { sender: string },
  key: string,
  eventId: string,
): Promise<SendOutcome> {
  let outcome: SendOutcome;
  try {
    outcome = await sendMessage(deps, args, { ...origin, eventId });
  } catch (error) {
    // An event exists when the failure names it (its record was written, its job was not): the key
    // keeps naming it, so a retry learns its status instead of making a second one.
    const made = error instanceof DependencyUnavailable && error.eventId === eventId;
    await settle(deps, store, origin.sender, key, eventId, made ? 'done' : 'release');
    throw error;
  }
  const made = outcome.kind !== 'invalid' && outcome.kind !== 'no_subscription';
  await settle(deps, store, origin.sender, key, eventId, made ? 'done' : 'release');
  return outcome;
}

/**
 * Best effort: the answer stands whether or not this write lands. Unsettled, the claim stays
 * `in_progress` until its lease ends; a retry then reads its event and answers it, or retakes the
 * key when there is none.
 */
async function settle(
  deps: IdempotencyDeps,
  store: IdempotencyStore,
  caller: string,
  key: string,
  eventId: string,
  outcome: 'done' | 'release',
): Promise<void> {
  try {
    await store.settleIdempotencyKey(caller, key, eventId, outcome);
  } catch (error) {
    deps.log?.warn('idempotency_key_not_settled', { sender: caller, eventId, outcome, cause: error instanceof Error ? error.name : 'unknown' });
  }
}
