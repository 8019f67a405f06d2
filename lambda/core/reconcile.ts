/**
 * The reconciler (docs/contract/delivery.md, "Nothing strands"): what settles an event record
 * left `queued` with nothing to deliver it. On AWS the record and its job are two writes
 * (core/outbox.ts), and a few faults leave a record `queued` with no job that will ever run: the
 * function dying between the two writes, a compensation that failed, SQS's own redrive moving the
 * job to the dead-letter queue (without a reason, and without touching the record), a stopped
 * event source letting the job expire unseen. A scheduled run reads the store's sparse index of
 * queued records (adapters/queued-index.ts) and, for each record with no sign of life for longer
 * than the retry schedule plus a margin (`strandedAfterMs`), decides by the record alone:
 *
 *   not queued any more (the index lags), its lease live (an attempt is being made, or the next
 *   one is not due yet), or a sign of life recently   ─> nothing
 *   queued, attempts left, never re-enqueued   ─> requeue: a new job, then `repairedAt` by
 *                                                 compare-and-set (once per stay in `queued`)
 *   queued again after a requeue, or no attempt left, or no body   ─> fail: a dead-letter copy
 *                                                 with reason `stranded`, then `queued -> failed`
 *                                                 by compare-and-set
 *
 * A record's last sign of life (`lastSignOfLife`) is the latest of when it was queued, requeued,
 * and its lease (`notBefore`): every attempt moves the lease (the worker's before its POST, the
 * outcome's to when the next attempt is due), so a job still being worked is never judged by when
 * it was created, and the reconciler costs the delivery path no write of its own.
 *
 * The order of each pair is what keeps it safe under a fault between the two: a job sent whose
 * mark failed is a duplicate job (the worker's lease and the record make it one POST at most per
 * attempt); a dead-letter copy whose record moved on meanwhile is a copy the worker skips if
 * redriven. Nothing is ever changed without the record still being what was read: the status,
 * the attempt count and the lease, so a worker that took the lease since the read wins, and its
 * 2xx is recorded even over a `stranded` failure (core/delivery.ts).
 *
 * Bound: a record stranded at t (its last sign of life) is requeued or failed by the first run
 * after t + strandedAfterMs (runs every Budgets.reconcileEveryMs), so within `repairBoundMs`; a
 * requeued record that strands again is failed one bound later.
 *
 * A run that could not settle a record (a failed read, send or write) counts it in `errors` and
 * goes on with the rest; the caller fails the run after its metrics are written.
 *
 * Deliberately not here: the schedule and the AWS clients (handlers/reconciler-lambda.ts), the
 * index's shape (the store's), and the embedded runtime (one transaction: nothing strands there).
 */
import type { Clock, DeliveryJob, EventRecord, Logger, QueuedEntry, Store } from '../ports';
import { Budgets } from './budgets';
import { EventStatus, Limits, type DeadLetterReason } from './protocol';

export type RepairAction = 'requeued' | 'failed';

/** The queue operations the reconciler needs: a new job, and a dead-letter copy with a reason. */
export interface RepairQueue {
  enqueue(job: DeliveryJob): Promise<void>;
  deadLetter(job: DeliveryJob, reason: DeadLetterReason): Promise<void>;
}

export interface ReconcileDeps {
  store: Pick<Store, 'getEvent' | 'updateEvent'> & Required<Pick<Store, 'listQueuedBefore' | 'markRequeued'>>;
  queue: RepairQueue;
  clock: Clock;
  retryDelaysS: readonly number[];
  log?: Logger;
  /** One count per action a run took (a metric); called for both actions on every run, 0 included. */
  repaired?: (action: RepairAction, count: number) => void;
}

export interface ReconcileOptions {
  /** Most records one run looks at. */
  limit?: number;
  /** Epoch ms (deps.clock) after which no new repair starts. */
  until?: number;
}

export interface ReconcileReport {
  found: number;
  requeued: number;
  failed: number;
  skipped: number;
  errors: number;
}

export type Repair = { kind: 'skip' } | { kind: 'requeue'; job: DeliveryJob } | { kind: 'fail'; job: DeliveryJob | undefined };

/** Records one run looks at, at most (about 3 calls each, ten at a time). */
export const RECONCILE_BATCH_LIMIT = 1_000;
const CONCURRENCY = 10;

/**
 * How long a record may be `queued` before it counts as stranded: the whole retry schedule, the
 * longest inline window and its lease, and Budgets.reconcileMarginMs for everything else that
 * legitimately keeps a job in play (see budgets.ts).
 */
export function strandedAfterMs(retryDelaysS: readonly number[]): number {
  const scheduleMs = retryDelaysS.reduce((sum, s) => sum + s * 1000, 0);
  return scheduleMs + Limits.deliveryWaitMaxMs + Budgets.inlineLeaseMarginMs + Budgets.reconcileMarginMs;
}

/** The longest a stranded record stays `queued` before the reconciler requeues or fails it. */
export function repairBoundMs(retryDelaysS: readonly number[]): number {
  return strandedAfterMs(retryDelaysS) + Budgets.reconcileEveryMs;
}

function jobOf(record: EventRecord): DeliveryJob | undefined {
  if (typeof record.body !== 'string' || record.body === '') return undefined;
  return {
    eventId: record.eventId,
    subscriptionId: record.subscriptionId,
    ...(record.generation !== undefined ? { generation: record.generation } : {}),
    body: record.body,
  };
}

/**
 * The last time anything showed the record in play: its queued time, its requeue (the index is
 * eventually consistent: a requeue moments ago may not show there yet), and its lease, which every
 * attempt moves (a lease in the future counts as now: the record is in play until it ends).
 */
export function lastSignOfLife(record: EventRecord, entry: QueuedEntry): number {
  return Math.max(entry.queuedSince, record.repairedAt ?? 0, record.notBefore ?? 0);
}

/** The decision for one record the index listed as queued since `queuedSince`: pure. */
export function repairOf(record: EventRecord | undefined, entry: QueuedEntry, now: number, retryDelaysS: readonly number[]): Repair {
  if (!record || record.status !== EventStatus.queued) return { kind: 'skip' };
  // A live lease: an attempt is being made (the worker's, the inline one), or the next is not due yet.
  if (record.notBefore !== undefined && record.notBefore > now) return { kind: 'skip' };
  if (now - lastSignOfLife(record, entry) < strandedAfterMs(retryDelaysS)) return { kind: 'skip' };
  const job = jobOf(record);
  const attemptsLeft = record.attempts <= retryDelaysS.length;
  if (job && attemptsLeft && record.repairedAt === undefined) return { kind: 'requeue', job };
  return { kind: 'fail', job };
}

/** One run: lists what has been queued too long and settles each. Throws only when the list cannot be read. */
export async function reconcile(deps: ReconcileDeps, options: ReconcileOptions = {}): Promise<ReconcileReport> {
  const limit = options.limit ?? RECONCILE_BATCH_LIMIT;
  const started = deps.clock.now();
  const report: ReconcileReport = { found: 0, requeued: 0, failed: 0, skipped: 0, errors: 0 };
  try {
    const entries = await deps.store.listQueuedBefore(started - strandedAfterMs(deps.retryDelaysS), limit);
    report.found = entries.length;
    for (let i = 0; i < entries.length; i += CONCURRENCY) {
      if (options.until !== undefined && deps.clock.now() >= options.until) break;
      await Promise.all(entries.slice(i, i + CONCURRENCY).map((entry) => settle(deps, entry, report)));
    }
  } finally {
    deps.repaired?.('requeued', report.requeued);
    deps.repaired?.('failed', report.failed);
  }
  deps.log?.info('reconcile', { ...report });
  return report;
}

async function settle(deps: ReconcileDeps, entry: QueuedEntry, report: ReconcileReport): Promise<void> {
  const { eventId } = entry;
  try {
    const now = deps.clock.now();
    const record = await deps.store.getEvent(eventId, now);
    const repair = repairOf(record, entry, now, deps.retryDelaysS);
    switch (repair.kind) {
      case 'skip':
        report.skipped++;
        return;
      case 'requeue': {
        await deps.queue.enqueue(repair.job);
        const marked = await deps.store.markRequeued(eventId, record!.attempts, now, record!.notBefore ?? null);
        // Not marked: the record moved on meanwhile (delivered, or another run); the job sent is a duplicate the worker settles.
        deps.log?.warn('reconcile_requeued', { eventId, attempts: record!.attempts, ...(marked ? {} : { raced: true }) });
        if (marked) report.requeued++;
        else report.skipped++;
        return;
      }
      case 'fail': {
        // The copy first: a record marked failed must have its dead letter (docs/contract/delivery.md).
        if (repair.job) await deps.queue.deadLetter(repair.job, 'stranded');
        // The note says why it failed (no attempt did): a job of it that surfaces later is dead-lettered as `stranded` too.
        const failed = await deps.store.updateEvent(
          eventId,
          { status: EventStatus.failed, appendLog: { at: now, note: 'stranded' } },
          { status: EventStatus.queued, attempts: record!.attempts, notBefore: record!.notBefore ?? null },
        );
        deps.log?.warn('reconcile_failed', {
          eventId,
          attempts: record!.attempts,
          reason: 'stranded',
          ...(repair.job ? {} : { deadLetter: false }),
          ...(failed ? {} : { raced: true }),
        });
        if (failed) report.failed++;
        else report.skipped++;
        return;
      }
    }
  } catch (error) {
    // Left as it is: the next run finds it again.
    report.errors++;
    deps.log?.error('reconcile_error', { eventId, cause: error instanceof Error ? error.name : 'unknown' });
  }
}
