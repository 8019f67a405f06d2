/**
 * How long a process waited for a CPU while it had work to do, over an interval: the run-queue
 * wait of its main thread (the one that runs JavaScript), from Linux's /proc/<pid>/schedstat. A
 * bound on an answer's time allows this wait, so it checks the code's budget rather than the
 * machine's load: on an idle machine the wait is a few ms and the bound is the budget; on a 2-core
 * machine at a load of 20 a handler that needs 100 ms of CPU can wait seconds for it (measured:
 * 3.5 s of CPU took 38 s, 34.6 s of it waiting). Time the process spent on its own work, or
 * waiting for I/O, is never allowed.
 *
 * Deliberately not here: a fallback estimate where schedstat is missing (not Linux, or a kernel
 * without it): there the wait reads 0 and the bound is the budget.
 */
import { readFileSync } from 'node:fs';

function runDelayNs(pid: number): number | undefined {
  try {
    const fields = readFileSync(`/proc/${pid}/schedstat`, 'utf8').trim().split(/\s+/).map(Number);
    return Number.isFinite(fields[1]) ? fields[1] : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Starts measuring the processes `pids` (default: this one; an end-to-end test adds the server's,
 * where its handler runs): `sofar()` returns their run-queue waits since, summed, in whole ms, and
 * `stop()` the same, fixed at its first call.
 */
export function measureCpuWait(pids: readonly (number | undefined)[] = [process.pid]): { sofar(): number; stop(): number } {
  const from = pids.map((pid) => (pid === undefined ? undefined : runDelayNs(pid)));
  const sofar = () =>
    pids.reduce<number>((sum, pid, i) => {
      const to = pid === undefined ? undefined : runDelayNs(pid);
      const start = from[i];
      return start === undefined || to === undefined ? sum : sum + Math.ceil((to - start) / 1e6);
    }, 0);
  let waitedMs: number | undefined;
  return {
    sofar,
    stop() {
      waitedMs ??= sofar();
      return waitedMs;
    },
  };
}

/**
 * Polls `probe` every `everyMs` until it holds; gives up after `limitMs` plus the CPU wait of
 * `pids` meanwhile, so a loaded machine makes the wait longer, not red. Resolves whether it held.
 */
export async function pollUntil(
  probe: () => boolean | Promise<boolean>,
  options: { limitMs: number; everyMs?: number; pids?: readonly (number | undefined)[] },
): Promise<boolean> {
  const cpuWait = measureCpuWait(options.pids);
  const started = Date.now();
  for (;;) {
    if (await probe()) return true;
    if (Date.now() - started > options.limitMs + cpuWait.sofar()) return false;
    await new Promise((resolve) => setTimeout(resolve, options.everyMs ?? 20));
  }
}
