/**
 * The outbox for storage that cannot share a transaction with its queue (DynamoDB and SQS; the
 * embedded database writes both in one), by docs/contract/delivery.md DEL-OUT-2 and DEL-OUT-3: the
 * record first, then its job, a failure of either compensated by marking the record failed.
 * `keepBack` (adapters/deadline.ts on AWS) leaves Budgets.outboxCompensationReserveMs of the
 * request for the compensating write.
 *
 * Deliberately not here: retries (the SDK clients retry within the request deadline), the
 * attempt itself (core/delivery.ts), and records stranded by a process that died between the two
 * writes (the reconciler).
 */
import type { DeliveryJob, EnqueueOptions, EventExpectation, EventPatch, EventRecord, Outbox, Queue, Store } from '../ports';
import { DependencyUnavailable, EventExists, guardDependency } from './errors';
import { EventStatus } from './protocol';

const ALL_STATUSES = Object.values(EventStatus);

/** The patch that puts back what `fields` changed, from the record as it was read. */
function restoring(read: EventRecord, fields: Omit<EventPatch, 'appendLog'>): EventPatch {
  const back: EventPatch = {};
  for (const key of Object.keys(fields) as (keyof typeof fields)[]) {
    const value = read[key as keyof EventRecord];
    if (value !== undefined) (back as Record<string, unknown>)[key] = value;
    // A field the record did not have: lastError and lastHttpStatus go back to null; any other
    // (notBefore, generation) keeps the new value, which means nothing on a settled record.
    else if (key === 'lastError' || key === 'lastHttpStatus') (back as Record<string, unknown>)[key] = null;
  }
  return back;
}

/**
 * True when nothing of `record` can be stored any more: a `failed` record is in its place (so a late
 * put fails its condition), or the stored one was marked failed.
 */
async function settleUnsent(store: OutboxStore, record: EventRecord): Promise<boolean> {
  if (await store.restoreEvent({ ...record, status: EventStatus.failed })) return true;
  // Before its job is sent nothing but this request writes the event, so one no longer queued is our own write.
  return (await markUnsent(store, record)) === 'marked';
}

/** A record that no worker will ever POST: failed before any attempt (only a redrive reopens it), or dropped. */
function neverSent(stored: EventRecord | undefined): boolean {
  return stored !== undefined && ((stored.status === EventStatus.failed && stored.attempts === 0) || stored.status === EventStatus.dropped);
}

/** The compensation of a failed send: `marked` (no worker will POST it), `moved` (the job did go out) or `unknown`. */
async function markUnsent(store: OutboxStore, record: EventRecord): Promise<'marked' | 'moved' | 'unknown'> {
  try {
    if (await store.updateEvent(record.eventId, { status: EventStatus.failed }, { status: EventStatus.queued })) return 'marked';
    const stored = await store.getEvent(record.eventId, record.createdAt);
    if (neverSent(stored)) return 'marked';
    return stored === undefined || stored.status === EventStatus.queued ? 'unknown' : 'moved';
  } catch {
    return 'unknown';
  }
}

/** What the outbox writes of the Store: the event record, put and then settled if its job could not be sent. */
export type OutboxStore = Pick<Store, 'putEvent' | 'getEvent' | 'updateEvent' | 'restoreEvent'>;

export function sequentialOutbox(store: OutboxStore, queue: Queue, options: { keepBack?: <T>(fn: () => Promise<T>) => Promise<T> } = {}): Outbox {
  const keepBack = options.keepBack ?? (<T>(fn: () => Promise<T>) => fn());
  return {
    async add(record: EventRecord, job: DeliveryJob, enqueueOptions?: EnqueueOptions): Promise<void> {
      try {
        // putEvent is idempotent for this very record: a retry whose first try was applied succeeds.
        await keepBack(() => store.putEvent(record));
      } catch (cause) {
        // Another record holds the id: nothing of ours is stored, and that record is not ours to fail.
        if (cause instanceof EventExists) throw new DependencyUnavailable('storage', { cause });
        const settled = await settleUnsent(store, record).catch(() => false);
        // Settled: nothing was recorded that anything could ever deliver.
        if (settled) throw cause instanceof DependencyUnavailable ? cause : new DependencyUnavailable('storage', { cause });
        // Neither fate is known: send the job all the same; the worker delivers the record or restores
        // it from the job, so the caller may be told "queued" unless this send fails too.
        const jobOut = await queue.enqueue(job, enqueueOptions).then(
          () => true,
          () => false,
        );
        throw new DependencyUnavailable('storage', { cause, eventId: record.eventId, undecided: true, willSettle: jobOut });
      }
      try {
        await keepBack(() => queue.enqueue(job, enqueueOptions));
      } catch (cause) {
        // A send that timed out may have been applied: only a record marked failed makes "not sent"
        // true. Unknown: the mark may have landed or not, so only "may still be delivered" is true.
        const mark = await markUnsent(store, record);
        throw new DependencyUnavailable('queue', {
          cause,
          eventId: record.eventId,
          ...(mark === 'marked' ? {} : { undecided: true, willSettle: mark === 'moved' }),
        });
      }
    },

    async reopen(read: EventRecord, patch: EventPatch, job: DeliveryJob): Promise<boolean> {
      if (job.eventId !== read.eventId) throw new Error('outbox: the job belongs to another event than the record');
      // The note goes in only once the job is out: a resend that never happened leaves no trace.
      const { appendLog, ...fields } = patch;
      const expected: EventExpectation = { status: read.status, attempts: read.attempts };
      const reopened = await guardDependency('storage', () => store.updateEvent(read.eventId, fields, expected));
      if (!reopened) return false;
      try {
        await queue.enqueue(job);
      } catch (cause) {
        // Back to where it was, so that the operator can simply try again.
        await store.updateEvent(read.eventId, restoring(read, fields), { status: EventStatus.queued }).catch(() => undefined);
        throw new DependencyUnavailable('queue', { cause, eventId: read.eventId });
      }
      if (appendLog) {
        // Whatever the worker did meanwhile, the note belongs to the log; a lost note loses no delivery.
        await store.updateEvent(read.eventId, { appendLog }, { status: ALL_STATUSES }).catch(() => undefined);
      }
      return true;
    },
  };
}
