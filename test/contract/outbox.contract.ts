/**
 * The outbox contract (ports.Outbox) that every outbox passes: the embedded database's
 * transactional outbox and the sequential composition of a Store and a Queue (core/outbox.ts).
 *
 * The rule above all: after any `add` or `reopen`, resolved or rejected, there is never a
 * `queued` record without a job. An adapter shows how its job write can fail through
 * `unqueueable(job)`, which returns a job that this adapter's queue cannot take.
 *
 * Deliberately not here: how the adapter fails (one transaction or a compensating write: the
 * adapters' own tests), and delivery of the jobs.
 */
import { DependencyUnavailable } from '../../lambda/core/errors';
import type { DeliveryJob, EventRecord, LogEntry, Outbox, Store } from '../../lambda/ports';
import { Limits } from '../../lambda/core/protocol';

export interface QueuedJob {
  eventId: string;
  job: DeliveryJob;
  /** How long after its add the job becomes due (0 or absent: at once). */
  delayMs?: number;
}

export interface OutboxHarness {
  outbox: Outbox;
  store: Store;
  /** Every job queued and not yet taken, in the order queued. */
  jobs(): Promise<QueuedJob[]>;
  /** A job of the same event that this adapter cannot queue. */
  unqueueable(job: DeliveryJob): DeliveryJob;
  /** What a worker does when an event settles: its job is taken off the queue. */
  takeJob(eventId: string): Promise<void>;
  cleanup(): Promise<void>;
}

export type OutboxFactory = () => Promise<OutboxHarness>;

const SECOND = 1000;
/** The caller's clock: whole seconds, a year ahead of the wall clock (see store.contract.ts). */
export const OUTBOX_T0 = Math.floor(Date.now() / SECOND) * SECOND + 365 * 24 * 3600 * SECOND;

const id = (n: number) => `evt_${n.toString(16).padStart(32, '0')}`;

export function outboxRecord(n: number, overrides: Partial<EventRecord> = {}): EventRecord {
  return {
    eventId: id(n),
    status: 'queued',
    subscriptionId: 'sub_a',
    generation: 'gen-a',
    attempts: 0,
    createdAt: OUTBOX_T0,
    expiresAt: OUTBOX_T0 + Limits.eventRecordMs,
    body: `{"eventId":"${id(n)}","name":"message.created","data":{"message":"m${n}"}}`,
    notBefore: OUTBOX_T0 + 4 * SECOND,
    ...overrides,
  };
}

export function outboxJob(n: number, overrides: Partial<DeliveryJob> = {}): DeliveryJob {
  return { eventId: id(n), subscriptionId: 'sub_a', generation: 'gen-a', body: outboxRecord(n).body!, ...overrides };
}

export function describeOutboxContract(name: string, factory: OutboxFactory): void {
  describe(`Outbox contract: ${name}`, () => {
    let harness: OutboxHarness;

    beforeEach(async () => {
      harness = await factory();
    });

    afterEach(async () => {
      await harness.cleanup();
    });

    const jobsOf = async (eventId: string) => (await harness.jobs()).filter((queued) => queued.eventId === eventId);

    /** The rule: every queued record has a job. */
    async function expectNoQueuedRecordWithoutJob(): Promise<void> {
      const queued = await harness.store.listEvents(OUTBOX_T0, { status: 'queued' });
      const jobIds = new Set((await harness.jobs()).map((queuedJob) => queuedJob.eventId));
      expect(queued.map((record) => record.eventId).filter((eventId) => !jobIds.has(eventId))).toEqual([]);
    }

    describe('add', () => {
      it('DEL-PIPE-2: records the event exactly as given and queues its job', async () => {
        await harness.outbox.add(outboxRecord(1), outboxJob(1));
        await expect(harness.store.getEvent(id(1), OUTBOX_T0)).resolves.toStrictEqual(outboxRecord(1));
        const jobs = await jobsOf(id(1));
        expect(jobs).toHaveLength(1);
        expect(jobs[0]?.job).toStrictEqual(outboxJob(1));
        expect(jobs[0]?.delayMs ?? 0).toBe(0);
      });

      it('queues the job with the delay it was given', async () => {
        await harness.outbox.add(outboxRecord(2), outboxJob(2), { delayMs: 7 * SECOND });
        expect((await jobsOf(id(2)))[0]?.delayMs).toBe(7 * SECOND);
      });

      it('DEL-PIPE-2: an id that exists is refused as storage unavailable, and the first record and its one job stay', async () => {
        await harness.outbox.add(outboxRecord(3), outboxJob(3));
        const second = harness.outbox.add(
          outboxRecord(3, { subscriptionId: 'sub_b', createdAt: OUTBOX_T0 + SECOND }),
          outboxJob(3, { subscriptionId: 'sub_b' }),
        );
        await expect(second).rejects.toBeInstanceOf(DependencyUnavailable);
        await expect(second.catch((error: DependencyUnavailable) => error.dependency)).resolves.toBe('storage');
        await expect(harness.store.getEvent(id(3), OUTBOX_T0)).resolves.toStrictEqual(outboxRecord(3));
        const jobs = await jobsOf(id(3));
        expect(jobs.map((queued) => queued.job)).toStrictEqual([outboxJob(3)]);
      });

      it('DEL-OUT-1: a job that cannot be queued rejects the add, and leaves no queued record without a job', async () => {
        await expect(harness.outbox.add(outboxRecord(4), harness.unqueueable(outboxJob(4)))).rejects.toBeInstanceOf(DependencyUnavailable);
        const record = await harness.store.getEvent(id(4), OUTBOX_T0);
        expect(record === undefined || record.status !== 'queued').toBe(true);
        await expect(jobsOf(id(4))).resolves.toEqual([]);
        await expectNoQueuedRecordWithoutJob();
      });

      it('DEL-OUT-1: across adds that succeed and adds that fail, every queued record has a job', async () => {
        const results = await Promise.allSettled(
          Array.from({ length: 12 }, (_, i) =>
            harness.outbox.add(outboxRecord(100 + i), i % 3 === 0 ? harness.unqueueable(outboxJob(100 + i)) : outboxJob(100 + i)),
          ),
        );
        expect(results.filter((result) => result.status === 'rejected')).toHaveLength(4);
        expect((await harness.store.listEvents(OUTBOX_T0, { status: 'queued' })).map((record) => record.eventId).sort()).toEqual(
          Array.from({ length: 12 }, (_, i) => i)
            .filter((i) => i % 3 !== 0)
            .map((i) => id(100 + i)),
        );
        await expectNoQueuedRecordWithoutJob();
      });
    });

    describe('reopen (an operator resend)', () => {
      const note: LogEntry = { at: OUTBOX_T0 + 60 * SECOND, note: 'resent' };
      const _failed = () => outboxRecord(5, { status: 'failed', attempts: 6, lastError: 'http_5xx', lastHttpStatus: 503, notBefore: undefined });
      const patch = { status: 'queued', attempts: 0, lastError: null, notBefore: OUTBOX_T0 + 60 * SECOND, appendLog: note } as const;

      const resend = outboxJob(5, { generation: 'gen-resend' });

      async function settledEvent(): Promise<EventRecord> {
        // Recorded through the outbox like any other event, then settled: its job is gone.
        await harness.outbox.add(outboxRecord(5), outboxJob(5));
        await harness.takeJob(id(5));
        expect(
          await harness.store.updateEvent(
            id(5),
            { status: 'failed', attempts: 6, lastError: 'http_5xx', lastHttpStatus: 503 },
            { status: 'queued', attempts: 0 },
          ),
        ).toBe(true);
        const read = await harness.store.getEvent(id(5), OUTBOX_T0);
        expect(read).toMatchObject({ status: 'failed', attempts: 6 });
        await expect(jobsOf(id(5))).resolves.toEqual([]);
        return read!;
      }

      it('applies the patch and queues the job when the record is still as read', async () => {
        const read = await settledEvent();
        await expect(harness.outbox.reopen(read, patch, resend)).resolves.toBe(true);
        const { appendLog: _appended, ...fields } = patch;
        await expect(harness.store.getEvent(id(5), OUTBOX_T0)).resolves.toStrictEqual({ ...read, ...fields, log: [note] });
        const jobs = await jobsOf(id(5));
        expect(jobs.map((queued) => queued.job)).toStrictEqual([resend]);
        expect(jobs[0]?.delayMs ?? 0).toBe(0);
      });

      it('changes nothing and queues nothing when the status changed since the read', async () => {
        const read = await settledEvent();
        await harness.store.updateEvent(id(5), { status: 'dropped' }, { status: 'failed' });
        const jobsBefore = await harness.jobs();
        const current = await harness.store.getEvent(id(5), OUTBOX_T0);
        await expect(harness.outbox.reopen(read, patch, resend)).resolves.toBe(false);
        await expect(harness.store.getEvent(id(5), OUTBOX_T0)).resolves.toStrictEqual(current);
        await expect(harness.jobs()).resolves.toStrictEqual(jobsBefore);
      });

      it('changes nothing and queues nothing when the attempt count changed since the read', async () => {
        const read = await settledEvent();
        await harness.store.updateEvent(id(5), { attempts: 7 }, { status: 'failed', attempts: 6 });
        const jobsBefore = await harness.jobs();
        await expect(harness.outbox.reopen(read, patch, resend)).resolves.toBe(false);
        await expect(harness.store.getEvent(id(5), OUTBOX_T0)).resolves.toMatchObject({ status: 'failed', attempts: 7 });
        await expect(harness.jobs()).resolves.toStrictEqual(jobsBefore);
      });

      it('answers false for an event that does not exist, and queues nothing', async () => {
        const jobsBefore = await harness.jobs();
        await expect(harness.outbox.reopen(outboxRecord(6, { status: 'failed', attempts: 6 }), patch, outboxJob(6))).resolves.toBe(false);
        await expect(harness.store.getEvent(id(6), OUTBOX_T0)).resolves.toBeUndefined();
        await expect(harness.jobs()).resolves.toStrictEqual(jobsBefore);
      });

      it('a job that cannot be queued rejects the reopen, and the record keeps the status it was read with', async () => {
        const read = await settledEvent();
        const jobsBefore = await harness.jobs();
        await expect(harness.outbox.reopen(read, patch, harness.unqueueable(resend))).rejects.toBeInstanceOf(DependencyUnavailable);
        await expect(harness.store.getEvent(id(5), OUTBOX_T0)).resolves.toMatchObject({ status: read.status });
        await expect(harness.jobs()).resolves.toStrictEqual(jobsBefore);
        await expectNoQueuedRecordWithoutJob();
      });
    });
  });
}
