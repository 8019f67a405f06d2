/**
 * The job table: the schedule is an ordered range of due rows; receiving counts and hides a job;
 * each change takes the row's receipt; dead letters keep why; a redrive brings them back.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openEmbeddedDatabase, type EmbeddedDatabase } from '../../../../lambda/adapters/embedded';
import { Limits } from '../../../../lambda/core/protocol';
import type { Clock, DeliveryJob, EventRecord } from '../../../../lambda/ports';

const T0 = Date.UTC(2030, 0, 1);
const id = (n: number) => `evt_${n.toString(16).padStart(32, '0')}`;
const record = (n: number): EventRecord => ({
  eventId: id(n),
  status: 'queued',
  subscriptionId: 'sub_a',
  attempts: 0,
  createdAt: T0,
  expiresAt: T0 + Limits.eventRecordMs,
  body: `{"n":${n}}`,
});
const job = (n: number): DeliveryJob => ({ eventId: id(n), subscriptionId: 'sub_a', body: `{"n":${n}}` });

let dir: string;
let db: EmbeddedDatabase;
const clock: Clock & { at: number } = {
  at: T0,
  now() {
    return this.at;
  },
  async sleep() {},
};

beforeEach(async () => {
  clock.at = T0;
  dir = await mkdtemp(join(tmpdir(), 'dm-dot-jobs-'));
  db = await openEmbeddedDatabase(dir, { role: 'server', clock });
});

afterEach(async () => {
  await db.close();
  await rm(dir, { recursive: true, force: true });
});

async function add(n: number, delayMs = 0): Promise<void> {
  await db.outbox.add(record(n), job(n), { delayMs });
}

describe('the schedule', () => {
  it('due gives the jobs due at now (inclusive), earliest first, at most limit', async () => {
    await add(1, 3000);
    await add(2, 1000);
    await add(3, 2000);
    await add(4, 2001);
    expect((await db.jobs.due(T0 + 2000, 10)).map((row) => row.eventId)).toEqual([id(2), id(3)]);
    expect((await db.jobs.due(T0 + 5000, 2)).map((row) => row.eventId)).toEqual([id(2), id(3)]);
    await expect(db.jobs.due(T0 + 999, 10)).resolves.toEqual([]);
  });

  it('nextDueAt is the earliest due time, undefined when there is no job', async () => {
    await expect(db.jobs.nextDueAt()).resolves.toBeUndefined();
    await add(1, 3000);
    await add(2, 1000);
    await expect(db.jobs.nextDueAt()).resolves.toBe(T0 + 1000);
  });
});

describe('LOCAL-2: receiving and settling a job', () => {
  it('a receive counts up and hides the job until its lease ends (the count surviving a restart: below)', async () => {
    await add(1);
    const received = await db.jobs.receive(id(1), T0, 60_000);
    expect(received).toMatchObject({ receives: 1, dueAt: T0 + 60_000, leasedUntil: T0 + 60_000 });
    await expect(db.jobs.get(id(1))).resolves.toMatchObject({ receives: 1 });
    await expect(db.jobs.due(T0 + 59_999, 10)).resolves.toEqual([]);
    await expect(db.jobs.due(T0 + 60_000, 10)).resolves.toHaveLength(1);
  });

  it('reschedule moves the job, keeps the receive count given, and ends the lease', async () => {
    await add(1);
    const received = (await db.jobs.receive(id(1), T0, 60_000))!;
    await expect(db.jobs.reschedule(id(1), T0 + 4000, received.receives, received.jobId)).resolves.toBe(true);
    const row = await db.jobs.get(id(1));
    expect(row).toMatchObject({ dueAt: T0 + 4000, receives: 1 });
    expect(row?.leasedUntil).toBeUndefined();
  });

  it('a stale receipt changes nothing (the job was replaced by a resend meanwhile)', async () => {
    await add(1);
    await expect(db.jobs.complete(id(1), 'not-this-job')).resolves.toBe(false);
    await expect(db.jobs.reschedule(id(1), T0 + 1, 5, 'not-this-job')).resolves.toBe(false);
    await expect(db.jobs.deadLetter(id(1), 'http_5xx', 5, 'not-this-job')).resolves.toBe(false);
    await expect(db.jobs.receive(id(1), T0, 1000, 'not-this-job')).resolves.toBeUndefined();
    await expect(db.jobs.get(id(1))).resolves.toMatchObject({ receives: 0, dueAt: T0 });
  });

  it('complete removes the job; counts follow', async () => {
    await add(1);
    await add(2);
    await expect(db.jobs.counts()).resolves.toEqual({ queued: 2, deadLetters: 0 });
    await expect(db.jobs.complete(id(1))).resolves.toBe(true);
    await expect(db.jobs.complete(id(1))).resolves.toBe(false);
    await expect(db.jobs.counts()).resolves.toEqual({ queued: 1, deadLetters: 0 });
  });

  it('an event updated to delivered loses its job in the same write (what the worker would do with it); any other status keeps it', async () => {
    await add(1);
    await add(2);
    await add(3);
    // Still queued: the safety net stays.
    await expect(db.store.updateEvent(id(1), { attempts: 1 }, { status: 'queued', attempts: 0 })).resolves.toBe(true);
    await expect(db.jobs.get(id(1))).resolves.toBeDefined();
    await expect(db.store.updateEvent(id(1), { status: 'delivered', attempts: 1, body: null }, { status: 'queued', attempts: 1 })).resolves.toBe(true);
    await expect(db.jobs.get(id(1))).resolves.toBeUndefined();
    // A write whose condition fails changes nothing, the job included.
    await expect(db.store.updateEvent(id(3), { status: 'delivered', attempts: 1, body: null }, { status: 'queued', attempts: 7 })).resolves.toBe(false);
    await expect(db.jobs.get(id(3))).resolves.toBeDefined();
    // Failed: its job is the worker's (it dead-letters a copy), never removed here.
    await expect(db.store.updateEvent(id(2), { status: 'failed', attempts: 1 }, { status: 'queued', attempts: 0 })).resolves.toBe(true);
    await expect(db.jobs.counts()).resolves.toEqual({ queued: 2, deadLetters: 0 });
    // A job the worker holds loses its row: its receipt then changes nothing.
    const held = (await db.jobs.receive(id(3), T0, 60_000))!;
    await expect(db.store.updateEvent(id(3), { status: 'delivered', attempts: 1, body: null }, { status: 'queued', attempts: 0 })).resolves.toBe(true);
    await expect(db.jobs.complete(id(3), held.jobId)).resolves.toBe(false);
    await expect(db.jobs.counts()).resolves.toEqual({ queued: 1, deadLetters: 0 });
  });

  it('LOCAL-2: a dead letter keeps the job, the reason, the receive count and when', async () => {
    await add(1);
    clock.at = T0 + 777;
    await expect(db.jobs.deadLetter(id(1), 'http_4xx', 3)).resolves.toBe(true);
    await expect(db.jobs.get(id(1))).resolves.toBeUndefined();
    await expect(db.jobs.deadLetters()).resolves.toStrictEqual([{ eventId: id(1), job: job(1), reason: 'http_4xx', receives: 3, deadLetteredAt: T0 + 777 }]);
    await expect(db.jobs.counts()).resolves.toEqual({ queued: 0, deadLetters: 1 });
  });
});

describe('CLI-9: redrive', () => {
  it('brings every dead letter back as a redriven job, due now, with a fresh receive count, and says how many', async () => {
    await add(1);
    await add(2);
    await db.jobs.deadLetter(id(1), 'http_5xx', 6);
    await db.jobs.deadLetter(id(2), 'receive_limit', 10);
    await expect(db.jobs.redrive(T0 + 5000)).resolves.toBe(2);
    await expect(db.jobs.deadLetters()).resolves.toEqual([]);
    const rows = await db.jobs.all();
    expect(rows.map((row) => ({ job: row.job, receives: row.receives, dueAt: row.dueAt }))).toStrictEqual([
      { job: { ...job(1), redriven: true }, receives: 0, dueAt: T0 + 5000 },
      { job: { ...job(2), redriven: true }, receives: 0, dueAt: T0 + 5000 },
    ]);
  });

  it('an event that has a job again (a resend) keeps that job', async () => {
    await add(1);
    await db.jobs.deadLetter(id(1), 'http_5xx', 6);
    await db.store.updateEvent(id(1), { status: 'failed' }, { status: 'queued' });
    const read = (await db.store.getEvent(id(1), T0))!;
    await db.outbox.reopen(read, { status: 'queued', attempts: 0 }, job(1));
    const resent = await db.jobs.get(id(1));
    await expect(db.jobs.redrive(T0 + 1)).resolves.toBe(1);
    await expect(db.jobs.get(id(1))).resolves.toStrictEqual(resent);
    await expect(db.jobs.deadLetters()).resolves.toEqual([]);
  });

  it('tells the listeners, so that the worker looks at once', async () => {
    await add(1);
    await db.jobs.deadLetter(id(1), 'http_5xx', 6);
    let heard = 0;
    db.onJobsChanged(() => heard++);
    await db.jobs.redrive(T0);
    expect(heard).toBe(1);
  });
});

describe('a job a dead server was attempting', () => {
  it('is due at once at the next server start, its receive count kept', async () => {
    await add(1);
    await db.jobs.receive(id(1), T0, 60_000);
    await db.close();
    clock.at = T0 + 1000;
    db = await openEmbeddedDatabase(dir, { role: 'server', clock });
    expect(db.report.releasedLeases).toBe(1);
    await expect(db.jobs.due(T0 + 1000, 10)).resolves.toMatchObject([{ eventId: id(1), receives: 1, dueAt: T0 + 1000 }]);
    expect((await db.jobs.get(id(1)))?.leasedUntil).toBeUndefined();
  });
});

describe('retention', () => {
  it('LOCAL-3, LOCAL-FAULT-7: the sweep removes an expired record and its job together, so no leftover job outlives its record', async () => {
    await add(1, 60 * 60_000);
    await add(2);
    const later = T0 + Limits.eventRecordMs + 30 * 24 * 60 * 60_000;
    const swept = await db.sweepExpired(later);
    expect(swept).toBeGreaterThanOrEqual(2);
    await expect(db.store.getEvent(id(1), later)).resolves.toBeUndefined();
    await expect(db.jobs.counts()).resolves.toEqual({ queued: 0, deadLetters: 0 });
    await expect(db.jobs.due(later, 10)).resolves.toEqual([]);
  });
});
