/**
 * The embedded store for the local runtime: every item in memory, persisted to
 * `<state dir>/store.json` with atomic replace (write a temp file, fsync, rename). Operations
 * run to completion on the event loop before their write starts, which makes each conditional
 * check-and-set atomic; concurrent writes are grouped into one file write (group commit), and an
 * operation resolves only once a write that includes it is on disk.
 *
 * Item shapes and conditions mirror the DynamoDB adapter (SPEC 5), so both pass one contract
 * suite. Expired items count as absent on every read and in every condition, and are swept when
 * the file is written.
 *
 * Deliberately not here: sharing a state directory between processes (one runtime per directory),
 * and durability against power loss beyond what fsync gives.
 */
import { mkdir, open, readFile, rename } from 'node:fs/promises';
import { join } from 'node:path';
import type { EventExpectation, EventPatch, EventRecord, InboundAnswer, InboundAnswerResult, PutSubscriptionResult, Store, SubscriptionRecord } from '../ports';
import { Limits, type EventStatus } from '../core/protocol';
import { ItemKeys, isLive, newestFirst, ttlOfEvent, ttlOfSubscription } from './items';

type Item = Record<string, unknown> & { pk: string; ttl: number };

export class FileStore implements Store {
  private readonly items = new Map<string, Item>();
  private scheduled: Promise<void> | undefined;
  private chain: Promise<void> = Promise.resolve();
  private tmpCounter = 0;

  private constructor(private readonly file: string) {}

  static async open(stateDir: string): Promise<FileStore> {
    await mkdir(stateDir, { recursive: true, mode: 0o700 });
    const store = new FileStore(join(stateDir, 'store.json'));
    let text: string | undefined;
    try {
      text = await readFile(store.file, 'utf8');
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    }
    if (text !== undefined) {
      const parsed = JSON.parse(text) as { items?: Item[] };
      for (const item of parsed.items ?? []) store.items.set(item.pk, item);
    }
    return store;
  }

  async getSubscription(now: number): Promise<SubscriptionRecord | undefined> {
    const item = this.items.get(ItemKeys.subscription);
    return item && isLive(item.expiresAt, now) ? fromItem<SubscriptionRecord>(item) : undefined;
  }

  async putSubscription(record: SubscriptionRecord, now: number): Promise<PutSubscriptionResult> {
    const existing = this.items.get(ItemKeys.subscription);
    if (existing && isLive(existing.expiresAt, now) && existing.url !== record.url) {
      return { ok: false, holder: fromItem<SubscriptionRecord>(existing) };
    }
    this.items.set(ItemKeys.subscription, { ...stripUndefined(record), pk: ItemKeys.subscription, ttl: ttlOfSubscription(record.expiresAt) });
    await this.persist();
    return { ok: true };
  }

  async deleteSubscription(url: string): Promise<boolean> {
    const existing = this.items.get(ItemKeys.subscription);
    if (!existing || existing.url !== url) return false;
    this.items.delete(ItemKeys.subscription);
    await this.persist();
    return true;
  }

  async recordDeliveryOutcome(subscriptionId: string, outcome: { deliveredAt?: number; error: SubscriptionRecord['lastError'] }): Promise<void> {
    const existing = this.items.get(ItemKeys.subscription);
    if (!existing || existing.id !== subscriptionId) return;
    existing.lastError = outcome.error;
    if (outcome.deliveredAt !== undefined) existing.lastDeliveryAt = outcome.deliveredAt;
    await this.persist();
  }

  async putEvent(record: EventRecord): Promise<void> {
    const pk = ItemKeys.event(record.eventId);
    const existing = this.items.get(pk);
    // The record's createdAt is the caller's "now" (as in the DynamoDB adapter's condition): the
    // wall clock here would disagree with every other decision, which all use the caller's clock.
    if (existing && isLive(existing.expiresAt, record.createdAt)) throw new Error(`event ${record.eventId} already exists`);
    this.items.set(pk, { ...stripUndefined(record), pk, ttl: ttlOfEvent(record.expiresAt) });
    await this.persist();
  }

  async getEvent(eventId: string, now: number): Promise<EventRecord | undefined> {
    const item = this.items.get(ItemKeys.event(eventId));
    return item && isLive(item.expiresAt, now) ? fromItem<EventRecord>(item) : undefined;
  }

  async updateEvent(eventId: string, patch: EventPatch, expected?: EventExpectation): Promise<boolean> {
    const item = this.items.get(ItemKeys.event(eventId));
    // Presence, not liveness, as in the DynamoDB adapter: callers read the record (with their own
    // clock) before they update it, and the expectation is what guards the transition.
    if (!item) return false;
    if (expected && (item.status !== expected.status || (expected.attempts !== undefined && item.attempts !== expected.attempts))) return false;
    Object.assign(item, stripUndefined(patch));
    await this.persist();
    return true;
  }

  async restoreEvent(record: EventRecord): Promise<boolean> {
    const pk = ItemKeys.event(record.eventId);
    const existing = this.items.get(pk);
    if (existing && isLive(existing.expiresAt, record.createdAt)) return false;
    this.items.set(pk, { ...stripUndefined(record), pk, ttl: ttlOfEvent(record.expiresAt) });
    await this.persist();
    return true;
  }

  async isVerified(key: string, now: number): Promise<boolean> {
    const item = this.items.get(ItemKeys.verified(key));
    return item !== undefined && isLive((item.verifiedAt as number) + Limits.verificationCacheMs, now);
  }

  async markVerified(key: string, now: number): Promise<void> {
    const pk = ItemKeys.verified(key);
    this.items.set(pk, { pk, verifiedAt: now, ttl: Math.ceil((now + Limits.verificationCacheMs) / 1000) });
    await this.persist();
  }

  async claimReplayId(id: string, now: number): Promise<boolean> {
    const pk = ItemKeys.replay(id);
    const existing = this.items.get(pk);
    if (existing && isLive(existing.expiresAt, now)) return false;
    const expiresAt = now + Limits.replayMemoryMs;
    this.items.set(pk, { pk, claimedAt: now, expiresAt, ttl: Math.ceil(expiresAt / 1000) });
    await this.persist();
    return true;
  }

  async putInboundAnswer(deliveryId: string, answer: InboundAnswer, now: number): Promise<InboundAnswerResult> {
    const pk = ItemKeys.inboundAnswer(deliveryId);
    const existing = this.items.get(pk);
    if (existing && isLive(existing.expiresAt, now)) return { stored: false, answer: { status: existing.status as number, body: existing.body as string } };
    const expiresAt = now + Limits.pupEventAnswerMs;
    this.items.set(pk, { pk, status: answer.status, body: answer.body, storedAt: now, expiresAt, ttl: Math.ceil(expiresAt / 1000) });
    await this.persist();
    return { stored: true };
  }

  async listEvents(now: number, filter: { status?: EventStatus } = {}): Promise<EventRecord[]> {
    const events: EventRecord[] = [];
    for (const item of this.items.values()) {
      if (!item.pk.startsWith(ItemKeys.event(''))) continue;
      if (!isLive(item.expiresAt, now)) continue;
      if (filter.status !== undefined && item.status !== filter.status) continue;
      events.push(fromItem<EventRecord>(item));
    }
    return newestFirst(events);
  }

  /** Resolves once a file write that started after this call's mutation has completed. */
  private persist(): Promise<void> {
    if (!this.scheduled) {
      const write = this.chain.then(() => {
        this.scheduled = undefined;
        return this.writeFile();
      });
      this.scheduled = write;
      this.chain = write.catch(() => undefined);
    }
    return this.scheduled;
  }

  private async writeFile(): Promise<void> {
    const nowS = Date.now() / 1000;
    for (const [pk, item] of this.items) if (item.ttl < nowS) this.items.delete(pk);
    const text = JSON.stringify({ version: 1, items: [...this.items.values()] });
    const tmp = `${this.file}.tmp-${process.pid}-${this.tmpCounter++}`;
    const handle = await open(tmp, 'w', 0o600);
    try {
      await handle.writeFile(text, 'utf8');
      await handle.datasync();
    } finally {
      await handle.close();
    }
    await rename(tmp, this.file);
  }
}

function fromItem<T>(item: Item): T {
  const { pk: _pk, ttl: _ttl, ...rest } = item;
  return structuredClone(rest) as T;
}

function stripUndefined<T extends object>(value: T): Record<string, unknown> {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined));
}
