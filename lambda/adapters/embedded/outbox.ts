/**
 * The transactional outbox of the embedded database: an event record and its delivery job are
 * written in ONE transaction, so a job exists exactly when its record was accepted as `queued`;
 * a failed write leaves neither. (On AWS the two are a DynamoDB write and an SQS send,
 * core/outbox.ts, which has to repair the record when the second step fails.)
 *
 * Errors: DependencyUnavailable('storage') when the transaction fails or the event id is taken;
 * never `queue`, since there is no separate queue that could fail after the record was written.
 *
 * Deliberately not here: the attempt itself (the worker runs it from the job table), retries.
 */
import { DependencyUnavailable } from '../../core/errors';
import { eventUpdate, newEventWrite } from '../../core/store/events';
import type { TableWrite } from '../../core/store/table';
import type { Clock, DeliveryJob, EnqueueOptions, EventPatch, EventRecord, Outbox } from '../../ports';
import { putJobInTxn } from './jobs';
import type { LmdbTable } from './table';

export class EmbeddedOutbox implements Outbox {
  constructor(
    private readonly table: LmdbTable,
    private readonly clock: Clock,
    /** Told after each commit that added a job (the in-process worker wakes on it). */
    private readonly changed: () => void,
  ) {}

  async add(record: EventRecord, job: DeliveryJob, options: EnqueueOptions = {}): Promise<void> {
    const now = this.clock.now();
    if (!(await this.write(record, job, newEventWrite(record), now + Math.max(0, options.delayMs ?? 0), now))) {
      throw new DependencyUnavailable('storage', { cause: new Error(`event ${record.eventId} already exists`) });
    }
  }

  /** The same compare-and-set as Store.updateEvent, with the job in its transaction. */
  async reopen(read: EventRecord, patch: EventPatch, job: DeliveryJob): Promise<boolean> {
    const now = this.clock.now();
    const planned = eventUpdate(read.eventId, patch, { status: read.status, attempts: read.attempts }, now);
    if (!planned) throw new Error('outbox: a reopen changes the record');
    return this.write(read, job, { kind: 'update', ...planned }, now, now);
  }

  /** The record's write and, when its condition held, the job due at `dueAt`, in one transaction. */
  private async write(record: EventRecord, job: DeliveryJob, planned: TableWrite, dueAt: number, now: number): Promise<boolean> {
    if (job.eventId !== record.eventId) throw new Error('outbox: the job belongs to another event than the record');
    let written: boolean;
    try {
      written = await this.table.transact([planned], () => putJobInTxn(this.table.dbs, job, dueAt, now));
    } catch (cause) {
      throw new DependencyUnavailable('storage', { cause });
    }
    if (written) this.changed();
    return written;
  }
}
