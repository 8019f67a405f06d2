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
 * where its handler runs); `stop()` returns their run-queue waits since, summed, in whole ms.
 */
export function measureCpuWait(pids: readonly (number | undefined)[] = [process.pid]): { stop(): number } {
  const from = pids.map((pid) => (pid === undefined ? undefined : runDelayNs(pid)));
  let waitedMs: number | undefined;
  return {
    stop() {
      waitedMs ??= pids.reduce<number>((sum, pid, i) => {
        const to = pid === undefined ? undefined : runDelayNs(pid);
        const start = from[i];
        return start === undefined || to === undefined ? sum : sum + Math.ceil((to - start) / 1e6);
      }, 0);
      return waitedMs;
    },
  };
}
