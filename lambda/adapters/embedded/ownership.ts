/**
 * One server per state directory: the owner record (`meta/owner`) names the process, its URL once
 * it listens, and the Unix-domain socket in the state directory it listens on while it lives
 * (docs/decisions.md, "Ownership is an OS-level fact", says why and how). The operator role never
 * writes it.
 *
 * Deliberately not here: what the caller does about a live owner (print, exit 2, or go through
 * that server's admin routes), and any locking beyond LMDB's own writer lock.
 */
import { randomUUID } from 'node:crypto';
import { readFileSync, rmSync } from 'node:fs';
import net from 'node:net';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { StateDirInUse, type OwnerSummary } from './errors';
import { write, type Databases } from './environment';

export interface OwnerRecord {
  /** Unique per open: "still ours" means this token, never merely this pid. */
  token: string;
  pid: number;
  /** Linux: field 22 of /proc/<pid>/stat (clock ticks after boot). */
  startTime?: string;
  /** Linux: /proc/sys/kernel/random/boot_id. */
  bootId?: string;
  hostname: string;
  startedAt: number;
  url?: string;
  /** The socket the owner listens on while it lives (a file name in the state directory). */
  socket?: string;
}

/** What a claim wrote, the socket that keeps it alive, and the dead owner it replaced. */
export type OwnerClaim = { mine: OwnerRecord; replaced?: OwnerRecord; socket?: Awaited<ReturnType<typeof listenOwnerSocket>> };

/**
 * Listens on a fresh socket in the state directory; undefined where no socket can be made there.
 * Closing it (at stop, or by the kernel when the process dies) is what frees the directory.
 */
export async function listenOwnerSocket(stateDir: string, token: string): Promise<{ name: string; close(): void } | undefined> {
  const name = `.owner-${token.slice(0, 8)}.sock`;
  const path = join(stateDir, name);
  const server = net.createServer((socket) => socket.destroy());
  const listening = await new Promise<boolean>((done) => server.once('error', () => done(false)).listen(path, () => done(true)));
  if (!listening) return undefined;
  server.unref();
  return { name, close: () => (server.close(), rmSync(path, { force: true })) };
}

/** True while the owner lives: its socket accepts a connection (any PID namespace), else its pid runs. */
export async function ownerAlive(stateDir: string, owner: OwnerRecord): Promise<boolean> {
  if (owner.socket === undefined) return pidAlive(owner);
  return new Promise<boolean>((done) => {
    const socket = net.connect(join(stateDir, owner.socket!));
    const timer = setTimeout(() => (socket.destroy(), done(true)), 2_000);
    socket.once('connect', () => (clearTimeout(timer), socket.destroy(), done(true)));
    // ECONNREFUSED (nobody listens), ENOENT (the file is gone): the owner is gone.
    socket.once('error', () => (clearTimeout(timer), done(false)));
  });
}

const OWNER_KEY = 'owner';

export function readOwnerRecord(dbs: Databases): OwnerRecord | undefined {
  const record = dbs.meta.get(OWNER_KEY) as Partial<OwnerRecord> | null | undefined;
  const valid = typeof record?.token === 'string' && typeof record.pid === 'number' && typeof record.startedAt === 'number';
  return valid ? (record as OwnerRecord) : undefined;
}

export function summary(owner: OwnerRecord): OwnerSummary {
  return { pid: owner.pid, startedAt: owner.startedAt, ...(owner.url !== undefined ? { url: owner.url } : {}) };
}

/**
 * Claims the state directory for this process (a server starts nothing else before it owns the
 * directory). Throws StateDirInUse when a live process owns it.
 */
export async function claimOwnership(dbs: Databases, stateDir: string, now: number): Promise<OwnerClaim> {
  const token = randomUUID();
  const socket = await listenOwnerSocket(stateDir, token);
  const { startTime, bootId } = processIdentity(process.pid);
  const mine: OwnerRecord = { token, pid: process.pid, hostname: hostname(), startedAt: now, startTime, bootId, socket: socket?.name };
  try {
    for (;;) {
      // Probed outside the transaction (a connect is asynchronous), replaced only if unchanged since.
      const seen = readOwnerRecord(dbs);
      if (seen && (await ownerAlive(stateDir, seen))) throw new StateDirInUse(stateDir, summary(seen));
      if (!(await ifOwnerIs(dbs, seen?.token, () => void dbs.meta.put(OWNER_KEY, mine)))) continue;
      if (seen?.socket !== undefined) rmSync(join(stateDir, seen.socket), { force: true });
      return { mine, replaced: seen, socket };
    }
  } catch (error) {
    socket?.close();
    throw error;
  }
}

/** Changes the owner record only while it is the one of `token` (undefined: none); false when it is not. */
function ifOwnerIs(dbs: Databases, token: string | undefined, change: (current: OwnerRecord | undefined) => void): Promise<boolean> {
  return write(dbs, () => {
    const current = readOwnerRecord(dbs);
    if (current?.token !== token) return false;
    change(current);
    return true;
  });
}

/** Records the server's URL in its owner record; false when the record is not ours any more. */
export function setOwnerUrl(dbs: Databases, token: string, url: string): Promise<boolean> {
  return ifOwnerIs(dbs, token, (current) => void dbs.meta.put(OWNER_KEY, { ...current, url }));
}

/** Clears the owner record only if it is still ours (a takeover since must not be undone). */
export function releaseOwnership(dbs: Databases, token: string): Promise<boolean> {
  return ifOwnerIs(dbs, token, () => void dbs.meta.remove(OWNER_KEY));
}

/** True while the process that wrote `owner` still runs: only for a record without a socket (see the header). */
function pidAlive(owner: OwnerRecord): boolean {
  // process.kill(0) and negative pids address process groups: never a valid owner.
  if (!Number.isSafeInteger(owner.pid) || owner.pid <= 0) return false;
  try {
    process.kill(owner.pid, 0);
  } catch (error) {
    // EPERM: it exists but belongs to another user; it still holds the directory.
    if ((error as NodeJS.ErrnoException).code !== 'EPERM') return false;
  }
  const now = processIdentity(owner.pid);
  if (now.zombie || (owner.bootId !== undefined && now.bootId !== undefined && owner.bootId !== now.bootId)) return false;
  return owner.startTime === undefined || now.startTime === undefined || owner.startTime === now.startTime;
}

/** What tells a process apart from a later one with the same pid (Linux only; empty elsewhere). */
function processIdentity(pid: number): { startTime?: string; bootId?: string; zombie?: boolean } {
  const read = (file: string) => {
    try {
      return readFileSync(file, 'utf8');
    } catch {
      // No procfs (another OS, some containers), or the process is gone.
      return undefined;
    }
  };
  const bootId = read('/proc/sys/kernel/random/boot_id')?.trim();
  const stat = read(`/proc/${pid}/stat`);
  // `pid (comm) state ppid ...`: comm may hold spaces and parentheses, so split after the last ')'.
  // fields[0] is field 3 (state); starttime is field 22.
  const fields = stat?.slice(stat.lastIndexOf(')') + 2).split(' ') ?? [];
  const startTime = /^\d+$/.test(fields[19] ?? '') ? fields[19] : undefined;
  return { bootId, startTime, zombie: fields[0] === 'Z' || fields[0] === 'X' };
}
