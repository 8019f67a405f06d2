/**
 * Runs the MCP conformance suites (installed in test/tools, run on the Node this file runs on) against a server
 * URL, reads the per-scenario `checks.json` files they write with `-o <dir>`, and judges every
 * check against an expected-failures file.
 *
 * Expected-failures files: one line per failing check, `<scenario>/<check-id>  # reason`; blank
 * lines and lines starting with `#` are comments. A reason is required. A check is failing when
 * its verdict is FAILURE or WARNING (the suites' own baseline logic treats a WARNING as a
 * failure too); a check id that occurs several times in a scenario collapses to one verdict, most
 * severe first, as the suites do; INFO entries are not checks. An entry is stale when its check
 * is not failing in the run (passing, skipped or not reported at all).
 *
 * Deliberately not here: starting the server (the test does) and any network beyond the URL.
 */
import assert from 'node:assert/strict';
import { spawnGroup as spawn } from '../../support/processes';
import { existsSync, mkdirSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT } from '../../support/e2e';

const TOOLS = join(ROOT, 'test', 'tools', 'node_modules');
/** The end-to-end step already runs on the test Node (test/tools/test-node.cjs: 22 or later), which the suites need. */
export const SUITE_NODE = process.execPath;

export interface SuiteSpec {
  /** Short name, also the expected-failures file suffix. */
  name: string;
  label: string;
  cli: string;
  /** Arguments after `list --server` naming the scenarios that apply. */
  listArgs: string[];
  /** Arguments after `server --url <url> -o <dir>` selecting those scenarios. */
  runArgs: string[];
  /** Scenarios that must be among those run (guards against a selection that silently shrinks). */
  required: string[];
  expectedFile: string;
  /** The whole CLI run is killed after this long. */
  timeoutMs: number;
}

const HERE = join(ROOT, 'test', 'e2e', 'conformance');

// The scenario and run deadlines are outer bounds for a hung exchange, not a speed check: the
// server-stateless scenario (dozens of requests) outran 15 s at load 15 behind the in-process Lambda.
export const SUITES: SuiteSpec[] = [
  {
    name: 'next',
    label: '@modelcontextprotocol/conformance@0.2.0-alpha.12, 2026-07-28 scenarios',
    cli: join(TOOLS, 'conformance-next', 'dist', 'index.js'),
    // `all` includes the pending scenarios (http-header-validation, json-schema-2020-12, ...);
    // the version filter leaves out the extension scenarios (tasks, skills), which dm-dot does not
    // implement or declare, and the stateful-era ones, which the legacy suite covers.
    listArgs: ['--spec-version', '2026-07-28'],
    runArgs: ['--suite', 'all', '--spec-version', '2026-07-28', '--timeout', '45000'],
    required: ['server-stateless', 'tools-list', 'caching', 'http-header-validation', 'dns-rebinding-protection'],
    expectedFile: join(HERE, 'expected-failures.next.txt'),
    timeoutMs: 150_000,
  },
  {
    // The same newer suite on the stateful wire (initialize handshake): the server serves both
    // eras on one endpoint, and this suite's legacy-era scenarios add checks 0.1.16 does not have
    // (wire schema validation, session id rules).
    name: 'next-2025-11-25',
    label: '@modelcontextprotocol/conformance@0.2.0-alpha.12, 2025-11-25 scenarios',
    cli: join(TOOLS, 'conformance-next', 'dist', 'index.js'),
    listArgs: ['--spec-version', '2025-11-25'],
    runArgs: ['--suite', 'all', '--spec-version', '2025-11-25', '--timeout', '45000'],
    required: ['server-initialize', 'ping', 'tools-list', 'dns-rebinding-protection'],
    expectedFile: join(HERE, 'expected-failures.next-2025-11-25.txt'),
    timeoutMs: 150_000,
  },
  {
    name: 'legacy',
    label: '@modelcontextprotocol/conformance@0.1.16, legacy (initialize) scenarios',
    cli: join(TOOLS, 'conformance-legacy', 'dist', 'index.js'),
    listArgs: [],
    runArgs: ['--suite', 'all'],
    required: ['server-initialize', 'ping', 'tools-list', 'dns-rebinding-protection'],
    expectedFile: join(HERE, 'expected-failures.legacy.txt'),
    timeoutMs: 150_000,
  },
];

export interface CliResult {
  code: number | null;
  timedOut: boolean;
  stdout: string;
  stderr: string;
}

/** Runs a conformance CLI with the test Node, with a minimal environment and a hard deadline. */
export function runCli(cli: string, args: string[], options: { cwd: string; timeoutMs: number }): Promise<CliResult> {
  return new Promise((done, fail) => {
    const child = spawn(SUITE_NODE, [cli, ...args], {
      cwd: options.cwd,
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', NO_COLOR: '1', FORCE_COLOR: '0' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    let timedOut = false;
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill('SIGKILL');
    }, options.timeoutMs);
    child.once('error', (error) => {
      clearTimeout(timer);
      fail(error);
    });
    child.once('close', (code) => {
      clearTimeout(timer);
      done({ code, timedOut, stdout, stderr });
    });
  });
}

/** The server scenarios a suite offers for the given `list` arguments, in its order. */
export async function listScenarios(suite: SuiteSpec, cwd: string): Promise<string[]> {
  const result = await runCli(suite.cli, ['list', '--server', ...suite.listArgs], { cwd, timeoutMs: 30_000 });
  if (result.code !== 0) throw new Error(`${suite.name}: list failed (${result.code}): ${result.stderr}`);
  const names = [...result.stdout.matchAll(/^\s+- (\S+)/gm)].map((m) => m[1]!);
  if (names.length === 0) throw new Error(`${suite.name}: list printed no scenarios:\n${result.stdout}`);
  return names;
}

export type Status = 'SUCCESS' | 'FAILURE' | 'WARNING' | 'SKIPPED' | 'INFO';

export interface Check {
  id: string;
  status: Status;
  errorMessage?: string;
}

/** Reads `<dir>/server-<scenario>-<timestamp>/checks.json` into scenario -> checks. */
export function readResults(dir: string): Map<string, Check[]> {
  const results = new Map<string, Check[]>();
  for (const entry of readdirSync(dir)) {
    const match = /^server-(.+)-\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-\d{3}Z$/.exec(entry);
    if (!match) continue;
    let checks: Check[];
    try {
      checks = JSON.parse(readFileSync(join(dir, entry, 'checks.json'), 'utf8')) as Check[];
    } catch (error) {
      checks = [{ id: 'checks-json-unreadable', status: 'FAILURE', errorMessage: String(error) }];
    }
    results.set(match[1]!, [...(results.get(match[1]!) ?? []), ...checks]);
  }
  return results;
}

const SEVERITY: Record<string, number> = { FAILURE: 3, WARNING: 2, SUCCESS: 1, SKIPPED: 0 };

/** One verdict per check id, most severe first; INFO entries dropped. */
export function collapse(checks: Check[]): Check[] {
  const byId = new Map<string, Check>();
  for (const check of checks) {
    if (check.status === 'INFO') continue;
    const seen = byId.get(check.id);
    if (!seen || (SEVERITY[check.status] ?? 0) > (SEVERITY[seen.status] ?? 0)) byId.set(check.id, check);
  }
  return [...byId.values()];
}

export const isFailing = (check: Check) => check.status === 'FAILURE' || check.status === 'WARNING';

/** Parses an expected-failures file into `<scenario>/<check-id>` -> reason; throws on a bad line. */
export function parseExpected(text: string, file = 'expected-failures'): Map<string, string> {
  const entries = new Map<string, string>();
  const problems: string[] = [];
  text.split('\n').forEach((raw, index) => {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) return;
    const match = /^([^\s/#]+)\/(\S+)\s+#\s*(\S.*)$/.exec(line);
    if (!match) {
      problems.push(`${file}:${index + 1}: expected "<scenario>/<check-id>  # reason", got: ${line}`);
      return;
    }
    const key = `${match[1]}/${match[2]}`;
    if (entries.has(key)) problems.push(`${file}:${index + 1}: duplicate entry ${key}`);
    entries.set(key, match[3]!.trim());
  });
  if (problems.length > 0) throw new Error(problems.join('\n'));
  return entries;
}

export interface Row {
  scenario: string;
  passed: number;
  failed: number;
  expected: number;
  skipped: number;
  /** The scenario wrote no results at all. */
  missing?: boolean;
}

export interface Judgement {
  rows: Row[];
  /** Failing checks not listed, and scenarios that reported nothing. */
  unexpected: string[];
  /** Listed checks that are not failing. */
  stale: string[];
  /** Listed checks that failed as expected, with their reasons. */
  expectedFailures: string[];
}

export function judge(scenarios: string[], results: Map<string, Check[]>, expected: Map<string, string>): Judgement {
  const rows: Row[] = [];
  const unexpected: string[] = [];
  const failingKeys = new Set<string>();
  const verdictOf = new Map<string, Status>();
  for (const scenario of scenarios) {
    const checks = results.get(scenario);
    if (!checks) {
      unexpected.push(`${scenario}: the scenario reported no results (crashed, or the run was cut short)`);
      rows.push({ scenario, passed: 0, failed: 0, expected: 0, skipped: 0, missing: true });
      continue;
    }
    const row: Row = { scenario, passed: 0, failed: 0, expected: 0, skipped: 0 };
    for (const check of collapse(checks)) {
      const key = `${scenario}/${check.id}`;
      verdictOf.set(key, check.status);
      if (check.status === 'SUCCESS') row.passed++;
      else if (check.status === 'SKIPPED') row.skipped++;
      else if (isFailing(check)) {
        row.failed++;
        failingKeys.add(key);
        if (expected.has(key)) row.expected++;
        else unexpected.push(`${key} [${check.status}] ${(check.errorMessage ?? '').slice(0, 300)}`);
      }
    }
    rows.push(row);
  }
  for (const scenario of results.keys()) {
    if (!scenarios.includes(scenario)) unexpected.push(`${scenario}: results for a scenario outside the selection`);
  }
  const stale: string[] = [];
  const expectedFailures: string[] = [];
  for (const [key, reason] of expected) {
    if (failingKeys.has(key)) expectedFailures.push(`${key}  # ${reason}`);
    else stale.push(`${key}: listed as expected to fail but ${verdictOf.has(key) ? `now ${verdictOf.get(key)}` : 'not reported by the run'}`);
  }
  return { rows, unexpected, stale, expectedFailures };
}

export function formatTable(title: string, judgement: Judgement): string {
  const header = ['scenario', 'passed', 'failed', 'expected'];
  const body = judgement.rows.map((r) => [
    r.scenario,
    String(r.passed),
    String(r.failed),
    String(r.expected),
    r.missing ? '<- no results' : r.failed > r.expected ? '<- unexpected' : '',
  ]);
  const total = judgement.rows.reduce((t, r) => ({ passed: t.passed + r.passed, failed: t.failed + r.failed, expected: t.expected + r.expected }), {
    passed: 0,
    failed: 0,
    expected: 0,
  });
  const footer = ['TOTAL', String(total.passed), String(total.failed), String(total.expected), ''];
  const width = header.map((h, i) => Math.max(h.length, ...body.map((b) => b[i]!.length), footer[i]!.length));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => (i === 0 ? c.padEnd(width[0]!) : i < 4 ? c.padStart(width[i]!) : c))
      .join('  ')
      .trimEnd();
  const rule = '-'.repeat(width.reduce((a, b) => a + b + 2, 0) - 2);
  const lines = [title, line(header), rule, ...body.map(line), rule, line(footer)];
  if (judgement.stale.length > 0) lines.push('stale expected failures:', ...judgement.stale.map((s) => `  ${s}`));
  if (judgement.unexpected.length > 0) lines.push('unexpected failures:', ...judgement.unexpected.map((s) => `  ${s}`));
  return lines.join('\n');
}

export interface SuiteOutcome {
  suite: SuiteSpec;
  /** The expected-failures file the run was judged against. */
  expectedFile: string;
  scenarios: string[];
  cli: CliResult;
  judgement: Judgement;
  ms: number;
}

/**
 * Lists the suite's scenarios, runs them against `mcpUrl` with results in `<workDir>/<suite>`, and
 * judges them against `expectedFile` (default: the suite's own file).
 */
export async function runSuite(suite: SuiteSpec, mcpUrl: string, workDir: string, expectedFile: string = suite.expectedFile): Promise<SuiteOutcome> {
  const started = Date.now();
  const dir = join(workDir, suite.name);
  mkdirSync(dir);
  const expected = parseExpected(readFileSync(expectedFile, 'utf8'), expectedFile);
  const scenarios = await listScenarios(suite, dir);
  const cli = await runCli(suite.cli, ['server', '--url', mcpUrl, '-o', join(dir, 'results'), ...suite.runArgs], { cwd: dir, timeoutMs: suite.timeoutMs });
  // No results directory at all: judge() reports every scenario as missing.
  const results = existsSync(join(dir, 'results')) ? readResults(join(dir, 'results')) : new Map<string, Check[]>();
  return { suite, expectedFile, scenarios, cli, judgement: judge(scenarios, results, expected), ms: Date.now() - started };
}

/**
 * The verdict on one suite's run, shared by every target (local runtime, Lambda): the CLI ended by
 * itself, every required scenario ran, every failing check is expected, no expected entry is
 * stale, and something passed. `target` names what to fix in the unexpected-failure message.
 */
export function assertSuiteOutcome(outcome: SuiteOutcome | undefined, target: string): void {
  assert.ok(outcome, 'the suite ran');
  const { suite, cli, judgement, scenarios, expectedFile } = outcome;
  assert.ok(!cli.timedOut, `${suite.name} was killed after ${suite.timeoutMs} ms:\n${cli.stdout.slice(-3000)}\n${cli.stderr.slice(-3000)}`);
  assert.ok(cli.code === 0 || cli.code === 1, `${suite.name} exited with ${cli.code}:\n${cli.stderr.slice(-3000)}`);
  for (const name of suite.required) assert.ok(scenarios.includes(name), `${suite.name} runs ${name}`);
  assert.deepEqual(judgement.unexpected, [], `${suite.name}: unexpected failures (fix ${target}, or list them with a reason in ${expectedFile})`);
  assert.deepEqual(judgement.stale, [], `${suite.name}: stale entries in ${expectedFile} (remove them)`);
  assert.ok(judgement.rows.reduce((n, r) => n + r.passed, 0) > 0, 'some checks passed');
}

/**
 * A suite whose scenarios no `--suite` selects (the server side has no extensions suite), so each
 * one is run on its own with `--scenario`: `list --server <listArgs>` names them, `select` keeps
 * those that apply, and `runArgs` follow `--scenario <name>`.
 */
export interface ScenarioSuiteSpec extends SuiteSpec {
  select: (scenario: string) => boolean;
}

/**
 * The Tasks extension (`io.modelcontextprotocol/tasks`, SEP-2663) scenarios of the newer suite,
 * every `tasks-*` one. Its fixture tools are stood in for by conformance/fixture-proxy.ts.
 */
export const TASKS_SUITE: ScenarioSuiteSpec = {
  name: 'tasks',
  label: '@modelcontextprotocol/conformance@0.2.0-alpha.12, Tasks extension scenarios',
  cli: join(TOOLS, 'conformance-next', 'dist', 'index.js'),
  listArgs: [],
  // The scenario's own deadline; its polls of tasks/get give up after 10 s each.
  runArgs: ['--timeout', '45000'],
  required: ['tasks-lifecycle', 'tasks-capability-negotiation'],
  expectedFile: join(HERE, 'expected-failures.tasks.txt'),
  timeoutMs: 60_000,
  select: (scenario) => scenario.startsWith('tasks-'),
};

/**
 * Like runSuite, for a suite run one scenario at a time (one CLI run each, one after the other,
 * results in `<workDir>/<suite>/results`); the CLI results are merged into one: it timed out when
 * any run did, and its code is the first that is neither 0 nor 1, else the highest.
 */
export async function runEachScenario(
  suite: ScenarioSuiteSpec,
  mcpUrl: string,
  workDir: string,
  expectedFile: string = suite.expectedFile,
): Promise<SuiteOutcome> {
  const started = Date.now();
  const dir = join(workDir, suite.name);
  mkdirSync(dir);
  const expected = parseExpected(readFileSync(expectedFile, 'utf8'), expectedFile);
  const scenarios = (await listScenarios(suite, dir)).filter(suite.select);
  const runs: CliResult[] = [];
  for (const scenario of scenarios) {
    const run = await runCli(suite.cli, ['server', '--url', mcpUrl, '-o', join(dir, 'results'), '--scenario', scenario, ...suite.runArgs], {
      cwd: dir,
      timeoutMs: suite.timeoutMs,
    });
    runs.push({ ...run, stdout: `=== ${scenario} ===\n${run.stdout}`, stderr: run.stderr === '' ? '' : `=== ${scenario} ===\n${run.stderr}` });
  }
  const odd = runs.find((r) => r.code !== 0 && r.code !== 1);
  const cli: CliResult = {
    code: odd ? odd.code : runs.reduce<number>((code, r) => Math.max(code, r.code ?? 0), 0),
    timedOut: runs.some((r) => r.timedOut),
    stdout: runs.map((r) => r.stdout).join('\n'),
    stderr: runs
      .map((r) => r.stderr)
      .filter(Boolean)
      .join('\n'),
  };
  const results = existsSync(join(dir, 'results')) ? readResults(join(dir, 'results')) : new Map<string, Check[]>();
  return { suite, expectedFile, scenarios, cli, judgement: judge(scenarios, results, expected), ms: Date.now() - started };
}
