/**
 * The LMDB environment of the local runtime: one file, `<state dir>/dm-dot.lmdb` (plus LMDB's lock
 * file `dm-dot.lmdb-lock` beside it), holding these sub-databases:
 *
 *   items          pk (the item keys of lambda/core/store/items.ts) -> the item (the record, its `ttl`)
 *   expiry         [ttl seconds, pk] -> 1: finds expired items for the sweep without a scan
 *   index:<name>   [partition, sort, pk] -> 1: each sparse index of the Store
 *   jobs           [dueAt ms, eventId] -> JobRow: the delivery schedule, ordered by due time
 *   jobs-by-event  eventId -> dueAt: finds an event's job (at most one per event)
 *   dead-letters   eventId -> DeadLetterRow
 *   leases         eventId -> leasedUntil of jobs a worker holds: released at a server's start
 *   meta           'schema', 'owner'
 *
 * Every write goes through `write`: one atomic step, serialized with every other writer of any
 * process (LMDB's writer lock), resolved once committed and fsynced (`overlappingSync: false`: the
 * commit promise is then the durability promise).
 *
 * Deliberately not here: what the records mean (the Store in lambda/core/store; jobs.ts), what to
 * do about a damaged page at run time (the caller decides), and repairing a file (never: file-check.ts).
 */
import { createHash, randomUUID } from 'node:crypto';
import { constants as fsConstants } from 'node:fs';
import { chmod, copyFile, link, lstat, mkdir, rm, stat, statfs } from 'node:fs/promises';
import { join } from 'node:path';
import { open, type Database, type Key, type RootDatabase } from 'lmdb';
import type { DeadLetterReason } from '../../core/protocol';
import { TableIndexes } from '../../core/store/items';
import { defined, type Item } from '../../core/store/table';
import type { DeliveryJob } from '../../ports';
import { StateUnreadable } from './errors';
import { asDamage, checkHeader, guard, moveAsideRemedy, probeInChild, unreadable, type DamageRecord } from './file-check';

export const DATABASE_FILE = 'dm-dot.lmdb';
/** Bumped when the layout of the sub-databases changes; a file of another layout is refused, never rewritten. */
const SCHEMA_VERSION = 2;

export type StoredItem = Record<string, unknown> & { ttl?: number };

export interface JobRow {
  /** Changes whenever the row is replaced by a new job for the same event: a receipt for the worker. */
  jobId: string;
  job: DeliveryJob;
  dueAt: number;
  /** Times a worker picked the job up (the safety net of SQS maxReceiveCount). */
  receives: number;
  enqueuedAt: number;
  /** Set while a worker holds it: the row's key has moved to this time (a visibility timeout). */
  leasedUntil?: number;
}

export interface DeadLetterRow {
  job: DeliveryJob;
  reason: DeadLetterReason;
  receives: number;
  deadLetteredAt: number;
}

type IndexKey = [string, number | string, string];

/** The sub-databases of the header's table, each behind `guard` (file-check.ts). */
function subDatabases(root: RootDatabase, file: string, damage: DamageRecord) {
  const sub = <V, K extends Key>(name: string) => guard(file, damage, name, root.openDB<V, K>(name, { encoding: 'json' }));
  return {
    items: sub<StoredItem, string>('items'),
    expiry: sub<number, [number, string]>('expiry'),
    jobs: sub<JobRow, [number, string]>('jobs'),
    jobIndex: sub<number, string>('jobs-by-event'),
    deadLetters: sub<DeadLetterRow, string>('dead-letters'),
    indexes: new Map(TableIndexes.map((index) => [index.name, sub<number, IndexKey>(`index:${index.name}`)])),
    leases: sub<number, string>('leases'),
    meta: sub<unknown, string>('meta'),
  };
}

export type Databases = ReturnType<typeof subDatabases> & {
  file: string;
  root: RootDatabase;
  damage: DamageRecord;
};

// One lmdb root per file and process, shared by every handle of this process. lmdb-js runs some
// writes synchronously on the main thread (opening a sub-database is one); with a second root on
// the same file they would wait for LMDB's writer lock while the first root's batch holds it,
// itself waiting for the main thread: a deadlock. A shared root hands its own batch over instead.
const shared = new Map<string, { dbs: Promise<Databases | undefined>; users: number }>();
const closing = new Map<string, Promise<void>>();

export interface OpenOptions {
  /** Create the environment when there is none. */
  create: boolean;
  /** Read every item of an existing file in a child process before mapping it (a server's start). */
  verify?: boolean;
}

/**
 * Opens the environment of `stateDir`. Undefined when there is none and `create` is false.
 * Throws StateUnreadable for a file that is not usable, before LMDB ever maps it. Every
 * successful open is matched by one `closeDatabases`.
 */
export async function openDatabases(stateDir: string, options: OpenOptions): Promise<Databases | undefined> {
  const file = join(stateDir, DATABASE_FILE);
  await closing.get(file);
  const entry = shared.get(file);
  if (entry) {
    entry.users++;
    const dbs = await entry.dbs.catch(() => undefined);
    if (dbs) return dbs;
    // The first open failed or found nothing: this one tries for itself.
    entry.users--;
    if (entry.users === 0 && shared.get(file) === entry) shared.delete(file);
    return openDatabases(stateDir, options);
  }
  const opening = { dbs: openRoot(stateDir, file, options), users: 1 };
  shared.set(file, opening);
  const dbs = await opening.dbs.catch((error: unknown) => {
    if (shared.get(file) === opening) shared.delete(file);
    throw error;
  });
  if (!dbs && shared.get(file) === opening) shared.delete(file);
  return dbs;
}

/** Gives back one open of `openDatabases`; the last one closes the environment. */
export async function closeDatabases(dbs: Databases): Promise<void> {
  const entry = shared.get(dbs.file);
  if (entry && --entry.users > 0) return;
  if (entry) shared.delete(dbs.file);
  const done = dbs.root.close().finally(() => closing.delete(dbs.file));
  closing.set(dbs.file, done);
  await done;
}

/** The file's stat, or undefined when it is absent; a file that cannot be examined is named. */
async function statOf(file: string) {
  return stat(file).catch((error: NodeJS.ErrnoException) => {
    if (error.code === 'ENOENT') return undefined;
    throw unreadable(file, error);
  });
}

async function openRoot(stateDir: string, file: string, options: OpenOptions): Promise<Databases | undefined> {
  const info = await statOf(file);
  if (info && !info.isFile()) throw new StateUnreadable(file, 'it is not a regular file', moveAsideRemedy(file));
  await refuseEarlierFiles(stateDir);
  if (!info && !options.create) return undefined;
  if (!info) await mkdir(stateDir, { recursive: true, mode: 0o700 });
  await refuseFullDisk(stateDir, file);
  if (!info) await createEnvironment(stateDir, file);
  // LMDB maps its lock file too: anything but a regular file there crashes the process (SIGSEGV).
  const lock = await statOf(`${file}-lock`);
  if (lock && !lock.isFile()) {
    throw new StateUnreadable(
      `${file}-lock`,
      "it is not a regular file (it is LMDB's lock file)",
      `Stop any dm-dot using this directory, remove it (rm -r '${file}-lock'); it is recreated at the next start and holds no data`,
    );
  }
  const header = await checkHeader(file);
  if (header === 'suspect') probeInChild(file);
  // A server reads it all before it serves (a file this open just created holds nothing to read).
  else if (options.verify && info) probeInChild(file, { suspect: false });
  let root: RootDatabase;
  try {
    root = open(file, { overlappingSync: false, maxDbs: 12, noSubdir: true });
  } catch (error) {
    throw unreadable(file, error);
  }
  // LMDB creates its files 0664 less the umask; the items hold the subscription's signing secret.
  // A file that is not ours to change (another user's we may read) keeps its mode.
  await Promise.all([file, `${file}-lock`].map((path) => chmod(path, 0o600).catch(() => undefined)));
  const damage: DamageRecord = { listeners: new Set() };
  try {
    // The layout first, from `meta` alone: opening a sub-database the file lacks writes it, and a
    // file of another layout is refused as it was.
    const schema = guard(file, damage, 'meta', root.openDB<unknown, string>('meta', { encoding: 'json' })).get('schema') ?? 1;
    if (schema === SCHEMA_VERSION) return { file, root, damage, ...subDatabases(root, file, damage) };
    if (typeof schema === 'number' && schema < SCHEMA_VERSION) throw earlierLayout(file, `layout ${schema}, this one reads ${SCHEMA_VERSION}`);
    throw new StateUnreadable(
      file,
      `it was written by a newer dm-dot (layout ${String(schema)}, this one reads ${SCHEMA_VERSION})`,
      'Run the dm-dot version that wrote it, or move it aside to start empty',
    );
  } catch (error) {
    await root.close().catch(() => undefined);
    throw error instanceof StateUnreadable ? error : unreadable(file, error);
  }
}

/** The files of the layout before the database file, which dm-dot no longer imports (docs/operating.md). */
const EARLIER_FILES = ['store.json', 'queue', 'dead-letter'];

function earlierLayout(path: string, what: string): StateUnreadable {
  return new StateUnreadable(
    path,
    `it was written by an earlier dm-dot (${what}), whose state this one no longer imports`,
    `Let the dm-dot that wrote it deliver what it holds, then move it aside (mv '${path}' '${path}.earlier') and start again; ` +
      'docs/operating.md, "Moving from an earlier layout", says what to carry over by hand',
  );
}

async function refuseEarlierFiles(stateDir: string): Promise<void> {
  for (const name of EARLIER_FILES) {
    const path = join(stateDir, name);
    // Any other failure to examine it is the directory's, and the open that follows names that.
    if (await lstat(path).catch(() => undefined)) throw earlierLayout(path, 'the layout before dm-dot.lmdb');
  }
}

/** Below this much free space a start is refused: LMDB maps its file and dies by SIGBUS when a page cannot be backed. */
const MIN_FREE_BYTES = 1024 * 1024;

async function refuseFullDisk(stateDir: string, file: string): Promise<void> {
  // No statfs here: LMDB's own write errors must do.
  const info = await statfs(stateDir).catch(() => undefined);
  const free = info ? Number(info.bavail) * Number(info.bsize) : Number.POSITIVE_INFINITY;
  if (free >= MIN_FREE_BYTES) return;
  throw new StateUnreadable(
    file,
    `the disk holding it is full (${Math.floor(free / 1024)} KiB free)`,
    `Free some space on the file system of ${stateDir} (at least ${MIN_FREE_BYTES / 1024 / 1024} MiB), then start again`,
  );
}

/**
 * Creates the environment under a temporary name and publishes it with link(), which fails when
 * the name exists: a process starting at the same moment never sees a half-created file (which
 * would look like a broken one), and of two creators exactly one file wins, the other's is dropped.
 */
async function createEnvironment(stateDir: string, file: string): Promise<void> {
  const temp = join(stateDir, `.${DATABASE_FILE}.new-${process.pid}-${randomUUID()}`);
  try {
    const root = open(temp, { overlappingSync: false, maxDbs: 12, noSubdir: true });
    try {
      await root.openDB<unknown, string>('meta', { encoding: 'json' }).put('schema', SCHEMA_VERSION);
    } finally {
      await root.close();
    }
    await chmod(temp, 0o600);
    await link(temp, file).catch(async (error: NodeJS.ErrnoException) => {
      if (error.code === 'EEXIST') return;
      // No hard links on this file system: an exclusive copy still never replaces a winner's file.
      if (!['EPERM', 'ENOTSUP', 'EOPNOTSUPP', 'EXDEV'].includes(error.code ?? '')) throw error;
      await copyFile(temp, file, fsConstants.COPYFILE_EXCL).catch((copy: NodeJS.ErrnoException) => {
        if (copy.code !== 'EEXIST') throw copy;
      });
    });
  } catch (error) {
    throw unreadable(file, error);
  } finally {
    await rm(temp, { force: true });
    await rm(`${temp}-lock`, { force: true });
  }
}

/**
 * Runs `fn` as one write (see the header). Always the asynchronous kind: a synchronous one would
 * block the main thread on LMDB's writer lock, the deadlock `shared` above describes.
 */
export function write<T>(dbs: Databases, fn: () => T): Promise<T> {
  ignoreOrphanCommitRejections();
  return dbs.root.childTransaction(fn).catch((error: unknown) => {
    // lmdb-js rejects a second promise with the real cause (ENOSPC, EIO, MDB_MAP_FULL) a moment later.
    const cause = (error as { commitError?: Promise<unknown> } | null)?.commitError;
    if (cause && typeof cause.then === 'function') cause.then(undefined, () => undefined);
    throw asDamage(dbs.file, dbs.damage, 'a write', error);
  });
}

let orphanGuard = false;

/**
 * A failed commit (a full disk) makes lmdb-js reject, besides the promise of every transaction in
 * the batch (which `write` callers hold and answer as `storage unavailable`), internal promises of
 * the same batch that no caller can reach; unheld, each would end the process as an unhandled
 * rejection. Those, and only those, are dropped here: every one has a held twin that reports it.
 * Any other unhandled rejection still ends the process, as it would without this listener.
 */
function ignoreOrphanCommitRejections(): void {
  if (orphanGuard) return;
  orphanGuard = true;
  process.on('unhandledRejection', (reason) => {
    if (reason instanceof Error && reason.message === 'Commit failed (see commitError for details)') return;
    throw reason;
  });
}

// LMDB keys are at most 1978 bytes and lmdb-js keys cannot hold NUL. Inbound ids (REPLAY#, ANSWER#)
// come from a request header of any length, so an oversized or odd one is kept under its hash:
// the same id always maps to the same key, which is all a claim needs.
const MAX_PLAIN_KEY_BYTES = 1024;

export function storageKey(pk: string): string {
  if (Buffer.byteLength(pk, 'utf8') <= MAX_PLAIN_KEY_BYTES && !pk.includes('\u0000')) return pk;
  const prefix = pk.slice(0, pk.indexOf('#') + 1);
  return `${prefix}~sha256~${createHash('sha256').update(pk, 'utf8').digest('hex')}`;
}

/** Inside a write: the item stored under `pk`, expired or not. */
export function getItem(dbs: Databases, pk: string): StoredItem | undefined {
  return dbs.items.get(storageKey(pk));
}

/**
 * Inside a write: stores the item under `pk`, or removes it (`undefined`), keeping the expiry index
 * and the Store's indexes in step. `old` is what this transaction read under `pk`, when it did.
 */
export function setItem(dbs: Databases, pk: string, item: Item | undefined, old: StoredItem | undefined = getItem(dbs, pk)): void {
  const key = storageKey(pk);
  const stored = item && (defined(item) as StoredItem);
  const before = indexEntries(dbs, key, old);
  const after = indexEntries(dbs, key, stored);
  // An entry the item keeps (most updates keep its ttl) is left alone: removing and putting it
  // back was two writes for nothing in every update's transaction.
  for (const [id, entry] of before) if (!after.has(id)) void entry.db.remove(entry.key);
  if (stored) void dbs.items.put(key, stored);
  else if (old) void dbs.items.remove(key);
  for (const [id, entry] of after) if (!before.has(id)) void entry.db.put(entry.key, 1);
}

/** The expiry and index entries of a stored item, by a string that tells them apart. */
function indexEntries(dbs: Databases, key: string, item: StoredItem | undefined): Map<string, { db: Database<number, Key>; key: Key }> {
  const entries = new Map<string, { db: Database<number, Key>; key: Key }>();
  const add = (name: string, db: unknown, entry: (string | number)[]) =>
    entries.set(`${name} ${JSON.stringify(entry)}`, { db: db as Database<number, Key>, key: entry });
  if (typeof item?.ttl === 'number') add('expiry', dbs.expiry, [item.ttl, key]);
  for (const index of TableIndexes) {
    const [partition, sort] = [item?.[index.partition], item?.[index.sort]];
    if (typeof partition === 'string' && (typeof sort === 'string' || typeof sort === 'number'))
      add(index.name, dbs.indexes.get(index.name)!, [partition, sort, key]);
  }
  return entries;
}
