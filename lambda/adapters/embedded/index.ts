/**
 * The embedded database of the local runtime (docs/contract/local-runtime.md): one LMDB environment,
 * `<state dir>/dm-dot.lmdb`, holding every store item, the delivery jobs (written in the same
 * transaction as their event record), the dead letters and the owner record.
 *
 * `openEmbeddedDatabase(stateDir, { role })`:
 * - `server`: claims the state directory (StateDirInUse when a live server owns it), puts jobs a
 *   dead owner's worker held back in the schedule, imports the earlier file layout if it is there
 *   (legacy.ts), repairs queued records without a job (repair.ts) and sweeps expired items. What
 *   it did is in `report.lines`, one line each, for the caller to log.
 * - `operator`: claims nothing, imports nothing. When a live server owns the directory it throws
 *   StateDirInUse naming it (go through that server); otherwise the database is the operator's to
 *   use directly, transactionally safe even if a server starts meanwhile (its worker polls for
 *   jobs written by other processes).
 *
 * A file that cannot be used throws StateUnreadable naming it; nothing is skipped silently. A
 * server's open reads the whole existing file in a child process first (environment.ts
 * `probeInChild`), so a damaged page is refused before anything is served. One met later, by a
 * read, is thrown as a StateUnreadable by that read and kept: `damage()` says what it was and
 * `onDamage` tells it once, for the caller to report.
 *
 * Deliberately not here: the delivery worker (lambda/local/worker.ts), settings, printing.
 */
import { resolve } from 'node:path';
import { systemClock, type Clock } from '../../ports';
import { StateDirInUse, StateUnreadable, type OwnerSummary } from './errors';
import { closeDatabases, openDatabases, probeInChild, sweepExpired, type Databases } from './environment';
import { JobTable } from './jobs';
import { importLegacyLayout, legacyLayoutPresent, type LegacyImport } from './legacy';
import { EmbeddedOutbox } from './outbox';
import {
  claimOwnership,
  ownerAlive,
  readOwner as readOwnerRecord,
  releaseOwnership,
  setOwnerUrl,
  summary,
  type OwnerRecord,
  type OwnerSocket,
} from './ownership';
import { repairQueuedWithoutJobs, type RepairReport } from './repair';
import { embeddedStore } from './table';
import type { TableStore } from '../../core/store/store';

export { DATABASE_FILE } from './environment';
export { StateDirInUse, StateUnreadable, type OwnerSummary } from './errors';
export type { DeadLetter, DueJob, JobCounts, JobTable } from './jobs';
export type { LegacyImport } from './legacy';
export type { RepairReport } from './repair';
export type { EmbeddedOutbox } from './outbox';
/** The one Store (lambda/core/store) over the embedded database. */
export type EmbeddedStore = TableStore;

export type DatabaseRole = 'server' | 'operator';

export interface OpenEmbeddedOptions {
  role: DatabaseRole;
  /** The clock of job due times, the owner's start time and the sweep; default the system clock. */
  clock?: Clock;
}

export interface OpenReport {
  /** Server: the dead owner whose record this server replaced. */
  tookOverFrom?: OwnerSummary;
  /** Server: jobs a dead owner's worker held, due again now. */
  releasedLeases: number;
  imported?: LegacyImport;
  repaired?: RepairReport;
  /** Server: expired items removed at open. */
  swept: number;
  /** Operator: the earlier file layout is still there (a server imports it at its next start). */
  legacyPending: boolean;
  /** What opening did, one line each, for the log. */
  lines: string[];
}

export interface EmbeddedDatabase {
  readonly stateDir: string;
  /** The LMDB file. */
  readonly file: string;
  readonly role: DatabaseRole;
  readonly store: EmbeddedStore;
  readonly outbox: EmbeddedOutbox;
  readonly jobs: JobTable;
  readonly report: OpenReport;
  /** Server: records the URL it listens on in the owner record (for StateDirInUse and the CLI). */
  setOwnerUrl(url: string): Promise<void>;
  /** The owner record as stored now, and whether its owner lives (its socket accepts a connection: any PID namespace). */
  owner(): Promise<(OwnerSummary & { alive: boolean }) | undefined>;
  /** The first damaged page this process met in the file (a sentence naming it), if any. */
  damage(): StateUnreadable | undefined;
  /** Called once, the first time a read or write of this process meets a damaged page; returns an unsubscribe. */
  onDamage(listener: (damage: StateUnreadable) => void): () => void;
  /**
   * Reads every item of the file in a child process, as a server's start does, and returns the
   * damage it found (a sentence naming the file), if any. Blocks until done (a fraction of a second
   * for tens of thousands of events): for the CLI, never for a server that is serving.
   */
  verify(): StateUnreadable | undefined;
  /** Called after each commit of this handle that added or moved a job earlier; returns an unsubscribe. */
  onJobsChanged(listener: () => void): () => void;
  /** Removes items whose ttl has passed at `now` (reads never depend on it). Returns how many. */
  sweepExpired(now: number): Promise<number>;
  /** Server: clears the owner record if it is still ours. Also part of `close`. */
  release(): Promise<boolean>;
  /** Releases (server) and closes the environment. Stop the worker first. */
  close(): Promise<void>;
}

export async function openEmbeddedDatabase(stateDir: string, options: OpenEmbeddedOptions): Promise<EmbeddedDatabase> {
  const dir = resolve(stateDir);
  const clock = options.clock ?? systemClock;
  const dbs = (await openDatabases(dir, { create: true, verify: options.role === 'server' }))!;
  const listeners = new Set<() => void>();
  const changed = () => {
    for (const listener of [...listeners]) listener();
  };
  let mine: OwnerRecord | undefined;
  let ownerSocket: OwnerSocket | undefined;
  const report: OpenReport = { releasedLeases: 0, swept: 0, legacyPending: false, lines: [] };
  const jobs = new JobTable(dbs, clock, changed);
  try {
    if (options.role === 'server') {
      const now = clock.now();
      const claimed = await claimOwnership(dbs, dir, now);
      mine = claimed.mine;
      ownerSocket = claimed.socket;
      if (claimed.replaced) {
        report.tookOverFrom = summary(claimed.replaced);
        report.lines.push(`took over ${dir} from a server that is gone (pid ${claimed.replaced.pid})`);
      }
      report.releasedLeases = await jobs.releaseLeases(now);
      if (report.releasedLeases > 0) report.lines.push(`${report.releasedLeases} delivery jobs that the previous server was attempting are due again`);
      const imported = await importLegacyLayout(dbs, dir, now);
      if (imported) {
        report.imported = imported;
        report.lines.push(imported.line);
      }
      report.repaired = await repairQueuedWithoutJobs(dbs, now);
      if (report.repaired.line) report.lines.push(report.repaired.line);
      report.swept = await sweepExpired(dbs, now);
    } else {
      const owner = readOwnerRecord(dbs);
      if (owner && (await ownerAlive(dir, owner))) throw new StateDirInUse(dir, summary(owner));
      report.legacyPending = await legacyLayoutPresent(dir);
      if (report.legacyPending) report.lines.push(`${dir} still holds the earlier file layout: start the server once to import it`);
    }
  } catch (error) {
    if (mine) await releaseOwnership(dbs, mine.token).catch(() => undefined);
    ownerSocket?.close();
    await closeDatabases(dbs).catch(() => undefined);
    throw error;
  }
  return handle(dir, dbs, options.role, clock, jobs, changed, listeners, report, mine, ownerSocket);
}

/**
 * The live server owning `stateDir`, if any, without opening the database for use (and without
 * creating one where there is none): how the operator CLI finds the server to go through.
 */
export async function readOwner(stateDir: string): Promise<OwnerSummary | undefined> {
  const dbs = await openDatabases(resolve(stateDir), { create: false });
  if (!dbs) return undefined;
  try {
    const owner = readOwnerRecord(dbs);
    return owner && (await ownerAlive(resolve(stateDir), owner)) ? summary(owner) : undefined;
  } finally {
    await closeDatabases(dbs);
  }
}

function handle(
  stateDir: string,
  dbs: Databases,
  role: DatabaseRole,
  clock: Clock,
  jobs: JobTable,
  changed: () => void,
  listeners: Set<() => void>,
  report: OpenReport,
  mine: OwnerRecord | undefined,
  ownerSocket?: OwnerSocket,
): EmbeddedDatabase {
  let closing: Promise<void> | undefined;
  const damageListeners = new Set<(damage: StateUnreadable) => void>();
  const release = async () => (mine ? releaseOwnership(dbs, mine.token) : false);
  return {
    stateDir,
    file: dbs.file,
    role,
    store: embeddedStore(dbs, { clock }),
    outbox: new EmbeddedOutbox(dbs, clock, changed),
    jobs,
    report,
    async setOwnerUrl(url: string) {
      if (!mine) throw new Error('only a server records its URL in the owner record');
      if (!(await setOwnerUrl(dbs, mine.token, url))) throw new Error(`the state directory ${stateDir} is no longer owned by this server`);
    },
    async owner() {
      const owner = readOwnerRecord(dbs);
      return owner ? { ...summary(owner), alive: await ownerAlive(stateDir, owner) } : undefined;
    },
    damage: () => dbs.damage.found,
    verify() {
      try {
        probeInChild(dbs.file, { suspect: false });
        return undefined;
      } catch (error) {
        if (error instanceof StateUnreadable) return error;
        throw error;
      }
    },
    onDamage(listener: (damage: StateUnreadable) => void) {
      // The environment, and so its listeners, may outlive this handle (one root per file and process).
      damageListeners.add(listener);
      dbs.damage.listeners.add(listener);
      return () => {
        damageListeners.delete(listener);
        dbs.damage.listeners.delete(listener);
      };
    },
    onJobsChanged(listener: () => void) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    sweepExpired: (now: number) => sweepExpired(dbs, now),
    release,
    close() {
      return (closing ??= (async () => {
        listeners.clear();
        for (const listener of damageListeners) dbs.damage.listeners.delete(listener);
        try {
          await release();
        } finally {
          ownerSocket?.close();
          await closeDatabases(dbs);
        }
      })());
    },
  };
}
