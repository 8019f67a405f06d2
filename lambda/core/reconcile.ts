/**
 * The reconciler (docs/contract/delivery.md, "Nothing strands", DEL-OUT-4..8): what settles an
 * event record left `queued` with nothing to deliver it, deciding by the record alone: nothing while
 * it is live, a new job once (then `repairedAt`), else a `stranded` dead-letter copy and
 * `queued -> failed`. Each pair is ordered to stay safe under a fault between its two steps (a
 * duplicate job, or a copy the worker skips). A record that could not be settled counts in
 * `errors`; the caller fails the run after its metrics are written.
 *
 * Deliberately not here: the schedule and the AWS clients (handlers/reconciler-lambda.ts), the
 * index's shape (the store's), and the embedded runtime (one transaction: nothing strands there).
 */
import { jobOf, type Clock, type DeliveryJob, type EventRecord, type Logger, type QueuedEntry, type Store } from '../ports';
import { Budgets } from './budgets';
import { EventStatus, Limits, type DeadLetterReason } from './protocol';

export type RepairAction = 'requeued' | 'failed';

export interface ReconcileDeps {
  store: Pick<Store, 'getEvent' | 'updateEvent'> & Required<Pick<Store, 'listQueuedBefore' | 'markRequeued'>>;
  /** A new job, and a dead-letter copy with a reason. */
  queue: { enqueue(job: DeliveryJob): Promise<void>; deadLetter(job: DeliveryJob, reason: DeadLetterReason): Promise<void> };
  clock: Clock;
  retryDelaysS: readonly number[];
  log?: Logger;
  /** One count per action a run took (a metric); called for both actions on every run, 0 included. */
  repaired?: (action: RepairAction, count: number) => void;
}

export type ReconcileReport = Record<'found' | 'requeued' | 'failed' | 'skipped' | 'errors', number>;

export type Repair = { kind: 'skip' } | { kind: 'requeue'; job: DeliveryJob } | { kind: 'fail'; job: DeliveryJob | undefined };

/** Records one run looks at, at most (about 3 calls each, ten at a time). */
export const RECONCILE_BATCH_LIMIT = 1_000;
const CONCURRENCY = 10;

/** How long a record may be `queued` before it counts as stranded: the retry schedule, the inline window, and a margin. */
export function strandedAfterMs(retryDelaysS: readonly number[]): number {
  const scheduleMs = retryDelaysS.reduce((sum, s) => sum + s * 1000, 0);
  return scheduleMs + Limits.deliveryWaitMaxMs + Budgets.inlineLeaseMarginMs + Budgets.reconcileMarginMs;
}

/** The last time anything showed the record in play: queued, requeued (the index may lag), or its lease, which every attempt moves. */
export function lastSignOfLife(record: EventRecord, entry: QueuedEntry): number {
  return Math.max(entry.queuedSince, record.repairedAt ?? 0, record.notBefore ?? 0);
}

/** The decision for one record the index listed as queued since `queuedSince`: pure. */
export function repairOf(record: EventRecord | undefined, entry: QueuedEntry, now: number, retryDelaysS: readonly number[]): Repair {
  if (!record || record.status !== EventStatus.queued) return { kind: 'skip' };
  // A live lease: an attempt is being made (the worker's, the inline one), or the next is not due yet.
  if (record.notBefore !== undefined && record.notBefore > now) return { kind: 'skip' };
  if (now - lastSignOfLife(record, entry) < strandedAfterMs(retryDelaysS)) return { kind: 'skip' };
  const job = record.body ? jobOf(record, record.body) : undefined;
  const attemptsLeft = record.attempts <= retryDelaysS.length;
  if (job && attemptsLeft && record.repairedAt === undefined) return { kind: 'requeue', job };
  return { kind: 'fail', job };
}

/** One run; `until`: epoch ms after which no new repair starts. Throws only when the list cannot be read. */
export async function reconcile(deps: ReconcileDeps, options: { limit?: number; until?: number } = {}): Promise<ReconcileReport> {
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
        report[marked ? 'requeued' : 'skipped']++;
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
        report[failed ? 'failed' : 'skipped']++;
        return;
      }
    }
  } catch (error) {
    // Left as it is: the next run finds it again.
    report.errors++;
    deps.log?.error('reconcile_error', { eventId, cause: error instanceof Error ? error.name : 'unknown' });
  }
}
