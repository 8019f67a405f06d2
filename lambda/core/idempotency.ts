/**
 * Idempotency keys (docs/contract/http.md, IDEM-1..8): a send that carries a key makes at most one
 * event per caller and key within Limits.idempotencyMemoryMs. It wraps `sendMessage`: a claimed key
 * sends with the claim's event id and is settled `done` (or released when nothing was made).
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

const PRINTABLE = /^[\x20-\x7e]+$/;
/** A Structured Field String (RFC 8941 3.3.3): in double quotes, with " and \ escaped by a backslash and nothing else escaped. */
const SF_STRING = /^"(?:[^"\\]|\\["\\])*"$/;

/** An idempotency key as the header carries it (IDEM-1: a quoted value is a Structured Field String). */
export function checkIdempotencyKey(raw: string): { ok: true; key: string } | { ok: false; error: string } {
  let key = raw;
  if (raw.length >= 2 && raw.startsWith('"') && raw.endsWith('"')) {
    if (!SF_STRING.test(raw)) {
      return { ok: false, error: 'Invalid Idempotency-Key: inside quotes, " and \\ must be escaped with a backslash, and nothing else may be.' };
    }
    key = raw.slice(1, -1).replace(/\\(["\\])/g, '$1');
  }
  if (key.length === 0) return { ok: false, error: 'Invalid Idempotency-Key: it is empty; send 1 to 255 printable ASCII characters.' };
  if (key.length > Limits.idempotencyKeyMaxChars) {
    return { ok: false, error: `Invalid Idempotency-Key: it has ${key.length} characters; the limit is ${Limits.idempotencyKeyMaxChars}.` };
  }
  if (!PRINTABLE.test(key)) return { ok: false, error: 'Invalid Idempotency-Key: only printable ASCII characters (space to ~) are allowed.' };
  return { ok: true, key };
}

/** How often a send tries to take a key that changes under it (a stale claim retaken by another request). */
const MAX_ROUNDS = 3;

/** `sendMessage`, at most once per (caller, key). A failed store throws DependencyUnavailable; a claim then lapses with its lease. */
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

  /** Best effort: unsettled, the claim stays `in_progress` until its lease ends, and a retry then reads its event. */
  const settle = async (eventId: string, outcome: 'done' | 'release'): Promise<void> => {
    try {
      await store.settleIdempotencyKey(caller, key, eventId, outcome);
    } catch (error) {
      deps.log?.warn('idempotency_key_not_settled', { sender: caller, eventId, outcome, cause: error instanceof Error ? error.name : 'unknown' });
    }
  };

  /** The claimed key's send: the event gets the id the claim names; the key is settled by what it made. */
  const makeEvent = async (eventId: string): Promise<SendOutcome> => {
    let outcome: SendOutcome;
    try {
      outcome = await sendMessage(deps, args, { ...origin, eventId });
    } catch (error) {
      // An event exists when the failure names it: the key keeps naming it, so a retry learns its status.
      const made = error instanceof DependencyUnavailable && error.eventId === eventId;
      await settle(eventId, made ? 'done' : 'release');
      throw error;
    }
    const made = outcome.kind !== 'invalid' && outcome.kind !== 'no_subscription';
    await settle(eventId, made ? 'done' : 'release');
    return outcome;
  };

  for (let round = 0; round < MAX_ROUNDS; round++) {
    const record = fresh();
    const claim = await guardDependency('storage', () => store.claimIdempotencyKey(caller, key, record, record.createdAt));
    if (claim.claimed) return makeEvent(record.eventId);
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
      if (existing.state === 'in_progress') await settle(event.eventId, 'done');
      return outcomeOfRecord(event);
    }
    if (existing.state === 'done') {
      // Its event is gone (records outlive keys, so only a store that lost it gets here).
      deps.log?.warn('idempotent_event_missing', { sender: caller, eventId: existing.eventId });
      return { kind: 'failed', eventId: existing.eventId, reason: null };
    }
    // A stale claim whose request died before it made an event: take it over, with a new event id.
    const again = fresh();
    if (await guardDependency('storage', () => store.retakeIdempotencyKey(caller, key, existing.eventId, again, again.createdAt))) {
      deps.log?.info('idempotency_key_retaken', { sender: caller, staleEventId: existing.eventId });
      return makeEvent(again.eventId);
    }
  }
  throw new Error('sendOnce: the idempotency key kept changing under concurrent requests');
}
