/**
 * The one Store (docs/contract/storage.md): every record's meaning, written once over the item
 * table port (./table.ts) that DynamoDB, the embedded database and the tests' Map implement.
 *
 * - Every read treats an item past its own expiry (expiresAt, or verifiedAt + 24 h) as absent,
 *   and so does every condition: the backends' TTL sweeps are late (DynamoDB's by days).
 * - Every check-and-set is one conditional write whose loser learns what is stored from that same
 *   write (ALL_OLD), never from a read followed by a write.
 * - The subscription is one item: a subscribe is one conditional put on what the subscribe read
 *   (absent; this URL with this generation; another URL's, expired), so there is one subscriber.
 *
 * When the SUBSCRIPTION item counts as live (epoch ms on the caller's clock `now`):
 *
 *   createdAt / refreshedAt      expiresAt                  ttl * 1000 = expiresAt + 1 day
 *   |---------- live ------------|---- stored, expired -----|---- the sweep may delete it
 *   live: now < expiresAt (at now == expiresAt it is already expired); expired: reads say absent
 *   and a put of the right expectation overwrites it, whether or not the sweep removed it yet.
 *
 * Deliberately not here: retries, timeouts and logging (the subscription item holds the signing
 * secret: nothing here ever prints an item), and scans on any request or delivery path: every
 * access there is by key; `listEvents` and `listSenders` (a prefix query) are operator-only.
 */
import type {
  AccessStore,
  DeploymentKeys,
  DeploymentRecord,
  EventExpectation,
  EventPatch,
  EventRecord,
  FailureReason,
  IdempotencyClaim,
  IdempotencyRecord,
  IdempotencyStore,
  InboundAnswer,
  InboundAnswerResult,
  InboxStore,
  PendingPosition,
  PutSubscriptionResult,
  QueuedEntry,
  ReplayClaim,
  SenderRecord,
  Store,
  SubscriptionExpectation,
  SubscriptionRecord,
} from '../../ports';
import { systemClock, type Clock } from '../../ports';
import { EventExists } from '../errors';
import { EventStatus, Limits } from '../protocol';
import { eventUpdate, isPending, isSameEvent, newEventWrite, requeuedWrite, restoreWrite } from './events';
import { ItemKeys, PendingIndex, QueuedIndex, isLive, newestFirst, pendingKeyOf, queuedShards, recordOf, ttl } from './items';
import { holds, when, type Item, type ItemTable, type Update } from './table';

export interface TableStoreOptions {
  /** The clock of the queued index's times only (every decision uses the caller's `now`). */
  clock?: Clock;
}

export class TableStore implements Store, AccessStore, IdempotencyStore, InboxStore {
  protected readonly clock: Clock;

  constructor(
    readonly table: ItemTable,
    options: TableStoreOptions = {},
  ) {
    this.clock = options.clock ?? systemClock;
  }

  // ---- the subscription ----------------------------------------------------------------------

  async getSubscription(now: number): Promise<SubscriptionRecord | undefined> {
    const item = await this.table.get(ItemKeys.subscription);
    return item && isLive(item.expiresAt, now) ? recordOf<SubscriptionRecord>(item) : undefined;
  }

  async getStoredSubscription(): Promise<SubscriptionRecord | undefined> {
    const item = await this.table.get(ItemKeys.subscription);
    return item ? recordOf<SubscriptionRecord>(item) : undefined;
  }

  async putSubscription(record: SubscriptionRecord, now: number, expected: SubscriptionExpectation): Promise<PutSubscriptionResult> {
    const generationIs = (generation: string | undefined) => (generation === undefined ? when.lacks('generation') : when.eq('generation', generation));
    const condition =
      expected.kind === 'absent'
        ? when.absent()
        : expected.kind === 'same'
          ? when.and(when.eq('url', expected.url), generationIs(expected.generation))
          : // `le`: a subscription is expired at now == expiresAt, for reads and this condition alike.
            when.and(when.le('expiresAt', now), generationIs(expected.generation));
    const result = await this.table.put(ItemKeys.subscription, { ...record, ttl: ttl.subscription(record.expiresAt) }, condition);
    // ALL_OLD: what is stored; nothing when the item is gone (a same-URL put after a delete).
    return result.ok ? { ok: true } : { ok: false, holder: result.old ? recordOf<SubscriptionRecord>(result.old) : undefined };
  }

  async deleteSubscription(url: string): Promise<boolean> {
    return (await this.table.delete(ItemKeys.subscription, when.eq('url', url))).ok;
  }

  async recordDeliveryOutcome(subscriptionId: string, outcome: { deliveredAt?: number; error: FailureReason | null }): Promise<void> {
    // Replaced or removed since the event was queued: nothing to record, and no stub is created.
    const set: Item = { lastError: outcome.error, lastDeliveryAt: outcome.deliveredAt };
    await this.table.update(ItemKeys.subscription, { set }, when.eq('id', subscriptionId));
  }

  // ---- events --------------------------------------------------------------------------------

  async putEvent(record: EventRecord): Promise<void> {
    const write = newEventWrite(record);
    const result = await this.table.put(write.key, write.item, write.condition);
    // A retry of this very put (the SDK's, after an answer was lost) meets its own first try.
    if (!result.ok && !isSameEvent(result.old, record)) throw new EventExists(record.eventId);
  }

  async getEvent(eventId: string, now: number): Promise<EventRecord | undefined> {
    const item = await this.table.get(ItemKeys.event(eventId));
    return item && isLive(item.expiresAt, now) ? recordOf<EventRecord>(item) : undefined;
  }

  async updateEvent(eventId: string, patch: EventPatch, expected?: EventExpectation): Promise<boolean> {
    const planned = eventUpdate(eventId, patch, expected, this.clock.now());
    if (!planned) return false;
    const result = await this.table.update(planned.key, planned.update, planned.condition);
    if (result.ok) return true;
    // Failed only because the event is pending in the inbox: the same update, keeping its bytes.
    if (patch.body !== null || !holds(result.old, planned.guard)) return false;
    const keeping = eventUpdate(eventId, patch, expected, this.clock.now(), true);
    if (!keeping) return true;
    return (await this.table.update(keeping.key, keeping.update, keeping.condition)).ok;
  }

  async restoreEvent(record: EventRecord): Promise<boolean> {
    const write = restoreWrite(record, this.clock.now());
    return (await this.table.update(write.key, write.update, write.condition)).ok;
  }

  async listEvents(now: number, filter: { status?: EventStatus } = {}): Promise<EventRecord[]> {
    const events: EventRecord[] = [];
    for (const { item } of await this.table.queryPrefix(ItemKeys.event(''))) {
      if (!isLive(item.expiresAt, now) || (filter.status !== undefined && item.status !== filter.status)) continue;
      events.push(recordOf<EventRecord>(item));
    }
    return newestFirst(events);
  }

  async listQueuedBefore(before: number, limit: number): Promise<QueuedEntry[]> {
    const found: QueuedEntry[] = [];
    // One query per shard, oldest first; each stops at `limit`, so the merge below is exact.
    for (const shard of queuedShards()) {
      for (const { key, item } of await this.table.queryIndex(QueuedIndex, shard, { before, limit })) {
        const since = item[QueuedIndex.sort];
        if (key.startsWith(ItemKeys.event('')) && typeof since === 'number') found.push({ eventId: key.slice(ItemKeys.event('').length), queuedSince: since });
      }
    }
    return found.sort((a, b) => a.queuedSince - b.queuedSince).slice(0, limit);
  }

  async markRequeued(eventId: string, attempts: number, now: number, notBefore: number | null): Promise<boolean> {
    const write = requeuedWrite(eventId, attempts, now, notBefore);
    return (await this.table.update(write.key, write.update, write.condition)).ok;
  }

  // ---- the inbox (ports.InboxStore) ------------------------------------------------------------

  async listPending(now: number, limit: number, after?: PendingPosition): Promise<EventRecord[]> {
    const pending: EventRecord[] = [];
    let from = after ? pendingKeyOf(after.createdAt, after.eventId) : undefined;
    // The index may still hold expired items (until the sweep) and, on DynamoDB, just-acknowledged ones.
    for (;;) {
      const want = limit - pending.length;
      const page = await this.table.queryIndex(PendingIndex, PendingIndex.shard, { ...(from !== undefined ? { after: from } : {}), limit: want });
      for (const { item } of page) {
        const record = recordOf<EventRecord>(item);
        if (isLive(record.expiresAt, now) && isPending(record)) pending.push(record);
      }
      if (pending.length >= limit || page.length < want) return pending;
      from = page[page.length - 1]!.item[PendingIndex.sort] as string;
    }
  }

  async acknowledgeEvent(eventId: string, at: number, now: number): Promise<'acknowledged' | 'already' | 'unknown'> {
    const key = ItemKeys.event(eventId);
    const open = when.and(when.gt('expiresAt', now), when.lacks('acknowledgedAt'));
    const leave = [PendingIndex.partition, PendingIndex.sort];
    // Its bytes go with the acknowledgement unless a delivery still needs them (it is queued).
    const notQueued = Object.values(EventStatus).filter((status) => status !== EventStatus.queued);
    let result = await this.table.update(key, { set: { acknowledgedAt: at }, remove: [...leave, 'body'] }, when.and(open, when.in('status', notQueued)));
    for (let tries = 0; !result.ok && tries < 3; tries++) {
      const old = result.old;
      if (!old || !isLive(old.expiresAt, now)) return 'unknown';
      if (old.acknowledgedAt !== undefined) return 'already';
      const status = old.status;
      const update: Update = { set: { acknowledgedAt: at }, remove: status === EventStatus.queued ? leave : [...leave, 'body'] };
      result = await this.table.update(key, update, when.and(open, when.eq('status', status)));
    }
    if (!result.ok) throw new Error(`event ${eventId} kept changing while it was acknowledged`);
    return 'acknowledged';
  }

  // ---- the verification cache, replay claims, inbound answers ----------------------------------

  async isVerified(key: string, now: number): Promise<boolean> {
    const item = await this.table.get(ItemKeys.verified(key));
    return item !== undefined && typeof item.verifiedAt === 'number' && isLive(item.verifiedAt + Limits.verificationCacheMs, now);
  }

  async markVerified(key: string, now: number): Promise<void> {
    // Unconditional: a newer verification simply restarts the 24 h window.
    await this.table.put(ItemKeys.verified(key), { verifiedAt: now, ttl: ttl.of(now + Limits.verificationCacheMs) });
  }

  async claimReplayId(id: string, now: number, token: string, request: string): Promise<ReplayClaim> {
    const expiresAt = now + Limits.replayMemoryMs;
    // TTL a second later than the claim's end, so no sweep removes a claim still in force.
    const item = { claimedAt: now, expiresAt, leaseUntil: now + Limits.replayLeaseMs, token, request, ttl: ttl.of(expiresAt) + 1 };
    // `lt`: a claim holds through its expiresAt, the last instant the timestamp window accepts; an
    // unsettled one (no answer) only through its lease.
    const free = when.or(when.absent(), when.lt('expiresAt', now), when.and(when.lacks('answerStatus'), when.lt('leaseUntil', now)));
    const result = await this.table.put(ItemKeys.replay(id), item, free);
    if (result.ok) return { claimed: true };
    const stored = result.old;
    // Carrying this token, it is this request's own (a write applied whose answer was lost).
    if (stored?.token === token) return { claimed: true };
    if (stored?.request !== request) return { claimed: false, sameRequest: false };
    if (typeof stored.answerStatus === 'number' && typeof stored.answerBody === 'string') {
      return { claimed: false, sameRequest: true, answer: { status: stored.answerStatus, body: stored.answerBody } };
    }
    return { claimed: false, sameRequest: true };
  }

  async settleReplayId(id: string, token: string, answer: InboundAnswer | undefined): Promise<void> {
    const mine = when.eq('token', token);
    if (answer) await this.table.update(ItemKeys.replay(id), { set: { answerStatus: answer.status, answerBody: answer.body } }, mine);
    else await this.table.delete(ItemKeys.replay(id), mine);
  }

  async putInboundAnswer(deliveryId: string, answer: InboundAnswer, now: number): Promise<InboundAnswerResult> {
    const expiresAt = now + Limits.pupEventAnswerMs;
    const item = { status: answer.status, body: answer.body, storedAt: now, expiresAt, ttl: ttl.of(expiresAt) };
    const result = await this.table.put(ItemKeys.inboundAnswer(deliveryId), item, when.or(when.absent(), when.le('expiresAt', now)));
    if (result.ok) return { stored: true };
    const stored = result.old;
    if (typeof stored?.status !== 'number' || typeof stored.body !== 'string') throw new Error('stored inbound answer has no status or body');
    return { stored: false, answer: { status: stored.status, body: stored.body } };
  }

  // ---- idempotency keys (ports.IdempotencyStore) ------------------------------------------------

  async claimIdempotencyKey(caller: string, key: string, record: IdempotencyRecord, now: number): Promise<IdempotencyClaim> {
    const item = { ...record, ttl: ttl.of(record.expiresAt) };
    const result = await this.table.put(ItemKeys.idempotency(caller, key), item, when.or(when.absent(), when.le('expiresAt', now)));
    if (result.ok) return { claimed: true };
    if (!result.old) throw new Error('conditional put of an idempotency key failed, yet none is stored');
    return { claimed: false, existing: recordOf<IdempotencyRecord>(result.old) };
  }

  async settleIdempotencyKey(caller: string, key: string, eventId: string, outcome: 'done' | 'release'): Promise<void> {
    const pk = ItemKeys.idempotency(caller, key);
    if (outcome === 'release') await this.table.delete(pk, when.eq('eventId', eventId));
    else await this.table.update(pk, { set: { state: 'done' }, remove: ['leaseUntil'] }, when.eq('eventId', eventId));
  }

  async retakeIdempotencyKey(caller: string, key: string, staleEventId: string, record: IdempotencyRecord, now: number): Promise<boolean> {
    // Over at its leaseUntil, as sendOnce judges it (core/idempotency.ts: running while now < leaseUntil).
    const stale = when.and(when.eq('eventId', staleEventId), when.eq('state', 'in_progress'), when.le('leaseUntil', now));
    return (await this.table.put(ItemKeys.idempotency(caller, key), { ...record, ttl: ttl.of(record.expiresAt) }, stale)).ok;
  }

  // ---- access (ports.AccessStore): DEPLOYMENT, SENDER#, RATE# -----------------------------------
  // DEPLOYMENT and SENDER# items carry no `ttl`: they never expire.

  async getDeployment(): Promise<DeploymentRecord | undefined> {
    const item = await this.table.get(ItemKeys.deployment);
    return item ? recordOf<DeploymentRecord>(item) : undefined;
  }

  async createDeployment(record: DeploymentRecord): Promise<DeploymentRecord> {
    const result = await this.table.put(ItemKeys.deployment, { ...record }, when.absent());
    if (result.ok) return { ...record };
    // The loser of two first requests learns the winner's principal from this failed write.
    if (result.old) return recordOf<DeploymentRecord>(result.old);
    const stored = await this.getDeployment();
    if (!stored) throw new Error('conditional put of the deployment failed, yet none is stored');
    return stored;
  }

  async setDeploymentKeys(keys: DeploymentKeys): Promise<boolean> {
    const overlap = keys.previousKeyHash !== undefined && keys.previousKeyUntil !== undefined;
    const update: Update = overlap
      ? { set: { keyHash: keys.keyHash, rotatedAt: keys.rotatedAt, previousKeyHash: keys.previousKeyHash, previousKeyUntil: keys.previousKeyUntil } }
      : { set: { keyHash: keys.keyHash, rotatedAt: keys.rotatedAt }, remove: ['previousKeyHash', 'previousKeyUntil'] };
    return (await this.table.update(ItemKeys.deployment, update, when.exists())).ok;
  }

  async addSender(record: SenderRecord): Promise<boolean> {
    return (await this.table.put(ItemKeys.sender(record.name), { ...record }, when.absent())).ok;
  }

  async getSender(name: string): Promise<SenderRecord | undefined> {
    const item = await this.table.get(ItemKeys.sender(name));
    return item ? recordOf<SenderRecord>(item) : undefined;
  }

  async listSenders(): Promise<SenderRecord[]> {
    const senders = (await this.table.queryPrefix(ItemKeys.sender(''))).map(({ item }) => recordOf<SenderRecord>(item));
    return senders.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  }

  async revokeSender(name: string, at: number): Promise<boolean> {
    return (await this.table.update(ItemKeys.sender(name), { set: { revokedAt: at } }, when.and(when.exists(), when.lacks('revokedAt')))).ok;
  }

  async touchSender(name: string, at: number, minIntervalMs: number): Promise<void> {
    const due = when.or(when.lacks('lastUsedAt'), when.le('lastUsedAt', at - minIntervalMs));
    await this.table.update(ItemKeys.sender(name), { set: { lastUsedAt: at } }, when.and(when.exists(), due));
  }

  async countSend(name: string, window: number, limit: number, expiresAt: number): Promise<boolean> {
    // One conditional update per send: the add creates the counter at 1, the condition stops it at the limit.
    const update: Update = { add: { count: 1 }, set: { expiresAt, ttl: ttl.of(expiresAt) } };
    return (await this.table.update(ItemKeys.rate(name, window), update, when.or(when.lacks('count'), when.lt('count', limit)))).ok;
  }
}
