/**
 * The embedded delivery queue of the local runtime: the in-process twin of SQS + the Delivery
 * Lambda. Each job is a file in `<state dir>/queue/` until it reaches a final state, so events
 * queued when the process dies are delivered after a restart. Retry timing comes from the
 * delivery core's decision (same schedule as AWS); exhausted or permanently failed jobs move to
 * `<state dir>/dead-letter/` with their final reason, the local dead-letter queue.
 *
 * Deliberately not here: the decision itself (core/delivery.ts), and multi-process consumers.
 */
import { mkdir, readdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { attemptDelivery, failAtReceiveLimit, receiveLimit, type DeliveryDeps } from '../core/delivery';
import type { DeliveryJob, EnqueueOptions, Queue } from '../ports';

interface QueuedFile {
  job: DeliveryJob;
  /** Times the worker picked the job up; a crash safety net like SQS maxReceiveCount. */
  receives: number;
  dueAt: number;
  /** Present only on dead letters; a queue file that has one was moved back by an operator. */
  reason?: string;
}

export interface FileQueueOptions {
  stateDir: string;
  deps: DeliveryDeps;
  /** Attempts run at once (DMDOT_DELIVERY_CONCURRENCY in the local runtime); default 8. */
  concurrency?: number;
  /** Called with each failure of the worker itself (never with endpoint text). */
  onError?: (error: unknown, eventId: string) => void;
}

const SAFE_ID = /^evt_[0-9a-f]{32}$/;

export class FileQueue implements Queue {
  private readonly queueDir: string;
  private readonly deadDir: string;
  private readonly timers = new Map<string, NodeJS.Timeout>();
  private readonly ready: string[] = [];
  private readonly inFlight = new Set<Promise<void>>();
  private running = 0;
  private stopped = false;

  private constructor(private readonly options: FileQueueOptions) {
    this.queueDir = join(options.stateDir, 'queue');
    this.deadDir = join(options.stateDir, 'dead-letter');
  }

  /** Opens the queue and schedules every job left from an earlier run. */
  static async start(options: FileQueueOptions): Promise<FileQueue> {
    const queue = new FileQueue(options);
    await mkdir(queue.queueDir, { recursive: true, mode: 0o700 });
    await mkdir(queue.deadDir, { recursive: true, mode: 0o700 });
    for (const name of await readdir(queue.queueDir)) {
      if (!name.endsWith('.json')) continue;
      const eventId = name.slice(0, -5);
      if (!SAFE_ID.test(eventId)) continue;
      const entry = await queue.read(eventId).catch(() => undefined);
      if (entry) queue.schedule(eventId, entry.dueAt);
    }
    return queue;
  }

  async enqueue(job: DeliveryJob, options: EnqueueOptions = {}): Promise<void> {
    if (!SAFE_ID.test(job.eventId)) throw new Error('file queue: malformed event id');
    if (this.stopped) throw new Error('file queue: stopped');
    const dueAt = Date.now() + Math.max(0, options.delayMs ?? 0);
    await this.write(job.eventId, { job, receives: 0, dueAt });
    this.schedule(job.eventId, dueAt);
  }

  /** Stops taking work; resolves when attempts in flight have finished. Queued files stay for the next start. */
  async stop(): Promise<void> {
    this.stopped = true;
    for (const timer of this.timers.values()) clearTimeout(timer);
    this.timers.clear();
    this.ready.length = 0;
    await Promise.allSettled([...this.inFlight]);
  }

  /** Jobs waiting or retrying (for tests and the status line). */
  async pending(): Promise<number> {
    return (await readdir(this.queueDir)).filter((n) => n.endsWith('.json')).length;
  }

  private schedule(eventId: string, dueAt: number): void {
    if (this.stopped) return;
    const existing = this.timers.get(eventId);
    if (existing) clearTimeout(existing);
    const timer = setTimeout(() => {
      this.timers.delete(eventId);
      this.ready.push(eventId);
      this.pump();
    }, Math.max(0, dueAt - Date.now()));
    this.timers.set(eventId, timer);
  }

  private pump(): void {
    const limit = this.options.concurrency ?? 8;
    while (!this.stopped && this.running < limit && this.ready.length > 0) {
      const eventId = this.ready.shift()!;
      this.running++;
      const work = this.process(eventId).finally(() => {
        this.running--;
        this.inFlight.delete(work);
        this.pump();
      });
      this.inFlight.add(work);
    }
  }

  private async process(eventId: string): Promise<void> {
    let entry: QueuedFile | undefined;
    const limit = receiveLimit(this.options.deps.retryDelaysS);
    try {
      entry = await this.read(eventId);
      if (entry.reason !== undefined) {
        // A dead letter moved back into queue/ (dm-dot redrive): a new round, like an SQS redrive.
        entry = { job: { ...entry.job, redriven: true }, receives: 0, dueAt: entry.dueAt };
      }
      entry.receives++;
      if (entry.receives > limit) {
        // Picked up this often without an outcome (the process kept dying mid-attempt).
        await this.giveUp(eventId, entry);
        return;
      }
      await this.write(eventId, entry);
      const decision = await attemptDelivery(this.options.deps, entry.job);
      if (decision.action === 'done') await rm(this.file(eventId), { force: true });
      else if (decision.action === 'dead_letter') await this.deadLetter(eventId, entry, decision.reason);
      else if (entry.receives >= limit) await this.giveUp(eventId, entry);
      else {
        // retry, or defer behind a lease: the same timer either way; a deferral counts no attempt.
        entry.dueAt = Date.now() + (decision.action === 'abandoned' ? 0 : decision.delayMs);
        await this.write(eventId, entry);
        this.schedule(eventId, entry.dueAt);
      }
    } catch (error) {
      this.options.onError?.(error, eventId);
      // The worker itself failed (storage, disk): try again after the first delay, like a crashed Lambda.
      if (entry) this.schedule(eventId, Date.now() + (this.options.deps.retryDelaysS[0] ?? 1) * 1000);
    }
  }

  /** The receive limit of SPEC 6.2's safety net: the event is marked failed and dead-lettered with why. */
  private async giveUp(eventId: string, entry: QueuedFile): Promise<void> {
    await failAtReceiveLimit(this.options.deps, eventId);
    await this.deadLetter(eventId, entry, 'receive_limit');
  }

  private async deadLetter(eventId: string, entry: QueuedFile, reason: string): Promise<void> {
    await writeFile(join(this.deadDir, `${eventId}.json`), JSON.stringify({ ...entry, reason, deadLetteredAt: new Date().toISOString() }), { mode: 0o600 });
    await rm(this.file(eventId), { force: true });
  }

  private file(eventId: string): string {
    return join(this.queueDir, `${eventId}.json`);
  }

  private async read(eventId: string): Promise<QueuedFile> {
    return JSON.parse(await readFile(this.file(eventId), 'utf8')) as QueuedFile;
  }

  /**
   * Operator redrive while the queue runs (`dm-dot redrive`, through the local admin route): moves
   * every dead letter back into queue/ and schedules it at once. Resolves with how many moved.
   */
  async redrive(): Promise<number> {
    const moved = await moveDeadLetters(this.options.stateDir);
    for (const eventId of moved) this.schedule(eventId, Date.now());
    return moved.length;
  }

  private async write(eventId: string, entry: QueuedFile): Promise<void> {
    const tmp = `${this.file(eventId)}.tmp`;
    await writeFile(tmp, JSON.stringify(entry), { mode: 0o600 });
    await rename(tmp, this.file(eventId));
  }
}

/**
 * Moves every dead letter back into the queue (the local twin of the SQS redrive command) while no
 * runtime uses the state directory; the next start delivers them with a new round of the
 * schedule. With the runtime running, use `FileQueue.redrive` (what `dm-dot redrive` asks the
 * server to do) so they are scheduled at once. Returns how many were moved.
 */
export async function redriveDeadLetters(stateDir: string): Promise<number> {
  return (await moveDeadLetters(stateDir)).length;
}

/** Renames each dead letter back into queue/ (atomic per file); returns the moved event ids. */
async function moveDeadLetters(stateDir: string): Promise<string[]> {
  const deadDir = join(stateDir, 'dead-letter');
  const queueDir = join(stateDir, 'queue');
  await mkdir(queueDir, { recursive: true, mode: 0o700 });
  const moved: string[] = [];
  let names: string[] = [];
  try {
    names = await readdir(deadDir);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return moved;
    throw error;
  }
  for (const name of names) {
    const eventId = name.slice(0, -5);
    if (!name.endsWith('.json') || !SAFE_ID.test(eventId)) continue;
    await rename(join(deadDir, name), join(queueDir, name));
    moved.push(eventId);
  }
  return moved;
}
