// `npm test`: the type check, Jest and the end-to-end files, started together, because the three
// mostly wait (child processes, sockets, timers) rather than compute: run one after another they
// took about 8.5 minutes on a 2-core machine. Each step's output is held back and printed whole
// when it ends, so the three never interleave; meanwhile one line is printed as each test file
// finishes (the reporters of progress.cjs). The exit code is 1 when any step failed.
// `node test/tools/run-tests.mjs e2e` runs only the named steps (`npm run test:e2e` is that).
//
// No process outlives the run: every step and everything it starts carries the run's marker
// (DMDOT_TEST_RUN) in its environment (test/support/processes.ts keeps it in the environments the
// tests build themselves). When the steps have ended, whatever still carries it is killed and
// named, and the run fails. SIGINT, SIGTERM and SIGHUP reach the steps, and the sweep still runs.
//
// Deliberately not here: choosing which tests run. Every file of every step runs, always.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { closeSync, mkdtempSync, openSync, readdirSync, readFileSync, readSync, rmSync, statSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

// Jest's default is one worker fewer than the cores (1 on 2 cores); its files wait on JVMs, child
// processes and sockets, so a few more workers than cores pay off. The same holds for e2e files.
const workers = Math.max(3, availableParallelism() - 1);

const progressReporter = join(root, 'test', 'tools', 'progress.cjs');

/** name -> [command, args] */
const STEPS = {
  // Formatting and lint (biome.json): one binary, a few seconds for the whole tree.
  lint: [process.execPath, [join(root, 'node_modules', '@biomejs', 'biome', 'bin', 'biome'), 'check', '--reporter=summary', root]],
  typecheck: [process.execPath, [join(root, 'node_modules', 'typescript', 'bin', 'tsc'), '--noEmit', '-p', root]],
  jest: [
    process.execPath,
    [join(root, 'node_modules', 'jest', 'bin', 'jest.js'), `--maxWorkers=${workers}`, '--reporters=default', `--reporters=${progressReporter}`],
  ],
  e2e: [
    process.execPath,
    [
      join(root, 'test', 'tools', 'node22.mjs'),
      '--import',
      'tsx',
      '--test',
      `--test-concurrency=${workers}`,
      '--test-timeout=300000',
      '--test-reporter=spec',
      '--test-reporter-destination=stdout',
      `--test-reporter=${join(root, 'test', 'tools', 'progress-node.mjs')}`,
      '--test-reporter-destination=stderr',
      'test/e2e/**/*.test.ts',
    ],
  ],
};

const wanted = process.argv.length > 2 ? process.argv.slice(2) : Object.keys(STEPS);
for (const name of wanted) {
  if (!(name in STEPS)) {
    console.error(`no step "${name}"; the steps are ${Object.keys(STEPS).join(', ')}`);
    process.exit(2);
  }
}

const MARKER = 'DMDOT_TEST_RUN';
const marker = `${process.pid}-${randomBytes(6).toString('hex')}`;
const scratch = mkdtempSync(join(tmpdir(), 'dmdot-test-run-'));
const progressFile = join(scratch, 'progress');
const stepEnv = { ...process.env, FORCE_COLOR: process.env.FORCE_COLOR ?? '0', [MARKER]: marker, DMDOT_PROGRESS_FILE: progressFile };

const children = new Set();

function run(name) {
  const [command, args] = STEPS[name];
  const started = Date.now();
  return new Promise((resolve) => {
    const chunks = [];
    const child = spawn(command, args, { cwd: root, env: stepEnv, stdio: ['ignore', 'pipe', 'pipe'] });
    children.add(child);
    child.stdout.on('data', (chunk) => chunks.push(chunk));
    child.stderr.on('data', (chunk) => chunks.push(chunk));
    const finish = (code, detail) => {
      children.delete(child);
      showProgress();
      const seconds = ((Date.now() - started) / 1000).toFixed(1);
      process.stdout.write(`\n===== ${name}: ${code === 0 ? 'passed' : `FAILED (${detail})`} in ${seconds} s =====\n`);
      process.stdout.write(Buffer.concat(chunks));
      resolve({ name, ok: code === 0, seconds });
    };
    child.on('error', (error) => finish(1, error.message));
    child.on('close', (code, signal) => finish(code ?? 1, signal ? `signal ${signal}` : `exit code ${code}`));
  });
}

// The progress lines, as the reporters append them.
let shown = 0;
function showProgress() {
  let size;
  try {
    size = statSync(progressFile).size;
  } catch {
    return;
  }
  if (size <= shown) return;
  const buffer = Buffer.alloc(size - shown);
  const fd = openSync(progressFile, 'r');
  try {
    readSync(fd, buffer, 0, buffer.length, shown);
  } finally {
    closeSync(fd);
  }
  const text = buffer.toString('utf8');
  const end = text.lastIndexOf('\n') + 1;
  if (end === 0) return;
  shown += Buffer.byteLength(text.slice(0, end));
  for (const line of text.slice(0, end).split('\n').filter(Boolean)) process.stdout.write(`  ${elapsed()} ${line}\n`);
}
const runStarted = Date.now();
const elapsed = () => `[${String(Math.round((Date.now() - runStarted) / 1000)).padStart(4)} s]`;

/** Processes of this run still alive (Linux: /proc/<pid>/environ), but never this one. */
function leftovers() {
  if (process.platform !== 'linux') return [];
  const found = [];
  const needle = `${MARKER}=${marker}\0`;
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    try {
      if (!`${readFileSync(`/proc/${entry}/environ`, 'latin1')}\0`.includes(needle)) continue;
      const command = readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0').filter(Boolean).join(' ');
      found.push({ pid: Number(entry), command });
    } catch {
      // Gone meanwhile, or another user's.
    }
  }
  return found;
}

/** Kills what the run left behind and says what it was; true when there was nothing. */
async function sweep() {
  let found = leftovers();
  if (found.length === 0) return true;
  // A step's last children may still be on their way out: a moment's grace, then the kill.
  for (let i = 0; i < 20 && found.length > 0; i++) {
    await new Promise((resolve) => setTimeout(resolve, 100));
    found = leftovers();
  }
  if (found.length === 0) return true;
  for (const { pid } of found) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // Gone already.
    }
  }
  const one = found.length === 1;
  console.log(`\nnpm test: FAILED: ${found.length} process${one ? '' : 'es'} of this run outlived the steps and ${one ? 'was' : 'were'} killed:`);
  for (const { pid, command } of found) console.log(`  pid ${pid}: ${command.length > 200 ? `${command.slice(0, 200)}...` : command}`);
  return false;
}

// A signal reaches the steps (also when it was sent to this process alone); the steps end their
// own children, the sweep then kills what is left, and the run exits as the signal asks.
let interrupted;
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
  process.on(signal, () => {
    if (interrupted) return;
    interrupted = signal;
    console.log(`\nnpm test: ${signal}: stopping the steps`);
    for (const child of children) child.kill(signal);
    // Steps that do not end by themselves are ended.
    setTimeout(() => {
      for (const child of children) child.kill('SIGKILL');
    }, 15_000).unref();
  });
}

console.log(
  `npm test: ${wanted.join(', ')} side by side (Jest ${workers} workers, ${workers} end-to-end files at a time); ` +
    "a line per finished test file, each step's output when it ends",
);
const ticker = setInterval(showProgress, 500);
const results = await Promise.all(wanted.map(run));
clearInterval(ticker);
const clean = await sweep();
rmSync(scratch, { recursive: true, force: true });
const total = ((Date.now() - runStarted) / 1000).toFixed(1);
const summary = results.map((r) => `${r.name} ${r.ok ? 'passed' : 'FAILED'} (${r.seconds} s)`).join(', ');
console.log(`\nnpm test: ${summary}${clean ? '' : ', leftover processes FAILED'}; ${total} s in all`);
if (interrupted) process.exit(128 + ({ SIGHUP: 1, SIGINT: 2, SIGTERM: 15 }[interrupted] ?? 0));
process.exit(results.every((r) => r.ok) && clean ? 0 : 1);
