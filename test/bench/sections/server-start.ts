/**
 * The local server's start-up as `npm start` runs it: `node lambda/local/start.mjs` (the launcher
 * over the built bundle, dist/server/dm-dot-server.cjs) from spawn to its listening line, on a
 * state directory that already holds a database (a restart, the usual case for a server that runs
 * for weeks), against `node -e 0` in the same rounds. The bundle is built first when it is
 * missing or out of date (the launcher does that itself; one unrecorded start absorbs it).
 *
 * Deliberately not here: `npm` itself (about half a second of its own before the script runs,
 * the same for any script), and the first start's key generation.
 */
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { newApiKey, ratio, ratioOf, ROOT, stats, type Section } from '../support';

const ROUNDS = 6;

/** Spawn to the listening line, then a clean stop; the milliseconds to the line. */
function startOnce(env: NodeJS.ProcessEnv): Promise<number> {
  return new Promise((done, fail) => {
    const t0 = performance.now();
    const child = spawn(process.execPath, [join(ROOT, 'lambda', 'local', 'start.mjs')], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    let took: number | undefined;
    const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
    child.stderr.setEncoding('utf8').on('data', (c: string) => (err = (err + c).slice(-2000)));
    child.stdout.setEncoding('utf8').on('data', (c: string) => {
      out += c;
      if (took === undefined && /dm-dot listening on http:\/\//.test(out)) {
        took = performance.now() - t0;
        child.kill('SIGTERM');
      }
    });
    child.once('error', fail);
    child.once('close', (code) => {
      clearTimeout(timer);
      if (took === undefined) fail(new Error(`npm start's server exited ${code} before listening: ${err.trim().slice(-300)}`));
      else done(took);
    });
  });
}

function nodeOnce(env: NodeJS.ProcessEnv): Promise<number> {
  return new Promise((done, fail) => {
    const t0 = performance.now();
    const child = spawn(process.execPath, ['-e', '0'], { env, stdio: 'ignore' });
    child.once('error', fail);
    child.once('close', () => done(performance.now() - t0));
  });
}

export const serverStartSection: Section = {
  key: 'server-start',
  title: 'npm start: the built server to its listening line',
  budgetMs: 150_000,
  async run(bench) {
    const stateDir = bench.tempDir('server-start');
    // The same environment on both sides, the CA bundle variable included when this shell has one.
    const env: NodeJS.ProcessEnv = {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      HOME: process.env.HOME ?? stateDir,
      HOST: '127.0.0.1',
      PORT: '0',
      DMDOT_STATE_DIR: stateDir,
      MCP_API_KEY: newApiKey(),
      ...(process.env.NODE_EXTRA_CA_CERTS ? { NODE_EXTRA_CA_CERTS: process.env.NODE_EXTRA_CA_CERTS } : {}),
    };
    // Unrecorded: builds the bundle if needed and creates the database.
    await startOnce(env);
    const samples = { start: [] as number[], node: [] as number[] };
    for (let round = 0; round < ROUNDS; round++) {
      const order = round % 2 === 0 ? (['node', 'start'] as const) : (['start', 'node'] as const);
      for (const side of order) samples[side].push(side === 'start' ? await startOnce(env) : await nodeOnce(env));
    }
    const start = stats(samples.start);
    const node = stats(samples.node);
    bench.timeRow('npm start: node lambda/local/start.mjs (the built server) to its listening line, a restart', start, 'node -e 0', node);
    bench.record({
      serverStartMs: start.median,
      serverStartP90Ms: start.p90,
      serverStartBaselineMs: node.median,
      serverStartRatio: ratioOf(start.median, node.median),
      serverStartCaBundle: process.env.NODE_EXTRA_CA_CERTS ? 'NODE_EXTRA_CA_CERTS on both sides' : 'no NODE_EXTRA_CA_CERTS',
    });
    bench.note(`server-start: the built server listens ${ratio(start.median, node.median)} the time of node -e 0 (a TypeScript loader took 1.3 to 1.6 s).`);
  },
};
