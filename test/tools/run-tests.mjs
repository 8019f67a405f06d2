// `npm test`: the type check, Jest and the end-to-end files, started together, because the three
// mostly wait (child processes, sockets, timers) rather than compute: run one after another they
// took about 8.5 minutes on a 2-core machine. Each step's output is held back and printed whole
// when it ends, so the three never interleave; the exit code is 1 when any step failed.
// `node test/tools/run-tests.mjs e2e` runs only the named steps (`npm run test:e2e` is that).
//
// Deliberately not here: choosing which tests run. Every file of every step runs, always.
import { spawn } from 'node:child_process';
import { availableParallelism } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const bin = (name) => join(root, 'node_modules', '.bin', name);

// Jest's default is one worker fewer than the cores (1 on 2 cores); its files wait on JVMs, child
// processes and sockets, so a few more workers than cores pay off. The same holds for e2e files.
const workers = Math.max(3, availableParallelism() - 1);

/** name -> [command, args] */
const STEPS = {
  typecheck: [process.execPath, [join(root, 'node_modules', 'typescript', 'bin', 'tsc'), '--noEmit', '-p', root]],
  jest: [process.execPath, [join(root, 'node_modules', 'jest', 'bin', 'jest.js'), `--maxWorkers=${workers}`]],
  e2e: [
    process.execPath,
    [join(root, 'test', 'tools', 'node22.mjs'), '--import', 'tsx', '--test', `--test-concurrency=${workers}`, '--test-timeout=300000', 'test/e2e/**/*.test.ts'],
  ],
};

const wanted = process.argv.length > 2 ? process.argv.slice(2) : Object.keys(STEPS);
for (const name of wanted) {
  if (!(name in STEPS)) {
    console.error(`no step "${name}"; the steps are ${Object.keys(STEPS).join(', ')}`);
    process.exit(2);
  }
}

function run(name) {
  const [command, args] = STEPS[name];
  const started = Date.now();
  return new Promise((resolve) => {
    const chunks = [];
    const child = spawn(command, args, { cwd: root, env: { ...process.env, FORCE_COLOR: process.env.FORCE_COLOR ?? '0' }, stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout.on('data', (chunk) => chunks.push(chunk));
    child.stderr.on('data', (chunk) => chunks.push(chunk));
    const finish = (code, detail) => {
      const seconds = ((Date.now() - started) / 1000).toFixed(1);
      process.stdout.write(`\n===== ${name}: ${code === 0 ? 'passed' : `FAILED (${detail})`} in ${seconds} s =====\n`);
      process.stdout.write(Buffer.concat(chunks));
      resolve({ name, ok: code === 0, seconds });
    };
    child.on('error', (error) => finish(1, error.message));
    child.on('close', (code, signal) => finish(code ?? 1, signal ? `signal ${signal}` : `exit code ${code}`));
  });
}

// Pressing Ctrl-C reaches the children through the process group; nothing to forward.
console.log(`npm test: ${wanted.join(', ')} side by side (Jest ${workers} workers, ${workers} end-to-end files at a time); each step prints when it ends`);
const started = Date.now();
const results = await Promise.all(wanted.map(run));
const total = ((Date.now() - started) / 1000).toFixed(1);
console.log(`\nnpm test: ${results.map((r) => `${r.name} ${r.ok ? 'passed' : 'FAILED'} (${r.seconds} s)`).join(', ')}; ${total} s in all`);
process.exit(results.every((r) => r.ok) ? 0 : 1);
