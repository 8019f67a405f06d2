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
import type { Clock, DeliveryJob, EnqueueOptions, EventPatch, EventRecord, Outbox } from '../../ports';
import { ItemKeys } from '../items';
import { getItem, putItem, recordOf, write, type Databases } from './environment';
import { putJobInTxn } from './jobs';
import { patched, putEventIfAbsent } from './store';

export class EmbeddedOutbox implements Outbox {
  constructor(
    private readonly dbs: Databases,
    private readonly clock: Clock,
    /** Told after each commit that added a job (the in-process worker wakes on it). */
    private readonly changed: () => void,
  ) {}

  async add(record: EventRecord, job: DeliveryJob, options: EnqueueOptions = {}): Promise<void> {
    if (job.eventId !== record.eventId) throw new Error('outbox: the job belongs to another event than the record');
    const now = this.clock.now();
    const dueAt = now + Math.max(0, options.delayMs ?? 0);
    let written: boolean;
    try {
      written = await write(this.dbs, () => {
        if (!putEventIfAbsent(this.dbs, record)) return false;
        putJobInTxn(this.dbs, job, dueAt, now);
        return true;
      });
    } catch (cause) {
      throw new DependencyUnavailable('storage', { cause });
    }
    if (!written) throw new DependencyUnavailable('storage', { cause: new Error(`event ${record.eventId} already exists`) });
    this.changed();
  }

  async reopen(read: EventRecord, patch: EventPatch, job: DeliveryJob): Promise<boolean> {
    if (job.eventId !== read.eventId) throw new Error('outbox: the job belongs to another event than the record');
    const now = this.clock.now();
    const pk = ItemKeys.event(read.eventId);
    let reopened: boolean;
    try {
      reopened = await write(this.dbs, () => {
        const item = getItem(this.dbs, pk);
        if (!item || item.status !== read.status || item.attempts !== read.attempts) return false;
        putItem(this.dbs, pk, patched(recordOf<Record<string, unknown>>(item), patch) ?? recordOf(item), item.ttl);
        putJobInTxn(this.dbs, job, now, now);
        return true;
      });
    } catch (cause) {
      throw new DependencyUnavailable('storage', { cause });
    }
    if (reopened) this.changed();
    return reopened;
  }
}
