/**
 * The local runtime's clock: time that a step of the wall clock (NTP, a resumed VM, a person
 * setting the date) does not move. `now()` is the wall clock at the process's start plus its
 * monotonic time since, so every due time, lease, rate window and expiry runs at the pace of real
 * time: a step back does not delay a retry due in 2 s by an hour or open a rate window twice, and a
 * step forward does not end a lease early. Times persisted by an earlier process are in the same
 * epoch milliseconds: the clock is re-based at each start. `wall()` stays the wall clock, for what
 * leaves the process to be compared with another machine's (a webhook signature's timestamp, the
 * window of pup's timestamps).
 *
 * Deliberately not here: the Lambdas (each invocation is short and its deadlines come from the
 * Lambda context; a frozen environment's monotonic time stops while the wall clock runs on), and
 * any correction of the wall clock. After a suspend `now()` may trail the wall clock by the time
 * asleep, which only makes what was due later happen that much later, never twice.
 */
import type { Clock } from '../ports';

export interface ClockSources {
  /** Monotonic milliseconds (performance.now()). */
  monotonic(): number;
  /** The wall clock in epoch milliseconds (Date.now()). */
  wall(): number;
}

const SYSTEM: ClockSources = { monotonic: () => performance.now(), wall: () => Date.now() };

export function steadyClock(sources: ClockSources = SYSTEM): Clock & { wall(): number } {
  // Read once: the epoch of the monotonic time, by the wall clock at start.
  const origin = sources.wall() - sources.monotonic();
  return {
    now: () => Math.floor(origin + sources.monotonic()),
    wall: () => sources.wall(),
    // Timers run on monotonic time already.
    sleep: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
  };
}
