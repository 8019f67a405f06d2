/**
 * What an EVENT# item is, as writes to the item table: the record with its `ttl` and its index
 * attributes, kept in step with its status and acknowledgement. Pure: the Store sends these writes,
 * and the embedded outbox puts the same ones into its transaction with the job.
 *
 * Deliberately not here: any I/O, and deciding any transition (the core's delivery code does).
 */
import type { EventExpectation, EventPatch, EventRecord } from '../../ports';
import { EventStatus } from '../protocol';
import { ItemKeys, PendingIndex, QueuedIndex, pendingKeyOf, queuedShardOf, recordOf, ttl } from './items';
import { when, type Condition, type Item, type TableWrite, type Update } from './table';

/** The fields an update may set from a patch (body and appendLog have their own rules). */
const PATCH_FIELDS = ['status', 'attempts', 'lastError', 'lastHttpStatus', 'deliveredAt', 'notBefore', 'subscriptionId', 'generation', 'cancelledAt'] as const;
/** What a restored record drops of an expired one it replaces, as a put would. */
const OPTIONAL_FIELDS = [...PATCH_FIELDS, 'body', 'log', 'repairedAt', 'sender', 'inbox', 'acknowledgedAt'] as const;

/** True while an event is in the pending index: sent with the inbox on and not acknowledged. */
export const isPending = (record: Pick<EventRecord, 'inbox' | 'acknowledgedAt'>): boolean => record.inbox === true && record.acknowledgedAt === undefined;

/** The index attributes of a record as written whole; `queuedSince` when it is queued. */
function indexAttributes(record: EventRecord, queuedSince: number): Item {
  const attributes: Item = {};
  if (record.status === EventStatus.queued) {
    attributes[QueuedIndex.partition] = queuedShardOf(record.eventId);
    attributes[QueuedIndex.sort] = queuedSince;
  }
  if (isPending(record)) {
    attributes[PendingIndex.partition] = PendingIndex.shard;
    attributes[PendingIndex.sort] = pendingKeyOf(record.createdAt, record.eventId);
  }
  return attributes;
}

/** No live event with this id, judged at the record's own createdAt (the writer's "now"). */
const noLiveEvent = (record: EventRecord): Condition => when.or(when.absent(), when.le('expiresAt', record.createdAt));

/** The put of a new event record (Store.putEvent, the embedded outbox's transaction). */
export function newEventWrite(record: EventRecord): Extract<TableWrite, { kind: 'put' }> {
  const item = { ...record, ttl: ttl.of(record.expiresAt), ...indexAttributes(record, record.createdAt) };
  return { kind: 'put', key: ItemKeys.event(record.eventId), item, condition: noLiveEvent(record) };
}

/** Whether a stored item (a failed put's ALL_OLD) is this very record: its writer's own earlier try. */
export function isSameEvent(stored: Item | undefined, record: EventRecord): boolean {
  // Nobody else knows the id before the put returns: only that put's own retry stores this exact record.
  return stored !== undefined && canonical(recordOf(stored)) === canonical(record);
}

function canonical(record: object): string {
  return JSON.stringify(
    Object.entries(record)
      .filter(([, value]) => value !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : 1)),
  );
}

/** Store.restoreEvent: an update that creates the item (the Delivery Lambda has no PutItem permission), removing what a put would drop. */
export function restoreWrite(record: EventRecord, now: number): Extract<TableWrite, { kind: 'update' }> {
  const set: Item = { ...record, ttl: ttl.of(record.expiresAt), ...indexAttributes(record, now) };
  const remove = [...OPTIONAL_FIELDS, QueuedIndex.partition, QueuedIndex.sort, PendingIndex.partition, PendingIndex.sort].filter(
    (field) => set[field] === undefined,
  );
  return { kind: 'update', key: ItemKeys.event(record.eventId), update: { set, remove }, condition: noLiveEvent(record) };
}

/**
 * The update of Store.updateEvent: undefined when the patch sets nothing. `keepBody`: the event
 * is pending in the inbox, so a delivery's `body: null` leaves its bytes (the Store learns that
 * from the first write's ALL_OLD and retries with it).
 */
export function eventUpdate(eventId: string, patch: EventPatch, expected: EventExpectation | undefined, now: number, keepBody = false) {
  const set: Item = {};
  const remove: string[] = [];
  const setIfAbsent: Item = {};
  for (const field of PATCH_FIELDS) if (patch[field] !== undefined) set[field] = patch[field];
  if (typeof patch.body === 'string') set.body = patch.body;
  const dropsBody = patch.body === null && !keepBody;
  if (dropsBody) remove.push('body');
  const update: Update = { set, remove, setIfAbsent, ...(patch.appendLog ? { append: { log: [patch.appendLog] } } : {}) };
  if (Object.keys(set).length === 0 && remove.length === 0 && !update.append) return undefined;
  if (patch.status === EventStatus.queued) {
    set[QueuedIndex.partition] = queuedShardOf(eventId);
    // A record that stays queued keeps its time; one that becomes queued starts it now.
    setIfAbsent[QueuedIndex.sort] = now;
  } else if (patch.status !== undefined) remove.push(QueuedIndex.partition, QueuedIndex.sort, 'repairedAt');
  // Presence, not liveness: callers read the record before they update it, and the expectation
  // guards the transition. `exists` keeps an update from creating a stub for an unknown id.
  const parts: Condition[] = [when.exists()];
  if (expected) {
    parts.push(when.in('status', typeof expected.status === 'string' ? [expected.status] : [...expected.status]));
    if (expected.attempts !== undefined) parts.push(when.eq('attempts', expected.attempts));
    if (expected.notBefore === null) parts.push(when.lacks('notBefore'));
    else if (expected.notBefore !== undefined) parts.push(when.eq('notBefore', expected.notBefore));
  }
  const guard = when.and(...parts);
  // A pending event keeps its bytes until acknowledged: the removal applies only to others.
  const condition = dropsBody ? when.and(guard, when.lacks(PendingIndex.partition)) : guard;
  return { key: ItemKeys.event(eventId), update, condition, guard };
}

/** The reconciler's mark (Store.markRequeued): only while the record holds the lease it read, so a worker that took it since is never fought. */
export function requeuedWrite(eventId: string, attempts: number, now: number, notBefore: number | null): Extract<TableWrite, { kind: 'update' }> {
  const lease = notBefore === null ? when.lacks('notBefore') : when.eq('notBefore', notBefore);
  return {
    kind: 'update',
    key: ItemKeys.event(eventId),
    update: { set: { repairedAt: now, [QueuedIndex.sort]: now } },
    condition: when.and(when.exists(), when.eq('status', EventStatus.queued), when.eq('attempts', attempts), lease, when.lacks('repairedAt')),
  };
}
