/**
 * The one Store (docs/contract/storage.md, STORE-2 and STORE-12): every record's meaning, written
 * once over the item table port (./table.ts). The subscription and the events are
 * ./event-store.ts's; this class adds every other record.
 *
 * Deliberately not here: retries, timeouts and logging (an item may hold a signing secret: nothing
 * here prints one), and scans on any request or delivery path (the listings are operator-only).
 */
import type {
  AccessStore,
  DeploymentKeys,
  DeploymentRecord,
  EventRecord,
  IdempotencyClaim,
  IdempotencyRecord,
  IdempotencyStore,
  InboundAnswer,
  InboundAnswerResult,
  InboxStore,
  PendingPosition,
  ReplayClaim,
  SenderRecord,
  Store,
} from '../../ports';
import { EventStatus, Limits } from '../protocol';
import { EventStore } from './event-store';
import { isPending } from './events';
import { ItemKeys, PendingIndex, isLive, pendingKeyOf, recordOf, ttl } from './items';
import { when, type Update } from './table';

export type { TableStoreOptions } from './event-store';

export class TableStore extends EventStore implements Store, AccessStore, IdempotencyStore, InboxStore {
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
    // `lt`: a claim holds through its expiresAt (the timestamp window's last instant); an unsettled one through its lease.
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

  // DEPLOYMENT and SENDER# items carry no `ttl`: they never expire.

  async getDeployment(): Promise<DeploymentRecord | undefined> {
    const item = await this.table.get(ItemKeys.deployment);
    return item ? recordOf<DeploymentRecord>(item) : undefined;
  }

  async createDeployment(record: DeploymentRecord): Promise<DeploymentRecord> {
    const result = await this.table.put(ItemKeys.deployment, { ...record }, when.absent());
    if (result.ok) return { ...record };
    // The loser of two first requests learns the winner's principal from this failed write.
    if (!result.old) throw new Error('conditional put of the deployment failed, yet none is stored');
    return recordOf<DeploymentRecord>(result.old);
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
