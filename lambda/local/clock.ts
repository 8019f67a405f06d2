/**
 * The local runtime's clock (LOCAL-CLOCK-1 to 5; docs/decisions.md, "A steady clock, with the wall
 * clock kept for what leaves the process", says why and why not on the Lambdas): `now()` is the
 * wall clock at the process's start plus its monotonic time since; `wall()` stays the wall clock.
 *
 * Deliberately not here: the Lambdas, and any correction of the wall clock. After a suspend `now()`
 * may trail the wall clock by the time asleep, which only makes what was due later happen that much
 * later, never twice.
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
