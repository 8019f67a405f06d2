/**
 * The in-process delivery worker of the local runtime: the local twin of SQS + the Delivery
 * Lambda. It receives the jobs due now from the job table (adapters/embedded/jobs.ts says how),
 * runs up to `concurrency` attempts at once through the Delivery Lambda's own runner
 * (core/runner.ts), and makes the runner's effects on the table.
 *
 * It wakes when a job is added in this process (`wake()`, which the embedded database's
 * `onJobsChanged` also calls) and otherwise polls at least every `pollIntervalMs`, so jobs written
 * by another process (the operator CLI's redrive while no server ran) are picked up too.
 *
 * A lasting fault (`lastingFault`: a damaged page of the state file) is not retried at the pace of
 * a passing one, and not logged here at all: the job that met it cools off for a lease, the loop
 * that met it sleeps a lease unless woken, and its owner (the runtime) reports it once. Without
 * that, a schedule read that fails every poll logged the same error every second.
 *
 * Deliberately not here: the decision and its mapping to effects (core/delivery.ts,
 * core/runner.ts), the job table's storage, and printing (the runner's log lines go to `log`).
 */
import { describeCause } from '../core/answers';
import type { DeliveryDecision, DeliveryDeps } from '../core/delivery';
import { createDeliveryRunner, type DeliveryRunner } from '../core/runner';
import type { JobEffects, Logger } from '../ports';
import type { DueJob, JobTable } from '../adapters/embedded/jobs';

type WorkerJobTable = Pick<JobTable, 'due' | 'nextDueAt' | 'receive' | 'reschedule' | 'complete' | 'deadLetter'>;

export interface DeliveryWorkerOptions {
  jobs: WorkerJobTable;
  deps: DeliveryDeps;
  concurrency?: number;
  /** The longest the worker sleeps without looking at the table; default 1000 ms. */
  pollIntervalMs?: number;
  /** How long a received job stays hidden from the schedule; default 60 s (a crashed attempt's job resurfaces after it). */
  leaseMs?: number;
  /** The runner's `delivery` lines (one per decision) and its worker errors. */
  log?: Logger;
  /** Every decision, including giving up at the receive limit (tests, and whoever watches). */
  onDecision?: (eventId: string, decision: DeliveryDecision, context: { receives: number }) => void;
  /** Each failure of the worker (never endpoint text; also logged to `log`). `eventId` is absent when reading the schedule failed. */
  onError?: (error: unknown, eventId: string | undefined) => void;
  /** True for a failure that retrying soon will not cure, which its owner reports (see the header); default none. */
  lastingFault?: (error: unknown) => boolean;
}

export type DeliveryWorker = Pick<Worker, 'wake' | 'runDue' | 'inFlight' | 'stop'>;

/** Creates the worker without starting its loop (see `runDue`); `startDeliveryWorker` starts it too. */
export function createDeliveryWorker(options: DeliveryWorkerOptions): DeliveryWorker & { start(): void } {
  return new Worker(options);
}

export function startDeliveryWorker(options: DeliveryWorkerOptions): DeliveryWorker {
  const worker = new Worker(options);
  worker.start();
  return worker;
}

class Worker {
  private readonly concurrency: number;
  private readonly pollIntervalMs: number;
  private readonly leaseMs: number;
  private readonly runJob: DeliveryRunner;
  private readonly running = new Map<string, Promise<void>>();
  /** Jobs whose receive failed (storage down): not looked at again before this time. */
  private readonly coolingUntil = new Map<string, number>();
  private stopped = false;
  private loop: Promise<void> | undefined;
  /** Ends the current sleep, while the loop sleeps. */
  private signal: (() => void) | undefined;
  /** A wake that came while the loop was busy. */
  private signalled = false;
  /** The time the last pass asked the schedule for due jobs. */
  private lookedAt = Number.NEGATIVE_INFINITY;

  constructor(private readonly options: DeliveryWorkerOptions) {
    this.concurrency = Math.max(1, options.concurrency ?? 8);
    this.pollIntervalMs = Math.max(1, options.pollIntervalMs ?? 1000);
    this.leaseMs = options.leaseMs ?? 60_000;
    this.runJob = createDeliveryRunner({ delivery: options.deps, ...(options.log ? { log: options.log } : {}) });
  }

  get inFlight(): number {
    return this.running.size;
  }

  start(): void {
    if (this.loop || this.stopped) return;
    this.loop = this.run();
  }

  /**
   * Looks at the schedule now (a job was added in this process). Asleep: wakes now. Busy (reading
   * the schedule): the next sleep returns at once, so a job added meanwhile is never left for the poll.
   */
  wake(): void {
    if (this.signal) this.signal();
    else this.signalled = true;
  }

  /** One pass: starts the jobs due now (up to the free slots); resolves with how many once they finished (tests drive it with a fake clock). */
  async runDue(): Promise<number> {
    const started = await this.fill();
    await Promise.all(started);
    return started.length;
  }

  /** Stops taking work; resolves when the attempts in flight have finished. Jobs stay for the next start. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.wake();
    await this.loop;
    await Promise.allSettled([...this.running.values()]);
  }

  private async run(): Promise<void> {
    while (!this.stopped) {
      let started = 0;
      let lasting = false;
      try {
        started = (await this.fill()).length;
      } catch (error) {
        this.reportError(error, undefined);
        lasting = this.isLasting(error);
      }
      if (this.stopped) break;
      // A job added meanwhile still wakes the loop (it may be readable where the rest is not).
      await this.sleep(lasting ? this.leaseMs : await this.waitMs(started));
    }
  }

  private isLasting(error: unknown): boolean {
    return quietly(() => this.options.lastingFault?.(error) === true, false);
  }

  /** How long to sleep: until the next due job, at most the poll interval. */
  private async waitMs(started: number): Promise<number> {
    if (this.running.size >= this.concurrency) return this.pollIntervalMs; // a finishing attempt wakes the loop
    const next = await this.options.jobs.nextDueAt().catch(() => undefined);
    if (next === undefined) return this.pollIntervalMs;
    const wait = next - this.options.deps.clock.now();
    // Nothing started although something was due when the pass looked: those jobs are in flight
    // or cooling down; wait for an attempt to finish (it wakes the loop) or for the next poll
    // rather than spin. A job that fell due only after the pass looked is looked at again now (a
    // loaded machine can take longer between the two reads than the job had left).
    if (wait <= 0) return started > 0 || next > this.lookedAt ? 0 : this.pollIntervalMs;
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
    this.lookedAt = now;
    for (const [eventId, until] of this.coolingUntil) if (until <= now) this.coolingUntil.delete(eventId);
    // Asks for more than the free slots: due jobs already in flight or cooling are skipped.
    const due = await this.options.jobs.due(now, free + this.running.size + this.coolingUntil.size);
    const started: Promise<void>[] = [];
    for (const row of due) {
      if (this.stopped || this.running.size >= this.concurrency) break;
      if (this.running.has(row.eventId) || this.coolingUntil.has(row.eventId)) continue;
      started.push(this.launch(row));
    }
    return started;
  }

  private launch(row: DueJob): Promise<void> {
    const work = this.attempt(row)
      .catch((error: unknown) => this.reportError(error, row.eventId))
      .finally(() => {
        this.running.delete(row.eventId);
        // A slot is free (and the job may be due again at once).
        this.wake();
      });
    this.running.set(row.eventId, work);
    return work;
  }

  private async attempt(row: DueJob): Promise<void> {
    const { jobs, deps } = this.options;
    const { eventId } = row;
    let received: DueJob | undefined;
    try {
      received = await jobs.receive(eventId, deps.clock.now(), this.leaseMs, row.jobId);
    } catch (error) {
      // Nothing received (storage, disk): not looked at again before the first retry delay, or a
      // lease when the fault is a lasting one.
      this.reportError(error, eventId);
      this.coolingUntil.set(eventId, deps.clock.now() + (this.isLasting(error) ? this.leaseMs : (deps.retryDelaysS[0] ?? 1) * 1000));
      return;
    }
    // Completed or replaced since the schedule was read (an operator's resend): nothing to do.
    if (!received) return;
    const result = await this.runJob({ job: received.job, receives: received.receives, effects: tableEffects(jobs, received, deps.clock) });
    if (result.decision) quietly(() => this.options.onDecision?.(eventId, result.decision!, { receives: received.receives }), undefined);
    // Already logged by the runner: only the hook hears of it.
    if (result.error !== undefined) this.reportError(result.error, eventId, false);
  }

  private reportError(error: unknown, eventId: string | undefined, log = true): void {
    quietly(() => {
      if (log && !this.isLasting(error)) this.options.log?.error('delivery_worker_error', { ...(eventId ? { eventId } : {}), cause: describeCause(error) });
      this.options.onError?.(error, eventId);
    }, undefined);
  }
}

/** `run()`, or `fallback` when it throws: a callback (the runtime's printing) must not change what happens to a job. */
function quietly<T>(run: () => T, fallback: T): T {
  try {
    return run();
  } catch {
    return fallback;
  }
}

/** The queue effects of one received row of the job table; its jobId is the receipt. */
function tableEffects(jobs: WorkerJobTable, received: DueJob, clock: { now(): number }): JobEffects {
  const { eventId, receives, jobId } = received;
  return {
    complete: async () => void (await jobs.complete(eventId, jobId)),
    // Without a delay the lease (hidden until its end) brings the job back, as a visibility timeout would.
    keepFor: async (delayMs) => {
      if (delayMs !== undefined) await jobs.reschedule(eventId, clock.now() + delayMs, receives, jobId);
    },
    deadLetter: async (reason) => void (await jobs.deadLetter(eventId, reason, receives, jobId)),
  };
}
