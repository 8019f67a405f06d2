/**
 * The local runtime's clock (docs/contract/local-runtime.md, LOCAL-CLOCK-1 to 5): `now()` is the
 * wall clock at the process's start plus its monotonic time since, so a step of the wall clock does
 * not move it. Times persisted by an earlier process are in the same epoch milliseconds: the clock
 * is re-based at each start. `wall()` stays the wall clock, for what leaves the process.
 *
 * Deliberately not here: the Lambdas (each invocation is short and its deadlines come from the
 * Lambda context; a frozen environment's monotonic time stops while the wall clock runs on), and
 * any correction of the wall clock. After a suspend `now()` may trail the wall clock by the time
 * asleep, which only makes what was due later happen that much later, never twice.
 */
import { systemClock, type Clock } from '../ports';

const SYSTEM = { monotonic: () => performance.now(), wall: () => Date.now() };

export function steadyClock(sources: typeof SYSTEM = SYSTEM): Clock & { wall(): number } {
  // Read once: the epoch of the monotonic time, by the wall clock at start.
  const origin = sources.wall() - sources.monotonic();
  return {
    now: () => Math.floor(origin + sources.monotonic()),
    wall: () => sources.wall(),
    // Timers run on monotonic time already.
    sleep: systemClock.sleep,
  };
}
