/**
 * The in-process delivery worker of the local runtime: the local twin of SQS + the Delivery
 * Lambda. The schedule is the job table itself (adapters/embedded/jobs.ts): the worker asks for
 * the jobs due now, runs up to `concurrency` attempts at once through the same core function as
 * the Delivery Lambda (core/delivery.ts `deliver`), and applies each decision to the table.
 *
 * It wakes when a job is added in this process (`wake()`, which the embedded database's
 * `onJobsChanged` also calls) and otherwise polls at least every `pollIntervalMs`, so jobs written
 * by another process (the operator CLI's redrive while no server ran) are picked up too.
 *
 * Per job, as SQS and the Delivery Lambda do it:
 * - the receive count goes up and is persisted before the attempt (and the job is hidden for a
 *   lease, a visibility timeout); past `receiveLimit` the event is failed and dead-lettered with
 *   `receive_limit`, without an attempt;
 * - `done` completes the job; `dead_letter` dead-letters it with its reason; `retry` and `defer`
 *   reschedule it after their delay (`abandoned`: at once), unless the receive limit is reached,
 *   which gives it up as above;
 * - a thrown error (storage down) reschedules it after the first retry delay and is reported
 *   through `onError`.
 *
 * Deliberately not here: the decision itself (core/delivery.ts), the job table's storage, and
 * printing (decisions and errors go to the callbacks).
 */
import { deliver, failAtReceiveLimit, receiveLimit, type DeliveryDecision, type DeliveryDeps } from '../core/delivery';
import type { DeadLetterReason } from '../core/protocol';
import type { DeliveryJob } from '../ports';

/** What the worker needs of a job table (adapters/embedded JobTable). */
export interface WorkerJobTable {
  due(now: number, limit: number): Promise<WorkerJob[]>;
  nextDueAt(): Promise<number | undefined>;
  receive(eventId: string, now: number, leaseMs: number, jobId?: string): Promise<WorkerJob | undefined>;
  reschedule(eventId: string, dueAt: number, receives: number, jobId?: string): Promise<boolean>;
  complete(eventId: string, jobId?: string): Promise<boolean>;
  deadLetter(eventId: string, reason: DeadLetterReason, receives: number, jobId?: string): Promise<boolean>;
}

export interface WorkerJob {
  eventId: string;
  job: DeliveryJob;
  dueAt: number;
  receives: number;
  jobId: string;
}

export interface DeliveryWorkerOptions {
  jobs: WorkerJobTable;
  deps: DeliveryDeps;
  /** Attempts run at once; default 8. */
  concurrency?: number;
  /** The longest the worker sleeps without looking at the table; default 1000 ms. */
  pollIntervalMs?: number;
  /** How long a received job stays hidden from the schedule; default 60 s (a crashed attempt's job resurfaces after it). */
  leaseMs?: number;
  /** Every decision, including giving up at the receive limit. */
  onDecision?: (eventId: string, decision: DeliveryDecision, context: { receives: number }) => void;
  /** Each failure of the worker itself (never endpoint text). `eventId` is absent when reading the schedule failed. */
  onError?: (error: unknown, eventId: string | undefined) => void;
}

export interface DeliveryWorker {
  /** Looks at the schedule now (a job was added in this process). */
  wake(): void;
  /**
   * One pass: starts every job due now (up to the free slots) and resolves, with how many it
   * started, once those attempts have finished. Tests drive the schedule with it and a fake clock.
   */
  runDue(): Promise<number>;
  /** Attempts running now. */
  readonly inFlight: number;
  /** Stops taking work; resolves when the attempts in flight have finished. Jobs stay for the next start. */
  stop(): Promise<void>;
}

/** Creates the worker without starting its loop (see `runDue`); `startDeliveryWorker` starts it too. */
export function createDeliveryWorker(options: DeliveryWorkerOptions): DeliveryWorker & { start(): void } {
  return new Worker(options);
}

export function startDeliveryWorker(options: DeliveryWorkerOptions): DeliveryWorker {
  const worker = new Worker(options);
  worker.start();
  return worker;
}

class Worker implements DeliveryWorker {
  private readonly concurrency: number;
  private readonly pollIntervalMs: number;
  private readonly leaseMs: number;
  private readonly limit: number;
  private readonly running = new Map<string, Promise<void>>();
  /** Jobs whose receive failed (storage down): not looked at again before this time. */
  private readonly coolingUntil = new Map<string, number>();
  private stopped = false;
  private loop: Promise<void> | undefined;
  /** Ends the current sleep, while the loop sleeps. */
  private signal: (() => void) | undefined;
  /** A wake that came while the loop was busy. */
  private signalled = false;

  constructor(private readonly options: DeliveryWorkerOptions) {
    this.concurrency = Math.max(1, options.concurrency ?? 8);
    this.pollIntervalMs = Math.max(1, options.pollIntervalMs ?? 1000);
    this.leaseMs = options.leaseMs ?? 60_000;
    this.limit = receiveLimit(options.deps.retryDelaysS);
  }

  get inFlight(): number {
    return this.running.size;
  }

  start(): void {
    if (this.loop || this.stopped) return;
    this.loop = this.run();
  }

  wake(): void {
    // Asleep: wake now. Busy (reading the schedule): the next sleep returns at once, so a job
    // added meanwhile is never left for the poll.
    if (this.signal) this.signal();
    else this.signalled = true;
  }

  async runDue(): Promise<number> {
    const started = await this.fill();
    await Promise.all(started);
    return started.length;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.wake();
    await this.loop;
    await Promise.allSettled([...this.running.values()]);
  }

  private async run(): Promise<void> {
    while (!this.stopped) {
      let started = 0;
      try {
        started = (await this.fill()).length;
      } catch (error) {
        this.reportError(error, undefined);
      }
      if (this.stopped) break;
      await this.sleep(await this.waitMs(started));
    }
  }

  /** How long to sleep: until the next due job, at most the poll interval. */
  private async waitMs(started: number): Promise<number> {
    if (this.running.size >= this.concurrency) return this.pollIntervalMs; // a finishing attempt wakes the loop
    let next: number | undefined;
    try {
      next = await this.options.jobs.nextDueAt();
    } catch {
      return this.pollIntervalMs;
    }
    if (next === undefined) return this.pollIntervalMs;
    const wait = next - this.options.deps.clock.now();
    // Nothing started although something is due: those jobs are in flight or cooling down; wait
    // for an attempt to finish (it wakes the loop) or for the next poll rather than spin.
    if (wait <= 0) return started > 0 ? 0 : this.pollIntervalMs;
    return Math.min(wait, this.pollIntervalMs);
  }

  private sleep(ms: number): Promise<void> {
    if (this.signalled || this.stopped) {
      this.signalled = false;
      return Promise.resolve();
    }
    return new Promise<void>((done) => {
      const finish = () => {
        clearTimeout(timer);
        if (this.signal === finish) this.signal = undefined;
        done();
      };
      const timer = setTimeout(finish, ms);
      this.signal = finish;
    });
  }

  /** Starts the due jobs that fit in the free slots; returns their attempts. */
  private async fill(): Promise<Promise<void>[]> {
    const free = this.concurrency - this.running.size;
    if (this.stopped || free <= 0) return [];
    const now = this.options.deps.clock.now();
    for (const [eventId, until] of this.coolingUntil) if (until <= now) this.coolingUntil.delete(eventId);
    // Asks for more than the free slots: due jobs already in flight or cooling are skipped.
    const due = await this.options.jobs.due(now, free + this.running.size + this.coolingUntil.size);
    const started: Promise<void>[] = [];
    for (const row of due) {
      if (this.stopped || this.running.size >= this.concurrency) break;
      if (this.running.has(row.eventId)) continue;
      if (this.coolingUntil.has(row.eventId)) continue;
      started.push(this.launch(row));
    }
    return started;
  }

  private launch(row: WorkerJob): Promise<void> {
    const work = this.attempt(row)
      .catch((error: unknown) => this.reportError(error, row.eventId))
      .finally(() => {
        this.running.delete(row.eventId);
        // A slot is free (and the job may be due again at once, e.g. `abandoned`).
        this.wake();
      });
    this.running.set(row.eventId, work);
    return work;
  }

  private async attempt(row: WorkerJob): Promise<void> {
    const { jobs, deps } = this.options;
    const { eventId } = row;
    let received: WorkerJob | undefined;
    try {
      received = await jobs.receive(eventId, deps.clock.now(), this.leaseMs, row.jobId);
      // Completed or replaced since the schedule was read (an operator's resend): nothing to do.
      if (!received) return;
      if (received.receives > this.limit) {
        // Picked up this often without an outcome (the process kept dying mid-attempt).
        await this.giveUp(received);
        return;
      }
      const decision = await deliver(deps, received.job);
      this.reportDecision(eventId, decision, received.receives);
      switch (decision.action) {
        case 'done':
          await jobs.complete(eventId, received.jobId);
          return;
        case 'dead_letter':
          await jobs.deadLetter(eventId, decision.reason, received.receives, received.jobId);
          return;
        default:
          if (received.receives >= this.limit) {
            await this.giveUp(received);
            return;
          }
          // retry, or defer behind the inline attempt's lease (which counts no attempt), or
          // abandoned (at once): the same schedule either way.
          await jobs.reschedule(eventId, deps.clock.now() + (decision.action === 'abandoned' ? 0 : decision.delayMs), received.receives, received.jobId);
      }
    } catch (error) {
      this.reportError(error, eventId);
      // The worker itself failed (storage, disk): try again after the first delay, like a crashed Lambda.
      const retryAt = deps.clock.now() + (deps.retryDelaysS[0] ?? 1) * 1000;
      if (!received) {
        this.coolingUntil.set(eventId, retryAt);
        return;
      }
      // If this fails too, the lease still brings the job back.
      await jobs.reschedule(eventId, retryAt, received.receives, received.jobId).catch(() => undefined);
    }
  }

  /** The receive limit of docs/contract/delivery.md's safety net: the event is failed and dead-lettered with why. */
  private async giveUp(received: WorkerJob): Promise<void> {
    const { jobs, deps } = this.options;
    await failAtReceiveLimit(deps, received.eventId);
    const event = await deps.store.getEvent(received.eventId, deps.clock.now()).catch(() => undefined);
    this.reportDecision(received.eventId, { action: 'dead_letter', reason: 'receive_limit', attempt: event?.attempts ?? 0 }, received.receives);
    await jobs.deadLetter(received.eventId, 'receive_limit', received.receives, received.jobId);
  }

  // A callback that throws must not change what happens to the job (it is the runtime's printing).
  private reportDecision(eventId: string, decision: DeliveryDecision, receives: number): void {
    try {
      this.options.onDecision?.(eventId, decision, { receives });
    } catch {
      // Ignored: see above.
    }
  }

  private reportError(error: unknown, eventId: string | undefined): void {
    try {
      this.options.onError?.(error, eventId);
    } catch {
      // Ignored: see above.
    }
  }
}
