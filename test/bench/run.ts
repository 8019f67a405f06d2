/**
 * The dm-dot benchmark (`npm run bench`). Every measurement is reported as a median and a p90 over
 * many samples, next to a baseline measured in this same process a moment before or after it
 * (rounds alternate subject and baseline, so drift of a noisy machine hits both alike), and the
 * ratio of the two. Nothing here is asserted against a number: absolute figures differ from one
 * machine to the next, ratios much less.
 *
 * Sections:
 * 1. in-process app: `createApp(...).handle(Request)` for tools/list, server/discover, events/list
 *    and tools/call send_to_dot (in-memory fakes; the fake queue marks the event delivered at once)
 *    vs a trivial `new Response('{}')` handler fed the same freshly built Request.
 * 2. core: canonical JSON + subscription id, Standard Webhooks signing of a 16 KiB event with one
 *    and two keys, checkMessage on a 16 KiB message, each vs the bare node:crypto / Buffer work.
 * 3. end to end on loopback: `startLocal` in this process (temp state dir, loopback callbacks on)
 *    and a node:http receiver on 127.0.0.1; send_to_dot round trip vs a plain POST to the receiver.
 * 4. file store: putEvent+updateEvent pairs from 1, 10 and 100 concurrent writers (group commit),
 *    in store writes per second, vs sequential fsync'd atomic file replaces.
 * 5. bundles and cold start (issue 10): both Lambda entries built with the stack's own options
 *    (lib/bundling.ts) before issue 10 and after each of its changes, their sizes against the
 *    budgets, and the cold start (fresh Node 22 process: load + first request, the synthesized
 *    environment, a fake AWS endpoint) against a bare MCP SDK server bundled the usual way.
 * 6. end to end through the MCP Lambda in-process (and the Delivery Lambda fed by a local event
 *    source) against DynamoDB Local and fauxqs: the same send_to_dot figures as section 3.
 *
 * Besides the table on stdout, the run writes bench/results.json (not committed): the figures of
 * issue 10 (bundle bytes, cold start and baseline, "delivered" answer and arrival medians on both
 * paths, the per-change cold start variants) and the machine they were measured on.
 *
 * Deliberately not here: pass/fail thresholds (test/build/bundles.test.ts holds the size budgets),
 * and any network beyond 127.0.0.1. Progress goes to stderr; stdout holds the table. Exit code 0
 * unless a section could not run at all.
 */
import { spawn } from 'node:child_process';
import { createHash, createHmac, randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { open, rename } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { arch, cpus, loadavg, platform, tmpdir, totalmem } from 'node:os';
import { join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { AWS_CREDENTIAL_CHAIN, lambdaBundle, MCP_DATA_CHUNK, MCP_SDK_SHIMS, type LambdaBundle } from '../../lib/bundling';
import { FileStore } from '../../lambda/adapters/file-store';
import { canonicalJson, newEventId, sha256Hex, subscriptionIdOf } from '../../lambda/core/identity';
import { buildEvent } from '../../lambda/core/messages';
import { EVENT_NAME, EventStatus, Limits, TOOL_NAME } from '../../lambda/core/protocol';
import { decodeSecret, signatureHeader } from '../../lambda/core/signing';
import { checkMessage } from '../../lambda/core/validation';
import { loadSettings } from '../../lambda/config';
import { createApp } from '../../lambda/http/app';
import { startLocal } from '../../lambda/local/runtime';
import type { Logger } from '../../lambda/log';
import type { McpDeps } from '../../lambda/mcp/server';
import type { EventRecord, SubscriptionRecord, WebhookClient } from '../../lambda/ports';
import { systemClock } from '../../lambda/ports';
import { startFakeSecretsManager } from '../support/fake-secrets-manager';
import { FakeQueue, FakeStore } from '../support/fakes';
import {
  BUNDLE_BUDGET_BYTES,
  buildBaselineBundle,
  buildLambdaBundle,
  coldStart,
  inputsMatching,
  lambdaRuntimeEnvironment,
  node22Binary,
  seedDeployedSecrets,
  stackEnvironments as synthesizeEnvironments,
  toolNames,
  toolsListEvent,
  toolsListRequest,
  type ColdStart,
  type StackEnvironments,
} from './lambda-bundles';

const ROOT = resolve(__dirname, '..', '..');
/** The whole run is cut short (partial table, exit 1) if it takes longer than this. */
const WATCHDOG_MS = 330_000;
/** Where the figures go for tools and the README (ignored by git). */
const RESULTS_FILE = join(ROOT, 'bench', 'results.json');
const MODERN = '2026-07-28';

// ---------------------------------------------------------------------------------------------
// Results, cleanup, statistics
// ---------------------------------------------------------------------------------------------

interface Row {
  name: string;
  median: string;
  p90: string;
  baseline: string;
  baselineMedian: string;
  ratio: string;
}

const rows: Row[] = [];
/** Other work on the machine inflates absolute numbers (ratios much less): the table says how busy it was. */
const startLoad = loadavg().map((l) => l.toFixed(2)).join(' ');
const failures: string[] = [];
const cleanups: Array<() => unknown> = [];
const notes: string[] = [];
/** bench/results.json: filled in by the sections, written at the end (also after a failure). */
const results: Record<string, unknown> = {
  machine: {
    node: process.version,
    platform: platform(),
    arch: arch(),
    cpus: cpus().length,
    cpuModel: cpus()[0]?.model ?? 'unknown',
    totalMemoryGiB: Number((totalmem() / 2 ** 30).toFixed(1)),
    loadAverageAtStart: loadavg().map((l) => Number(l.toFixed(2))),
  },
};

let environments: Promise<StackEnvironments> | undefined;
/** The functions' environments from one synth (a few seconds), shared by the sections that need them. */
function stackEnvironments(): Promise<StackEnvironments> {
  environments ??= synthesizeEnvironments();
  return environments;
}

function progress(line: string): void {
  process.stderr.write(`bench: ${line}\n`);
}

function tempDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), `dmdot-bench-${prefix}-`));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** Runs (newest first) the cleanups registered after the first `keep` ones. */
async function runCleanups(keep = 0): Promise<void> {
  while (cleanups.length > keep) {
    const step = cleanups.pop()!;
    try {
      await withTimeout(Promise.resolve().then(step), 10_000, 'cleanup');
    } catch (error) {
      progress(`cleanup failed: ${error instanceof Error ? error.message : String(error)}`);
    }
  }
}

function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} timed out after ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

interface Stats {
  median: number;
  p90: number;
  n: number;
}

function quantile(sorted: readonly number[], q: number): number {
  if (sorted.length === 0) return Number.NaN;
  const position = (sorted.length - 1) * q;
  const lower = Math.floor(position);
  const upper = Math.ceil(position);
  return sorted[lower]! + (sorted[upper]! - sorted[lower]!) * (position - lower);
}

function stats(samples: readonly number[]): Stats {
  const sorted = [...samples].sort((a, b) => a - b);
  return { median: quantile(sorted, 0.5), p90: quantile(sorted, 0.9), n: sorted.length };
}

/** For throughput the slow tail is the low end: the value 90% of samples reached or beat. */
function throughputStats(samples: readonly number[]): Stats {
  const sorted = [...samples].sort((a, b) => a - b);
  return { median: quantile(sorted, 0.5), p90: quantile(sorted, 0.1), n: sorted.length };
}

function ms(value: number): string {
  if (!Number.isFinite(value)) return 'n/a';
  if (value >= 100) return `${value.toFixed(0)} ms`;
  if (value >= 1) return `${value.toFixed(2)} ms`;
  return `${(value * 1000).toFixed(value >= 0.1 ? 0 : 1)} µs`;
}

function perSecond(value: number): string {
  return Number.isFinite(value) ? `${Math.round(value).toLocaleString('en-US')} ops/s` : 'n/a';
}

function kib(bytes: number): string {
  return `${(bytes / 1024).toFixed(1)} KiB`;
}

function ratio(subject: number, baseline: number): string {
  return Number.isFinite(subject) && Number.isFinite(baseline) && baseline > 0 ? `${(subject / baseline).toFixed(2)}×` : 'n/a';
}

function timeRow(name: string, subject: Stats, baselineName: string, baseline: Stats): void {
  rows.push({
    name: `${name} (n=${subject.n})`,
    median: ms(subject.median),
    p90: ms(subject.p90),
    baseline: `${baselineName} (n=${baseline.n})`,
    baselineMedian: ms(baseline.median),
    ratio: ratio(subject.median, baseline.median),
  });
}

/** Runs one section; a failure is reported as a row and in the exit code, and the run goes on. */
async function section(title: string, budgetMs: number, body: () => Promise<void>): Promise<void> {
  progress(`${title}…`);
  const started = performance.now();
  const keep = cleanups.length;
  try {
    await withTimeout(body(), budgetMs, title);
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    failures.push(`${title}: ${message}`);
    rows.push({ name: `${title}: FAILED`, median: '-', p90: '-', baseline: message.replace(/\|/g, '/').slice(0, 160), baselineMedian: '-', ratio: '-' });
  }
  // Servers, apps and temp dirs of this section go before the next one measures anything.
  await runCleanups(keep);
  progress(`${title} done in ${((performance.now() - started) / 1000).toFixed(1)} s`);
}

// ---------------------------------------------------------------------------------------------
// Paired measurement: rounds alternate baseline and subject
// ---------------------------------------------------------------------------------------------

interface PairedOptions {
  /** Samples per side in total, split evenly over the rounds. */
  samples: number;
  /** Operations timed together per sample (per-operation time = sample / batch). */
  batch: number;
  warmup: number;
  rounds: number;
  /** Stop early (keeping what was measured) once this much time has gone by. */
  maxMs: number;
}

async function pairedAsync(subject: () => Promise<unknown>, baseline: () => Promise<unknown>, options: PairedOptions) {
  for (let i = 0; i < options.warmup; i++) {
    await baseline();
    await subject();
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
        for (let b = 0; b < options.batch; b++) await fn();
        into.push((performance.now() - t0) / options.batch);
      }
    }
  }
  return { subject: stats(out.subject), baseline: stats(out.baseline) };
}

function pairedSync(subject: () => unknown, baseline: () => unknown, options: PairedOptions) {
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
// Shared fixtures
// ---------------------------------------------------------------------------------------------

const silentLog: Logger = { info: () => undefined, warn: () => undefined, error: () => undefined };

function newSecret(bytes = 32): string {
  return `whsec_${randomBytes(bytes).toString('base64')}`;
}

/** A message of at most `maxBytes` UTF-8 bytes (and within a few bytes of it), multibyte characters included. */
function messageOfBytes(maxBytes: number): string {
  const unit = 'Hello dot, ünïcödé ✓ message. ';
  let text = unit.repeat(Math.ceil(maxBytes / Buffer.byteLength(unit)) + 1);
  while (Buffer.byteLength(text) > maxBytes) text = text.slice(0, -1);
  return text;
}

function rpcBody(method: string, params: Record<string, unknown> = {}): string {
  return JSON.stringify({
    jsonrpc: '2.0',
    id: 1,
    method,
    params: { ...params, _meta: { 'io.modelcontextprotocol/protocolVersion': MODERN, 'io.modelcontextprotocol/clientCapabilities': {} } },
  });
}

function rpcHeaders(method: string, key: string, name?: string): Record<string, string> {
  return {
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
    authorization: `Bearer ${key}`,
    'mcp-protocol-version': MODERN,
    'mcp-method': method,
    ...(name ? { 'mcp-name': name } : {}),
  };
}

// ---------------------------------------------------------------------------------------------
// 1. In-process app
// ---------------------------------------------------------------------------------------------

async function benchApp(): Promise<void> {
  const key = randomBytes(24).toString('base64url');
  const store = new FakeStore();
  const now = Date.now();
  const subscription: SubscriptionRecord = {
    id: 'sub_bench',
    url: 'https://dot.example.com/hook',
    name: EVENT_NAME,
    secret: newSecret(),
    principal: sha256Hex(key),
    createdAt: now,
    refreshedAt: now,
    expiresAt: now + 24 * 3600_000,
  };
  store.subscription = subscription;
  const queue = new FakeQueue();
  // The fake worker: the event is delivered as soon as it is queued, so the outcome wait ends at its first read.
  queue.onEnqueue = (job) => {
    const event = store.events.get(job.eventId);
    if (event) event.status = EventStatus.delivered;
  };
  const webhook: WebhookClient = {
    post: () => Promise.reject(new Error('bench: no webhook calls expected in the in-process app section')),
  };
  const deps: McpDeps = {
    store,
    queue,
    webhook,
    clock: systemClock,
    deliveryWaitMs: 50,
    retryDelaysS: [1, 4, 30, 120, 600],
    urlPolicy: { allowLoopbackCallbacks: false },
    version: '0.0.0-bench',
    log: silentLog,
  };
  const app = createApp(deps, { apiKey: key, allowedOrigins: [] });
  cleanups.push(() => app.close());
  // Every request leaves call records and an event behind in the fake; forget them now and then.
  let sinceReset = 0;
  const resetFakes = () => {
    if (++sinceReset < 200) return;
    sinceReset = 0;
    store.calls.length = 0;
    store.events.clear();
    queue.jobs.length = 0;
  };

  const trivial = async (request: Request): Promise<Response> => {
    void request;
    return new Response('{}', { headers: { 'content-type': 'application/json' } });
  };

  const cases: Array<{ label: string; method: string; params?: Record<string, unknown>; name?: string; check: (body: any) => boolean }> = [
    { label: 'tools/list', method: 'tools/list', check: (b) => b.result?.tools?.length === 1 },
    { label: 'server/discover', method: 'server/discover', check: (b) => b.result?.capabilities?.events !== undefined },
    { label: 'events/list', method: 'events/list', check: (b) => Array.isArray(b.result?.events) },
    {
      label: 'tools/call send_to_dot',
      method: 'tools/call',
      params: { name: TOOL_NAME, arguments: { message: 'Hello from the benchmark.' } },
      name: TOOL_NAME,
      check: (b) => b.result?.structuredContent?.status === 'delivered',
    },
  ];

  for (const c of cases) {
    const body = rpcBody(c.method, c.params);
    const headers = rpcHeaders(c.method, key, c.name);
    const makeRequest = () => new Request('http://localhost/mcp', { method: 'POST', headers, body });
    // Sanity check first: a benchmark of error answers would be meaningless.
    const first = await app.handle(makeRequest());
    const answer = (await first.json()) as any;
    if (first.status !== 200 || !c.check(answer)) throw new Error(`${c.label}: unexpected answer ${first.status} ${JSON.stringify(answer).slice(0, 200)}`);

    const result = await pairedAsync(
      async () => {
        const response = await app.handle(makeRequest());
        await response.arrayBuffer();
        resetFakes();
      },
      async () => {
        const response = await trivial(makeRequest());
        await response.arrayBuffer();
      },
      { samples: 1500, batch: 1, warmup: 150, rounds: 5, maxMs: 6_000 },
    );
    timeRow(`app ${c.label}`, result.subject, 'Request + new Response("{}")', result.baseline);
  }
}

// ---------------------------------------------------------------------------------------------
// 2. Core
// ---------------------------------------------------------------------------------------------

async function benchCore(): Promise<void> {
  const principal = sha256Hex(randomBytes(24).toString('base64url'));
  const url = 'https://chatgpt.example.com/backend-api/dots/webhooks/abc123?token=xyz';
  const micro = { samples: 300, batch: 200, warmup: 2000, rounds: 5, maxMs: 4_000 };

  const id = pairedSync(
    () => subscriptionIdOf(principal, url, EVENT_NAME, {}),
    () => createHash('sha256').update(JSON.stringify([principal, url, EVENT_NAME, {}])).digest('hex'),
    micro,
  );
  if (canonicalJson([principal, url, EVENT_NAME, {}]) !== JSON.stringify([principal, url, EVENT_NAME, {}])) notes.push('canonicalJson and JSON.stringify differ on the id input (the baseline is not the same bytes).');
  timeRow('core canonicalJson + subscriptionIdOf', id.subject, 'JSON.stringify + sha256 hex', id.baseline);

  const eventId = newEventId();
  const body = new TextEncoder().encode(buildEvent(eventId, messageOfBytes(Limits.messageMaxBytes), Date.now()));
  const key1 = decodeSecret(newSecret())!;
  const key2 = decodeSecret(newSecret())!;
  const ts = Math.floor(Date.now() / 1000);
  const bareHmac = () => createHmac('sha256', key1).update(`${eventId}.${ts}.`).update(body).digest('base64');
  const signOptions = { samples: 300, batch: 20, warmup: 200, rounds: 5, maxMs: 4_000 };

  const one = pairedSync(() => signatureHeader([key1], eventId, ts, body), bareHmac, signOptions);
  timeRow(`core sign ${kib(body.byteLength)} event, 1 key`, one.subject, 'bare node:crypto HMAC-SHA256', one.baseline);
  const two = pairedSync(() => signatureHeader([key1, key2], eventId, ts, body), bareHmac, signOptions);
  timeRow(`core sign ${kib(body.byteLength)} event, 2 keys`, two.subject, 'bare node:crypto HMAC-SHA256', two.baseline);

  const message = `  ${messageOfBytes(Limits.messageMaxBytes)}  `;
  const args = { message };
  if (!checkMessage(args).ok) throw new Error('checkMessage refused the 16 KiB fixture');
  const check = pairedSync(
    () => checkMessage(args),
    () => Buffer.byteLength(message.trim(), 'utf8'),
    { samples: 300, batch: 50, warmup: 500, rounds: 5, maxMs: 4_000 },
  );
  timeRow(`core checkMessage ${kib(Buffer.byteLength(message.trim()))} message`, check.subject, 'Buffer.byteLength(trim())', check.baseline);
}

// ---------------------------------------------------------------------------------------------
// 3. End to end on loopback
// ---------------------------------------------------------------------------------------------

async function startReceiver() {
  const arrivals = new Map<string, number>();
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      let json: any;
      try {
        json = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      } catch {
        json = undefined;
      }
      if (json?.type === 'verification') {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ challenge: json.challenge }));
        return;
      }
      if (typeof json?.eventId === 'string') arrivals.set(json.eventId, performance.now());
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{}');
    });
  });
  server.keepAliveTimeout = 10_000;
  await new Promise<void>((done, fail) => {
    server.once('error', fail);
    server.listen(0, '127.0.0.1', () => done());
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: (path: string) => `http://127.0.0.1:${port}${path}`,
    arrivals,
    close: () =>
      new Promise<void>((done) => {
        server.close(() => done());
        server.closeAllConnections();
      }),
  };
}

type RpcCall = (method: string, params: Record<string, unknown>, name?: string) => Promise<{ status: number; body: any }>;
type Receiver = Awaited<ReturnType<typeof startReceiver>>;

/**
 * Subscribes the receiver, then alternates batches of plain POSTs to it (the baseline) and
 * send_to_dot calls; records, per send, the time to the "delivered" answer and to the event's
 * arrival at the receiver. `path` names the rows and the results.json fields.
 */
async function measureSends(path: 'local' | 'lambda', call: RpcCall, receiver: Receiver): Promise<void> {
  const subscribed = await call('events/subscribe', {
    name: EVENT_NAME,
    arguments: {},
    delivery: { mode: 'webhook', url: receiver.url('/hook'), secret: newSecret() },
  });
  if (!subscribed.body.result?.id) throw new Error(`subscribe failed: ${subscribed.status} ${JSON.stringify(subscribed.body).slice(0, 200)}`);

  const roundTrips: number[] = [];
  const arrivals: number[] = [];
  const baselineTrips: number[] = [];
  let notDelivered = 0;
  let counter = 0;
  const send = async (record: boolean) => {
    const t0 = performance.now();
    const { body } = await call('tools/call', { name: TOOL_NAME, arguments: { message: `bench message ${counter++}` } }, TOOL_NAME);
    const t1 = performance.now();
    const outcome = body.result?.structuredContent;
    if (outcome?.status !== 'delivered') {
      notDelivered++;
      if (notDelivered > 3) throw new Error(`send_to_dot was not delivered: ${JSON.stringify(body).slice(0, 200)}`);
      return;
    }
    const arrived = receiver.arrivals.get(outcome.eventId);
    receiver.arrivals.delete(outcome.eventId);
    if (!record) return;
    roundTrips.push(t1 - t0);
    if (arrived !== undefined) arrivals.push(arrived - t0);
  };
  const plainPost = async (record: boolean) => {
    const t0 = performance.now();
    const response = await fetch(receiver.url('/baseline'), {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ message: `bench message ${counter++}` }),
      signal: AbortSignal.timeout(10_000),
    });
    await response.arrayBuffer();
    if (record) baselineTrips.push(performance.now() - t0);
  };

  for (let i = 0; i < 3; i++) await send(false);
  for (let i = 0; i < 30; i++) await plainPost(false);
  const deadline = performance.now() + 12_000;
  for (let round = 0; round < 5 && performance.now() < deadline; round++) {
    for (let i = 0; i < 60; i++) await plainPost(true);
    for (let i = 0; i < 8 && performance.now() < deadline; i++) await send(true);
  }
  const baseline = stats(baselineTrips);
  const answered = stats(roundTrips);
  const atReceiver = stats(arrivals);
  const where = path === 'local' ? 'local runtime' : 'MCP Lambda in-process';
  timeRow(`e2e ${where}: send_to_dot → "delivered" answer`, answered, 'plain POST round trip to receiver', baseline);
  timeRow(`e2e ${where}: send_to_dot → event at receiver`, atReceiver, 'plain POST round trip to receiver', baseline);
  rows.push({
    name: `e2e ${where}: "delivered" answer / event at receiver (target ≤ 1.5×)`,
    median: ms(answered.median),
    p90: '-',
    baseline: 'event at receiver',
    baselineMedian: ms(atReceiver.median),
    ratio: ratio(answered.median, atReceiver.median),
  });
  const figures = { deliveredAnswerMs: answered.median, atReceiverMs: atReceiver.median, deliveredRatio: answered.median / atReceiver.median, plainPostMs: baseline.median, sends: answered.n };
  if (path === 'local') Object.assign(results, figures);
  else results.lambda = figures;
  if (notDelivered > 0) notes.push(`e2e ${where}: ${notDelivered} send(s) were not answered "delivered" and are left out.`);
}

async function benchEndToEnd(): Promise<void> {
  const stateDir = tempDir('state');
  const key = randomBytes(24).toString('base64url');
  const receiver = await startReceiver();
  cleanups.push(() => receiver.close());
  const runtime = await startLocal({
    // Through the real settings parser, so every other setting keeps its documented default.
    settings: loadSettings({ HOST: '127.0.0.1', PORT: '0', DMDOT_STATE_DIR: stateDir, DMDOT_ALLOW_LOOPBACK_CALLBACKS: '1' }),
    apiKey: key,
    log: silentLog,
    announce: () => undefined,
  });
  cleanups.push(() => runtime.stop());

  const call: RpcCall = async (method, params, name) => {
    const response = await fetch(runtime.url, {
      method: 'POST',
      headers: rpcHeaders(method, key, name),
      body: rpcBody(method, params),
      signal: AbortSignal.timeout(10_000),
    });
    return { status: response.status, body: (await response.json()) as any };
  };
  await measureSends('local', call, receiver);
  notes.push(
    'e2e: the first attempt is made inline (SPEC 6.2 step 3): the "delivered" answer comes when the receiver answers; the "event at receiver" row shows the pipeline itself.',
  );
}

// ---------------------------------------------------------------------------------------------
// 4. File store
// ---------------------------------------------------------------------------------------------

async function storeTrial(writers: number, durationMs: number): Promise<number> {
  const dir = mkdtempSync(join(tmpdir(), 'dmdot-bench-store-'));
  try {
    const store = await FileStore.open(dir);
    let ops = 0;
    const started = performance.now();
    const deadline = started + durationMs;
    await Promise.all(
      Array.from({ length: writers }, async () => {
        while (performance.now() < deadline) {
          const eventId = newEventId();
          const createdAt = Date.now();
          const record: EventRecord = {
            eventId,
            status: EventStatus.queued,
            subscriptionId: 'sub_bench',
            attempts: 0,
            createdAt,
            expiresAt: createdAt + Limits.eventRecordMs,
          };
          await store.putEvent(record);
          await store.updateEvent(eventId, { status: EventStatus.delivered, attempts: 1, deliveredAt: Date.now(), lastHttpStatus: 200, lastError: null });
          ops += 2;
        }
      }),
    );
    return ops / ((performance.now() - started) / 1000);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** What one store write costs at the file level: write a temp file, datasync, rename over. */
async function rawWriteTrial(text: string, durationMs: number): Promise<number> {
  const dir = mkdtempSync(join(tmpdir(), 'dmdot-bench-raw-'));
  try {
    const file = join(dir, 'store.json');
    let writes = 0;
    const started = performance.now();
    const deadline = started + durationMs;
    while (performance.now() < deadline) {
      const tmp = `${file}.tmp-${writes}`;
      const handle = await open(tmp, 'w', 0o600);
      try {
        await handle.writeFile(text, 'utf8');
        await handle.datasync();
      } finally {
        await handle.close();
      }
      await rename(tmp, file);
      writes++;
    }
    return writes / ((performance.now() - started) / 1000);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

async function benchFileStore(): Promise<void> {
  const writerCounts = [1, 10, 100];
  const trials = 5;
  const durationMs = 400;
  // About the size of store.json holding 50 events: what a young store rewrites on each commit.
  const sample = JSON.stringify({
    version: 1,
    items: Array.from({ length: 50 }, () => ({ pk: `EVENT#${newEventId()}`, eventId: newEventId(), status: 'delivered', subscriptionId: 'sub_bench', attempts: 1, createdAt: Date.now(), expiresAt: Date.now(), deliveredAt: Date.now(), lastHttpStatus: 200, lastError: null, ttl: 1 })),
  });
  const results = new Map<number, number[]>(writerCounts.map((n) => [n, []]));
  const baseline: number[] = [];
  await storeTrial(4, 100); // warm-up: module code, file system paths
  for (let t = 0; t < trials; t++) {
    baseline.push(await rawWriteTrial(sample, durationMs));
    for (const n of writerCounts) results.get(n)!.push(await storeTrial(n, durationMs));
  }
  const base = throughputStats(baseline);
  for (const n of writerCounts) {
    const s = throughputStats(results.get(n)!);
    rows.push({
      name: `file store putEvent+updateEvent, ${n} writer${n === 1 ? '' : 's'} (trials=${s.n})`,
      median: perSecond(s.median),
      p90: perSecond(s.p90),
      baseline: `sequential fsync'd atomic replace of ${kib(sample.length)} (trials=${base.n})`,
      baselineMedian: perSecond(base.median),
      ratio: ratio(s.median, base.median),
    });
  }
  notes.push(
    `file store: an op is one store write call (a pair is 2 ops); each trial runs ${durationMs} ms on a fresh store; the p90 column of ops/s rows is the slow tail (10th percentile of throughput); ratio > 1 means more writes per second than one fsync'd file replace each.`,
  );
}

// ---------------------------------------------------------------------------------------------
// 5. Bundles and cold start, as deployed, change by change (issue 10)
// ---------------------------------------------------------------------------------------------

/**
 * The MCP and delivery bundles before issue 10 and after each of its changes, cumulatively, in
 * one run: every variant is the shared description of lib/bundling.ts with the later changes
 * taken back out. The last one is exactly what the stack deploys (its environment comes from the
 * synthesized template, so a NODE_OPTIONS put back there shows up here).
 */
function bundleVariants(): Array<{ key: string; label: string; spec: LambdaBundle; nodeOptions?: string }> {
  const deployed = lambdaBundle(undefined, [MCP_DATA_CHUNK]);
  const oneFile = { ...deployed, chunks: [] };
  const { [MCP_SDK_SHIMS]: shims, [AWS_CREDENTIAL_CHAIN]: _chain, ...otherAliases } = deployed.alias;
  // esbuild's own default for platform node (what the stack used before).
  const cjsFirst = ['main', 'module'];
  return [
    { key: 'before', label: 'before issue 10 (source maps loaded at run time)', spec: { ...oneFile, mainFields: cjsFirst, alias: otherAliases }, nodeOptions: '--enable-source-maps' },
    { key: 'offlineMaps', label: '+ source maps decoded offline (no NODE_OPTIONS)', spec: { ...oneFile, mainFields: cjsFirst, alias: otherAliases } },
    { key: 'esBuilds', label: '+ ES builds of the AWS SDK (mainFields)', spec: { ...oneFile, alias: otherAliases } },
    { key: 'noAjv', label: '+ no ajv (_shims alias)', spec: { ...oneFile, alias: { ...otherAliases, [MCP_SDK_SHIMS]: shims! } } },
    { key: 'envCredentials', label: '+ environment-only credentials', spec: oneFile },
    { key: 'deployed', label: '+ storage code in its own file (mcp-data.js, loaded on first use) = as deployed', spec: deployed },
  ];
}

interface VariantResult {
  key: string;
  label: string;
  mcpBundleBytes: number;
  deliveryBundleBytes: number;
  coldStartMs: number;
  coldStartP90Ms: number;
  coldStartRatio: number;
  loadMs: number;
  firstRequestMs: number;
  deliveryColdStartMs: number;
}

async function benchBundles(): Promise<void> {
  const root = tempDir('bundles');
  const variants = bundleVariants();
  const environments = await stackEnvironments();
  const built = await Promise.all(
    variants.map(async (v) => ({
      ...v,
      mcp: await buildLambdaBundle(join(root, v.key, 'mcp'), { file: 'lambda/handlers/mcp.ts' }, v.spec),
      // The Delivery function has no chunk.
      delivery: await buildLambdaBundle(join(root, v.key, 'delivery'), { file: 'lambda/handlers/delivery.ts' }, { ...v.spec, chunks: [] }),
    })),
  );
  const baseline = await buildBaselineBundle(join(root, 'baseline'));
  const deployed = built.at(-1)!;
  if (Object.keys(environments.mcp).includes('NODE_OPTIONS')) notes.push(`bundles: the stack sets NODE_OPTIONS=${environments.mcp.NODE_OPTIONS} on the MCP function; the "as deployed" rows include it.`);

  // A fake AWS endpoint: Secrets Manager answers the API key; nothing else is called before the first answer.
  const apiKey = randomBytes(24).toString('base64url');
  // Signatures are checked by the tests (test/build/bundles.test.ts); here the fake answers at once.
  const secrets = await startFakeSecretsManager(environments.mcp.API_KEY_SECRET_ARN, { verifySignatures: false });
  cleanups.push(() => secrets.stop());
  seedDeployedSecrets(secrets, environments.mcp, apiKey);
  const mcpEnv = { ...lambdaRuntimeEnvironment('dm-dot-mcp', secrets.endpoint), ...environments.mcp };
  const deliveryEnv = { ...lambdaRuntimeEnvironment('dm-dot-delivery', secrets.endpoint), ...environments.delivery };
  const event = await toolsListEvent(apiKey);
  const bareRequest = JSON.stringify(toolsListRequest('http://localhost/mcp'));
  const emptyBatch = JSON.stringify({ Records: [] });
  const node = node22Binary();
  const nodeVersion = await new Promise<string>((done) => {
    const child = spawn(node.path, ['--version'], { stdio: ['ignore', 'pipe', 'ignore'] });
    let out = '';
    child.stdout.setEncoding('utf8').on('data', (c: string) => (out += c));
    child.once('close', () => done(out.trim() || 'unknown'));
    child.once('error', () => done('unknown'));
  });
  Object.assign(results.machine as object, { coldStartNode: nodeVersion, coldStartNodeIsLambdaMajor: node.isNode22 });

  const envOf = (base: Record<string, string>, nodeOptions?: string) => (nodeOptions ? { ...base, NODE_OPTIONS: nodeOptions } : base);
  const checkMcp = (label: string, answer: { status: number; body: string }, expected: string) => {
    const tools = toolNames(answer.body);
    if (answer.status !== 200 || tools.join() !== expected) throw new Error(`${label}: first answer ${answer.status} ${answer.body.slice(0, 160)}`);
  };
  const jobs: Array<{ key: string; run: () => Promise<ColdStart> }> = [
    {
      key: 'baseline',
      run: async () => {
        const started = await coldStart(node.path, baseline.file, 'fetch', bareRequest, mcpEnv);
        checkMcp('baseline', started.answer, 'echo');
        return started;
      },
    },
  ];
  for (const v of built) {
    jobs.push({
      key: `mcp:${v.key}`,
      run: async () => {
        // With a chunk: after the answer, what the first request that needs storage adds (timed apart).
        const then = v.mcp.chunkFiles[0] ? { require: v.mcp.chunkFiles[0], call: 'createMcpData', args: [mcpEnv.TABLE_NAME, mcpEnv.QUEUE_URL] } : undefined;
        const started = await coldStart(node.path, v.mcp.file, 'apigw', event, envOf(mcpEnv, v.nodeOptions), undefined, then);
        checkMcp(v.key, started.answer, TOOL_NAME);
        return started;
      },
    });
    jobs.push({
      key: `delivery:${v.key}`,
      run: async () => {
        const started = await coldStart(node.path, v.delivery.file, 'sqs', emptyBatch, envOf(deliveryEnv, v.nodeOptions));
        if (started.answer.body !== '{"batchItemFailures":[]}') throw new Error(`delivery ${v.key}: ${started.answer.body.slice(0, 160)}`);
        return started;
      },
    });
  }
  // One unrecorded pass warms the page cache. Then each round runs the headline pair back to back
  // (baseline and as-deployed, their order alternating), so both see the same moment of a shared
  // machine, and then every other job in a rotating order. At least 5 rounds; more while time allows.
  for (const job of jobs) await job.run();
  const samples = new Map<string, ColdStart[]>(jobs.map((j) => [j.key, []]));
  const pairRatios: number[] = [];
  const pair = [jobs.find((j) => j.key === 'baseline')!, jobs.find((j) => j.key === 'mcp:deployed')!];
  const others = jobs.filter((j) => !pair.includes(j));
  const deadline = performance.now() + 90_000;
  for (let round = 0; round < 25 && (round < 5 || performance.now() < deadline); round++) {
    const [first, second] = round % 2 === 0 ? pair : [pair[1]!, pair[0]!];
    const a = await first!.run();
    const b = await second!.run();
    samples.get(first!.key)!.push(a);
    samples.get(second!.key)!.push(b);
    pairRatios.push(first!.key === 'baseline' ? b.totalMs / a.totalMs : a.totalMs / b.totalMs);
    for (let i = 0; i < others.length; i++) {
      const job = others[(i + round) % others.length]!;
      samples.get(job.key)!.push(await job.run());
    }
  }
  const total = (key: string) => stats(samples.get(key)!.map((x) => x.totalMs));
  const part = (key: string, field: 'loadMs' | 'firstRequestMs') => stats(samples.get(key)!.map((x) => x[field])).median;
  const base = total('baseline');

  const variantResults: VariantResult[] = built.map((v) => {
    const cold = total(`mcp:${v.key}`);
    return {
      key: v.key,
      label: v.label,
      mcpBundleBytes: v.mcp.bytes,
      deliveryBundleBytes: v.delivery.bytes,
      coldStartMs: cold.median,
      coldStartP90Ms: cold.p90,
      coldStartRatio: cold.median / base.median,
      loadMs: part(`mcp:${v.key}`, 'loadMs'),
      firstRequestMs: part(`mcp:${v.key}`, 'firstRequestMs'),
      deliveryColdStartMs: total(`delivery:${v.key}`).median,
    };
  });

  for (const v of variantResults) {
    timeRow(`MCP cold start (load + first tools/list), ${v.label}`, total(`mcp:${v.key}`), 'bare MCP SDK server, classic zod, esbuild defaults', base);
  }
  const sizeRow = (name: string, subject: number, baselineName: string, baselineBytes: number) =>
    rows.push({ name, median: kib(subject), p90: '-', baseline: baselineName, baselineMedian: kib(baselineBytes), ratio: ratio(subject, baselineBytes) });
  for (const v of variantResults) {
    sizeRow(`MCP bundle, ${v.label}`, v.mcpBundleBytes, `budget ${kib(BUNDLE_BUDGET_BYTES.mcp)}`, BUNDLE_BUDGET_BYTES.mcp);
  }
  for (const v of variantResults) {
    sizeRow(`delivery bundle, ${v.label}`, v.deliveryBundleBytes, `budget ${kib(BUNDLE_BUDGET_BYTES.delivery)}`, BUNDLE_BUDGET_BYTES.delivery);
  }
  sizeRow('bare MCP SDK server bundle (the cold start baseline)', baseline.bytes, 'MCP bundle as deployed', deployed.mcp.bytes);
  sizeRow("MCP index.js alone, as deployed (what a cold start parses; mcp-data.js waits for storage)", deployed.mcp.indexBytes, 'MCP bundle as deployed', deployed.mcp.bytes);
  const last = variantResults.at(-1)!;
  const paired = stats(pairRatios);
  rows.push({
    name: `MCP cold start as deployed / baseline, back-to-back pairs (n=${paired.n}; target ≤ 1.25×)`,
    median: `${paired.median.toFixed(2)}×`,
    p90: `${paired.p90.toFixed(2)}×`,
    baseline: 'ratio of the medians above',
    baselineMedian: `${last.coldStartRatio.toFixed(2)}×`,
    ratio: `${paired.median.toFixed(2)}×`,
  });
  const chunkLoad = stats(samples.get('mcp:deployed')!.flatMap((x) => (x.thenMs === undefined ? [] : [x.thenMs])));
  rows.push({
    name: `first request that needs storage, once per cold start: loading mcp-data.js and its clients (n=${chunkLoad.n})`,
    median: ms(chunkLoad.median),
    p90: ms(chunkLoad.p90),
    baseline: 'MCP cold start as deployed',
    baselineMedian: ms(last.coldStartMs),
    ratio: ratio(chunkLoad.median, last.coldStartMs),
  });
  const deliveryBefore = total('delivery:before');
  timeRow('delivery cold start (load + empty batch), as deployed', total('delivery:deployed'), 'the same, before issue 10', deliveryBefore);

  const SDK = /node_modules\/@modelcontextprotocol\//;
  const sdkInDelivery = inputsMatching(deployed.delivery, SDK).length > 0 || deployed.delivery.text.includes('@modelcontextprotocol');
  rows.push({ name: "delivery bundle contains '@modelcontextprotocol' (must be no)", median: sdkInDelivery ? 'yes' : 'no', p90: '-', baseline: '-', baselineMedian: '-', ratio: '-' });

  Object.assign(results, {
    mcpBundleBytes: deployed.mcp.bytes,
    deliveryBundleBytes: deployed.delivery.bytes,
    baselineBundleBytes: baseline.bytes,
    coldStartMs: last.coldStartMs,
    baselineColdStartMs: base.median,
    // The headline: the median of the per-round ratios of the back-to-back pair (noise of a shared
    // machine hits both sides of a pair alike); the ratio of the two medians is kept next to it.
    coldStartRatio: stats(pairRatios).median,
    coldStartRatioOfMedians: last.coldStartRatio,
    coldStartSamples: base.n,
    deliveryColdStartMs: last.deliveryColdStartMs,
    mcpIndexBytes: deployed.mcp.indexBytes,
    storageChunkLoadMs: chunkLoad.median,
    budgets: { mcpBundleBytes: BUNDLE_BUDGET_BYTES.mcp, deliveryBundleBytes: BUNDLE_BUDGET_BYTES.delivery, coldStartRatio: 1.25 },
    coldStartVariants: variantResults,
  });
  notes.push(
    `bundles: built with lib/bundling.ts's options (the stack's) into the asset layout; cold start = require(index.js) + first invocation, timed in a fresh ${nodeVersion} process (${node.isNode22 ? 'test/tools Node 22, the Lambda runtime major' : 'this Node: test/tools Node 22 is missing'}) with the synthesized environment, Lambda's own variables and a fake Secrets Manager on 127.0.0.1; the baseline gets the same tools/list as a web Request.`,
  );
  notes.push(`bundles: as deployed, MCP load ${ms(last.loadMs)} + first request ${ms(last.firstRequestMs)}; before issue 10 ${ms(variantResults[0]!.loadMs)} + ${ms(variantResults[0]!.firstRequestMs)}; baseline ${ms(part('baseline', 'loadMs'))} + ${ms(part('baseline', 'firstRequestMs'))}. Source maps (written, not loaded): ${kib(statSync(`${deployed.mcp.file}.map`).size)} (mcp), ${kib(statSync(`${deployed.delivery.file}.map`).size)} (delivery).`);
}

// ---------------------------------------------------------------------------------------------
// 6. End to end through the MCP Lambda in-process, against DynamoDB Local and fauxqs
// ---------------------------------------------------------------------------------------------

/**
 * The MCP Lambda (`mcpLambdaFromEnvironment`, behind the local API Gateway) and the Delivery
 * Lambda (fed by a local SQS event source that long-polls fauxqs) in this process, with the
 * stack's wait window, against DynamoDB Local and fauxqs, and the loopback receiver. What it cannot
 * show: the SQS hop and the delivery function's cold start on AWS.
 */
async function benchLambdaEndToEnd(): Promise<void> {
  const { startDynamoDbLocal } = await import('../support/dynamodb-local');
  const { startFauxqs } = await import('../support/fauxqs');
  const { pollOnce } = await import('../support/event-source');
  const { localApiGateway } = await import('../support/apigw');
  const { mcpLambdaFromEnvironment } = await import('../../lambda/handlers/mcp-lambda');
  const { deliveryLambdaFromEnvironment } = await import('../../lambda/handlers/delivery-lambda');
  const { testSecretsReader } = await import('../support/fake-secrets-manager');

  // This process runs the Lambdas' code: keep the AWS SDK's Node 20 notice and the MCP SDK's
  // once-per-handler note on JSON response mode (dm-dot sends no mid-call notifications) off the output.
  process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
  const key = randomBytes(24).toString('base64url');
  const [ddb, fauxqs, secrets, receiver] = await Promise.all([startDynamoDbLocal(), startFauxqs(), startFakeSecretsManager(), startReceiver()]);
  cleanups.push(() => ddb.stop(), () => fauxqs.stop(), () => secrets.stop(), () => receiver.close());
  const table = 'dm-dot-bench';
  await ddb.createTable(table);
  secrets.setSecret(key);
  const stackEnv = await stackEnvironments().catch(() => undefined);
  const env: NodeJS.ProcessEnv = {
    TABLE_NAME: table,
    QUEUE_URL: fauxqs.queueUrl,
    DEAD_LETTER_QUEUE_URL: fauxqs.deadLetterQueueUrl,
    API_KEY_SECRET_ARN: secrets.arn,
    // The stack's wait window and retry schedule, when the synth ran; the documented defaults otherwise.
    ...(stackEnv ? { DMDOT_DELIVERY_WAIT_MS: stackEnv.mcp.DMDOT_DELIVERY_WAIT_MS, DMDOT_RETRY_DELAYS: stackEnv.delivery.DMDOT_RETRY_DELAYS } : {}),
    DMDOT_ALLOW_LOOPBACK_CALLBACKS: '1',
  };
  const secretsClient = testSecretsReader(secrets.endpoint, { maxAttempts: 1 });
  const gateway = localApiGateway(mcpLambdaFromEnvironment(env, { dynamodb: ddb.client, sqs: fauxqs.client, secrets: secretsClient }, { log: silentLog }));
  const worker = deliveryLambdaFromEnvironment(env, { dynamodb: ddb.client, sqs: fauxqs.client }, { log: silentLog });

  // The event source mapping: one long poll after another until the section ends.
  let polling = true;
  const loop = (async () => {
    while (polling) {
      try {
        await pollOnce(fauxqs, worker, { timeoutMs: 1_000 });
      } catch (error) {
        if (polling) progress(`lambda e2e: poll failed: ${error instanceof Error ? error.message : String(error)}`);
      }
    }
  })();
  cleanups.push(async () => {
    polling = false;
    await loop;
  });

  const call = async (method: string, params: Record<string, unknown>, name?: string) => {
    const response = await gateway.fetch('https://api.example/mcp', { method: 'POST', headers: rpcHeaders(method, key, name), body: rpcBody(method, params) });
    return { status: response.status, body: (await response.json()) as any };
  };
  await measureSends('lambda', call, receiver);
  notes.push('lambda e2e: MCP and Delivery Lambdas in this process against DynamoDB Local and fauxqs (long-polled by a local event source); no SQS network hop or delivery cold start as on AWS.');
}

// ---------------------------------------------------------------------------------------------
// Main
// ---------------------------------------------------------------------------------------------

function table(): string {
  const header: Row = { name: 'name', median: 'median', p90: 'p90', baseline: 'baseline', baselineMedian: 'baseline median', ratio: 'ratio' };
  const columns = Object.keys(header) as Array<keyof Row>;
  const line = (row: Row) => `| ${columns.map((c) => row[c]).join(' | ')} |`;
  return [line(header), `|${columns.map(() => '---').join('|')}|`, ...rows.map(line)].join('\n');
}

function report(startedAt: number): string {
  const cpu = cpus()[0]?.model ?? 'unknown CPU';
  return [
    `dm-dot benchmark: Node ${process.version}, ${cpus().length} × ${cpu}, load average ${loadavg().map((l) => l.toFixed(2)).join(' ')} (at start ${startLoad}), ${new Date().toISOString()}, ${((performance.now() - startedAt) / 1000).toFixed(1)} s`,
    '',
    table(),
    '',
    'ratio = median / baseline median (for ops/s rows, > 1 is faster; elsewhere > 1 is slower or bigger).',
    ...notes.map((n) => `- ${n}`),
    ...failures.map((f) => `- FAILED ${f}`),
    '',
  ].join('\n');
}

function writeResults(startedAt: number): void {
  const machine = results.machine as Record<string, unknown>;
  machine.loadAverageAtEnd = loadavg().map((l) => Number(l.toFixed(2)));
  const out = { generatedAt: new Date().toISOString(), durationS: Number(((performance.now() - startedAt) / 1000).toFixed(1)), ...results, failures };
  try {
    mkdirSync(join(ROOT, 'bench'), { recursive: true });
    // Three decimals are plenty for milliseconds and ratios measured on a shared machine.
    const rounded = (_key: string, value: unknown) => (typeof value === 'number' && !Number.isInteger(value) ? Number(value.toFixed(3)) : value);
    writeFileSync(RESULTS_FILE, `${JSON.stringify(out, rounded, 2)}\n`);
    progress(`wrote ${RESULTS_FILE}`);
  } catch (error) {
    progress(`could not write ${RESULTS_FILE}: ${error instanceof Error ? error.message : String(error)}`);
  }
}

async function finish(code: number, startedAt: number): Promise<never> {
  await runCleanups();
  writeResults(startedAt);
  await new Promise<void>((done) => process.stdout.write(report(startedAt), () => done()));
  process.exit(code);
}

async function main(): Promise<void> {
  const startedAt = performance.now();
  const watchdog = setTimeout(() => {
    failures.push(`watchdog: the run took longer than ${WATCHDOG_MS / 1000} s and was cut short`);
    void finish(1, startedAt);
  }, WATCHDOG_MS);
  watchdog.unref();
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => {
      failures.push(`interrupted by ${signal}`);
      void finish(130, startedAt);
    });
  }

  const all: Array<[key: string, title: string, budgetMs: number, body: () => Promise<void>]> = [
    ['app', 'in-process app', 40_000, benchApp],
    ['core', 'core', 30_000, benchCore],
    ['e2e', 'end to end on loopback', 40_000, benchEndToEnd],
    ['store', 'file store', 30_000, benchFileStore],
    ['bundles', 'bundles and cold start', 150_000, benchBundles],
    ['lambda', 'end to end through the MCP Lambda (DynamoDB Local, fauxqs)', 60_000, benchLambdaEndToEnd],
  ];
  // BENCH_SECTIONS=bundles,lambda runs only those (while working on one part); the default is all.
  const only = process.env.BENCH_SECTIONS?.split(',').map((k) => k.trim()).filter(Boolean);
  const unknown = only?.filter((k) => !all.some(([key]) => key === k)) ?? [];
  if (unknown.length > 0) throw new Error(`BENCH_SECTIONS: unknown section(s) ${unknown.join(', ')}; known: ${all.map(([key]) => key).join(', ')}`);
  if (only) results.sections = only;
  for (const [key, title, budgetMs, body] of all) {
    if (!only || only.includes(key)) await section(title, budgetMs, body);
  }
  clearTimeout(watchdog);
  await finish(failures.length === 0 ? 0 : 1, startedAt);
}

main().catch(async (error) => {
  process.stderr.write(`bench: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  await runCleanups();
  process.exit(1);
});
