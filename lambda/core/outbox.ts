/**
 * The outbox for storage that cannot share a transaction with its queue (DynamoDB and SQS): the
 * record is written first, then its job is sent. A record therefore never waits for a job that
 * was never sent without saying so: when the send fails, the record is marked `failed` (the event
 * was never accepted) and the caller is told `queue` unavailable with the event id.
 *
 * The embedded database of the local runtime does not use this: it writes the record and its job
 * in one transaction (lambda/adapters/embedded).
 *
 * Deliberately not here: retries (the SDK clients retry within the request deadline) and the
 * attempt itself (core/delivery.ts).
 */
import type { DeliveryJob, EnqueueOptions, EventExpectation, EventPatch, EventRecord, Outbox, Queue, Store } from '../ports';
import { DependencyUnavailable, guardDependency } from './errors';
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

export function sequentialOutbox(store: Store, queue: Queue): Outbox {
  return {
    async add(record: EventRecord, job: DeliveryJob, options?: EnqueueOptions): Promise<void> {
      await guardDependency('storage', () => store.putEvent(record));
      try {
        await queue.enqueue(job, options);
      } catch (cause) {
        // The record must not claim a delivery that can never happen. A send that timed out may
        // have been applied all the same; only a record marked failed makes "not sent" true (the
        // worker never sends a failed event that did not come through the dead-letter queue).
        const marked = await store.updateEvent(record.eventId, { status: EventStatus.failed }, { status: EventStatus.queued }).catch(() => false);
        throw new DependencyUnavailable('queue', { cause, eventId: record.eventId, ...(marked ? {} : { undecided: true }) });
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
