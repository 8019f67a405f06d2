/**
 * The import of the earlier file layout (store.json, queue/, dead-letter/, as file-store.ts and
 * file-queue.ts wrote them): everything in one go on the first server start, old files renamed
 * aside with their contents intact, nothing imported twice.
 */
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openEmbeddedDatabase, type EmbeddedDatabase } from '../../../../lambda/adapters/embedded';
import { Limits } from '../../../../lambda/core/protocol';
import type { Clock, EventRecord, SubscriptionRecord } from '../../../../lambda/ports';

const T0 = Date.UTC(2030, 0, 1);
const clock: Clock = { now: () => T0, sleep: async () => undefined };
const id = (n: number) => `evt_${n.toString(16).padStart(32, '0')}`;

const subscription: SubscriptionRecord = {
  id: 'sub_a',
  generation: 'gen-a',
  url: 'https://a.example.com/hook',
  name: 'dot',
  secret: 'whsec_c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0',
  principal: 'principal-a',
  createdAt: T0 - 1000,
  refreshedAt: T0 - 1000,
  expiresAt: T0 + 3_600_000,
  lastError: null,
};

/** An event record; an override of `undefined` leaves the field out. */
const record = (n: number, overrides: Partial<EventRecord> = {}): EventRecord =>
  Object.fromEntries(
    Object.entries({
      eventId: id(n),
      status: 'queued',
      subscriptionId: 'sub_a',
      generation: 'gen-a',
      attempts: 0,
      createdAt: T0 - 1000,
      expiresAt: T0 + Limits.eventRecordMs,
      body: `{"eventId":"${id(n)}"}`,
      ...overrides,
    }).filter(([, value]) => value !== undefined),
  ) as unknown as EventRecord;

const jobOf = (n: number) => ({ eventId: id(n), subscriptionId: 'sub_a', generation: 'gen-a', body: `{"eventId":"${id(n)}"}` });

/** The items as file-store.ts wrote them: the record plus `pk` and `ttl`. */
const storeItems = [
  { ...subscription, pk: 'SUBSCRIPTION', ttl: Math.ceil((subscription.expiresAt + Limits.subscriptionItemGraceMs) / 1000) },
  // 1: queued, with its job file
  { ...record(1), pk: `EVENT#${id(1)}`, ttl: Math.ceil(record(1).expiresAt / 1000) },
  // 2: queued, its job only in a complete .json.tmp (the rename never happened)
  { ...record(2), pk: `EVENT#${id(2)}`, ttl: Math.ceil(record(2).expiresAt / 1000) },
  // 3: queued, its job in a half-written .json.tmp: the caller never got an answer
  { ...record(3), pk: `EVENT#${id(3)}`, ttl: Math.ceil(record(3).expiresAt / 1000) },
  // 4: queued, no job file at all, but its kept bytes: queued again
  { ...record(4), pk: `EVENT#${id(4)}`, ttl: Math.ceil(record(4).expiresAt / 1000) },
  // 5: queued, no job file and no kept bytes (from before they were kept): failed
  { ...record(5, { body: undefined }), pk: `EVENT#${id(5)}`, ttl: Math.ceil(record(5).expiresAt / 1000) },
  // 6: failed, in the dead letters
  { ...record(6, { status: 'failed', attempts: 6, lastError: 'http_5xx' }), pk: `EVENT#${id(6)}`, ttl: Math.ceil(record(6).expiresAt / 1000) },
  // 7: delivered
  {
    ...record(7, { status: 'delivered', attempts: 1, deliveredAt: T0 - 500, body: undefined }),
    pk: `EVENT#${id(7)}`,
    ttl: Math.ceil(record(7).expiresAt / 1000),
  },
  // 8: failed, its dead letter moved back into queue/ by the old `dm-dot redrive`
  { ...record(8, { status: 'failed', attempts: 6, lastError: 'timeout' }), pk: `EVENT#${id(8)}`, ttl: Math.ceil(record(8).expiresAt / 1000) },
  { pk: 'VERIFIED#k1', verifiedAt: T0 - 1000, ttl: Math.ceil((T0 - 1000 + Limits.verificationCacheMs) / 1000) },
  { pk: 'REPLAY#msg_1', claimedAt: T0 - 1000, expiresAt: T0 - 1000 + Limits.replayMemoryMs, ttl: Math.ceil((T0 - 1000 + Limits.replayMemoryMs) / 1000) },
  {
    pk: 'ANSWER#msg_evt',
    status: 200,
    body: '{ "a":1 }',
    storedAt: T0 - 1000,
    expiresAt: T0 + Limits.pupEventAnswerMs,
    ttl: Math.ceil((T0 + Limits.pupEventAnswerMs) / 1000),
  },
];

let dir: string;
const opened: EmbeddedDatabase[] = [];

async function writeLegacyLayout(): Promise<Record<string, string>> {
  const files: Record<string, string> = {
    'store.json': JSON.stringify({ version: 1, items: storeItems }),
    [`queue/${id(1)}.json`]: JSON.stringify({ job: jobOf(1), receives: 2, dueAt: T0 + 4000 }),
    [`queue/${id(2)}.json.tmp`]: JSON.stringify({ job: jobOf(2), receives: 0, dueAt: T0 }),
    [`queue/${id(3)}.json.tmp`]: JSON.stringify({ job: jobOf(3), receives: 0, dueAt: T0 }).slice(0, 25),
    [`queue/${id(8)}.json`]: JSON.stringify({
      job: jobOf(8),
      receives: 7,
      dueAt: T0 - 100,
      reason: 'timeout',
      deadLetteredAt: new Date(T0 - 200).toISOString(),
    }),
    [`dead-letter/${id(6)}.json`]: JSON.stringify({
      job: jobOf(6),
      receives: 6,
      dueAt: T0 - 300,
      reason: 'http_5xx',
      deadLetteredAt: new Date(T0 - 300).toISOString(),
    }),
  };
  await mkdir(join(dir, 'queue'));
  await mkdir(join(dir, 'dead-letter'));
  for (const [name, content] of Object.entries(files)) await writeFile(join(dir, name), content);
  return files;
}

async function server(): Promise<EmbeddedDatabase> {
  const db = await openEmbeddedDatabase(dir, { role: 'server', clock });
  opened.push(db);
  return db;
}

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'dm-dot-legacy-'));
});

afterEach(async () => {
  for (const db of opened.splice(0)) await db.close();
  await rm(dir, { recursive: true, force: true });
});

describe('LOCAL-7: the first server start on an earlier layout', () => {
  it('imports every store item, readable through the store as before', async () => {
    await writeLegacyLayout();
    const db = await server();
    await expect(db.store.getSubscription(T0)).resolves.toStrictEqual(subscription);
    await expect(db.store.getEvent(id(1), T0)).resolves.toStrictEqual(record(1));
    await expect(db.store.getEvent(id(7), T0)).resolves.toStrictEqual(record(7, { status: 'delivered', attempts: 1, deliveredAt: T0 - 500, body: undefined }));
    await expect(db.store.isVerified('k1', T0)).resolves.toBe(true);
    await expect(db.store.claimReplayId('msg_1', T0, 'new', 'POST /pup/challenge')).resolves.toMatchObject({ claimed: false });
    await expect(db.store.putInboundAnswer('msg_evt', { status: 200, body: '{}' }, T0)).resolves.toStrictEqual({
      stored: false,
      answer: { status: 200, body: '{ "a":1 }' },
    });
    expect(db.report.imported?.items).toEqual({ subscription: 1, events: 8, verified: 1, replay: 1, answers: 1, other: 0 });
  });

  it('imports queued jobs with their receive counts and due times, and a dead letter moved back as a redriven job', async () => {
    await writeLegacyLayout();
    const db = await server();
    await expect(db.jobs.get(id(1))).resolves.toMatchObject({ job: jobOf(1), receives: 2, dueAt: T0 + 4000 });
    await expect(db.jobs.get(id(8))).resolves.toMatchObject({ job: { ...jobOf(8), redriven: true }, receives: 0, dueAt: T0 });
  });

  it('imports a job from a complete .json.tmp, and marks failed the queued event whose .json.tmp is half-written', async () => {
    await writeLegacyLayout();
    const db = await server();
    await expect(db.jobs.get(id(2))).resolves.toMatchObject({ job: jobOf(2) });
    await expect(db.jobs.get(id(3))).resolves.toBeUndefined();
    await expect(db.store.getEvent(id(3), T0)).resolves.toMatchObject({ status: 'failed' });
    expect(db.report.imported).toMatchObject({ jobsFromTmp: 1, failedEvents: [id(3)] });
  });

  it('imports the dead letters with their reason, receive count and time', async () => {
    await writeLegacyLayout();
    const db = await server();
    await expect(db.jobs.deadLetters()).resolves.toStrictEqual([{ eventId: id(6), job: jobOf(6), reason: 'http_5xx', receives: 6, deadLetteredAt: T0 - 300 }]);
  });

  it('then gives the queued records left without a job one from their kept bytes, and fails those without', async () => {
    await writeLegacyLayout();
    const db = await server();
    await expect(db.jobs.get(id(4))).resolves.toMatchObject({ job: jobOf(4), receives: 0, dueAt: T0 });
    await expect(db.store.getEvent(id(5), T0)).resolves.toMatchObject({ status: 'failed' });
    expect(db.report.repaired).toMatchObject({ requeued: [id(4)], failed: [id(5)] });
    // Every queued record has its job now.
    const queued = await db.store.listEvents(T0, { status: 'queued' });
    for (const event of queued) await expect(db.jobs.get(event.eventId)).resolves.toBeDefined();
    expect(queued.map((event) => event.eventId).sort()).toEqual([id(1), id(2), id(4)]);
  });

  it('renames the old files aside with their contents intact, and says so in one line', async () => {
    const files = await writeLegacyLayout();
    const db = await server();
    expect(existsSync(join(dir, 'store.json'))).toBe(false);
    expect(existsSync(join(dir, 'queue'))).toBe(false);
    expect(existsSync(join(dir, 'dead-letter'))).toBe(false);
    for (const [name, content] of Object.entries(files)) {
      const moved = name
        .replace(/^store\.json$/, 'store.json.imported')
        .replace(/^queue\//, 'queue.imported/')
        .replace(/^dead-letter\//, 'dead-letter.imported/');
      await expect(readFile(join(dir, moved), 'utf8')).resolves.toBe(content);
    }
    const line = db.report.imported?.line ?? '';
    expect(line).toContain(dir);
    expect(line).toMatch(
      /1 subscription, 8 events, 1 verification, 1 replay id, 1 inbound answer, 3 queued jobs \(1 from a half-renamed file\), 1 dead letter, 1 event marked failed/,
    );
    expect(line).toContain('store.json -> store.json.imported');
    expect(db.report.lines).toContain(line);
  });

  it('a second start imports nothing and changes nothing', async () => {
    await writeLegacyLayout();
    const first = await server();
    const jobs = await first.jobs.all();
    const events = await first.store.listEvents(T0);
    await first.close();
    const second = await server();
    expect(second.report.imported).toBeUndefined();
    await expect(second.jobs.all()).resolves.toStrictEqual(jobs);
    await expect(second.store.listEvents(T0)).resolves.toStrictEqual(events);
  });

  it('items and jobs already in the database are kept (an import interrupted before its renames runs again safely)', async () => {
    const first = await server();
    const mine = record(1, { subscriptionId: 'sub_mine' });
    await first.outbox.add(mine, { ...jobOf(1), subscriptionId: 'sub_mine' });
    await first.close();
    await writeLegacyLayout();
    const db = await server();
    await expect(db.store.getEvent(id(1), T0)).resolves.toStrictEqual(mine);
    await expect(db.jobs.get(id(1))).resolves.toMatchObject({ job: { subscriptionId: 'sub_mine' }, receives: 0 });
    expect(db.report.imported?.alreadyPresent).toBe(2);
  });

  it('an old name aside that is taken already is kept: the new one gets a number', async () => {
    await writeLegacyLayout();
    await writeFile(join(dir, 'store.json.imported'), 'an earlier import');
    await server();
    await expect(readFile(join(dir, 'store.json.imported'), 'utf8')).resolves.toBe('an earlier import');
    expect((await readdir(dir)).filter((name) => name.startsWith('store.json'))).toEqual(['store.json.imported', 'store.json.imported.2']);
  });

  it('an operator does not import: it reports the earlier layout as pending and leaves the files', async () => {
    await writeLegacyLayout();
    const db = await openEmbeddedDatabase(dir, { role: 'operator', clock });
    opened.push(db);
    expect(db.report.legacyPending).toBe(true);
    await expect(db.store.getSubscription(T0)).resolves.toBeUndefined();
    expect(existsSync(join(dir, 'store.json'))).toBe(true);
  });
});
