/**
 * A damaged page inside an intact file (LOCAL-FAULT-10): a real LMDB file written by the embedded
 * store, closed, then a data page overwritten in part with junk (never pages 0 and 1, the meta
 * pages, so the header check still says the file is fine and its size is right). Each read that
 * meets it throws StateUnreadable naming the file and what to do, never a byte of it (the
 * subscription item holds the signing secret, and a JSON decoder's own message quotes the bytes
 * it could not read); the schedule still gives the jobs it can read; a server's start refuses it.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DATABASE_FILE, openEmbeddedDatabase, StateUnreadable } from '../../../../lambda/adapters/embedded';
import { Limits } from '../../../../lambda/core/protocol';
import type { DeliveryJob, EventRecord, SubscriptionRecord } from '../../../../lambda/ports';

const T0 = Date.UTC(2030, 0, 1);
const SECRET = `whsec_${Buffer.from('a signing secret that must never be printed').toString('base64')}`;
const id = (n: number) => `evt_${n.toString(16).padStart(32, '0')}`;
const record = (n: number): EventRecord => ({
  eventId: id(n),
  status: 'queued',
  subscriptionId: 'sub_a',
  attempts: 0,
  createdAt: T0,
  expiresAt: T0 + Limits.eventRecordMs,
  body: JSON.stringify({ n, message: 'm'.repeat(200) }),
});
const job = (n: number): DeliveryJob => ({ eventId: id(n), subscriptionId: 'sub_a', body: record(n).body! });
const subscription: SubscriptionRecord = {
  id: 'sub_a',
  url: 'https://dot.example/hook',
  name: 'message.created',
  secret: SECRET,
  principal: 'p',
  createdAt: T0,
  refreshedAt: T0,
  expiresAt: T0 + 7 * 24 * 3600_000,
};

const EVENTS = 30;
let dir: string;
let file: string;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'dm-dot-damaged-'));
  file = join(dir, DATABASE_FILE);
  const db = await openEmbeddedDatabase(dir, { role: 'server', clock: { now: () => T0, sleep: async () => undefined } });
  await db.store.putSubscription(subscription, T0, { kind: 'absent' });
  for (let n = 0; n < EVENTS; n++) await db.outbox.add(record(n), job(n));
  await db.close();
});

afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

// LMDB data format 2 as lmdb-js builds it: 4 KiB pages here, the page flags at byte 18 of a page's
// 24-byte header, P_LEAF 0x02. Pages 0 and 1 are the meta pages.
const PAGE = 4096;
const P_LEAF = 0x02;

/**
 * Overwrites `marker` with junk of the same length in every leaf page that holds it, old copies
 * included (copy-on-write leaves freed copies behind: the live one is among them). Node headers
 * and sizes stay as they were, so LMDB still finds the entry; its value no longer decodes.
 */
function garble(marker: string): number[] {
  const bytes = readFileSync(file);
  const needle = Buffer.from(marker);
  const hit: number[] = [];
  for (let page = 2; (page + 1) * PAGE <= bytes.length; page++) {
    const start = page * PAGE;
    if ((bytes.readUInt16LE(start + 18) & P_LEAF) === 0) continue;
    const at = bytes.subarray(start, start + PAGE).indexOf(needle);
    if (at < 0) continue;
    for (let i = 0; i < needle.length; i++) bytes[start + at + i] = 0xa5 ^ i;
    hit.push(page);
  }
  expect(hit.length).toBeGreaterThan(0);
  expect(hit).not.toContain(0);
  expect(hit).not.toContain(1);
  writeFileSync(file, bytes);
  return hit;
}

/** Neither the secret nor the junk's neighbourhood (the bytes a decoder would quote) is in the error. */
function expectNoContent(error: StateUnreadable): void {
  const all = [error.message, String(error.stack), JSON.stringify(error), String((error as Error & { cause?: unknown }).cause ?? '')].join('\n');
  expect(all).not.toContain(SECRET);
  expect(all).not.toContain('whsec_');
  expect(all).not.toContain('dot.example');
  expect(all).not.toMatch(/\u00a5|\ufffd/);
}

describe('a damaged page', () => {
  it('LOCAL-FAULT-10: a read that meets it throws StateUnreadable naming the file and what to do, and never a byte of the file (the signing secret)', async () => {
    // The bytes just before the secret: the decoder's own message would quote the secret.
    garble('"secret":"');
    const db = await openEmbeddedDatabase(dir, { role: 'operator' });
    try {
      const error = (await db.store.getSubscription(T0).catch((thrown: unknown) => thrown)) as StateUnreadable;
      expect(error).toBeInstanceOf(StateUnreadable);
      expect(error.file).toBe(file);
      expect(error.message).toContain(file);
      expect(error.message).toMatch(/a damaged page: an item could not be read/);
      expect(error.message).toMatch(/Stop any dm-dot server using it, then move it aside/);
      expect(error.message).toMatch(/restore the state directory from a backup \(docs\/operating\.md, "Back up the state directory"\)/);
      expectNoContent(error);
      // Kept, and told once: met again, it is not news.
      expect(db.damage()).toBe(error);
      const told: StateUnreadable[] = [];
      db.onDamage((damage) => told.push(damage));
      await expect(db.store.getStoredSubscription()).rejects.toBeInstanceOf(StateUnreadable);
      expect(told).toEqual([]);
      // The rest of the file still reads.
      await expect(db.store.getEvent(id(3), T0)).resolves.toMatchObject({ eventId: id(3) });
      await expect(db.jobs.due(T0, 100)).resolves.toHaveLength(EVENTS);
    } finally {
      await db.close();
    }
  });

  it('LOCAL-FAULT-10: the schedule still gives every job it can read, leaves out the damaged rows, and keeps the damage for whoever reports it', async () => {
    // Two job rows (their value, not their key): `"job":{"eventId":"evt_…"` is in a job row only.
    garble(`"job":{"eventId":"${id(4)}"`);
    garble(`"job":{"eventId":"${id(17)}"`);
    const db = await openEmbeddedDatabase(dir, { role: 'operator' });
    try {
      for (let pass = 0; pass < 3; pass++) {
        const due = (await db.jobs.due(T0, 100)).map((row) => row.eventId);
        expect(due).toHaveLength(EVENTS - 2);
        expect(due).not.toContain(id(4));
        expect(due).not.toContain(id(17));
      }
      // The limit counts readable rows only: a damaged row takes no one's place.
      await expect(db.jobs.due(T0, EVENTS - 2)).resolves.toHaveLength(EVENTS - 2);
      const damage = db.damage()!;
      expect(damage).toBeInstanceOf(StateUnreadable);
      expect(damage.message).toMatch(/a value in jobs does not decode/);
      expectNoContent(damage);
      // A read of the whole table is not quietly short: it says so.
      await expect(db.jobs.all()).rejects.toBeInstanceOf(StateUnreadable);
    } finally {
      await db.close();
    }
  });

  it('LOCAL-FAULT-10: whoever listens hears of it once, however many reads meet it', async () => {
    garble(`"job":{"eventId":"${id(4)}"`);
    const db = await openEmbeddedDatabase(dir, { role: 'operator' });
    try {
      const told: string[] = [];
      db.onDamage((damage) => told.push(damage.message));
      for (let pass = 0; pass < 5; pass++) await db.jobs.due(T0, 100);
      await expect(db.jobs.all()).rejects.toBeInstanceOf(StateUnreadable);
      expect(told).toEqual([db.damage()!.message]);
    } finally {
      await db.close();
    }
  });

  it('LOCAL-FAULT-10: a server does not start on it: the read of the whole file at its start refuses it, names it, and leaves it as it was', async () => {
    garble(`"eventId":"${id(9)}"`);
    const before = await readFile(file);
    const error = (await openEmbeddedDatabase(dir, { role: 'server' }).then(
      async (db) => {
        await db.close();
        return undefined;
      },
      (thrown: unknown) => thrown,
    )) as StateUnreadable;
    expect(error).toBeInstanceOf(StateUnreadable);
    expect(error.file).toBe(file);
    expect(error.message).toMatch(/a damaged page: an item could not be read \(a value in \S+ does not decode\)/);
    expect(error.message).toMatch(/move it aside/);
    expectNoContent(error);
    await expect(readFile(file)).resolves.toEqual(before);
  }, 30_000);
});
