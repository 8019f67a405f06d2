/**
 * The operator CLI's start-up: the wall time of `dm-dot --version` and of `dm-dot events --json`
 * run as processes (`node <bin> ...`, the bin of package.json, with DMDOT_STATE_DIR on a temp state
 * directory that holds a small database and no server), against `node -e 0` in the same run,
 * rounds alternating the three. Target: each at most 4× the bare Node start.
 *
 * If the built CLI is missing or does not run, `npm run build` is run once; if it still does not
 * run, the section fails saying so (and results.json says why under `cliMs`).
 *
 * Then the CLI as the README teaches it (`cliTaughtMs`): the command its `alias dm-dot="…"` line
 * names, with `$PWD` standing for the clone, run from a folder outside the clone for `status`,
 * `send` and `events`, against a local server started in this process with a subscribed receiver
 * (the walkthrough's terminal 1 and 2), alternating with `node -e 0` (target: each ≤ 4×).
 *
 * Then the same three taught commands on every other Node at hand (`cliTaughtByNode`): test/tools'
 * Node (the Lambda runtime's major, 24) and each Node named in BENCH_NODES (colon-separated paths
 * to `node` binaries, e.g. a Node 22), each first on PATH so that the alias's `node` is that Node,
 * against that same Node's `node -e 0` (a note says when no Node 22 was among them). Both sides
 * of every row run in the same environment; the CA bundle variable (NODE_EXTRA_CA_CERTS, which
 * slows Node 20's own start by tens of milliseconds) is passed to both when this shell has it, and
 * results.json says which.
 *
 * Deliberately not here: AWS, and a large history (`events` reads every record; the scale section
 * has 200,000 of them for the server).
 */
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { delimiter, dirname, join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { openEmbeddedDatabase } from '../../../lambda/adapters/embedded';
import { newEventId } from '../../../lambda/core/identity';
import { EventStatus, Limits } from '../../../lambda/core/protocol';
import { localSettings } from '../../../lambda/config/settings';
import { startLocal } from '../../../lambda/local/runtime';
import { testNode } from '../../tools/test-node.cjs';
import { startReceiver, subscribe, type RpcCall } from '../sends';
import { errorText, progress, ratio, ratioOf, ROOT, rpcBody, rpcHeaders, silentLog, stats, type Bench, type Section } from '../support';

/** Records in the CLI's state directory: enough for `events` to list something. */
const RECORDS = 20;
const ROUNDS = 12;
const PER_ROUND = 3;
/** Each other Node: fewer rounds (three commands and its baseline, two runs a round each), so three Nodes fit the budget on a busy machine. */
const OTHER_NODE_ROUNDS = 8;

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
  ms: number;
}

/** `node <args>` (this Node), timed from spawn to exit. */
function run(args: string[], env: NodeJS.ProcessEnv, timeoutMs = 20_000, command = process.execPath): Promise<Run> {
  return new Promise((done, fail) => {
    const t0 = performance.now();
    const child = spawn(command, args, { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (c: string) => (stdout += c));
    child.stderr.setEncoding('utf8').on('data', (c: string) => (stderr += c));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.once('error', (error) => {
      clearTimeout(timer);
      fail(error);
    });
    child.once('close', (code) => {
      clearTimeout(timer);
      done({ code, stdout, stderr, ms: performance.now() - t0 });
    });
  });
}

/** package.json's `bin["dm-dot"]`, absolute, read now (the CLI's layout may change under us). */
function binPath(): string {
  const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { bin?: string | Record<string, string> };
  const bin = typeof pkg.bin === 'string' ? pkg.bin : pkg.bin?.['dm-dot'];
  if (!bin) throw new Error('package.json names no bin "dm-dot"');
  return join(ROOT, bin);
}

export const cliSection: Section = {
  key: 'cli',
  title: 'operator CLI start-up',
  budgetMs: 540_000,
  async run(bench) {
    const stateDir = bench.tempDir('cli-state');
    const db = await openEmbeddedDatabase(stateDir, { role: 'operator' });
    try {
      const now = Date.now();
      for (let i = 0; i < RECORDS; i++) {
        const createdAt = now - i * 60_000;
        await db.store.putEvent({
          eventId: newEventId(),
          status: EventStatus.delivered,
          subscriptionId: 'sub_cli',
          attempts: 1,
          lastError: null,
          lastHttpStatus: 200,
          createdAt,
          deliveredAt: createdAt + 40,
          expiresAt: createdAt + Limits.eventRecordMs,
        });
      }
    } finally {
      await db.close();
    }
    // Only what the CLI needs: no NODE_OPTIONS or loaders of this process, no AWS settings.
    const env: NodeJS.ProcessEnv = {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      HOME: process.env.HOME ?? stateDir,
      LANG: 'C.UTF-8',
      DMDOT_STATE_DIR: stateDir,
      NO_COLOR: '1',
      // The same on both sides of every row: set for both when this shell has it, else for neither.
      ...(process.env.NODE_EXTRA_CA_CERTS ? { NODE_EXTRA_CA_CERTS: process.env.NODE_EXTRA_CA_CERTS } : {}),
    };
    bench.record({ cliCaBundle: env.NODE_EXTRA_CA_CERTS ? 'NODE_EXTRA_CA_CERTS on both sides' : 'no NODE_EXTRA_CA_CERTS' });

    let bin = binPath();
    const check = async (): Promise<string | undefined> => {
      if (!existsSync(bin)) return `${bin} does not exist`;
      const version = await run([bin, '--version'], env);
      if (version.code !== 0) return `\`dm-dot --version\` exited ${version.code}: ${(version.stderr || version.stdout).trim().slice(0, 200)}`;
      const events = await run([bin, 'events', '--json'], env);
      if (events.code !== 0) return `\`dm-dot events --json\` exited ${events.code}: ${(events.stderr || events.stdout).trim().slice(0, 200)}`;
      let listed: unknown;
      try {
        listed = (JSON.parse(events.stdout) as { events?: unknown }).events;
      } catch {
        return `\`dm-dot events --json\` printed no JSON: ${events.stdout.slice(0, 200)}`;
      }
      // Its shape belongs to the CLI: a different one is worth a note, not a failure.
      if (!Array.isArray(listed) || listed.length !== RECORDS)
        bench.note(
          `cli: \`dm-dot events --json\` did not list the ${RECORDS} records as an "events" array (${Array.isArray(listed) ? `${listed.length} listed` : 'no such array'}).`,
        );
      return undefined;
    };
    let problem = await check();
    if (problem) {
      progress(`cli: ${problem}; running npm run build once`);
      const built = await run(['run', 'build'], process.env, 90_000, 'npm').catch((error: unknown) => ({
        code: null,
        stdout: '',
        stderr: errorText(error),
        ms: 0,
      }));
      bin = binPath();
      problem = await check();
      if (problem) {
        const why = `the built CLI could not be measured: ${problem} (npm run build exited ${built.code}${built.code === 0 ? '' : `: ${built.stderr.trim().slice(-200)}`})`;
        bench.record({ cliMs: { measured: false, reason: why } });
        throw new Error(why);
      }
    }

    const jobs: Array<{ key: 'node' | 'version' | 'events'; args: string[] }> = [
      { key: 'node', args: ['-e', '0'] },
      { key: 'version', args: [bin, '--version'] },
      { key: 'events', args: [bin, 'events', '--json'] },
    ];
    const samples = { node: [] as number[], version: [] as number[], events: [] as number[] };
    // One unrecorded pass warms the page cache; then rounds rotate which job goes first.
    for (const job of jobs) await run(job.args, env);
    for (let round = 0; round < ROUNDS; round++) {
      for (let i = 0; i < jobs.length; i++) {
        const job = jobs[(i + round) % jobs.length]!;
        for (let s = 0; s < PER_ROUND; s++) {
          const result = await run(job.args, env);
          if (result.code !== 0)
            throw new Error(`${job.args.slice(1).join(' ') || job.args.join(' ')} exited ${result.code}: ${result.stderr.trim().slice(0, 200)}`);
          samples[job.key].push(result.ms);
        }
      }
    }
    const node = stats(samples.node);
    const version = stats(samples.version);
    const events = stats(samples.events);
    bench.timeRow('dm-dot --version, a process (target ≤ 4×)', version, 'node -e 0', node);
    bench.timeRow(`dm-dot events --json, a process, ${RECORDS} records, no server (target ≤ 4×)`, events, 'node -e 0', node);
    bench.record({
      cliMs: { version: version.median, events: events.median },
      cliP90Ms: { version: version.p90, events: events.p90 },
      nodeBaselineMs: node.median,
      cliRatio: { version: ratioOf(version.median, node.median), events: ratioOf(events.median, node.median) },
      cliSamples: version.n,
      cliBin: bin.slice(ROOT.length + 1),
    });
    bench.note(
      `cli: ${bin.slice(ROOT.length + 1)} run by this Node (${process.version}) with a minimal environment; ratios ${ratio(version.median, node.median)} (--version) and ${ratio(events.median, node.median)} (events --json).`,
    );
    await measureTaught(bench, env);
  },
};

/** The command the README's `alias dm-dot="…"` line names, `$PWD` being the clone's root. */
export function taughtCommand(readme: string): string[] {
  const line = /^alias dm-dot="([^"]+)"/m.exec(readme);
  if (!line) throw new Error('the README teaches no `alias dm-dot="…"` line');
  return line[1]!.replace(/\$PWD\b|\$\{PWD\}/g, ROOT).split(/\s+/);
}

async function measureTaught(bench: Bench, baseEnv: NodeJS.ProcessEnv): Promise<void> {
  const [command, ...prefix] = taughtCommand(readFileSync(join(ROOT, 'README.md'), 'utf8'));
  const stateDir = bench.tempDir('cli-taught');
  const elsewhere = bench.tempDir('cli-elsewhere');
  const runtime = await startLocal({
    settings: localSettings({ HOST: '127.0.0.1', PORT: '0', DMDOT_STATE_DIR: stateDir, DMDOT_ALLOW_LOOPBACK_CALLBACKS: '1' }, { projectRoot: ROOT }),
    log: silentLog,
    announce: () => undefined,
  });
  bench.cleanup(() => runtime.stop());
  const receiver = await startReceiver();
  bench.cleanup(() => receiver.close());
  const key = readFileSync(join(stateDir, 'api-key'), 'utf8').trim();
  const call: RpcCall = async (method, params, name) => {
    const response = await fetch(runtime.url, {
      method: 'POST',
      headers: rpcHeaders(method, key, name),
      body: rpcBody(method, params),
      signal: AbortSignal.timeout(10_000),
    });
    return { status: response.status, body: (await response.json()) as any };
  };
  await subscribe(call, receiver);

  // The key comes from the state directory's key file, as the walkthrough's does.
  const env: NodeJS.ProcessEnv = { ...baseEnv, DMDOT_STATE_DIR: stateDir };
  const inFolder = (args: string[], cmd = command!) =>
    new Promise<Run>((done, fail) => {
      const t0 = performance.now();
      const child = spawn(cmd, args, { cwd: elsewhere, env, stdio: ['ignore', 'pipe', 'pipe'] });
      let stdout = '';
      let stderr = '';
      child.stdout.setEncoding('utf8').on('data', (c: string) => (stdout += c));
      child.stderr.setEncoding('utf8').on('data', (c: string) => (stderr += c));
      child.once('error', fail);
      child.once('close', (code) => done({ code, stdout, stderr, ms: performance.now() - t0 }));
    });
  const jobs: Array<{ key: 'node' | 'status' | 'send' | 'events'; args: string[]; cmd?: string }> = [
    // The same `node` the alias names, found on PATH the same way.
    { key: 'node', args: ['-e', '0'], cmd: command },
    { key: 'status', args: [...prefix, 'status'] },
    { key: 'send', args: [...prefix, 'send', 'from the taught CLI'] },
    { key: 'events', args: [...prefix, 'events'] },
  ];
  const samples = { node: [] as number[], status: [] as number[], send: [] as number[], events: [] as number[] };
  for (const job of jobs) {
    const first = await inFolder(job.args, job.cmd);
    if (first.code !== 0) throw new Error(`the taught \`${[command, ...job.args].join(' ')}\` exited ${first.code}: ${first.stderr.trim().slice(0, 200)}`);
  }
  for (let round = 0; round < ROUNDS; round++) {
    for (let i = 0; i < jobs.length; i++) {
      const job = jobs[(i + round) % jobs.length]!;
      for (let s = 0; s < PER_ROUND; s++) {
        const result = await inFolder(job.args, job.cmd);
        if (result.code !== 0)
          throw new Error(`the taught \`dm-dot ${job.args.slice(prefix.length).join(' ')}\` exited ${result.code}: ${result.stderr.trim().slice(0, 200)}`);
        samples[job.key].push(result.ms);
      }
    }
  }
  const node = stats(samples.node);
  const figures = { status: stats(samples.status), send: stats(samples.send), events: stats(samples.events) };
  for (const [name, figure] of Object.entries(figures))
    bench.timeRow(`dm-dot ${name} as the README teaches it, a running server (target ≤ 4×)`, figure, 'node -e 0', node);
  bench.record({
    cliTaughtMs: { status: figures.status.median, send: figures.send.median, events: figures.events.median },
    cliTaughtBaselineMs: node.median,
    cliTaughtRatio: {
      status: ratioOf(figures.status.median, node.median),
      send: ratioOf(figures.send.median, node.median),
      events: ratioOf(figures.events.median, node.median),
    },
    cliTaughtCommand: `${[command, ...prefix].join(' ').replace(ROOT, '$PWD')} (from a folder outside the clone)`,
  });

  // The taught commands on the other Nodes at hand, each first on PATH as a person's own would be.
  const others = [testNode()?.path, ...(process.env.BENCH_NODES ?? '').split(':')].filter((p): p is string => !!p && p !== process.execPath);
  type Taught = 'status' | 'send' | 'events';
  const byNode: Record<string, Record<Taught | 'node', number> & { ratio: Record<Taught, number> }> = {};
  for (const nodePath of [...new Set(others)]) {
    const version = (await inFolder(['--version'], nodePath)).stdout.trim();
    const onPath: NodeJS.ProcessEnv = { ...env, PATH: `${dirname(nodePath)}${delimiter}${env.PATH ?? ''}` };
    const runOn = (args: string[]) =>
      new Promise<Run>((done, fail) => {
        const t0 = performance.now();
        const child = spawn(command!, args, { cwd: elsewhere, env: onPath, stdio: ['ignore', 'pipe', 'pipe'] });
        let stderr = '';
        child.stderr.setEncoding('utf8').on('data', (c: string) => (stderr += c));
        child.stdout.resume();
        child.once('error', fail);
        child.once('close', (code) => done({ code, stdout: '', stderr, ms: performance.now() - t0 }));
      });
    const argsOf = (key: Taught | 'node') => jobs.find((j) => j.key === key)!.args;
    for (const key of ['status', 'send', 'events'] as const) {
      const first = await runOn(argsOf(key));
      if (first.code !== 0) throw new Error(`the taught dm-dot ${key} on ${version} exited ${first.code}: ${first.stderr.trim().slice(0, 200)}`);
    }
    const side = { node: [] as number[], status: [] as number[], send: [] as number[], events: [] as number[] };
    const keys = ['node', 'status', 'send', 'events'] as const;
    for (let round = 0; round < OTHER_NODE_ROUNDS; round++) {
      for (let i = 0; i < keys.length; i++) {
        const key = keys[(i + round) % keys.length]!;
        for (let s = 0; s < 2; s++) {
          const result = await runOn(argsOf(key));
          if (result.code !== 0) throw new Error(`the taught dm-dot ${key} on ${version} exited ${result.code}: ${result.stderr.trim().slice(0, 200)}`);
          side[key].push(result.ms);
        }
      }
    }
    const nodeStats = stats(side.node);
    const entry = { node: nodeStats.median, ratio: {} as Record<Taught, number> } as (typeof byNode)[string];
    for (const key of ['status', 'send', 'events'] as const) {
      const figure = stats(side[key]);
      bench.timeRow(`dm-dot ${key} as the README teaches it, ${version} first on PATH (target ≤ 4×)`, figure, `node -e 0 on ${version}`, nodeStats);
      entry[key] = figure.median;
      entry.ratio[key] = ratioOf(figure.median, nodeStats.median);
    }
    byNode[version] = entry;
  }
  if (![process.version, ...Object.keys(byNode)].some((v) => v.startsWith('v22.')))
    bench.note('cli: no Node 22 was measured: name one in BENCH_NODES (colon-separated paths to node binaries).');
  bench.record({
    cliTaughtByNode: {
      [process.version]: {
        status: figures.status.median,
        send: figures.send.median,
        events: figures.events.median,
        node: node.median,
        ratio: {
          status: ratioOf(figures.status.median, node.median),
          send: ratioOf(figures.send.median, node.median),
          events: ratioOf(figures.events.median, node.median),
        },
      },
      ...byNode,
    },
  });
}
