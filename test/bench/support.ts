/**
 * What every section of the bench (test/bench/run.ts) shares: the `Bench` a section reports into
 * (table rows, notes, bench/results.json fields, cleanups, temp dirs), statistics, the paired
 * measurement (rounds alternate baseline and subject), formatting, and small fixtures (a silent
 * logger, secrets, JSON-RPC requests of the 2026-07-28 era, the synthesized stack environments).
 *
 * Deliberately not here: any measurement (test/bench/sections/), and any threshold: a figure is
 * printed next to its baseline and never asserted.
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import type { Logger } from '../../lambda/ports';
import { modernBody, modernHeaders } from '../support/rpc';
import { stackEnvironments as synthesizeEnvironments, type StackEnvironments } from './lambda-bundles';

export const ROOT = resolve(__dirname, '..', '..');

// ---------------------------------------------------------------------------------------------
// Progress and timeouts
// ---------------------------------------------------------------------------------------------

/** Progress goes to stderr; stdout holds the table. */
export function progress(line: string): void {
  process.stderr.write(`bench: ${line}\n`);
}

export function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} timed out after ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

export function errorText(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

export const sleep = (ms: number) => new Promise<void>((done) => setTimeout(done, ms));

// ---------------------------------------------------------------------------------------------
// Statistics and formatting
// ---------------------------------------------------------------------------------------------

export interface Stats {
  median: number;
  p90: number;
  n: number;
}

export function quantile(sorted: readonly number[], q: number): number {
  if (sorted.length === 0) return Number.NaN;
  const position = (sorted.length - 1) * q;
  const lower = Math.floor(position);
  const upper = Math.ceil(position);
  return sorted[lower]! + (sorted[upper]! - sorted[lower]!) * (position - lower);
}

export function stats(samples: readonly number[]): Stats {
  const sorted = [...samples].sort((a, b) => a - b);
  return { median: quantile(sorted, 0.5), p90: quantile(sorted, 0.9), n: sorted.length };
}

/** For throughput the slow tail is the low end: the value 90% of samples reached or beat. */
export function throughputStats(samples: readonly number[]): Stats {
  const sorted = [...samples].sort((a, b) => a - b);
  return { median: quantile(sorted, 0.5), p90: quantile(sorted, 0.1), n: sorted.length };
}

export function ms(value: number): string {
  if (!Number.isFinite(value)) return 'n/a';
  if (value >= 100) return `${value.toFixed(0)} ms`;
  if (value >= 1) return `${value.toFixed(2)} ms`;
  return `${(value * 1000).toFixed(value >= 0.1 ? 0 : 1)} µs`;
}

export function perSecond(value: number): string {
  return Number.isFinite(value) ? `${Math.round(value).toLocaleString('en-US')} ops/s` : 'n/a';
}

export function kib(bytes: number): string {
  return `${(bytes / 1024).toFixed(1)} KiB`;
}

export function mib(bytes: number): string {
  return Number.isFinite(bytes) ? `${(bytes / 2 ** 20).toFixed(1)} MiB` : 'n/a';
}

/** The report's width: every line fits a 120-column terminal. */
export const WIDTH = 120;

/** `text` in lines of at most WIDTH characters, broken at spaces: the first line starts with `first`, the others with `indent`. */
export function wrap(text: string, indent = '    ', width = WIDTH, first = ''): string[] {
  const lines: string[] = [];
  let line = '';
  for (const word of text.split(' ').filter(Boolean)) {
    const prefix = lines.length === 0 ? first : indent;
    if (line && prefix.length + line.length + 1 + word.length > width) {
      lines.push(prefix + line);
      line = word;
    } else line = line ? `${line} ${word}` : word;
  }
  lines.push((lines.length === 0 ? first : indent) + line);
  // A single word longer than the width (a path) is cut rather than let it overflow.
  return lines.map((l) => (l.length > width ? `${l.slice(0, width - 1)}…` : l));
}

export function ratio(subject: number, baseline: number): string {
  return Number.isFinite(subject) && Number.isFinite(baseline) && baseline > 0 ? `${(subject / baseline).toFixed(2)}×` : 'n/a';
}

/** subject / baseline as a number for results.json (NaN when either side is missing). */
export function ratioOf(subject: number, baseline: number): number {
  return Number.isFinite(subject) && Number.isFinite(baseline) && baseline > 0 ? subject / baseline : Number.NaN;
}

// ---------------------------------------------------------------------------------------------
// The bench a section reports into
// ---------------------------------------------------------------------------------------------

export interface Row {
  name: string;
  median: string;
  p90: string;
  /** What the p90 column holds when it is another tail (`p99`); `p90` when not given. */
  tail?: string;
  /** A target that is not a ratio (`peak 180 MB against < 150 MB`): set when it was missed, and the row is marked as one. */
  missed?: string;
  baseline: string;
  baselineMedian: string;
  ratio: string;
}

export class Bench {
  readonly rows: Row[] = [];
  readonly notes: string[] = [];
  readonly failures: string[] = [];
  /** bench/results.json: filled in by the sections, written at the end (also after a failure). */
  readonly results: Record<string, unknown> = {};
  private readonly cleanups: Array<() => unknown> = [];
  private environments: Promise<StackEnvironments> | undefined;

  /**
   * Rows whose ratio missed the target their name states, as `name: ratio against target` lines:
   * `target ≤ 1.5×` (a time or a size: at most) or `target ≥ 0.5×` (a throughput: at least).
   */
  readonly missed: string[] = [];

  row(row: Row): void {
    const [, bound, target] = /target ([≤≥]) ([\d.]+)×/.exec(row.name) ?? [];
    const value = Number.parseFloat(row.ratio);
    const miss = bound === '≤' ? value > Number(target) : value < Number(target);
    if (target !== undefined && Number.isFinite(value) && miss) {
      row = { ...row, ratio: `${row.ratio} MISSED` };
      this.missed.push(`${row.name}: ${row.ratio.replace(' MISSED', '')} against ${bound} ${target}×`);
    } else if (row.missed) {
      this.missed.push(`${row.name}: ${row.missed}`);
      row = { ...row, ratio: `${row.ratio} MISSED` };
    }
    this.rows.push(row);
  }

  /** A timing row: subject median and p90 next to the baseline's median, and their ratio. */
  timeRow(name: string, subject: Stats, baselineName: string, baseline: Stats): void {
    this.row({
      name: `${name} (n=${subject.n})`,
      median: ms(subject.median),
      p90: ms(subject.p90),
      baseline: `${baselineName} (n=${baseline.n})`,
      baselineMedian: ms(baseline.median),
      ratio: ratio(subject.median, baseline.median),
    });
  }

  note(line: string): void {
    this.notes.push(line);
  }

  /** Merges fields into bench/results.json. */
  record(fields: Record<string, unknown>): void {
    Object.assign(this.results, fields);
  }

  /** Merges fields into results.json's `machine` (what the figures were measured on). */
  recordMachine(fields: Record<string, unknown>): void {
    this.results.machine = { ...((this.results.machine as Record<string, unknown> | undefined) ?? {}), ...fields };
  }

  /** Registers a cleanup; the section's cleanups run (newest first) when it ends. */
  cleanup(...steps: Array<() => unknown>): void {
    this.cleanups.push(...steps);
  }

  tempDir(prefix: string): string {
    const dir = mkdtempSync(join(tmpdir(), `dmdot-bench-${prefix}-`));
    this.cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    return dir;
  }

  /** How many cleanups are registered: a section runs those registered after this mark when it ends. */
  mark(): number {
    return this.cleanups.length;
  }

  /** Runs (newest first) the cleanups registered after the first `keep` ones. */
  async runCleanups(keep = 0): Promise<void> {
    while (this.cleanups.length > keep) {
      const step = this.cleanups.pop()!;
      try {
        await withTimeout(Promise.resolve().then(step), 10_000, 'cleanup');
      } catch (error) {
        progress(`cleanup failed: ${errorText(error)}`);
      }
    }
  }

  /** The functions' environments from one synth (a few seconds), shared by the sections that need them. */
  stackEnvironments(): Promise<StackEnvironments> {
    this.environments ??= synthesizeEnvironments();
    return this.environments;
  }
}

/** One section of the bench: `run` reports into the bench and may throw (a FAILED row, the run goes on). */
export interface Section {
  /** Its name in BENCH_SECTIONS. */
  key: string;
  title: string;
  /** The section is cut short (a FAILED row) past this. */
  budgetMs: number;
  run(bench: Bench): Promise<void>;
}

// ---------------------------------------------------------------------------------------------
// Paired measurement: rounds alternate baseline and subject
// ---------------------------------------------------------------------------------------------

export interface PairedOptions {
  /** Samples per side in total, split evenly over the rounds. */
  samples: number;
  /** Operations timed together per sample (per-operation time = sample / batch). */
  batch: number;
  warmup: number;
  rounds: number;
  /** Stop early (keeping what was measured) once this much time has gone by. */
  maxMs: number;
}

export async function pairedAsync(subject: () => Promise<unknown>, baseline: () => Promise<unknown>, options: PairedOptions) {
  for (let i = 0; i < options.warmup; i++) {
    await baseline();
    await subject();
  }
  const out = { subject: [] as number[], baseline: [] as number[] };
  const perRound = Math.max(1, Math.ceil(options.samples / options.rounds));
  const deadline = performance.now() + options.maxMs;
  for (let round = 0; round < options.rounds && performance.now() < deadline; round++) {
    // The side that goes first alternates too, so a slow start of a round hits both alike.
    const order =
      round % 2 === 0
        ? ([
            [baseline, out.baseline],
            [subject, out.subject],
          ] as const)
        : ([
            [subject, out.subject],
            [baseline, out.baseline],
          ] as const);
    for (const [fn, into] of order) {
      for (let s = 0; s < perRound && performance.now() < deadline; s++) {
        const t0 = performance.now();
        for (let b = 0; b < options.batch; b++) await fn();
        into.push((performance.now() - t0) / options.batch);
      }
    }
  }
  return { subject: stats(out.subject), baseline: stats(out.baseline) };
}

export function pairedSync(subject: () => unknown, baseline: () => unknown, options: PairedOptions) {
  let sink = 0;
  const consume = (value: unknown) => {
    if (typeof value === 'string') sink += value.length;
    else if (value && typeof value === 'object') sink += 1;
  };
  for (let i = 0; i < options.warmup; i++) {
    consume(baseline());
    consume(subject());
  }
  const out = { subject: [] as number[], baseline: [] as number[] };
  const perRound = Math.max(1, Math.ceil(options.samples / options.rounds));
  const deadline = performance.now() + options.maxMs;
  for (let round = 0; round < options.rounds && performance.now() < deadline; round++) {
    for (const [fn, into] of [
      [baseline, out.baseline],
      [subject, out.subject],
    ] as const) {
      for (let s = 0; s < perRound && performance.now() < deadline; s++) {
        const t0 = performance.now();
        for (let b = 0; b < options.batch; b++) consume(fn());
        into.push((performance.now() - t0) / options.batch);
      }
    }
  }
  if (sink === -1) progress('unreachable'); // keeps the results observable to the optimizer
  return { subject: stats(out.subject), baseline: stats(out.baseline) };
}

// ---------------------------------------------------------------------------------------------
// Fixtures
// ---------------------------------------------------------------------------------------------

export const silentLog: Logger = { info: () => undefined, warn: () => undefined, error: () => undefined };

export function newSecret(bytes = 32): string {
  return `whsec_${randomBytes(bytes).toString('base64')}`;
}

/** An API key of the recommended length (43 characters, as the local runtime generates). */
export function newApiKey(): string {
  return randomBytes(32).toString('base64url');
}

/** A message of at most `maxBytes` UTF-8 bytes (and within a few bytes of it), multibyte characters included. */
export function messageOfBytes(maxBytes: number): string {
  const unit = 'Hello dot, ünïcödé ✓ message. ';
  let text = unit.repeat(Math.ceil(maxBytes / Buffer.byteLength(unit)) + 1);
  while (Buffer.byteLength(text) > maxBytes) text = text.slice(0, -1);
  return text;
}

export function rpcBody(method: string, params: Record<string, unknown> = {}): string {
  return modernBody(method, params);
}

export function rpcHeaders(method: string, key: string, name?: string): Record<string, string> {
  return modernHeaders(method, { authorization: `Bearer ${key}`, ...(name ? { 'mcp-name': name } : {}) });
}

/** `<binary> --version`, or 'unknown'. */
export function versionOf(binary: string): Promise<string> {
  return new Promise<string>((done) => {
    const child = spawn(binary, ['--version'], { stdio: ['ignore', 'pipe', 'ignore'] });
    let out = '';
    child.stdout.setEncoding('utf8').on('data', (c: string) => (out += c));
    child.once('close', () => done(out.trim() || 'unknown'));
    child.once('error', () => done('unknown'));
  });
}
