/**
 * The in-process delivery worker over the embedded database's job table, with the real delivery
 * core and a scripted callback endpoint. The schedule tests drive passes by hand (`runDue`) on a
 * fake clock, so every due time is checked to the millisecond; the loop tests (polling, waking,
 * stopping) run the worker's own loop on the real clock with short intervals.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openEmbeddedDatabase, type EmbeddedDatabase } from '../../../lambda/adapters/embedded';
import { receiveLimit, type DeliveryDecision, type DeliveryDeps } from '../../../lambda/core/delivery';
import { Limits } from '../../../lambda/core/protocol';
import { createDeliveryWorker, startDeliveryWorker, type DeliveryWorker } from '../../../lambda/local/worker';
import { systemClock, type Clock, type DeliveryJob, type EventRecord, type Store, type SubscriptionRecord, type WebhookResponse } from '../../../lambda/ports';
import { FakeClock, respond, ScriptedWebhookClient } from '../../support/fakes';

const T0 = Date.UTC(2030, 0, 1);
const DELAYS = [1, 4, 30, 120, 600] as const;
const LIMIT = receiveLimit(DELAYS);
const id = (n: number) => `evt_${n.toString(16).padStart(32, '0')}`;

const subscriptionAt = (now: number): SubscriptionRecord => ({
  id: 'sub_a',
  generation: 'gen-a',
  url: 'https://dot.example.com/hook',
  name: 'dot',
  secret: 'whsec_c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0',
  principal: 'principal-a',
  createdAt: now,
  refreshedAt: now,
  expiresAt: now + 3_600_000,
});
const recordAt = (now: number, n: number, overrides: Partial<EventRecord> = {}): EventRecord => ({
  eventId: id(n),
  status: 'queued',
  subscriptionId: 'sub_a',
  generation: 'gen-a',
  attempts: 0,
  createdAt: now,
  expiresAt: now + Limits.eventRecordMs,
  body: `{"eventId":"${id(n)}"}`,
  ...overrides,
});
const job = (n: number): DeliveryJob => ({ eventId: id(n), subscriptionId: 'sub_a', generation: 'gen-a', body: `{"eventId":"${id(n)}"}` });

let dir: string;
const opened: EmbeddedDatabase[] = [];
const workers: DeliveryWorker[] = [];

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'dm-dot-worker-'));
});

afterEach(async () => {
  for (const worker of workers.splice(0)) await worker.stop();
  for (const db of opened.splice(0)) await db.close();
  await rm(dir, { recursive: true, force: true });
});

async function database(clock: Clock, role: 'server' | 'operator' = 'server'): Promise<EmbeddedDatabase> {
  const db = await openEmbeddedDatabase(dir, { role, clock });
  opened.push(db);
  return db;
}

/** A gate a scripted POST waits on, and a way to learn that a POST has started. */
function gate() {
  let open: () => void = () => undefined;
  const opened = new Promise<void>((done) => (open = done));
  return { open, opened };
}

/**
 * The job table, and a promise that resolves once the worker has read when the next job is due:
 * its pass is over and it is about to sleep (the fact a fixed pause before an add only hoped for).
 */
function watched(table: EmbeddedDatabase['jobs']): { jobs: EmbeddedDatabase['jobs']; scheduleRead: Promise<void> } {
  const read = signal();
  const jobs = new Proxy(table, {
    get(target, property) {
      const value = Reflect.get(target, property, target);
      if (property !== 'nextDueAt' || typeof value !== 'function') return typeof value === 'function' ? value.bind(target) : value;
      return async (...args: unknown[]) => {
        const next = await value.apply(target, args);
        read.fire();
        return next;
      };
    },
  });
  return { jobs, scheduleRead: read.fired };
}

function signal<T = void>() {
  let fire: (value: T) => void = () => undefined;
  const fired = new Promise<T>((done) => (fire = done));
  return { fire, fired };
}

describe('LOCAL-4: the schedule (fake clock, one pass at a time)', () => {
  let clock: FakeClock;
  let db: EmbeddedDatabase;
  let webhook: ScriptedWebhookClient;
  let deps: DeliveryDeps;
  let decisions: { eventId: string; decision: DeliveryDecision; receives: number }[];
  let errors: { error: unknown; eventId: string | undefined }[];

  beforeEach(async () => {
    clock = new FakeClock(T0);
    db = await database(clock);
    await db.store.putSubscription(subscriptionAt(T0), T0, { kind: 'absent' });
    webhook = new ScriptedWebhookClient();
    deps = { store: db.store, webhook, clock, retryDelaysS: DELAYS };
    decisions = [];
    errors = [];
  });

  const worker = (overrides: Partial<Parameters<typeof createDeliveryWorker>[0]> = {}) =>
    createDeliveryWorker({
      jobs: db.jobs,
      deps,
      onDecision: (eventId, decision, context) => decisions.push({ eventId, decision, receives: context.receives }),
      onError: (error, eventId) => errors.push({ error, eventId }),
      ...overrides,
    });

  it('a due job is attempted; once delivered its job is gone and the decision reported', async () => {
    await db.outbox.add(recordAt(T0, 1), job(1));
    webhook.add(respond(200));
    await expect(worker().runDue()).resolves.toBe(1);
    expect(webhook.last.headers['webhook-id']).toBe(id(1));
    await expect(db.store.getEvent(id(1), T0)).resolves.toMatchObject({ status: 'delivered', attempts: 1 });
    await expect(db.jobs.all()).resolves.toEqual([]);
    expect(decisions).toEqual([{ eventId: id(1), decision: { action: 'done', status: 'delivered', attempt: 1 }, receives: 1 }]);
  });

  it('a job is not attempted before it is due', async () => {
    await db.outbox.add(recordAt(T0, 1), job(1), { delayMs: 5000 });
    const pass = worker();
    clock.advance(4999);
    await expect(pass.runDue()).resolves.toBe(0);
    expect(webhook.requests).toHaveLength(0);
    clock.advance(1);
    webhook.add(respond(200));
    await expect(pass.runDue()).resolves.toBe(1);
  });

  it('LIM-10, LOCAL-4: a transient failure reschedules the job exactly one retry delay later, then the next delay', async () => {
    await db.outbox.add(recordAt(T0, 1), job(1));
    webhook.add(respond(503), respond(503), respond(200));
    const pass = worker();
    await pass.runDue();
    await expect(db.jobs.get(id(1))).resolves.toMatchObject({ dueAt: T0 + 1000, receives: 1 });
    clock.advance(999);
    await expect(pass.runDue()).resolves.toBe(0);
    clock.advance(1);
    await expect(pass.runDue()).resolves.toBe(1);
    await expect(db.jobs.get(id(1))).resolves.toMatchObject({ dueAt: T0 + 1000 + 4000, receives: 2 });
    clock.advance(4000);
    await pass.runDue();
    await expect(db.store.getEvent(id(1), clock.now())).resolves.toMatchObject({ status: 'delivered', attempts: 3 });
    expect(decisions.map((d) => d.decision.action)).toEqual(['retry', 'retry', 'done']);
  });

  it('the receive count is persisted before the attempt is made', async () => {
    await db.outbox.add(recordAt(T0, 1), job(1));
    let seen: number | undefined;
    webhook.add(async (): Promise<WebhookResponse> => {
      seen = (await db.jobs.get(id(1)))?.receives;
      return respond(200);
    });
    await worker().runDue();
    expect(seen).toBe(1);
  });

  it('DEL-RUN-1: a job received more often than the limit is failed and dead-lettered with receive_limit, without an attempt', async () => {
    await db.outbox.add(recordAt(T0, 1), job(1));
    // Received LIMIT times already (the process kept dying mid-attempt): a lease of 0 leaves it due.
    for (let i = 0; i < LIMIT; i++) await db.jobs.receive(id(1), T0, 0);
    await worker().runDue();
    expect(webhook.requests).toHaveLength(0);
    await expect(db.store.getEvent(id(1), T0)).resolves.toMatchObject({ status: 'failed' });
    await expect(db.jobs.deadLetters()).resolves.toMatchObject([{ eventId: id(1), reason: 'receive_limit', receives: LIMIT + 1 }]);
    expect(decisions).toEqual([{ eventId: id(1), decision: { action: 'dead_letter', reason: 'receive_limit', attempt: 0 }, receives: LIMIT + 1 }]);
  });

  it('DEL-RUN-1: at the receive limit a decision that is not final gives the job up with receive_limit', async () => {
    await db.outbox.add(recordAt(T0, 1), job(1));
    for (let i = 0; i < LIMIT - 1; i++) await db.jobs.receive(id(1), T0, 0);
    webhook.add(respond(503));
    await worker().runDue();
    expect(webhook.requests).toHaveLength(1);
    await expect(db.jobs.get(id(1))).resolves.toBeUndefined();
    await expect(db.jobs.deadLetters()).resolves.toMatchObject([{ eventId: id(1), reason: 'receive_limit', receives: LIMIT }]);
    await expect(db.store.getEvent(id(1), T0)).resolves.toMatchObject({ status: 'failed', attempts: 1 });
  });

  it('DEL-PIPE-18: a permanent failure dead-letters the job with its reason', async () => {
    await db.outbox.add(recordAt(T0, 1), job(1));
    webhook.add(respond(404));
    await worker().runDue();
    await expect(db.jobs.deadLetters()).resolves.toMatchObject([{ eventId: id(1), job: job(1), reason: 'http_4xx', receives: 1, deadLetteredAt: T0 }]);
    await expect(db.store.getEvent(id(1), T0)).resolves.toMatchObject({ status: 'failed', lastError: 'http_4xx' });
    await expect(db.jobs.counts()).resolves.toEqual({ queued: 0, deadLetters: 1 });
  });

  it("DEL-PIPE-7: behind the inline attempt's lease the job is deferred to the lease's end, counting no attempt", async () => {
    await db.outbox.add(recordAt(T0, 1, { notBefore: T0 + 3000 }), job(1));
    await worker().runDue();
    expect(webhook.requests).toHaveLength(0);
    await expect(db.jobs.get(id(1))).resolves.toMatchObject({ dueAt: T0 + 3000, receives: 1 });
    await expect(db.store.getEvent(id(1), T0)).resolves.toMatchObject({ status: 'queued', attempts: 0 });
    expect(decisions[0]?.decision).toEqual({ action: 'defer', delayMs: 3000 });
  });

  it("DEL-RUN-3: a thrown error (storage down) leaves the job to come back when its lease ends, as SQS's visibility timeout does, and is reported", async () => {
    await db.outbox.add(recordAt(T0, 1), job(1));
    const failing: Store = Object.create(db.store) as Store;
    failing.getEvent = async () => {
      throw new Error('storage down');
    };
    await worker({ deps: { ...deps, store: failing }, leaseMs: 60_000 }).runDue();
    expect(errors).toHaveLength(1);
    expect(errors[0]).toMatchObject({ eventId: id(1), error: new Error('storage down') });
    await expect(db.jobs.get(id(1))).resolves.toMatchObject({ dueAt: T0 + 60_000, receives: 1 });
    await expect(db.jobs.deadLetters()).resolves.toEqual([]);
  });

  it('DEL-RUN-2: a deferral shorter than Budgets.deferInPlaceMaxMs is slept in place, then the attempt is made (as on Lambda)', async () => {
    await db.outbox.add(recordAt(T0, 1, { notBefore: T0 + 400 }), job(1));
    webhook.add(respond(200));
    await worker().runDue();
    expect(clock.sleeps).toEqual([400]);
    expect(webhook.requests).toHaveLength(1);
    await expect(db.store.getEvent(id(1), clock.now())).resolves.toMatchObject({ status: 'delivered', attempts: 1 });
    await expect(db.jobs.all()).resolves.toEqual([]);
  });

  it('DEL-RUN-5: every decision is one `delivery` line with via=worker, in the vocabulary of the inline attempt and of the Lambda', async () => {
    await db.outbox.add(recordAt(T0, 1), job(1));
    webhook.add(respond(503));
    const lines: { level: string; event: string; fields: Record<string, unknown> | undefined }[] = [];
    const log = {
      info: (event: string, fields?: Record<string, unknown>) => void lines.push({ level: 'info', event, fields }),
      warn: (event: string, fields?: Record<string, unknown>) => void lines.push({ level: 'warn', event, fields }),
      error: (event: string, fields?: Record<string, unknown>) => void lines.push({ level: 'error', event, fields }),
    };
    await worker({ log }).runDue();
    expect(lines).toEqual([
      { level: 'info', event: 'delivery', fields: { eventId: id(1), via: 'worker', action: 'retry', attempt: 1, reason: 'http_5xx', delayS: 1, receives: 1 } },
    ]);
  });

  it('DEL-RUN-4: the safety-net job of an event that failed inline is its dead-letter copy, logged as that, not as a second failure', async () => {
    // The inline attempt got a 400: one POST, the event failed on attempt 1.
    await db.outbox.add(recordAt(T0, 1, { status: 'failed', attempts: 1, lastError: 'http_4xx', lastHttpStatus: 400 }), job(1));
    const lines: { event: string; fields: Record<string, unknown> | undefined }[] = [];
    const log = {
      info: (event: string, fields?: Record<string, unknown>) => void lines.push({ event, fields }),
      warn: (event: string, fields?: Record<string, unknown>) => void lines.push({ event, fields }),
      error: () => undefined,
    };
    await worker({ log }).runDue();
    expect(webhook.requests).toHaveLength(0);
    expect(lines).toEqual([
      { event: 'delivery', fields: { eventId: id(1), via: 'worker', action: 'dead_letter_copy', attempt: 1, reason: 'http_4xx', receives: 1 } },
    ]);
    await expect(db.jobs.deadLetters()).resolves.toMatchObject([{ eventId: id(1), reason: 'http_4xx' }]);
  });

  it('DEL-LEASE-3: two workers over one job table make one POST for one job (the lease before it)', async () => {
    await db.outbox.add(recordAt(T0, 1), job(1));
    const release = gate();
    const posting = signal();
    webhook.add(async () => {
      posting.fire();
      await release.opened;
      return respond(200);
    });
    // The first worker's job-table lease runs out while its POST is still in flight (lease 0), so
    // the second worker (another process on the same database) sees the job due and receives it.
    const first = worker({ leaseMs: 0 }).runDue();
    await posting.fired;
    const second = worker().runDue();
    await expect(second).resolves.toBe(1);
    release.open();
    await first;
    expect(webhook.requests).toHaveLength(1);
    await expect(db.store.getEvent(id(1), clock.now())).resolves.toMatchObject({ status: 'delivered', attempts: 1 });
    await expect(db.jobs.all()).resolves.toEqual([]);
  });

  it('a redriven dead letter runs as redriven: its failed event gets a new round and is delivered', async () => {
    await db.outbox.add(recordAt(T0, 1), job(1));
    webhook.add(respond(404), respond(200));
    const pass = worker();
    await pass.runDue();
    await expect(db.jobs.redrive(clock.now())).resolves.toBe(1);
    await expect(db.jobs.get(id(1))).resolves.toMatchObject({ job: { ...job(1), redriven: true }, receives: 0 });
    await pass.runDue();
    const event = await db.store.getEvent(id(1), clock.now());
    expect(event).toMatchObject({ status: 'delivered' });
    expect(event?.log?.some((entry) => 'note' in entry && entry.note === 'redriven')).toBe(true);
  });

  it('runs at most `concurrency` attempts at once', async () => {
    for (let n = 1; n <= 5; n++) await db.outbox.add(recordAt(T0, n), job(n));
    let running = 0;
    let most = 0;
    const release = gate();
    const bothStarted = signal();
    for (let n = 1; n <= 5; n++) {
      webhook.add(async () => {
        most = Math.max(most, ++running);
        if (running === 2) bothStarted.fire();
        await release.opened;
        running--;
        return respond(200);
      });
    }
    const pass = worker({ concurrency: 2 });
    const first = pass.runDue();
    await bothStarted.fired;
    expect(pass.inFlight).toBe(2);
    release.open();
    await expect(first).resolves.toBe(2);
    await expect(pass.runDue()).resolves.toBe(2);
    await expect(pass.runDue()).resolves.toBe(1);
    expect(most).toBe(2);
  });
});

describe('the loop (real clock)', () => {
  async function setup(): Promise<{ db: EmbeddedDatabase; webhook: ScriptedWebhookClient; deps: DeliveryDeps }> {
    const db = await database(systemClock);
    await db.store.putSubscription(subscriptionAt(Date.now()), Date.now(), { kind: 'absent' });
    const webhook = new ScriptedWebhookClient();
    return { db, webhook, deps: { store: db.store, webhook, clock: systemClock, retryDelaysS: DELAYS } };
  }

  it('a job another process added (no wake) is picked up by polling', async () => {
    // The operator opened first, while no server ran; it writes after the server started.
    const operator = await database(systemClock, 'operator');
    const { webhook, deps, db } = await setup();
    const posted = signal();
    webhook.add(() => {
      posted.fire();
      return respond(200);
    });
    const { jobs, scheduleRead } = watched(db.jobs);
    const worker = startDeliveryWorker({ jobs, deps, pollIntervalMs: 100 });
    workers.push(worker);
    // Added once the first pass has found nothing and gone to sleep, so only a poll can find it.
    await scheduleRead;
    await operator.outbox.add(recordAt(Date.now(), 1), job(1));
    // Nothing wakes this worker: without its poll the attempt never comes and the test times out.
    await posted.fired;
  });

  it('a wake after an in-process add starts the attempt without waiting for the poll', async () => {
    const { webhook, deps, db } = await setup();
    const posted = signal();
    webhook.add(() => {
      posted.fire();
      return respond(200);
    });
    // The poll is far longer than the test's timeout: only the wake can start the attempt in time.
    const { jobs, scheduleRead } = watched(db.jobs);
    const worker = startDeliveryWorker({ jobs, deps, pollIntervalMs: 600_000 });
    workers.push(worker);
    db.onJobsChanged(() => worker.wake());
    await scheduleRead;
    await db.outbox.add(recordAt(Date.now(), 1), job(1));
    await posted.fired;
  });

  it('a retry is attempted again when it falls due, without a wake', async () => {
    const { webhook, deps, db } = await setup();
    const second = signal<number>();
    webhook.add(respond(503), () => {
      second.fire(Date.now());
      return respond(200);
    });
    // The poll is far longer than this test may run: only the worker's own timer for the retry's
    // due time can bring the second attempt (no upper bound on speed is asserted, so a loaded
    // machine whose fsyncs stall cannot fail it).
    const worker = startDeliveryWorker({ jobs: db.jobs, deps: { ...deps, retryDelaysS: [0.2, 1] }, pollIntervalMs: 600_000 });
    workers.push(worker);
    const added = Date.now();
    await db.outbox.add(recordAt(Date.now(), 1), job(1));
    worker.wake();
    const at = await second.fired;
    expect(at - added).toBeGreaterThanOrEqual(200);
  }, 60_000);

  it('a job that falls due between the pass and the read of the next due time is looked at again at once, not at the poll', async () => {
    // The loop on a clock the schedule moves: time passes while the worker reads it (a loaded
    // machine's slow read), so the pass finds nothing due at 100, and by the read of the next due
    // time (101) that job is due.
    const clock = new FakeClock(100);
    const first = signal<number>();
    const second = signal<number>();
    const looked = [first, second];
    const jobs = {
      due: async (now: number) => {
        looked.shift()?.fire(now);
        return [];
      },
      nextDueAt: async () => {
        clock.current = 101;
        return 101;
      },
      receive: async () => undefined,
      reschedule: async () => true,
      complete: async () => true,
      deadLetter: async () => true,
    } as unknown as EmbeddedDatabase['jobs'];
    // The poll is far longer than the test's timeout: only looking again at once finds the job.
    const worker = startDeliveryWorker({ jobs, deps: { clock, retryDelaysS: DELAYS } as unknown as DeliveryDeps, pollIntervalMs: 600_000 });
    workers.push(worker);
    await expect(first.fired).resolves.toBe(100);
    await expect(second.fired).resolves.toBe(101);
  });

  it('stop waits for the attempt in flight, takes no more work, and leaves queued jobs for the next start', async () => {
    const { webhook, deps, db } = await setup();
    const release = gate();
    const inFlight = signal();
    webhook.add(async () => {
      inFlight.fire();
      await release.opened;
      return respond(200);
    });
    const worker = startDeliveryWorker({ jobs: db.jobs, deps, concurrency: 1, pollIntervalMs: 20 });
    await db.outbox.add(recordAt(Date.now(), 1), job(1));
    worker.wake();
    await inFlight.fired;
    await db.outbox.add(recordAt(Date.now(), 2), job(2));
    const stopping = worker.stop();
    release.open();
    await stopping;
    // Read as soon as stop resolved: the attempt it waited for has recorded its outcome (a stop
    // that did not wait would resolve with the record still in flight).
    const record = await db.store.getEvent(id(1), Date.now());
    expect(record).toMatchObject({ status: 'delivered' });
    expect(webhook.requests).toHaveLength(1);
    await expect(db.jobs.all()).resolves.toMatchObject([{ eventId: id(2), receives: 0 }]);
  });
});
