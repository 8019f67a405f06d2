/**
 * The bench's report as a person reads it (test/bench/run.ts, support.ts): a ratio over the target
 * a row's name states is marked MISSED and listed, one within it is not, and every line the
 * report's wrapping makes fits 120 columns.
 */
import { Bench, stats, WIDTH, wrap } from '../bench/support';

describe('the bench report', () => {
  it('marks a ratio over the target its name states, and only that one', () => {
    const bench = new Bench();
    bench.timeRow('e2e local: "delivered" answer / event at receiver (target ≤ 1.5×)', stats([155, 155, 155]), 'plain POST', stats([100, 100, 100]));
    bench.timeRow('e2e aws: "delivered" answer / event at receiver (target ≤ 1.5×)', stats([140, 140]), 'plain POST', stats([100, 100]));
    bench.timeRow('no target here', stats([900]), 'base', stats([100]));
    expect(bench.rows.map((r) => r.ratio)).toEqual(['1.55× MISSED', '1.40×', '9.00×']);
    expect(bench.missed).toEqual(['e2e local: "delivered" answer / event at receiver (target ≤ 1.5×) (n=3): 1.55× against ≤ 1.5×']);
  });

  it(`wraps every line to ${WIDTH} columns, the lines after the first indented`, () => {
    const long = `${'a long row name with many words '.repeat(12)}${'x'.repeat(200)}`;
    const lines = wrap(long, '    ', WIDTH, '  ');
    expect(lines.length).toBeGreaterThan(3);
    for (const line of lines) expect(line.length).toBeLessThanOrEqual(WIDTH);
    expect(lines[0]!.startsWith('  a long')).toBe(true);
    expect(lines.slice(1).every((l) => l.startsWith('    '))).toBe(true);
  });
});
