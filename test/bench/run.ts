/**
 * The dm-dot benchmark (`npm run bench`): runs the sections of test/bench/sections/ in order, or
 * those named in BENCH_SECTIONS (`BENCH_SECTIONS=bundles,lambda npm run bench`), prints one report
 * that fits 120 columns (each row a name line and a figures line; a ratio past the target its name
 * states, `target ≤ 2×` or `target ≥ 0.5×`, is marked MISSED and listed at the end) and writes bench/results.json (not committed).
 *
 * Every measurement is reported as a median and a p90 over many samples, next to a baseline
 * measured in this same run a moment before or after it (rounds alternate subject and baseline,
 * so drift of a noisy machine hits both alike), and the ratio of the two. What is not a timing
 * stands next to its target instead: exact counts (AWS calls per send), the slow-body attack's
 * memory, close times and answers (its RSS next to the server's RSS just before). Nothing here is
 * asserted against a number: absolute figures differ from one machine to the next, ratios much less. Each section's
 * module header says what it measures and what it deliberately does not.
 *
 * results.json holds the figures docs/performance.md quotes (bundle bytes, cold starts and their baseline,
 * the "delivered" answer and arrival medians on both paths, the per-change cold start variants,
 * AWS calls per delivered send, the local runtime at 200,000 records, CLI start-up, the slow-body
 * attack) and the machine they were measured on.
 *
 * Deliberately not here: pass/fail thresholds (test/build/bundles.test.ts holds the size budgets),
 * and any network beyond 127.0.0.1. Progress goes to stderr; stdout holds the table. Exit code 0
 * unless a section could not run at all.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { arch, cpus, loadavg, platform, totalmem } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { appSection } from './sections/app';
import { awsCallsSection } from './sections/aws-calls';
import { bundlesSection } from './sections/bundles';
import { cliSection } from './sections/cli';
import { coreSection } from './sections/core';
import { embeddedDueSection } from './sections/embedded-due';
import { embeddedWritesSection } from './sections/embedded-writes';
import { lambdaE2eSection } from './sections/lambda-e2e';
import { localE2eSection } from './sections/local-e2e';
import { localScaleSection } from './sections/local-scale';
import { serverStartSection } from './sections/server-start';
import { slowBodySection } from './sections/slow-body';
import { throughputSection } from './sections/throughput';
import { Bench, errorText, progress, ROOT, WIDTH, withTimeout, wrap, type Section } from './support';

/** Where the figures go for tools and docs/performance.md (ignored by git). */
const RESULTS_FILE = join(ROOT, 'bench', 'results.json');
/** Added to the selected sections' budgets: the whole run is cut short (partial table, exit 1) past their sum. */
const WATCHDOG_MARGIN_MS = 30_000;

/** In the order they run. */
const SECTIONS: readonly Section[] = [
  appSection,
  coreSection,
  localE2eSection,
  embeddedWritesSection,
  bundlesSection,
  lambdaE2eSection,
  awsCallsSection,
  localScaleSection,
  throughputSection,
  embeddedDueSection,
  cliSection,
  serverStartSection,
  slowBodySection,
];

const bench = new Bench();
/** Other work on the machine inflates absolute numbers (ratios much less): the table says how busy it was. */
const startLoad = loadavg()
  .map((l) => l.toFixed(2))
  .join(' ');
bench.recordMachine({
  node: process.version,
  platform: platform(),
  arch: arch(),
  cpus: cpus().length,
  cpuModel: cpus()[0]?.model ?? 'unknown',
  totalMemoryGiB: Number((totalmem() / 2 ** 30).toFixed(1)),
  loadAverageAtStart: loadavg().map((l) => Number(l.toFixed(2))),
});

/** Runs one section; a failure is reported as a row and in the exit code, and the run goes on. */
async function runSection(section: Section): Promise<void> {
  progress(`${section.title}…`);
  const started = performance.now();
  const keep = bench.mark();
  try {
    await withTimeout(section.run(bench), section.budgetMs, section.title);
  } catch (error) {
    const message = errorText(error);
    bench.failures.push(`${section.title}: ${message}`);
    bench.row({
      name: `${section.title}: FAILED`,
      median: '-',
      p90: '-',
      baseline: message.replace(/\|/g, '/').replace(/\s+/g, ' ').slice(0, 160),
      baselineMedian: '-',
      ratio: '-',
    });
  }
  // Servers, apps and temp dirs of this section go before the next one measures anything.
  await bench.runCleanups(keep);
  progress(`${section.title} done in ${((performance.now() - started) / 1000).toFixed(1)} s`);
}

/** One row as a name line and a figures line, each wrapped to WIDTH (a markdown table's rows were 250 characters). */
function table(): string {
  return bench.rows
    .flatMap((row) => [
      ...wrap(row.name),
      ...wrap(
        `median ${row.median}, ${row.tail ?? 'p90'} ${row.p90}; baseline ${row.baseline}: ${row.baselineMedian}; ratio ${row.ratio}`,
        '      ',
        undefined,
        '    ',
      ),
    ])
    .join('\n');
}

function report(startedAt: number): string {
  const cpu = cpus()[0]?.model ?? 'unknown CPU';
  return [
    ...wrap(
      `dm-dot benchmark: Node ${process.version}, ${cpus().length} × ${cpu}, load average ${loadavg()
        .map((l) => l.toFixed(2))
        .join(' ')} (at start ${startLoad}), ${new Date().toISOString()}, ${((performance.now() - startedAt) / 1000).toFixed(1)} s`,
      '  ',
    ),
    '',
    table(),
    '',
    ...wrap(
      'ratio = median / baseline median (for ops/s and sends/s rows, > 1 is faster; elsewhere > 1 is slower or bigger). MISSED: past the target the name states.',
      '  ',
    ),
    ...(bench.missed.length ? ['', `${bench.missed.length} target(s) missed:`, ...bench.missed.flatMap((m) => wrap(`- MISSED ${m}`, '  '))] : []),
    ...bench.notes.flatMap((n) => wrap(`- ${n}`, '  ')),
    ...bench.failures.flatMap((f) => wrap(`- FAILED ${f}`, '  ')),
    '',
  ].join('\n');
}

function writeResults(startedAt: number): void {
  bench.recordMachine({ loadAverageAtEnd: loadavg().map((l) => Number(l.toFixed(2))) });
  const out = {
    generatedAt: new Date().toISOString(),
    durationS: Number(((performance.now() - startedAt) / 1000).toFixed(1)),
    ...bench.results,
    missedTargets: bench.missed,
    failures: bench.failures,
  };
  try {
    mkdirSync(join(ROOT, 'bench'), { recursive: true });
    // Three decimals are plenty for milliseconds and ratios measured on a shared machine; NaN (a
    // figure that could not be measured) becomes null.
    const rounded = (_key: string, value: unknown) =>
      typeof value === 'number' && !Number.isInteger(value) && Number.isFinite(value) ? Number(value.toFixed(3)) : value;
    writeFileSync(RESULTS_FILE, `${JSON.stringify(out, rounded, 2)}\n`);
    progress(`wrote ${RESULTS_FILE}`);
  } catch (error) {
    progress(`could not write ${RESULTS_FILE}: ${errorText(error)}`);
  }
}

let finishing = false;
async function finish(code: number, startedAt: number): Promise<never> {
  if (!finishing) {
    finishing = true;
    await bench.runCleanups();
    writeResults(startedAt);
    await new Promise<void>((done) => process.stdout.write(report(startedAt), () => done()));
  }
  process.exit(code);
}

/** BENCH_SECTIONS=bundles,lambda runs only those (while working on one part); the default is all. */
function selectedSections(): readonly Section[] {
  const only = process.env.BENCH_SECTIONS?.split(',')
    .map((k) => k.trim())
    .filter(Boolean);
  if (!only || only.length === 0) return SECTIONS;
  const unknown = only.filter((k) => !SECTIONS.some((s) => s.key === k));
  if (unknown.length > 0) throw new Error(`BENCH_SECTIONS: unknown section(s) ${unknown.join(', ')}; known: ${SECTIONS.map((s) => s.key).join(', ')}`);
  bench.record({ sections: only });
  return SECTIONS.filter((s) => only.includes(s.key));
}

/** `--help`: the sections and the settings, then exit. */
function usage(): string {
  return [
    'usage: npm run bench (tsx test/bench/run.ts) [--help]',
    '',
    'Runs every section in this order and prints one table (stdout; progress on stderr); writes bench/results.json.',
    '',
    'sections (BENCH_SECTIONS=key,key runs only those):',
    ...SECTIONS.flatMap((s) => wrap(`${s.key}: ${s.title} (budget ${s.budgetMs / 1000} s)`, '    ', WIDTH, '  ')),
    '',
    'settings:',
    '  BENCH_SECTIONS  comma-separated section keys',
    '  BENCH_NODES     colon-separated paths to other node binaries for the cli section (e.g. a Node 22)',
    '',
  ].join('\n');
}

async function main(): Promise<void> {
  if (process.argv.includes('--help') || process.argv.includes('-h')) {
    process.stdout.write(usage());
    return;
  }
  const startedAt = performance.now();
  const selected = selectedSections();
  const watchdogMs = selected.reduce((sum, s) => sum + s.budgetMs, WATCHDOG_MARGIN_MS);
  const watchdog = setTimeout(() => {
    bench.failures.push(`watchdog: the run took longer than ${watchdogMs / 1000} s and was cut short`);
    void finish(1, startedAt);
  }, watchdogMs);
  watchdog.unref();
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => {
      bench.failures.push(`interrupted by ${signal}`);
      void finish(130, startedAt);
    });
  }
  for (const section of selected) await runSection(section);
  clearTimeout(watchdog);
  await finish(bench.failures.length === 0 ? 0 : 1, startedAt);
}

main().catch(async (error) => {
  process.stderr.write(`bench: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  await bench.runCleanups();
  process.exit(1);
});
