/**
 * The local runtime's steady clock (lambda/local/clock.ts) over scripted sources: steps of the
 * wall clock move `wall()` and never `now()`.
 */
import { steadyClock } from '../../../lambda/local/clock';

function sources() {
  const s = { mono: 5_000.25, wallMs: Date.UTC(2026, 11, 2, 12, 0, 0) };
  return { s, sources: { monotonic: () => s.mono, wall: () => s.wallMs } };
}

describe('LOCAL-CLOCK-1: the local clock ignores steps of the wall clock', () => {
  test('LOCAL-CLOCK-1: it starts at the wall clock and runs at the pace of monotonic time', () => {
    const { s, sources: src } = sources();
    const clock = steadyClock(src);
    const start = clock.now();
    expect(start).toBe(s.wallMs);
    s.mono += 2_000;
    s.wallMs += 2_000;
    expect(clock.now()).toBe(start + 2_000);
    expect(Number.isSafeInteger(clock.now())).toBe(true);
  });

  test('LOCAL-CLOCK-1: a step back of an hour and a step forward of ten minutes move wall() only', () => {
    const { s, sources: src } = sources();
    const clock = steadyClock(src);
    const start = clock.now();
    s.wallMs -= 3_600_000;
    s.mono += 1_000;
    expect(clock.now()).toBe(start + 1_000);
    expect(clock.wall()).toBe(start - 3_600_000 + 0);
    s.wallMs += 3_600_000 + 600_000;
    s.mono += 1_000;
    expect(clock.now()).toBe(start + 2_000);
    expect(clock.wall()).toBe(start + 600_000);
  });
});
