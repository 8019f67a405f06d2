/**
 * The built `dm-dot` executable for end-to-end tests: build it once per file as `npm ci` does
 * (`lambda/cli/build.mjs`), then run it as a child process with exactly the environment given,
 * collecting what it printed and its exit code.
 *
 * Deliberately not here: long-running commands with a standard input (each test drives `dm-dot
 * dot` itself), and any check of what was printed (each file keeps its own secret checks).
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { ROOT } from './e2e';
import { killGroup, spawnGroup } from './processes';

export const CLI = join(ROOT, 'lambda/cli/dm-dot.mjs');

/** A command that does not end by itself within this is killed (a hang must fail the test, not the run). */
const RUN_LIMIT_MS = 60_000;

export interface CliRun {
  code: number | null;
  out: string;
  err: string;
}

/** What `npm run build` (and `npm ci`, through prepare) does: the bin runs this bundle. */
export function buildCli(): void {
  const built = spawnSync(process.execPath, [join(ROOT, 'lambda/cli/build.mjs')], { cwd: ROOT, encoding: 'utf8' });
  assert.equal(built.status, 0, built.stderr);
}

export function runCli(
  args: string[],
  env: Record<string, string>,
  options: { cwd?: string; onOutput?: (out: string, err: string) => void } = {},
): Promise<CliRun> {
  return new Promise((done, fail) => {
    // In a process group of its own (processes.ts), with the run's marker added to `env`.
    const child = spawnGroup(process.execPath, [CLI, ...args], { cwd: options.cwd ?? ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.setEncoding('utf8').on('data', (c: string) => (out += c));
    child.stderr.setEncoding('utf8').on('data', (c: string) => (err += c));
    const timer = setTimeout(() => killGroup(child), RUN_LIMIT_MS);
    child.once('error', fail);
    // 'close', not 'exit': at 'exit' the pipes may still hold the last output (a run read as exit
    // 1 with nothing printed, twice in full runs).
    child.once('close', (code) => {
      clearTimeout(timer);
      options.onOutput?.(out, err);
      done({ code, out, err });
    });
  });
}
