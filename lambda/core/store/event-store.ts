/**
 * The part of the one Store (./store.ts, whose rules hold here) that the delivery worker and the
 * reconciler reach: the SUBSCRIPTION item and the EVENT# records. `TableStore` extends it, so a
 * Lambda that builds only this class bundles only these records' meaning (the delivery bundle's budget).
 *
 * Deliberately not here: the records no worker reads, and scans on a delivery path.
 */
import type {
  EventExpectation,
  EventPatch,
  EventRecord,
  FailureReason,
  PutSubscriptionResult,
  QueuedEntry,
  SubscriptionExpectation,
  SubscriptionRecord,
} from '../../ports';
import { systemClock, type Clock } from '../../ports';
import { EventExists } from '../errors';
import type { EventStatus } from '../protocol';
import { eventUpdate, isSameEvent, newEventWrite, requeuedWrite, restoreWrite } from './events';
import { ItemKeys, QueuedIndex, isLive, newestFirst, queuedShards, recordOf, ttl } from './items';
import { holds, when, type Item, type ItemTable } from './table';

export interface TableStoreOptions {
  /** The clock of the queued index's times only (every decision uses the caller's `now`). */
  clock?: Clock;
}

export class EventStore {
  protected readonly clock: Clock;

  constructor(
    readonly table: ItemTable,
    options: TableStoreOptions = {},
  ) {
    this.clock = options.clock ?? systemClock;
  }

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
}
