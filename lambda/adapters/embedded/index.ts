/**
 * The embedded database of the local runtime (docs/contract/local-runtime.md): one LMDB environment,
 * `<state dir>/dm-dot.lmdb`, holding every store item, the delivery jobs (written in the same
 * transaction as their event record), the dead letters and the owner record.
 *
 * `openEmbeddedDatabase(stateDir, { role })`:
 * - `server`: claims the state directory (StateDirInUse when a live server owns it), puts jobs a
 *   dead owner's worker held back in the schedule, and sweeps expired items; `report.lines` says
 *   what it did, for the caller to log.
 * - `operator`: claims nothing, and throws StateDirInUse while a live server owns the
 *   directory (go through that server); otherwise the database is the operator's, transactionally
 *   safe even if a server starts meanwhile (its worker polls for jobs written by other processes).
 *
 * Deliberately not here: the delivery worker (lambda/local/worker.ts), settings, printing.
 */
import { resolve } from 'node:path';
import { TableStore } from '../../core/store/store';
import { systemClock, type Clock } from '../../ports';
import { StateDirInUse, StateUnreadable, type OwnerSummary } from './errors';
import { closeDatabases, openDatabases, type Databases } from './environment';
import { probeInChild } from './file-check';
import { JobTable, sweepExpired } from './jobs';
import { EmbeddedOutbox } from './outbox';
import { claimOwnership, ownerAlive, readOwnerRecord, releaseOwnership, setOwnerUrl, summary, type OwnerClaim } from './ownership';
import { LmdbTable } from './table';

export { DATABASE_FILE } from './environment';
export { StateDirInUse, StateUnreadable, type OwnerSummary } from './errors';

export interface OpenReport {
  /** Server: the dead owner whose record this server replaced. */
  tookOverFrom?: OwnerSummary;
  /** Server: jobs a dead owner's worker held, due again now. */
  releasedLeases: number;
  lines: string[];
}

/** `clock`: the clock of job due times, the owner's start time and the sweep; default the system clock. */
export async function openEmbeddedDatabase(stateDir: string, options: { role: 'server' | 'operator'; clock?: Clock }): Promise<EmbeddedDatabase> {
  const dir = resolve(stateDir);
  const clock = options.clock ?? systemClock;
  const dbs = (await openDatabases(dir, { create: true, verify: options.role === 'server' }))!;
  const db = new EmbeddedDatabase(dir, dbs, clock);
  const { report } = db;
  try {
    if (options.role === 'server') {
      const now = clock.now();
      const claimed = await claimOwnership(dbs, dir, now);
      db.owned = claimed;
      if (claimed.replaced) {
        report.tookOverFrom = summary(claimed.replaced);
        report.lines.push(`took over ${dir} from a server that is gone (pid ${claimed.replaced.pid})`);
      }
      report.releasedLeases = await db.jobs.releaseLeases(now);
      if (report.releasedLeases > 0) report.lines.push(`${report.releasedLeases} delivery jobs that the previous server was attempting are due again`);
      await sweepExpired(dbs, now);
    } else {
      const owner = readOwnerRecord(dbs);
      if (owner && (await ownerAlive(dir, owner))) throw new StateDirInUse(dir, summary(owner));
    }
  } catch (error) {
    await db.close().catch(() => undefined);
    throw error;
  }
  return db;
}

/** The live server owning `stateDir`, if any, without creating a database where there is none (how the CLI finds the server). */
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

export class EmbeddedDatabase {
  readonly store: TableStore;
  readonly outbox: EmbeddedOutbox;
  readonly jobs: JobTable;
  readonly report: OpenReport = { releasedLeases: 0, lines: [] };
  /** Server: its claim of the directory. */
  owned?: OwnerClaim;
  private readonly jobListeners = new Set<() => void>();
  private readonly damageListeners = new Set<(damage: StateUnreadable) => void>();
  private closing?: Promise<void>;

  constructor(
    readonly stateDir: string,
    private readonly dbs: Databases,
    clock: Clock,
  ) {
    const changed = () => {
      for (const listener of [...this.jobListeners]) listener();
    };
    const table = new LmdbTable(dbs);
    this.store = new TableStore(table, { clock });
    this.outbox = new EmbeddedOutbox(table, clock, changed);
    this.jobs = new JobTable(dbs, clock, changed);
  }

  /** Server: records the URL it listens on in the owner record (for StateDirInUse and the CLI). */
  async setOwnerUrl(url: string): Promise<void> {
    if (!this.owned) throw new Error('only a server records its URL in the owner record');
    if (!(await setOwnerUrl(this.dbs, this.owned.mine.token, url))) throw new Error(`the state directory ${this.stateDir} is no longer owned by this server`);
  }

  /** The owner record as stored now, and whether its owner lives (its socket accepts a connection: any PID namespace). */
  async owner(): Promise<(OwnerSummary & { alive: boolean }) | undefined> {
    const owner = readOwnerRecord(this.dbs);
    return owner ? { ...summary(owner), alive: await ownerAlive(this.stateDir, owner) } : undefined;
  }

  /** The first damaged page this process met in the file (a sentence naming it), if any. */
  damage(): StateUnreadable | undefined {
    return this.dbs.damage.found;
  }

  /** Called once, the first time a read or write of this process meets a damaged page; returns an unsubscribe. */
  onDamage(listener: (damage: StateUnreadable) => void): () => void {
    // The environment, and so its listeners, may outlive this handle (one root per file and process).
    this.damageListeners.add(listener);
    this.dbs.damage.listeners.add(listener);
    return () => {
      this.damageListeners.delete(listener);
      this.dbs.damage.listeners.delete(listener);
    };
  }

  /** The damage a read of the whole file in a child process finds, as a server's start does; blocks (the CLI's, never a serving server's). */
  verify(): StateUnreadable | undefined {
    try {
      probeInChild(this.dbs.file, { suspect: false });
      return undefined;
    } catch (error) {
      if (error instanceof StateUnreadable) return error;
      throw error;
    }
  }

  /** Called after each commit of this handle that added or moved a job earlier; returns an unsubscribe. */
  onJobsChanged(listener: () => void): () => void {
    this.jobListeners.add(listener);
    return () => this.jobListeners.delete(listener);
  }

  sweepExpired(now: number): Promise<number> {
    return sweepExpired(this.dbs, now);
  }

  /** Server: clears the owner record if it is still ours. Also part of `close`. */
  async release(): Promise<boolean> {
    return this.owned ? releaseOwnership(this.dbs, this.owned.mine.token) : false;
  }

  /** Releases (server) and closes the environment. Stop the worker first. */
  close(): Promise<void> {
    return (this.closing ??= (async () => {
      this.jobListeners.clear();
      for (const listener of this.damageListeners) this.dbs.damage.listeners.delete(listener);
      try {
        await this.release();
      } finally {
        this.owned?.socket?.close();
        await closeDatabases(this.dbs);
      }
    })());
  }
}
