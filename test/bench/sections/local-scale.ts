/**
 * The local runtime with history: two `startLocal` servers in this process, one on an empty state
 * directory and one whose database already holds 200,000 event records (written directly through
 * `openEmbeddedDatabase(dir, { role: 'operator' })` before it starts: delivered records of the last
 * twelve days, as a busy dot's history would be), each with a loopback dot subscribed. Rounds
 * alternate the two servers: one send_to_dot delivered inline (to the "delivered" answer), and
 * `GET /healthz`. The empty server is the baseline of the full one. Target: a send at 200,000
 * records within 2× of the empty one; /healthz unaffected.
 *
 * Deliberately not here: the fill's own speed beyond one progress line (the store section
 * measures writes), operator reads that scan the history (`dm-dot events`: the cli section), and
 * queued jobs (the history is settled, so the worker has nothing to do).
 */
import { performance } from 'node:perf_hooks';
import { openEmbeddedDatabase } from '../../../lambda/adapters/embedded';
import { localSettings } from '../../../lambda/config/settings';
import { newEventId } from '../../../lambda/core/identity';
import { EventStatus, Limits } from '../../../lambda/core/protocol';
import { startLocal, type LocalRuntime } from '../../../lambda/local/runtime';
import type { EventRecord } from '../../../lambda/ports';
import { sendOnce, startReceiver, subscribe, type RpcCall } from '../sends';
import { ms, newApiKey, pairedAsync, progress, ratio, ratioOf, ROOT, rpcBody, rpcHeaders, silentLog, type Bench, type Section } from '../support';

const RECORDS = 200_000;
/** Writes in flight at once while filling: lmdb-js commits concurrent writes together. */
const FILL_CONCURRENCY = 2_000;

function historyRecord(index: number, now: number): EventRecord {
  // One every 5 s back from now: 200,000 records span about 11.6 days, all live (records keep 15).
  const createdAt = now - (index + 1) * 5_000;
  const deliveredAt = createdAt + 40;
  return {
    eventId: newEventId(),
    status: EventStatus.delivered,
    subscriptionId: 'sub_history',
    generation: 'gen-history',
    attempts: 1,
    lastError: null,
    lastHttpStatus: 200,
    createdAt,
    deliveredAt,
    expiresAt: createdAt + Limits.eventRecordMs,
    log: [{ at: createdAt + 5, outcome: 'delivered', statusClass: '2xx', durationMs: 35, counted: true }],
  };
}

/** Fills a state directory's database with `count` delivered records; returns the time it took. */
async function fill(stateDir: string, count: number): Promise<number> {
  const started = performance.now();
  const db = await openEmbeddedDatabase(stateDir, { role: 'operator' });
  try {
    const now = Date.now();
    for (let done = 0; done < count; ) {
      const batch = Math.min(FILL_CONCURRENCY, count - done);
      await Promise.all(Array.from({ length: batch }, (_, i) => db.store.putEvent(historyRecord(done + i, now))));
      done += batch;
      if (done % 50_000 === 0) progress(`scale: ${done.toLocaleString('en-US')} records written`);
    }
  } finally {
    await db.close();
  }
  return performance.now() - started;
}

async function start(bench: Bench, stateDir: string, key: string): Promise<LocalRuntime> {
  const runtime = await startLocal({
    settings: localSettings(
      { HOST: '127.0.0.1', PORT: '0', DMDOT_STATE_DIR: stateDir, DMDOT_ALLOW_LOOPBACK_CALLBACKS: '1', MCP_API_KEY: key },
      { projectRoot: ROOT },
    ),
    log: silentLog,
    announce: () => undefined,
  });
  bench.cleanup(() => runtime.stop());
  return runtime;
}

function caller(runtime: LocalRuntime, key: string): RpcCall {
  return async (method, params, name) => {
    const response = await fetch(runtime.url, {
      method: 'POST',
      headers: rpcHeaders(method, key, name),
      body: rpcBody(method, params),
      signal: AbortSignal.timeout(10_000),
    });
    return { status: response.status, body: (await response.json()) as any };
  };
}

export const localScaleSection: Section = {
  key: 'scale',
  title: 'local runtime: empty state vs 200,000 records',
  budgetMs: 120_000,
  async run(bench) {
    const emptyDir = bench.tempDir('scale-empty');
    const fullDir = bench.tempDir('scale-full');
    const fillMs = await fill(fullDir, RECORDS);
    progress(`scale: ${RECORDS.toLocaleString('en-US')} records in ${(fillMs / 1000).toFixed(1)} s`);

    const key = newApiKey();
    const receiver = await startReceiver();
    bench.cleanup(() => receiver.close());
    const startedAt = performance.now();
    const full = await start(bench, fullDir, key);
    const fullStartMs = performance.now() - startedAt;
    const emptyStartedAt = performance.now();
    const empty = await start(bench, emptyDir, key);
    const emptyStartMs = performance.now() - emptyStartedAt;
    const calls = { empty: caller(empty, key), full: caller(full, key) };
    await subscribe(calls.empty, receiver, '/hook-empty');
    await subscribe(calls.full, receiver, '/hook-full');

    let counter = 0;
    const send = (call: RpcCall) => () => sendOnce(call, `scale message ${counter++}`);
    const health = (runtime: LocalRuntime) => async () => {
      const response = await fetch(`http://127.0.0.1:${runtime.port}/healthz`, { signal: AbortSignal.timeout(10_000) });
      await response.arrayBuffer();
      if (response.status !== 200) throw new Error(`/healthz answered ${response.status}`);
    };

    const sends = await pairedAsync(send(calls.full), send(calls.empty), { samples: 150, batch: 1, warmup: 5, rounds: 6, maxMs: 30_000 });
    const healthz = await pairedAsync(health(full), health(empty), { samples: 1200, batch: 1, warmup: 50, rounds: 6, maxMs: 10_000 });

    const records = RECORDS.toLocaleString('en-US');
    bench.timeRow(
      `local send_to_dot → "delivered", ${records} records in the state directory (target ≤ 2×)`,
      sends.subject,
      'the same, empty state directory',
      sends.baseline,
    );
    bench.timeRow(`local GET /healthz, ${records} records in the state directory`, healthz.subject, 'the same, empty state directory', healthz.baseline);
    bench.row({
      name: `local server start (open, repair, sweep), ${records} records`,
      median: ms(fullStartMs),
      p90: '-',
      baseline: 'the same, empty state directory (one start each)',
      baselineMedian: ms(emptyStartMs),
      ratio: ratio(fullStartMs, emptyStartMs),
    });
    bench.record({
      localSendEmptyMs: sends.baseline.median,
      localSendAt200kMs: sends.subject.median,
      localSendEmptyP90Ms: sends.baseline.p90,
      localSendAt200kP90Ms: sends.subject.p90,
      localSendRatio: ratioOf(sends.subject.median, sends.baseline.median),
      localSendSamples: sends.subject.n,
      localHealthzEmptyMs: healthz.baseline.median,
      localHealthzAt200kMs: healthz.subject.median,
      localHealthzRatio: ratioOf(healthz.subject.median, healthz.baseline.median),
      localScale: { records: RECORDS, fillS: fillMs / 1000, startEmptyMs: emptyStartMs, startAt200kMs: fullStartMs, targetSendRatio: 2 },
    });
    bench.note(
      `scale: both servers run in this process on their own state directories; rounds alternate them. The full one's ${records} delivered records were written through the operator's database handle in ${(fillMs / 1000).toFixed(1)} s before it started.`,
    );
  },
};
