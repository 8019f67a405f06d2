/**
 * The job table of the embedded database: the local twin of the SQS queue and its dead-letter
 * queue. One row per event with a delivery in play, keyed by `[dueAt, eventId]` in an ordered
 * sub-database, so "what is due now" is a range read of the due rows only (never a scan of the
 * schedule or of the event records), plus an index by event id.
 *
 * The worker (lambda/local/worker.ts) receives a row (`receive`: a lease, as an SQS visibility
 * timeout), then completes, reschedules or dead-letters it, each with the row's `jobId` as a
 * receipt: when an operator's resend replaced the job in between, the stale receipt changes nothing.
 *
 * Deliberately not here: the decision what to do with a job (core/delivery.ts and the worker),
 * and inserting a job without its record (the outbox does both in one transaction).
 */
import { randomUUID } from 'node:crypto';
import type { DeadLetterReason } from '../../core/protocol';
import { ItemKeys } from '../../core/store/items';
import { defined } from '../../core/store/table';
import type { Clock, DeliveryJob } from '../../ports';
import { StateUnreadable } from './errors';
import { setItem, write, type Databases, type DeadLetterRow, type JobRow } from './environment';

/** A job row with its event id; `jobId` is the receipt to pass back to complete, reschedule or dead-letter this very job. */
export type DueJob = JobRow & { eventId: string };

export class JobTable {
  constructor(
    private readonly dbs: Databases,
    private readonly clock: Clock,
    private readonly changed: () => void,
  ) {}

  /**
   * Jobs due at `now` (dueAt <= now), earliest first, at most `limit`. A row on a damaged page is
   * left out (the environment kept the damage for the runtime to report); a range that breaks off
   * at one gives the rows read before it, and throws (StateUnreadable) only when there are none.
   */
  async due(now: number, limit = 100): Promise<DueJob[]> {
    const rows: DueJob[] = [];
    try {
      // Key by key, each row read on its own: a value that does not decode would end a range read.
      for (const key of this.dbs.jobs.getKeys({ end: [Math.floor(now) + 1] })) {
        if (rows.length >= limit) break;
        let row: JobRow | undefined;
        try {
          row = this.dbs.jobs.get(key);
        } catch (error) {
          if (!(error instanceof StateUnreadable)) throw error;
        }
        if (row) rows.push(dueJob(row));
      }
    } catch (error) {
      if (!(error instanceof StateUnreadable) || rows.length === 0) throw error;
    }
    return rows;
  }

  async nextDueAt(): Promise<number | undefined> {
    for (const key of this.dbs.jobs.getKeys({ limit: 1 })) return key[0];
    return undefined;
  }

  async get(eventId: string): Promise<DueJob | undefined> {
    const row = rowOf(this.dbs, eventId);
    return row && dueJob(row);
  }

  /** Every job, earliest first (for inspection and tests). */
  async all(): Promise<DueJob[]> {
    return [...this.dbs.jobs.getRange()].map(({ value }) => dueJob(value));
  }

  /** A worker takes the job: its receive count goes up and it is hidden until `now + leaseMs`. Undefined when gone or replaced. */
  receive(eventId: string, now: number, leaseMs: number, jobId?: string): Promise<DueJob | undefined> {
    return write(this.dbs, () => {
      const row = rowOf(this.dbs, eventId, jobId);
      if (!row) return undefined;
      const leasedUntil = Math.ceil(now + leaseMs);
      return dueJob(moveRow(this.dbs, row, leasedUntil, { receives: row.receives + 1, leasedUntil }));
    });
  }

  /** Due again at `dueAt` with this receive count. False when the job is gone or was replaced. */
  async reschedule(eventId: string, dueAt: number, receives: number, jobId?: string): Promise<boolean> {
    const moved = await write(this.dbs, () => {
      const row = rowOf(this.dbs, eventId, jobId);
      if (row) moveRow(this.dbs, row, Math.ceil(dueAt), { receives, leasedUntil: undefined });
      return row !== undefined;
    });
    if (moved) this.changed();
    return moved;
  }

  /** The job reached a final state: its row goes. False when it was gone or replaced already. */
  complete(eventId: string, jobId?: string): Promise<boolean> {
    return write(this.dbs, () => rowOf(this.dbs, eventId, jobId) !== undefined && removeJobInTxn(this.dbs, eventId) !== undefined);
  }

  /** Moves the job to the dead letters with why (the local dead-letter queue). */
  deadLetter(eventId: string, reason: DeadLetterReason, receives: number, jobId?: string): Promise<boolean> {
    const at = this.clock.now();
    return write(this.dbs, () => {
      const row = rowOf(this.dbs, eventId, jobId) && removeJobInTxn(this.dbs, eventId);
      if (row) void this.dbs.deadLetters.put(eventId, { job: row.job, reason, receives, deadLetteredAt: at });
      return row !== undefined;
    });
  }

  /**
   * The operator's redrive: every dead letter back as a job, due at `now`, with a fresh receive
   * count and `redriven: true` (a failed event then gets a new round of the schedule). An event
   * that has a job again already (an operator's resend) keeps that one. Returns how many.
   */
  async redrive(now: number): Promise<number> {
    const count = await write(this.dbs, () => {
      const letters = [...this.dbs.deadLetters.getRange()];
      for (const { key, value } of letters) {
        if (this.dbs.jobIndex.get(key) === undefined) putJobInTxn(this.dbs, { ...value.job, redriven: true }, now, now);
        void this.dbs.deadLetters.remove(key);
      }
      return letters.length;
    });
    if (count > 0) this.changed();
    return count;
  }

  /** `queued`: jobs waiting, retrying or being attempted. */
  async counts(): Promise<{ queued: number; deadLetters: number }> {
    const entries = (db: { getStats(): object }) => (db.getStats() as { entryCount: number }).entryCount;
    return { queued: entries(this.dbs.jobIndex), deadLetters: entries(this.dbs.deadLetters) };
  }

  async deadLetters(): Promise<(DeadLetterRow & { eventId: string })[]> {
    return [...this.dbs.deadLetters.getRange()].map(({ key, value }) => ({ eventId: key, ...value }));
  }

  /** Jobs a dead owner's worker held (a new owner runs this before its worker starts): due at `now`, receive counts kept. */
  async releaseLeases(now: number): Promise<number> {
    const released = await write(this.dbs, () => {
      const leased = [...this.dbs.leases.getKeys()];
      for (const eventId of leased) {
        const row = rowOf(this.dbs, eventId);
        if (row) moveRow(this.dbs, row, Math.min(Math.ceil(now), row.dueAt), { leasedUntil: undefined });
        else void this.dbs.leases.remove(eventId);
      }
      return leased.length;
    });
    if (released > 0) this.changed();
    return released;
  }
}

function dueJob(row: JobRow): DueJob {
  return { eventId: row.job.eventId, ...row };
}

/** The event's job row; undefined when there is none, or when `jobId` is given and the row is another job. */
function rowOf(dbs: Databases, eventId: string, jobId?: string): JobRow | undefined {
  const dueAt = dbs.jobIndex.get(eventId);
  const row = dueAt === undefined ? undefined : dbs.jobs.get([dueAt, eventId]);
  return row && (jobId === undefined || row.jobId === jobId) ? row : undefined;
}

/** Inside a write: the row under its new due time, with `changes` applied (`leasedUntil: undefined` ends a lease). */
function moveRow(dbs: Databases, row: JobRow, dueAt: number, changes: Partial<JobRow>): JobRow {
  const eventId = row.job.eventId;
  void dbs.jobs.remove([row.dueAt, eventId]);
  const next = defined({ ...row, ...changes, dueAt }) as unknown as JobRow;
  void dbs.jobs.put([dueAt, eventId], next);
  void dbs.jobIndex.put(eventId, dueAt);
  if (next.leasedUntil !== undefined) void dbs.leases.put(eventId, next.leasedUntil);
  else void dbs.leases.remove(eventId);
  return next;
}

/** Inside a write: the event's job, due at `dueAt`, replacing any it had (the newer intent wins; the old receipt stops working). */
export function putJobInTxn(dbs: Databases, job: DeliveryJob, dueAt: number, now: number): JobRow {
  removeJobInTxn(dbs, job.eventId);
  const row: JobRow = { jobId: randomUUID(), job: defined({ ...job }) as unknown as DeliveryJob, dueAt: Math.ceil(dueAt), receives: 0, enqueuedAt: now };
  void dbs.jobs.put([row.dueAt, job.eventId], row);
  void dbs.jobIndex.put(job.eventId, row.dueAt);
  return row;
}

/** Inside a write: removes the event's job, its index entry and its lease, if any. */
export function removeJobInTxn(dbs: Databases, eventId: string): JobRow | undefined {
  const row = rowOf(dbs, eventId);
  if (!row) return undefined;
  void dbs.jobs.remove([row.dueAt, eventId]);
  void dbs.jobIndex.remove(eventId);
  if (row.leasedUntil !== undefined) void dbs.leases.remove(eventId);
  return row;
}

/**
 * Deletes items whose ttl has passed at `now` (the DynamoDB TTL sweeper's job), at most `batch`
 * per transaction so that no writer waits long, and with an event its job: retention removes a
 * record and its job together, or the job would come back as a delivery of a record that is gone.
 * Reads never depend on it: they judge expiry themselves. Returns how many items were deleted.
 */
export async function sweepExpired(dbs: Databases, now: number, batch = 5000): Promise<number> {
  let total = 0;
  for (;;) {
    const deleted = await write(dbs, () => {
      // Collected first: deleting under a live cursor would move it.
      const keys = [...dbs.expiry.getKeys({ end: [now / 1000], limit: batch })];
      for (const [ttl, pk] of keys) {
        const item = dbs.items.get(pk);
        if (item?.ttl === ttl) {
          setItem(dbs, pk, undefined, item);
          if (pk.startsWith(ItemKeys.event('')) && typeof item.eventId === 'string') removeJobInTxn(dbs, item.eventId);
        }
        void dbs.expiry.remove([ttl, pk]);
      }
      return keys.length;
    });
    total += deleted;
    if (deleted < batch) return total;
  }
}
