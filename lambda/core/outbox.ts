/**
 * The outbox for storage that cannot share a transaction with its queue (DynamoDB and SQS): the
 * record is written first, then its job is sent. A record therefore never waits silently for a
 * job that was never sent:
 *
 *   put record   fails, nothing stored     ─> storage unavailable, "nothing was sent"
 *                fails, maybe stored       ─> compensate: a `failed` record in its place (or the
 *                                             stored one marked failed) ─> "nothing was sent";
 *                                             compensation fails too ─> send the job anyway: the
 *                                             worker delivers the record, or restores one that
 *                                             never landed, so the caller is told `queued`
 *                                             (undecided only when that send fails as well)
 *   send job     fails                     ─> compensate: record `queued -> failed`, then "not
 *                                             sent" with the event id; the record had moved on
 *                                             (the job did go out) ─> `queued`; compensation
 *                                             unanswered ─> undecided, "may still be delivered":
 *                                             a write whose answer was lost may have landed, and
 *                                             a record still `queued` is the reconciler's
 *                                             (core/reconcile.ts)
 *
 * A compensating compare-and-set that answers "no" is read back before anything is concluded:
 * the SDK retries a write whose answer was lost, and the retry then meets the write it repeats.
 *
 * The compensating write needs time of its own: `keepBack` (the AWS wiring passes one from
 * adapters/deadline.ts) runs the put and the send so that Budgets.outboxCompensationReserveMs of
 * the request is left when they give up.
 *
 * The embedded database of the local runtime does not use this: it writes the record and its job
 * in one transaction (lambda/adapters/embedded).
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

export interface SequentialOutboxOptions {
  /**
   * Runs the record's put and the job's send so that time is left after them for the
   * compensating write. Default: runs them as they are.
   */
  keepBack?: <T>(fn: () => Promise<T>) => Promise<T>;
}

const asIs = <T>(fn: () => Promise<T>): Promise<T> => fn();

/**
 * True when nothing of `record` can be stored any more: a `failed` record is in its place, or the
 * stored one was marked failed. A put that failed may have been applied (its answer lost), and a
 * request DynamoDB has not yet applied could still arrive after this: the failed record in its
 * place makes that late put fail its condition.
 */
async function settleUnsent(store: OutboxStore, record: EventRecord): Promise<boolean> {
  if (await store.restoreEvent({ ...record, status: EventStatus.failed })) return true;
  // A record is stored: mark it as a failed send would be. Before its job is sent nothing but this
  // request writes the event, so a record that is no longer queued is our own settling write.
  return (await markUnsent(store, record)) === 'marked';
}

/** A record that no worker will ever POST: failed before any attempt (only a redrive reopens it), or dropped. */
function neverSent(stored: EventRecord | undefined): boolean {
  return stored !== undefined && ((stored.status === EventStatus.failed && stored.attempts === 0) || stored.status === EventStatus.dropped);
}

/**
 * The compensation of a send that failed: `marked` when the record is now one no worker will POST
 * (so "not sent" is true), `moved` when it had moved on without us (the job did go out), and
 * `unknown` when no answer came.
 */
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

export function sequentialOutbox(store: OutboxStore, queue: Queue, options: SequentialOutboxOptions = {}): Outbox {
  const keepBack = options.keepBack ?? asIs;
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
        // Neither the put's fate nor the compensation's is known: send the job all the same. The
        // worker delivers the record if the put landed and restores it from the job if it did not
        // (core/delivery.ts `prepare`), so the event will be settled either way and the caller may be
        // told "queued". Only when this send fails too is the event's fate really unknown.
        const jobOut = await queue.enqueue(job, enqueueOptions).then(
          () => true,
          () => false,
        );
        throw new DependencyUnavailable('storage', { cause, eventId: record.eventId, undecided: true, willSettle: jobOut });
      }
      try {
        await keepBack(() => queue.enqueue(job, enqueueOptions));
      } catch (cause) {
        // The record must not claim a delivery that can never happen. A send that timed out may
        // have been applied all the same; only a record marked failed makes "not sent" true (the
        // worker never sends a failed event that did not come through the dead-letter queue).
        const mark = await markUnsent(store, record);
        // Moved on: a worker has the job, so "queued" is true (core/messages.ts). Unknown: the mark
        // may have landed with its answer lost (then nothing will ever send it) or not (then the
        // reconciler re-enqueues the record), so the caller can only be told "may still be delivered".
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
