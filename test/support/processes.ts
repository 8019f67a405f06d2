/**
 * The tests' child processes (DynamoDB Local's JVM, fauxqs, the local server, the built CLI, ...),
 * each started in a process group of its own so that it ends with whatever it started in turn,
 * and killed by that group on every way out of the test process: the helper's own stop, the end of
 * a Jest file for a start no caller ever received (a hook that timed out while it waited), the
 * process's exit (an uncaught error included), and SIGINT, SIGTERM or SIGHUP of the test process.
 *
 * Each child also carries the run's marker (`DMDOT_TEST_RUN`, set by test/tools/run-tests.mjs) in
 * its environment, also when a test hands it an environment of its own, so that the runner finds
 * and kills what no exit path here could reach (a test process killed with SIGKILL) and fails the
 * run for it.
 *
 * `waitUntilReady` waits for a child to be ready for as long as it is alive and working, not for a
 * fixed time that a loaded machine overruns.
 *
 * Deliberately not here: the sign that a child is ready (each helper knows its own), and Windows
 * (no process groups; `detached` there opens a console).
 */
import { spawn, type ChildProcess, type ChildProcessByStdio, type ChildProcessWithoutNullStreams, type SpawnOptions } from 'node:child_process';
import { readFileSync } from 'node:fs';
import type { Readable } from 'node:stream';
import { runInThisContext } from 'node:vm';

export const RUN_MARKER = 'DMDOT_TEST_RUN';

/** `env` with the run's marker added when this process runs under test/tools/run-tests.mjs. */
export function markedEnv(env: NodeJS.ProcessEnv = process.env): NodeJS.ProcessEnv {
  const marker = process.env[RUN_MARKER];
  return marker === undefined ? env : { ...env, [RUN_MARKER]: marker };
}

interface Tracked {
  child: ChildProcess;
  /** Set once the starting helper handed the process to its caller, who then stops it. */
  handedOver: boolean;
}

/**
 * The process itself. Under Jest, `process` is a copy made for each test file, whose listeners
 * the real process never calls (an 'exit' listener on it never runs); code compiled by node:vm
 * outside the file's context sees the real one.
 */
const host = runInThisContext('process') as NodeJS.Process;

/**
 * Every child of this process still tracked, for the exit paths: one registry on the real process
 * for all the files a Jest worker runs (each loads its own copy of this module), so the listeners
 * below are added once per process, not once per file.
 */
const KEY = Symbol.for('dm-dot.test-children');
const registry = ((host as unknown as Record<symbol, { tracked: Set<Tracked> } | undefined>)[KEY] ??= hookExitPaths(new Set()));
/** This file's children (under Jest: this test file's). */
const ours = new Set<Tracked>();

/** Kills the child's whole process group (the child itself when it has none). Never throws. */
export function killGroup(child: ChildProcess, signal: NodeJS.Signals = 'SIGKILL'): void {
  if (child.pid === undefined) return;
  try {
    process.kill(-child.pid, signal);
  } catch {
    // The group is gone already, or the child was not started detached.
    try {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
    } catch {
      // Gone.
    }
  }
}

function killAll(entries: Set<Tracked>, filter: (entry: Tracked) => boolean = () => true): void {
  for (const entry of entries) {
    if (!filter(entry)) continue;
    killGroup(entry.child);
    registry.tracked.delete(entry);
    ours.delete(entry);
  }
}

function hookExitPaths(tracked: Set<Tracked>): { tracked: Set<Tracked> } {
  host.on('exit', () => killAll(tracked));
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    const onSignal = () => {
      killAll(tracked);
      // Alone on this signal, the listener took away its default (ending the process): give it back.
      if (host.listenerCount(signal) === 1) {
        host.removeListener(signal, onSignal);
        host.kill(host.pid, signal);
      }
    };
    host.on(signal, onSignal);
  }
  return { tracked };
}

// Under Jest this runs once per test file, as the file is collected: a start that no caller
// received (its beforeAll hook timed out while it waited) is ended with the file.
const jestGlobals = globalThis as { afterAll?: (fn: () => void) => void; expect?: { getState?: () => { currentTestName?: string } } };
if (typeof jestGlobals.afterAll === 'function' && jestGlobals.expect?.getState?.().currentTestName === undefined) {
  jestGlobals.afterAll(() => killAll(ours, (entry) => !entry.handedOver));
}

export interface GroupChild {
  child: ChildProcess;
  /** The starting helper calls this when it hands the process to its caller. */
  handOver(): void;
  /** Kills the group now (SIGKILL unless told). */
  kill(signal?: NodeJS.Signals): void;
}

/**
 * `spawn` in a new process group (detached, not unref'd: the test process still waits for it),
 * with the run's marker in its environment, tracked until it exits.
 */
type Args = readonly string[];
type Piped = ChildProcessByStdio<null, Readable, Readable>;
export function spawnGroup(command: string, args: Args, options: SpawnOptions & { stdio: ['pipe', 'pipe', 'pipe'] }): ChildProcessWithoutNullStreams;
export function spawnGroup(command: string, args: Args, options: SpawnOptions & { stdio: ['ignore', 'pipe', 'pipe'] }): Piped;
export function spawnGroup(command: string, args: readonly string[], options?: SpawnOptions): ChildProcess;
export function spawnGroup(command: string, args: readonly string[], options: SpawnOptions = {}): ChildProcess {
  return startGroup(command, args, options, true).child;
}

/** As `spawnGroup`, for a helper that hands the process over only once it is ready. */
export function startGroup(command: string, args: readonly string[], options: SpawnOptions = {}, handedOver = false): GroupChild {
  const child = spawn(command, args, { ...options, env: markedEnv(options.env ?? process.env), detached: process.platform !== 'win32' });
  const entry: Tracked = { child, handedOver };
  registry.tracked.add(entry);
  ours.add(entry);
  const forget = () => ours.delete(entry) && registry.tracked.delete(entry);
  // Whatever the leader started may outlive it: the group goes with the leader.
  child.once('exit', () => {
    if (forget()) killGroup(child);
  });
  child.once('error', forget);
  return {
    child,
    handOver: () => {
      entry.handedOver = true;
    },
    kill: (signal: NodeJS.Signals = 'SIGKILL') => killGroup(child, signal),
  };
}

/**
 * How long a helper waits for a child it started to be ready, at most. Not a measurement: the wait
 * ends as soon as the child is ready, and earlier when it exits or stops making progress (below);
 * this only bounds a child that keeps working and never gets there.
 */
export const START_LIMIT_MS = 240_000;
/** Without CPU time or output for this long, a child that is not ready yet is stuck. */
export const START_IDLE_MS = 60_000;
/** The timeout of a hook that starts such children: past START_LIMIT_MS, so the helper's own error (saying what it waited for) is what a reader sees. */
export const START_HOOK_MS = START_LIMIT_MS + 60_000;

/** CPU time the process has used (Linux: /proc/<pid>/stat, in clock ticks), or undefined where it cannot be read. */
export function cpuTicks(pid: number | undefined): number | undefined {
  if (pid === undefined) return undefined;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // After "pid (comm) ": state is field 3, utime 14 and stime 15.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const ticks = Number(fields[11]) + Number(fields[12]);
    return Number.isFinite(ticks) ? ticks : undefined;
  } catch {
    return undefined;
  }
}

export interface ReadyWait<T> {
  /** What is awaited, for the error: "DynamoDB Local to answer ListTables on http://...". */
  what: string;
  child: ChildProcess;
  /** Resolves to the ready value, or to undefined when not ready yet (it is asked again). */
  probe: () => Promise<T | undefined> | T | undefined;
  /** Grows as the child writes; its length counts as progress. */
  output?: () => string;
  /** Why the child exited during the wait, for the error (defaults to its code and signal). */
  onExit?: () => Error | Promise<Error>;
  pollMs?: number;
  limitMs?: number;
  idleMs?: number;
}

/**
 * Waits for `probe` while the child is alive and making progress (CPU time or output), up to
 * `limitMs`. A slow machine makes the wait longer, not the test red; a child that exited, or sits
 * idle without being ready, fails it at once with what was awaited and the child's last output.
 */
export async function waitUntilReady<T>(wait: ReadyWait<T>): Promise<T> {
  const { child, what, pollMs = 100, limitMs = START_LIMIT_MS, idleMs = START_IDLE_MS } = wait;
  const started = Date.now();
  let lastTicks = cpuTicks(child.pid);
  let lastOutput = wait.output?.().length ?? 0;
  let lastProgress = started;
  const tail = () => {
    const out = wait.output?.().trim() ?? '';
    return out ? `; its last output: ${out.slice(-1500)}` : '';
  };
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) {
      if (wait.onExit) throw await wait.onExit();
      throw new Error(`gave up waiting for ${what}: the process exited (code ${child.exitCode}, signal ${child.signalCode})${tail()}`);
    }
    const value = await wait.probe();
    if (value !== undefined) return value;
    const now = Date.now();
    const ticks = cpuTicks(child.pid);
    const output = wait.output?.().length ?? 0;
    if ((ticks !== undefined && ticks !== lastTicks) || output !== lastOutput) {
      lastProgress = now;
      lastTicks = ticks;
      lastOutput = output;
    }
    const waited = `${Math.round((now - started) / 1000)} s`;
    if (now - started > limitMs) throw new Error(`gave up waiting for ${what} after ${waited} (the process was still working)${tail()}`);
    // Where CPU time cannot be read, output alone is no sign of life: only the limit applies.
    if (ticks !== undefined && now - lastProgress > idleMs) {
      const idle = `${Math.round(idleMs / 1000)} s`;
      throw new Error(`gave up waiting for ${what} after ${waited}: the process used no CPU time and wrote nothing for ${idle}${tail()}`);
    }
    await new Promise((resolve) => setTimeout(resolve, pollMs));
  }
}
