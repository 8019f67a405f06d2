/**
 * The local runtime as `npm start` runs it, in a child process of its own
 * (`node lambda/local/start.mjs`: the launcher over the built server, which builds it first when
 * it is missing or stale; PORT=0), so that its memory can be read apart from the bench's:
 * `rssBytes()` reads VmRSS from /proc/<pid>/status (Linux). The port comes from the listening line
 * the server prints first. `args` runs another server the same way (the throughput section's
 * floor-server.ts), which prints a listening line of the same shape.
 *
 * Deliberately not here: settings beyond the environment the caller passes, and any request.
 */
import { spawn } from 'node:child_process';
import { performance } from 'node:perf_hooks';
import { readFileSync } from 'node:fs';
import { ROOT } from './support';

export interface ServerProcess {
  pid: number;
  port: number;
  /** http://127.0.0.1:<port> */
  origin: string;
  /** The server's resident set size now, from /proc/<pid>/status (NaN when it cannot be read). */
  rssBytes(): number;
  /** The last 4,000 characters the server wrote to stderr. */
  stderr(): string;
  stop(): Promise<void>;
}

export function rssOf(pid: number): number {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const match = /^VmRSS:\s+(\d+)\s+kB/m.exec(status);
    return match ? Number(match[1]) * 1024 : Number.NaN;
  } catch {
    return Number.NaN;
  }
}

/** CPU time the process has used, in clock ticks (utime + stime of /proc/<pid>/stat; NaN when unreadable). */
export function cpuTicksOf(pid: number): number {
  try {
    // The command name may hold spaces; the fields after its closing parenthesis do not.
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
    return Number(fields[11]) + Number(fields[12]);
  } catch {
    return Number.NaN;
  }
}

/**
 * Waits until none of the processes used more than 2 ticks (about 20 ms) of CPU in the last 250 ms,
 * or `limitMs` passed: work one side left running (a worker draining jobs) must not slow the other
 * side's round. Returns how long it waited. Where /proc is missing it returns at once.
 */
export async function untilIdle(pids: readonly number[], limitMs = 10_000): Promise<number> {
  const started = performance.now();
  let before = pids.map(cpuTicksOf);
  while (performance.now() - started < limitMs) {
    await new Promise((done) => setTimeout(done, 250));
    const now = pids.map(cpuTicksOf);
    if (now.some(Number.isNaN) || now.every((ticks, i) => ticks - before[i]! <= 2)) break;
    before = now;
  }
  return performance.now() - started;
}

export async function startServerProcess(env: Record<string, string>, timeoutMs = 60_000, args = ['lambda/local/start.mjs']): Promise<ServerProcess> {
  const child = spawn(process.execPath, args, {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: process.env.HOME ?? '/tmp', HOST: '127.0.0.1', PORT: '0', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  // Both pipes are drained for the server's whole life: a full pipe would block its writes.
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (err = (err + chunk).slice(-4000)));
  const exited = new Promise<void>((done) => child.once('exit', () => done()));
  const port = await new Promise<number>((done, fail) => {
    const timer = setTimeout(() => fail(new Error(`the server did not print its listening line within ${timeoutMs} ms: ${err.trim().slice(-400)}`)), timeoutMs);
    child.once('error', (error) => {
      clearTimeout(timer);
      fail(error);
    });
    void exited.then(() => {
      clearTimeout(timer);
      fail(new Error(`the server exited during start (${child.exitCode ?? child.signalCode}): ${err.trim().slice(-400)}`));
    });
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      if (out.length < 10_000) out += chunk;
      const match = /listening on http:\/\/[^:]+:(\d+)\//.exec(out);
      if (match) {
        clearTimeout(timer);
        done(Number(match[1]));
      }
    });
  });
  const pid = child.pid!;
  return {
    pid,
    port,
    origin: `http://127.0.0.1:${port}`,
    rssBytes: () => rssOf(pid),
    stderr: () => err,
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
      await exited;
      clearTimeout(timer);
    },
  };
}
