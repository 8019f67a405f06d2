// Preloaded into a server under test (NODE_OPTIONS=--import=<this file>): steps its wall clock.
// Date.now() returns the real time plus the milliseconds written in the file named by
// DMDOT_TEST_WALL_OFFSET_FILE (re-read at most every 10 ms), as an NTP step or a resumed VM
// would move it. Monotonic time (performance.now(), timers) is left alone, as such a step leaves it.
import { readFileSync } from 'node:fs';

const file = process.env.DMDOT_TEST_WALL_OFFSET_FILE;
if (file) {
  const real = Date.now.bind(Date);
  let offset = 0;
  let readAt = Number.NEGATIVE_INFINITY;
  Date.now = () => {
    const t = performance.now();
    if (t - readAt > 10) {
      readAt = t;
      try {
        offset = Number(readFileSync(file, 'utf8').trim()) || 0;
      } catch {
        offset = 0;
      }
    }
    return real() + offset;
  };
}
