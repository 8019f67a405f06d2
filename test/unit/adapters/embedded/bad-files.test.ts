/**
 * Bad files are loud: a database file that cannot be used, or a file of an earlier layout, makes
 * the open throw StateUnreadable naming that file, and leaves the file as it was. (LMDB itself
 * would crash the process on most of these, so each test is also proof that it did not.)
 */
import { chmod, mkdir, mkdtemp, readFile, rm, stat, truncate, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { open } from 'lmdb';
import { DATABASE_FILE, openEmbeddedDatabase, StateUnreadable } from '../../../../lambda/adapters/embedded';
import { Limits } from '../../../../lambda/core/protocol';
import { probeInChild } from '../../../../lambda/adapters/embedded/file-check';
import { checkHeader } from '../../../../lambda/adapters/embedded/file-check';

const T0 = Date.UTC(2030, 0, 1);
const EVENT_ID = 'evt_0123456789abcdef0123456789abcdef';

let dir: string;
let file: string;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'dm-dot-bad-'));
  file = join(dir, DATABASE_FILE);
});

afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function refusal(role: 'server' | 'operator' = 'server'): Promise<StateUnreadable> {
  const error = await openEmbeddedDatabase(dir, { role }).then(
    async (db) => {
      await db.close();
      return undefined;
    },
    (thrown: unknown) => thrown,
  );
  expect(error).toBeInstanceOf(StateUnreadable);
  return error as StateUnreadable;
}

describe('the database file', () => {
  it('a file of garbage in its place is refused, named, and left as it was', async () => {
    const garbage = Buffer.from('garbage'.repeat(1000));
    await writeFile(file, garbage);
    const error = await refusal();
    expect(error.file).toBe(file);
    expect(error.message).toContain(file);
    expect(error.message).toMatch(/not a dm-dot database/);
    expect(error.message).toMatch(/Move it aside/);
    await expect(readFile(file)).resolves.toEqual(garbage);
  });

  it('a file of zeros (no LMDB header) is refused, for the operator too', async () => {
    await writeFile(file, Buffer.alloc(8192));
    const error = await refusal('operator');
    expect(error.file).toBe(file);
  });

  it('an empty file is refused rather than silently initialized', async () => {
    await writeFile(file, '');
    await refusal();
    await expect(stat(file)).resolves.toMatchObject({ size: 0 });
  });

  it('a database truncated under its data is refused, and reading it never crashes this process', async () => {
    const db = await openEmbeddedDatabase(dir, { role: 'server' });
    for (let i = 0; i < 20; i++) {
      await Promise.all(
        Array.from({ length: 100 }, (_, j) =>
          db.store.putEvent({
            eventId: `evt_${(i * 100 + j).toString(16).padStart(32, '0')}`,
            status: 'delivered',
            subscriptionId: 'sub_a',
            attempts: 1,
            createdAt: T0,
            expiresAt: T0 + Limits.eventRecordMs,
            log: [{ at: T0, outcome: 'delivered', statusClass: '2xx', durationMs: 1, counted: true }],
          }),
        ),
      );
    }
    await db.close();
    const size = (await stat(file)).size;
    await truncate(file, Math.floor(size / 2));
    const error = await refusal();
    expect(error.file).toBe(file);
    expect(error.message).toMatch(/damaged or truncated/);
  }, 30_000);

  it('the child-process read that settles a suspect header passes a healthy database, open in another process or not', async () => {
    // It used to open sub-databases while listing them, which ends the listing's read (MDB_BAD_TXN):
    // a server starting beside another one that was still growing a new file called it damaged.
    const db = await openEmbeddedDatabase(dir, { role: 'server' });
    await db.store.putEvent({
      eventId: `evt_${'1'.repeat(32)}`,
      status: 'queued',
      subscriptionId: 'sub_a',
      attempts: 0,
      createdAt: T0,
      expiresAt: T0 + Limits.eventRecordMs,
    });
    expect(() => probeInChild(file)).not.toThrow();
    await db.close();
    expect(() => probeInChild(file)).not.toThrow();
  }, 30_000);

  it('a healthy database growing under a writer never reads as suspect (the size is taken after the headers)', async () => {
    // The size used to be read before the headers: a commit in between named pages past it, and
    // `dm-dot status` beside a busy server read its whole file and reported a damaged page found
    // elsewhere as though the file could not be opened. Values past a page make every commit grow the file.
    const root = open(file, { overlappingSync: false, noSubdir: true });
    const items = root.openDB<string, string>('items', { encoding: 'json' });
    await items.put('first', 'x');
    let writing = true;
    let commits = 0;
    const writer = (async () => {
      while (writing) await items.put(`k${commits++}`, 'v'.repeat(40_000));
    })();
    const verdicts = new Set<string>();
    try {
      for (let n = 0; n < 5_000 || commits < 300; n++) verdicts.add(await checkHeader(file));
    } finally {
      writing = false;
      await writer;
      await root.close();
    }
    expect([...verdicts]).toEqual(['ok']);
  }, 60_000);
  it('a database written by a newer dm-dot is refused, not rewritten', async () => {
    await openEmbeddedDatabase(dir, { role: 'server' }).then((db) => db.close());
    const env = open(file, { overlappingSync: false, noSubdir: true, maxDbs: 12 });
    await env.openDB('meta', { encoding: 'json' }).put('schema', 99);
    await env.close();
    const error = await refusal();
    expect(error.message).toMatch(/newer dm-dot \(layout 99/);
    const again = open(file, { overlappingSync: false, noSubdir: true, maxDbs: 12 });
    expect(again.openDB('meta', { encoding: 'json' }).get('schema')).toBe(99);
    await again.close();
  });

  it('a directory in its place is refused', async () => {
    await mkdir(file);
    const error = await refusal();
    expect(error.file).toBe(file);
    expect(error.message).toMatch(/not a regular file/);
  });

  it('LOCAL-FAULT-4: a lock file that is not a file (a directory) is refused, named, with what to do, before LMDB maps it', async () => {
    await openEmbeddedDatabase(dir, { role: 'server' }).then((db) => db.close());
    await rm(`${file}-lock`, { force: true });
    await mkdir(`${file}-lock`);
    const error = await refusal();
    expect(error.file).toBe(`${file}-lock`);
    expect(error.message).toMatch(/not a regular file/);
    expect(error.message).toMatch(/remove it/);
  });

  const asRoot = typeof process.getuid === 'function' && process.getuid() === 0;
  (asRoot ? it.skip : it)('a file this user may not read is refused as a permission problem', async () => {
    await openEmbeddedDatabase(dir, { role: 'server' }).then((db) => db.close());
    await chmod(file, 0o000);
    try {
      const error = await refusal();
      expect(error.message).toMatch(/permission denied/);
    } finally {
      await chmod(file, 0o600);
    }
  });
});

describe('LOCAL-20: an earlier layout is refused, named, and left as it was', () => {
  it.each(['server', 'operator'] as const)('a database file of layout 1 (%s)', async (role) => {
    const lmdbFile = () => open(file, { overlappingSync: false, noSubdir: true, maxDbs: 12 });
    const env = lmdbFile();
    await env.openDB('meta', { encoding: 'json' }).put('schema', 1);
    await env.openDB('items', { encoding: 'json' }).put(`EVENT#${EVENT_ID}`, { eventId: EVENT_ID, status: 'queued' });
    await env.openDB('queued', { encoding: 'json' }).put(`EVENT#${EVENT_ID}`, 1);
    await env.close();
    const before = await readFile(file);
    const error = await refusal(role);
    expect(error.file).toBe(file);
    expect(error.message).toMatch(/earlier dm-dot \(layout 1, this one reads 2\).*no longer imports.*"Moving from an earlier layout"/);
    const again = lmdbFile();
    expect(again.openDB('meta', { encoding: 'json' }).get('schema')).toBe(1);
    expect(again.openDB('items', { encoding: 'json' }).get(`EVENT#${EVENT_ID}`)).toEqual({ eventId: EVENT_ID, status: 'queued' });
    expect(again.openDB('queued', { encoding: 'json' }).get(`EVENT#${EVENT_ID}`)).toBe(1);
    await again.close();
    expect((await readFile(file)).equals(before)).toBe(true);
  });

  it.each([
    ['store.json', 'file'],
    ['queue', 'directory'],
    ['dead-letter', 'directory'],
  ] as const)('the layout before the database file: %s, as a %s, beside a database or not', async (name, kind) => {
    const path = join(dir, name);
    const body = '{"version":1,"items":[]}';
    if (kind === 'file') await writeFile(path, body);
    else await mkdir(join(path, 'inner'), { recursive: true });
    for (const withDatabase of [false, true]) {
      if (withDatabase) {
        await rm(path, { recursive: true });
        await openEmbeddedDatabase(dir, { role: 'server' }).then((db) => db.close());
        if (kind === 'file') await writeFile(path, body);
        else await mkdir(join(path, 'inner'), { recursive: true });
      }
      for (const role of ['server', 'operator'] as const) {
        const error = await refusal(role);
        expect(error.file).toBe(path);
        expect(error.message).toMatch(/layout before dm-dot\.lmdb.*no longer imports.*move it aside/);
      }
      // Nothing was created, moved or changed.
      await expect(
        stat(file).then(
          () => true,
          () => false,
        ),
      ).resolves.toBe(withDatabase);
      if (kind === 'file') await expect(readFile(path, 'utf8')).resolves.toBe(body);
      else expect((await stat(join(path, 'inner'))).isDirectory()).toBe(true);
    }
  });
});
