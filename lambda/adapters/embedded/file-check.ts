/**
 * What dm-dot checks of the LMDB file (environment.ts opens it), since LMDB itself crashes the
 * process (SIGSEGV, SIGBUS) on a file that is not an LMDB environment, is truncated or has a page
 * that crashes its reader: the header before mapping it (`checkHeader`), a read of every item in a
 * child process for a server's start or a suspect header (`probeInChild`), and every read and write
 * (`guard`: a damaged page inside an intact file shows only when it is read, and becomes one
 * StateUnreadable naming the file, never the bytes). Also the sentences that name a file dm-dot
 * cannot use and what to do.
 *
 * Deliberately not here: opening, writing or repairing the file (dm-dot never rewrites a damaged
 * file: the operator moves it aside or restores a backup), and what to do about a damaged page at
 * run time (the caller decides).
 */
import { spawnSync } from 'node:child_process';
import { constants as fsConstants } from 'node:fs';
import { open as openFile } from 'node:fs/promises';
import { endianness } from 'node:os';
import { StateUnreadable } from './errors';

/** What to do about a file dm-dot cannot use; `stopFirst` when a server may have it open (it was found while in use). */
export function moveAsideRemedy(file: string, options: { stopFirst?: boolean } = {}): string {
  const remedy =
    `move it aside (mv '${file}' '${file}.broken') to start with an empty state directory, or restore the state directory from a backup ` +
    '(docs/operating.md, "Back up the state directory"); dm-dot never overwrites it';
  return options.stopFirst ? `Stop any dm-dot server using it, then ${remedy}` : `${remedy[0]!.toUpperCase()}${remedy.slice(1)}`;
}

/** The sentence of a damaged page: the file, what could not be read, what to do. Never the bytes. */
export function damagedPage(file: string, detail: string): StateUnreadable {
  return new StateUnreadable(file, `it has a damaged page: an item could not be read (${detail})`, moveAsideRemedy(file, { stopFirst: true }));
}

export function unreadable(file: string, error: unknown): StateUnreadable {
  const code = (error as NodeJS.ErrnoException | null)?.code;
  if (code === 'EACCES' || code === 'EPERM') {
    return new StateUnreadable(
      file,
      'permission denied',
      'Give the user running dm-dot read and write access to it and to its directory (mode 0600 for the files)',
      { cause: error },
    );
  }
  const detail = error instanceof Error ? error.message : String(error);
  return new StateUnreadable(file, `it could not be opened (${detail})`, moveAsideRemedy(file), { cause: error });
}

// LMDB data format 2 (the lmdb-js build), 64-bit little-endian (the only builds lmdb ships prebuilt; others are not
// checked): a 24-byte page header, then MDB_meta.
const PAGE_HEADER_BYTES = 24;
const P_META = 0x08;
const MDB_MAGIC = 0xbeefc0de;
const MDB_DATA_VERSION = 2;
const META_BYTES = 144;

/**
 * Checks both meta pages of an existing file. Throws StateUnreadable when it is not an LMDB
 * environment of this format; 'suspect' when it is shorter than its newest meta page says (LMDB
 * may legitimately leave freed trailing pages unwritten, so only a read can tell).
 */
export async function checkHeader(file: string): Promise<'ok' | 'suspect'> {
  if (endianness() !== 'LE' || !['x64', 'arm64'].includes(process.arch)) return 'ok';
  const handle = await openFile(file, fsConstants.O_RDONLY).catch((error: unknown) => Promise.reject(unreadable(file, error)));
  try {
    const notLmdb = (why: string) => new StateUnreadable(file, `it is not a dm-dot database (${why})`, moveAsideRemedy(file));
    const first = await readAt(handle, 0, PAGE_HEADER_BYTES + META_BYTES);
    if (first.length === 0) throw notLmdb('the file is empty');
    if (first.length < PAGE_HEADER_BYTES + META_BYTES) throw notLmdb('the file is too short');
    const meta0 = parseMeta(first);
    if (meta0 === 'not_meta') throw notLmdb('no LMDB header');
    if (meta0 === 'bad_version') {
      throw new StateUnreadable(
        file,
        'it was written by an incompatible LMDB version',
        'Open it with the dm-dot version that wrote it, or move it aside to start empty',
      );
    }
    const second = await readAt(handle, meta0.pageSize, PAGE_HEADER_BYTES + META_BYTES);
    const meta1 = second.length === PAGE_HEADER_BYTES + META_BYTES ? parseMeta(second) : 'not_meta';
    if (typeof meta1 === 'string') throw new StateUnreadable(file, 'it is damaged or truncated (its second header page is missing)', moveAsideRemedy(file));
    const newest = meta1.txnId > meta0.txnId ? meta1 : meta0;
    // The size after the headers: a writer extends the file before it writes the header naming the
    // new pages, so a size read first could predate a commit and call a growing file truncated.
    const size = (await handle.stat()).size;
    return size < (newest.lastPage + 1) * newest.pageSize ? 'suspect' : 'ok';
  } finally {
    await handle.close();
  }
}

async function readAt(handle: Awaited<ReturnType<typeof openFile>>, position: number, length: number): Promise<Buffer> {
  const { buffer, bytesRead } = await handle.read({ buffer: Buffer.alloc(length), position });
  return buffer.subarray(0, bytesRead);
}

function parseMeta(page: Buffer): { pageSize: number; lastPage: number; txnId: bigint } | 'not_meta' | 'bad_version' {
  const flags = page.readUInt16LE(18);
  if ((flags & P_META) === 0 || page.readUInt32LE(PAGE_HEADER_BYTES) !== MDB_MAGIC) return 'not_meta';
  if ((page.readUInt32LE(PAGE_HEADER_BYTES + 4) & 0xffff) !== MDB_DATA_VERSION) return 'bad_version';
  const pageSize = page.readUInt32LE(PAGE_HEADER_BYTES + 24);
  if (pageSize < 512 || pageSize > 65536 || (pageSize & (pageSize - 1)) !== 0) return 'not_meta';
  const lastPage = Number(page.readBigUInt64LE(PAGE_HEADER_BYTES + 120));
  return { pageSize, lastPage, txnId: page.readBigUInt64LE(PAGE_HEADER_BYTES + 128) };
}

// Reads and decodes every entry of every sub-database (each leaf and overflow page) in a throwaway
// process: if the file is truncated under its data, or a page is damaged so that reading it
// crashes, the crash happens there, not in the server. A failure is told in one line of the
// probe's own words, never in the failing error's: JSON.parse's message quotes the bytes, which
// may be the subscription's signing secret; LMDB's names a code and a fixed text.
const PROBE_SAYS = 'dm-dot probe: ';
const PROBE = `
const [, moduleId, file] = process.argv;
const { open } = require(moduleId);
let where = 'the list of sub-databases';
try {
  const env = open(file, { readOnly: true, noSubdir: true, maxDbs: 12 });
  // The names first: opening a sub-database while the root's keys are being read ends that read
  // (MDB_BAD_TXN), which made a healthy file look damaged.
  const names = [...env.getKeys({ snapshot: true })].filter((name) => typeof name === 'string');
  for (const name of names) {
    where = name;
    const db = env.openDB(name, { encoding: 'binary', keyEncoding: 'binary' });
    // Every sub-database of dm-dot is JSON-encoded.
    for (const entry of db.getRange({ snapshot: true })) JSON.parse(entry.value.toString('utf8'));
  }
} catch (error) {
  const lmdb = typeof error?.code === 'number' ? String(error.message).split(':')[0] : undefined;
  const what = error instanceof SyntaxError ? 'a value in ' + where + ' does not decode' : (lmdb ?? error?.name ?? 'an error') + ' in ' + where;
  // Marked: LMDB itself may have printed a line of its own before it ("page … not found error").
  process.stderr.write('${PROBE_SAYS}' + what + '\\n');
  process.exit(3);
}
process.exit(0);
`;

/**
 * Reads every item of `file` in a child process (see PROBE). `suspect`: the header check found
 * the file shorter than its header says, so it may be truncated; otherwise it looks intact and
 * what the read finds is a damaged page.
 */
export function probeInChild(file: string, options: { suspect?: boolean } = {}): void {
  let module = 'lmdb';
  try {
    module = require.resolve('lmdb');
  } catch {
    // Resolved from the working directory instead.
  }
  // The file and the module travel as arguments: the probe needs nothing of this process's environment.
  const result = spawnSync(process.execPath, ['-e', PROBE, module, file], { env: {}, stdio: 'pipe', timeout: 120_000 });
  if (result.status === 0) return;
  // Exit 3 comes with the probe's own line; any other failure is the probe not running at all (no lmdb).
  const lines = (result.stderr?.toString('utf8') ?? '').split('\n').map((line) => line.trim());
  const said = result.status === 3 ? lines.find((line) => line.startsWith(PROBE_SAYS))?.slice(PROBE_SAYS.length, PROBE_SAYS.length + 200) : undefined;
  const firstLine = lines.find((line) => line !== '')?.slice(0, 200);
  const how = result.signal
    ? `reading it crashed the reader (${result.signal})`
    : (said ?? `reading it failed (exit ${String(result.status)}${firstLine ? `: ${firstLine}` : ''})`);
  if (options.suspect ?? true) throw new StateUnreadable(file, `it is damaged or truncated: ${how}`, moveAsideRemedy(file));
  throw damagedPage(file, how);
}

/** The first damaged page met in the file by this process, and who wants to hear of it (once). */
export interface DamageRecord {
  found?: StateUnreadable;
  listeners: Set<(damage: StateUnreadable) => void>;
}

/** LMDB's answers for a page that is not what it should be (lmdb.h): never the caller's mistake. */
const DAMAGE_CODES = new Map<number, string>([
  [-30797, 'MDB_PAGE_NOTFOUND'],
  [-30796, 'MDB_CORRUPTED'],
  [-30795, 'MDB_PANIC'],
  [-30793, 'MDB_INVALID'],
  [-30778, 'MDB_BAD_CHECKSUM'],
]);
/** "Transaction must abort": what every later read of a transaction that met a damaged page gets. */
const MDB_BAD_TXN = -30782;

/**
 * `error` as a damaged page of `file` when it is one (anything else is returned as it was). The
 * first one found is kept in `damage` and told to its listeners; a SyntaxError's own message is
 * dropped, since it quotes the bytes it could not decode.
 */
export function asDamage(file: string, damage: DamageRecord, where: string, error: unknown): unknown {
  if (error instanceof StateUnreadable) return error;
  const code = (error as { code?: unknown } | null)?.code;
  let found: StateUnreadable;
  // By name: lmdb-js may run its decoder in another realm (a test runner's), with its own SyntaxError.
  if ((error as Error | null)?.name === 'SyntaxError') found = damagedPage(file, `a value in ${where} does not decode`);
  else if (typeof code === 'number' && DAMAGE_CODES.has(code)) found = damagedPage(file, `${DAMAGE_CODES.get(code)!} in ${where}`);
  else if (code === MDB_BAD_TXN && damage.found) return damage.found;
  else return error;
  if (!damage.found) {
    damage.found = found;
    for (const listener of [...damage.listeners]) {
      try {
        listener(found);
      } catch {
        // A listener is someone's printing: it must not change what the read answers.
      }
    }
  }
  return found;
}

const RANGES = new Set<PropertyKey>(['getRange', 'getKeys', 'getValues']);

/**
 * The sub-database `name` as its callers use it, with every error of a read or a write passed
 * through `asDamage`, a range's too (a range reads lazily, as it is iterated). The lmdb-js object
 * itself is what each method runs on: a proxy, not a copy, so its state stays in one place.
 */
export function guard<D extends object>(file: string, damage: DamageRecord, name: string, db: D): D {
  const translate = (error: unknown) => asDamage(file, damage, name, error);
  return new Proxy(db, {
    get(target, property) {
      const value: unknown = Reflect.get(target, property, target);
      if (typeof value !== 'function') return value;
      return (...args: unknown[]) => {
        let result: unknown;
        try {
          result = (value as (...a: unknown[]) => unknown).apply(target, args);
        } catch (error) {
          throw translate(error);
        }
        return RANGES.has(property) ? guardRange(result as Iterable<unknown>, translate) : result;
      };
    },
  });
}

function* guardRange(range: Iterable<unknown>, translate: (error: unknown) => unknown): Generator<unknown> {
  try {
    yield* range;
  } catch (error) {
    throw translate(error);
  }
}
