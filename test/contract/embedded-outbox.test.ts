/**
 * The outbox contract against the embedded database's transactional outbox, and against the
 * sequential composition (core/outbox.ts) of the embedded store with a queue stub that can refuse
 * a job, so both ways of recording an event with its job keep the same promises. Then what only
 * the embedded outbox has: one transaction, so a failed add leaves nothing at all.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openEmbeddedDatabase, type EmbeddedDatabase } from '../../lambda/adapters/embedded';
import { DependencyUnavailable } from '../../lambda/core/errors';
import { sequentialOutbox } from '../../lambda/core/outbox';
import type { Clock, DeliveryJob, Queue } from '../../lambda/ports';
import { describeOutboxContract, OUTBOX_T0, outboxJob, outboxRecord, type QueuedJob } from './outbox.contract';

const fixedClock = (at: number): Clock & { at: number } => ({
  at,
  now() {
    return this.at;
  },
  async sleep(ms: number) {
    this.at += ms;
  },
});

/** JSON cannot encode a BigInt: the job row's write fails inside the transaction, after the record's. */
const unencodable = (job: DeliveryJob): DeliveryJob => ({ ...job, unencodable: BigInt(1) }) as unknown as DeliveryJob;

describeOutboxContract('embedded database (one transaction)', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'dm-dot-outbox-'));
  const clock = fixedClock(OUTBOX_T0);
  const db = await openEmbeddedDatabase(dir, { role: 'server', clock });
  return {
    outbox: db.outbox,
    store: db.store,
    jobs: async () => (await db.jobs.all()).map((row) => ({ eventId: row.eventId, job: row.job, delayMs: row.dueAt - clock.now() })),
    unqueueable: unencodable,
    takeJob: async (eventId) => {
      await db.jobs.complete(eventId);
    },
    cleanup: async () => {
      await db.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
});

/** A queue that keeps what it was given and refuses the jobs of events marked unqueueable. */
function queueStub() {
  const queued: QueuedJob[] = [];
  const refused = new Set<string>();
  const queue: Queue = {
    async enqueue(job, options) {
      if (refused.has(job.eventId)) throw new Error('queue stub: send refused');
      queued.push({ eventId: job.eventId, job, ...(options?.delayMs !== undefined ? { delayMs: options.delayMs } : {}) });
    },
  };
  return { queue, queued, refused };
}

describeOutboxContract('sequentialOutbox(embedded store, queue stub)', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'dm-dot-outbox-'));
  const db = await openEmbeddedDatabase(dir, { role: 'server' });
  const { queue, queued, refused } = queueStub();
  return {
    outbox: sequentialOutbox(db.store, queue),
    store: db.store,
    jobs: async () => [...queued],
    unqueueable: (job) => {
      refused.add(job.eventId);
      return job;
    },
    takeJob: async (eventId) => {
      for (let i = queued.length - 1; i >= 0; i--) if (queued[i]?.eventId === eventId) queued.splice(i, 1);
    },
    cleanup: async () => {
      await db.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
});

describe('LOCAL-3: embedded outbox', () => {
  let dir: string;
  let db: EmbeddedDatabase;
  const clock = fixedClock(OUTBOX_T0);

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'dm-dot-outbox-'));
    db = await openEmbeddedDatabase(dir, { role: 'server', clock });
  });

  afterEach(async () => {
    await db.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('LOCAL-3: a job row that cannot be written takes its record with it: neither is stored', async () => {
    const failure = db.outbox.add(outboxRecord(1), unencodable(outboxJob(1)));
    await expect(failure).rejects.toBeInstanceOf(DependencyUnavailable);
    await expect(failure.catch((error: DependencyUnavailable) => error.dependency)).resolves.toBe('storage');
    await expect(db.store.getEvent(outboxRecord(1).eventId, OUTBOX_T0)).resolves.toBeUndefined();
    await expect(db.jobs.all()).resolves.toEqual([]);
  });

  it('a database that cannot be written rejects the add as storage unavailable, and nothing is there after a reopen', async () => {
    await db.close();
    await expect(db.outbox.add(outboxRecord(2), outboxJob(2))).rejects.toMatchObject({ name: 'DependencyUnavailable', dependency: 'storage' });
    db = await openEmbeddedDatabase(dir, { role: 'server', clock });
    await expect(db.store.getEvent(outboxRecord(2).eventId, OUTBOX_T0)).resolves.toBeUndefined();
    await expect(db.jobs.all()).resolves.toEqual([]);
  });

  it('listeners hear of a committed add (the worker wakes), and not of a rejected one', async () => {
    const heard: string[] = [];
    db.onJobsChanged(() => heard.push('changed'));
    await db.outbox.add(outboxRecord(3), outboxJob(3));
    expect(heard).toEqual(['changed']);
    await db.outbox.add(outboxRecord(3), outboxJob(3)).catch(() => undefined);
    expect(heard).toEqual(['changed']);
  });

  it('a reopen replaces a job the event still had: one job per event, and the old receipt changes nothing', async () => {
    await db.outbox.add(outboxRecord(4), outboxJob(4));
    const old = await db.jobs.get(outboxRecord(4).eventId);
    await db.store.updateEvent(outboxRecord(4).eventId, { status: 'failed', attempts: 6 }, { status: 'queued' });
    const read = (await db.store.getEvent(outboxRecord(4).eventId, OUTBOX_T0))!;
    await expect(db.outbox.reopen(read, { status: 'queued', attempts: 0 }, outboxJob(4))).resolves.toBe(true);
    const rows = await db.jobs.all();
    expect(rows).toHaveLength(1);
    expect(rows[0]?.jobId).not.toBe(old?.jobId);
    await expect(db.jobs.complete(outboxRecord(4).eventId, old?.jobId)).resolves.toBe(false);
    await expect(db.jobs.all()).resolves.toHaveLength(1);
  });
});

describe('sequential outbox over the embedded store', () => {
  it('a refused send marks the record failed and names the event as queue unavailable', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'dm-dot-outbox-'));
    const db = await openEmbeddedDatabase(dir, { role: 'server' });
    try {
      const { queue, refused } = queueStub();
      refused.add(outboxRecord(5).eventId);
      const failure = sequentialOutbox(db.store, queue).add(outboxRecord(5), outboxJob(5));
      await expect(failure).rejects.toMatchObject({ name: 'DependencyUnavailable', dependency: 'queue', eventId: outboxRecord(5).eventId });
      await expect(db.store.getEvent(outboxRecord(5).eventId, OUTBOX_T0)).resolves.toMatchObject({ status: 'failed' });
    } finally {
      await db.close();
      await rm(dir, { recursive: true, force: true });
    }
  });
});
