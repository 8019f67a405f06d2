/**
 * The Store port (docs/contract/storage.md) on the embedded database: the same items, keys and TTL rules as the
 * DynamoDB adapter (adapters/items.ts), so that both pass one contract suite
 * (test/contract/store.contract.ts).
 *
 * - Every read judges expiry with the `now` the caller passes; an item past its expiry is absent
 *   for reads and for the conditions of writes alike, whether or not the sweep removed it yet.
 * - Every check-and-set reads and writes inside one LMDB write transaction (environment.ts
 *   `write`), so it is atomic against concurrent callers in this process and against any other
 *   process that has the environment open (the operator CLI).
 * - A write resolves only once it is committed and fsynced; writes issued together share a commit.
 *
 * Deliberately not here: the delivery jobs (jobs.ts; `putEvent` exists for the port, the runtime
 * records events through the outbox, which writes a record and its job together), the sweep's
 * schedule, and any logging (the subscription item holds the signing secret).
 */
import { Limits, type EventStatus } from '../../core/protocol';
import { EventExists } from '../../core/errors';
import type {
  AccessStore,
  DeploymentKeys,
  DeploymentRecord,
  SenderRecord,
  EventExpectation,
  EventPatch,
  EventRecord,
  InboundAnswer,
  InboundAnswerResult,
  PutSubscriptionResult,
  ReplayClaim,
  Store,
  SubscriptionExpectation,
  SubscriptionRecord,
} from '../../ports';
import { byName, ItemKeys, isLive, newestFirst, replayClaimOf, ttlOfEvent, ttlOfSubscription } from '../items';
import { getItem, putItem, recordOf, removeItem, storageKey, write, type Databases, type StoredItem } from './environment';

/** The fields a patch may set; anything else in a patch object is ignored, as on DynamoDB. */
const PATCH_FIELDS = [
  'status',
  'attempts',
  'lastError',
  'lastHttpStatus',
  'deliveredAt',
  'notBefore',
  'subscriptionId',
  'generation',
  'cancelledAt',
] as const satisfies readonly (keyof EventPatch)[];

export class EmbeddedStore implements Store, AccessStore {
  constructor(private readonly dbs: Databases) {}

  async getSubscription(now: number): Promise<SubscriptionRecord | undefined> {
    const item = getItem(this.dbs, ItemKeys.subscription);
    return item && isLive(item.expiresAt, now) ? recordOf<SubscriptionRecord>(item) : undefined;
  }

  async getStoredSubscription(): Promise<SubscriptionRecord | undefined> {
    const item = getItem(this.dbs, ItemKeys.subscription);
    return item ? recordOf<SubscriptionRecord>(item) : undefined;
  }

  putSubscription(record: SubscriptionRecord, now: number, expected: SubscriptionExpectation): Promise<PutSubscriptionResult> {
    return write(this.dbs, (): PutSubscriptionResult => {
      const stored = getItem(this.dbs, ItemKeys.subscription);
      const holder = stored ? recordOf<SubscriptionRecord>(stored) : undefined;
      if (!subscriptionExpectationHolds(holder, now, expected)) return { ok: false, holder };
      putItem(this.dbs, ItemKeys.subscription, record, ttlOfSubscription(record.expiresAt));
      return { ok: true };
    });
  }

  deleteSubscription(url: string): Promise<boolean> {
    return write(this.dbs, () => {
      const stored = getItem(this.dbs, ItemKeys.subscription);
      if (!stored || stored.url !== url) return false;
      removeItem(this.dbs, ItemKeys.subscription);
      return true;
    });
  }

  async recordDeliveryOutcome(subscriptionId: string, outcome: { deliveredAt?: number; error: SubscriptionRecord['lastError'] }): Promise<void> {
    await write(this.dbs, () => {
      const stored = getItem(this.dbs, ItemKeys.subscription);
      // Replaced or removed since the event was queued: nothing to record, and no stub is created.
      if (!stored || stored.id !== subscriptionId) return;
      const next: Record<string, unknown> = { ...recordOf<SubscriptionRecord>(stored), lastError: outcome.error };
      if (outcome.deliveredAt !== undefined) next.lastDeliveryAt = outcome.deliveredAt;
      putItem(this.dbs, ItemKeys.subscription, next, stored.ttl);
    });
  }

  async putEvent(record: EventRecord): Promise<void> {
    const written = await write(this.dbs, () => putEventIfAbsent(this.dbs, record));
    if (!written) throw new EventExists(record.eventId);
  }

  async getEvent(eventId: string, now: number): Promise<EventRecord | undefined> {
    const item = getItem(this.dbs, ItemKeys.event(eventId));
    return item && isLive(item.expiresAt, now) ? recordOf<EventRecord>(item) : undefined;
  }

  updateEvent(eventId: string, patch: EventPatch, expected?: EventExpectation): Promise<boolean> {
    return write(this.dbs, () => updateEventInTxn(this.dbs, eventId, patch, expected));
  }

  restoreEvent(record: EventRecord): Promise<boolean> {
    return write(this.dbs, () => putEventIfAbsent(this.dbs, record));
  }

  async isVerified(key: string, now: number): Promise<boolean> {
    const item = getItem(this.dbs, ItemKeys.verified(key));
    return item !== undefined && typeof item.verifiedAt === 'number' && isLive(item.verifiedAt + Limits.verificationCacheMs, now);
  }

  async markVerified(key: string, now: number): Promise<void> {
    // Unconditional: a newer verification simply restarts the 24 h window.
    await write(this.dbs, () => putItem(this.dbs, ItemKeys.verified(key), { verifiedAt: now }, Math.ceil((now + Limits.verificationCacheMs) / 1000)));
  }

  claimReplayId(id: string, now: number, token: string, request: string): Promise<ReplayClaim> {
    const pk = ItemKeys.replay(id);
    return write(this.dbs, (): ReplayClaim => {
      const existing = getItem(this.dbs, pk);
      // Held up to and including its expiresAt (the port's inclusive window), unlike other items;
      // an unsettled claim only through its lease.
      const held =
        existing &&
        typeof existing.expiresAt === 'number' &&
        now <= existing.expiresAt &&
        (typeof existing.answerStatus === 'number' || typeof existing.leaseUntil !== 'number' || now <= existing.leaseUntil);
      if (held) return replayClaimOf(existing, token, request);
      const expiresAt = now + Limits.replayMemoryMs;
      putItem(this.dbs, pk, { claimedAt: now, expiresAt, leaseUntil: now + Limits.replayLeaseMs, token, request }, Math.ceil(expiresAt / 1000));
      return { claimed: true };
    });
  }

  async settleReplayId(id: string, token: string, answer: InboundAnswer | undefined): Promise<void> {
    const pk = ItemKeys.replay(id);
    await write(this.dbs, () => {
      const existing = getItem(this.dbs, pk);
      if (!existing || existing.token !== token) return;
      if (answer) {
        const { ttl, ...fields } = existing;
        putItem(this.dbs, pk, { ...fields, answerStatus: answer.status, answerBody: answer.body }, ttl);
      } else {
        removeItem(this.dbs, pk);
      }
    });
  }

  putInboundAnswer(deliveryId: string, answer: InboundAnswer, now: number): Promise<InboundAnswerResult> {
    const pk = ItemKeys.inboundAnswer(deliveryId);
    return write(this.dbs, (): InboundAnswerResult => {
      const existing = getItem(this.dbs, pk);
      if (existing && isLive(existing.expiresAt, now)) {
        if (typeof existing.status !== 'number' || typeof existing.body !== 'string') throw new Error('stored inbound answer has no status or body');
        return { stored: false, answer: { status: existing.status, body: existing.body } };
      }
      const expiresAt = now + Limits.pupEventAnswerMs;
      putItem(this.dbs, pk, { status: answer.status, body: answer.body, storedAt: now, expiresAt }, Math.ceil(expiresAt / 1000));
      return { stored: true };
    });
  }

  async listEvents(now: number, filter: { status?: EventStatus } = {}): Promise<EventRecord[]> {
    const events: EventRecord[] = [];
    for (const { value } of eventItems(this.dbs)) {
      if (!isLive(value.expiresAt, now)) continue;
      if (filter.status !== undefined && value.status !== filter.status) continue;
      events.push(recordOf<EventRecord>(value));
    }
    return newestFirst(events);
  }

  // ---- Access (ports.AccessStore): DEPLOYMENT, SENDER#, RATE# -------------------------------------

  async getDeployment(): Promise<DeploymentRecord | undefined> {
    const item = getItem(this.dbs, ItemKeys.deployment);
    return item ? recordOf<DeploymentRecord>(item) : undefined;
  }

  createDeployment(record: DeploymentRecord): Promise<DeploymentRecord> {
    return write(this.dbs, () => {
      const stored = getItem(this.dbs, ItemKeys.deployment);
      if (stored) return recordOf<DeploymentRecord>(stored);
      putItem(this.dbs, ItemKeys.deployment, record, NEVER);
      return { ...record };
    });
  }

  setDeploymentKeys(keys: DeploymentKeys): Promise<boolean> {
    return write(this.dbs, () => {
      const stored = getItem(this.dbs, ItemKeys.deployment);
      if (!stored) return false;
      const { previousKeyHash: _h, previousKeyUntil: _u, ...kept } = recordOf<DeploymentRecord>(stored);
      putItem(this.dbs, ItemKeys.deployment, { ...kept, ...keys }, NEVER);
      return true;
    });
  }

  addSender(record: SenderRecord): Promise<boolean> {
    return write(this.dbs, () => {
      if (getItem(this.dbs, ItemKeys.sender(record.name))) return false;
      putItem(this.dbs, ItemKeys.sender(record.name), record, NEVER);
      return true;
    });
  }

  async getSender(name: string): Promise<SenderRecord | undefined> {
    const item = getItem(this.dbs, ItemKeys.sender(name));
    return item ? recordOf<SenderRecord>(item) : undefined;
  }

  async listSenders(): Promise<SenderRecord[]> {
    const prefix = storageKey(ItemKeys.sender(''));
    const senders: SenderRecord[] = [];
    for (const { value } of this.dbs.items.getRange({ start: prefix, end: `${prefix.slice(0, -1)}$` })) senders.push(recordOf<SenderRecord>(value));
    return byName(senders);
  }

  revokeSender(name: string, at: number): Promise<boolean> {
    return write(this.dbs, () => {
      const stored = getItem(this.dbs, ItemKeys.sender(name));
      if (!stored || stored.revokedAt !== undefined) return false;
      putItem(this.dbs, ItemKeys.sender(name), { ...recordOf<SenderRecord>(stored), revokedAt: at }, NEVER);
      return true;
    });
  }

  async touchSender(name: string, at: number, minIntervalMs: number): Promise<void> {
    await write(this.dbs, () => {
      const stored = getItem(this.dbs, ItemKeys.sender(name));
      if (!stored) return;
      if (typeof stored.lastUsedAt === 'number' && stored.lastUsedAt > at - minIntervalMs) return;
      putItem(this.dbs, ItemKeys.sender(name), { ...recordOf<SenderRecord>(stored), lastUsedAt: at }, NEVER);
    });
  }

  countSend(name: string, window: number, limit: number, expiresAt: number): Promise<boolean> {
    const pk = ItemKeys.rate(name, window);
    return write(this.dbs, () => {
      const stored = getItem(this.dbs, pk);
      const count = typeof stored?.count === 'number' ? stored.count : 0;
      if (count >= limit) return false;
      putItem(this.dbs, pk, { count: count + 1, expiresAt }, Math.ceil(expiresAt / 1000));
      return true;
    });
  }
  // ---- end of Access ------------------------------------------------------------------------------
}

/** The `ttl` of items that never expire (DEPLOYMENT, SENDER#): past any sweep (the year 3000). */
const NEVER = 32_503_680_000;

/** Every stored EVENT# item, expired or not, in key order (an ordered range, not a scan of the rest). */
export function eventItems(dbs: Databases): Iterable<{ key: string; value: StoredItem }> {
  const prefix = storageKey(ItemKeys.event(''));
  // '#' + 1 is '$': the end of the EVENT# range.
  return dbs.items.getRange({ start: prefix, end: `${prefix.slice(0, -1)}$` });
}

export function subscriptionExpectationHolds(stored: SubscriptionRecord | undefined, now: number, expected: SubscriptionExpectation): boolean {
  switch (expected.kind) {
    case 'absent':
      return stored === undefined;
    case 'same':
      // Live or merely expired: a refresh, or the same callback subscribing again after expiry.
      return stored !== undefined && stored.url === expected.url && stored.generation === expected.generation;
    case 'expired':
      return stored !== undefined && !isLive(stored.expiresAt, now) && stored.generation === expected.generation;
  }
}

/** Inside a write: creates the record unless a live one (at the record's own createdAt) exists. */
export function putEventIfAbsent(dbs: Databases, record: EventRecord): boolean {
  const pk = ItemKeys.event(record.eventId);
  const existing = getItem(dbs, pk);
  // The record's createdAt is the writer's "now", as in the DynamoDB adapter's condition.
  if (existing && isLive(existing.expiresAt, record.createdAt)) return false;
  putItem(dbs, pk, record, ttlOfEvent(record.expiresAt));
  return true;
}

/** Inside a write: the compare-and-set of `Store.updateEvent`. */
export function updateEventInTxn(dbs: Databases, eventId: string, patch: EventPatch, expected?: EventExpectation): boolean {
  const pk = ItemKeys.event(eventId);
  const item = getItem(dbs, pk);
  // Presence, not liveness, as on DynamoDB: callers read the record (on their own clock) before
  // they update it, and the expectation is what guards the transition.
  if (!item) return false;
  if (expected && !eventExpectationHolds(item, expected)) return false;
  const next = patched(recordOf<Record<string, unknown>>(item), patch);
  if (!next) return false;
  putItem(dbs, pk, next, item.ttl);
  return true;
}

export function eventExpectationHolds(item: Record<string, unknown>, expected: EventExpectation): boolean {
  const statuses: readonly unknown[] = typeof expected.status === 'string' ? [expected.status] : expected.status;
  if (!statuses.includes(item.status)) return false;
  if (expected.notBefore !== undefined && (item.notBefore ?? null) !== expected.notBefore) return false;
  return expected.attempts === undefined || item.attempts === expected.attempts;
}

/** The record with the patch applied, or undefined when the patch sets nothing (as on DynamoDB). */
export function patched(record: Record<string, unknown>, patch: EventPatch): Record<string, unknown> | undefined {
  const next = { ...record };
  let changed = false;
  for (const field of PATCH_FIELDS) {
    const value = patch[field];
    if (value === undefined) continue;
    next[field] = value;
    changed = true;
  }
  if (patch.body === null) {
    delete next.body;
    changed = true;
  } else if (typeof patch.body === 'string') {
    next.body = patch.body;
    changed = true;
  }
  if (patch.appendLog !== undefined) {
    next.log = [...(Array.isArray(next.log) ? (next.log as unknown[]) : []), patch.appendLog];
    changed = true;
  }
  return changed ? next : undefined;
}
