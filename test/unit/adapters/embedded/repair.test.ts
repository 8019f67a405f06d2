/**
 * The outbox invariant restored at every server start: each live `queued` record has a job.
 * Records are written without a job here through a second handle's `store.putEvent` (the port
 * allows it; only the outbox is used in the runtime), as an import or a hand edit would leave them.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openEmbeddedDatabase, type EmbeddedDatabase } from '../../../../lambda/adapters/embedded';
import { Limits } from '../../../../lambda/core/protocol';
import type { Clock, EventRecord } from '../../../../lambda/ports';

const T0 = Date.UTC(2030, 0, 1);
const clock: Clock = { now: () => T0, sleep: async () => undefined };
const id = (n: number) => `evt_${n.toString(16).padStart(32, '0')}`;
const record = (n: number, overrides: Partial<EventRecord> = {}): EventRecord => ({
  eventId: id(n),
  status: 'queued',
  subscriptionId: 'sub_a',
  generation: 'gen-a',
  attempts: 0,
  createdAt: T0 - 1000,
  expiresAt: T0 + Limits.eventRecordMs,
  body: `{"n":${n}}`,
  ...overrides,
});

let dir: string;
const opened: EmbeddedDatabase[] = [];

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'dm-dot-repair-'));
});

afterEach(async () => {
  for (const db of opened.splice(0)) await db.close();
  await rm(dir, { recursive: true, force: true });
});

/** Writes records with no job (as an operator process could), then starts a server. */
async function serverAfter(...records: EventRecord[]): Promise<EmbeddedDatabase> {
  const operator = await openEmbeddedDatabase(dir, { role: 'operator', clock });
  for (const event of records) await operator.store.putEvent(event);
  await operator.close();
  const db = await openEmbeddedDatabase(dir, { role: 'server', clock });
  opened.push(db);
  return db;
}

it('a queued record without a job gets one from its kept bytes, due now, and is reported', async () => {
  const db = await serverAfter(record(1));
  await expect(db.jobs.get(id(1))).resolves.toMatchObject({
    job: { eventId: id(1), subscriptionId: 'sub_a', generation: 'gen-a', body: '{"n":1}' },
    dueAt: T0,
    receives: 0,
  });
  await expect(db.store.getEvent(id(1), T0)).resolves.toStrictEqual(record(1));
  expect(db.report.repaired?.requeued).toEqual([id(1)]);
  expect(db.report.lines.join('\n')).toContain(`queued again from their kept bytes (${id(1)})`);
});

it('a queued record with neither job nor kept bytes is marked failed and reported', async () => {
  const { body: _none, ...withoutBody } = record(2);
  const db = await serverAfter(withoutBody);
  await expect(db.jobs.get(id(2))).resolves.toBeUndefined();
  await expect(db.store.getEvent(id(2), T0)).resolves.toMatchObject({ status: 'failed' });
  expect(db.report.repaired?.failed).toEqual([id(2)]);
});

it('a queued record that has its job is left alone, job and all', async () => {
  const first = await openEmbeddedDatabase(dir, { role: 'server', clock });
  await first.outbox.add(record(3), { eventId: id(3), subscriptionId: 'sub_a', body: 'the job bytes' }, { delayMs: 5000 });
  const job = await first.jobs.get(id(3));
  await first.close();
  const db = await openEmbeddedDatabase(dir, { role: 'server', clock });
  opened.push(db);
  await expect(db.jobs.get(id(3))).resolves.toStrictEqual(job);
  expect(db.report.repaired).toEqual({ requeued: [], failed: [] });
});

it('settled and expired records get no job', async () => {
  const db = await serverAfter(
    record(4, { status: 'delivered', attempts: 1 }),
    record(5, { status: 'failed', attempts: 6 }),
    record(6, { status: 'dropped' }),
    record(7, { expiresAt: T0 - 1 }),
  );
  await expect(db.jobs.all()).resolves.toEqual([]);
  await expect(db.store.getEvent(id(7), T0 - 2)).resolves.toMatchObject({ status: 'queued' });
});

it('an operator repairs nothing', async () => {
  const operator = await openEmbeddedDatabase(dir, { role: 'operator', clock });
  opened.push(operator);
  await operator.store.putEvent(record(8));
  const again = await openEmbeddedDatabase(dir, { role: 'operator', clock });
  opened.push(again);
  expect(again.report.repaired).toBeUndefined();
  await expect(again.jobs.all()).resolves.toEqual([]);
});
