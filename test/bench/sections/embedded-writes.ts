/**
 * The embedded database's write throughput (LMDB, lambda/adapters/embedded): from 1, 10 and 100
 * concurrent writers, in store writes per second, on a fresh database per trial:
 * - `putEvent` + `updateEvent` pairs (a record, then its delivered outcome);
 * - `outbox.add` + `updateEvent` pairs: what a delivered send writes (the record and its job in one
 *   transaction, then the outcome, which also removes the job).
 * Concurrent writes share one commit (lmdb-js batches them), so throughput grows with writers
 * while every commit is still fsync'd. The baseline is what one durable small write costs on this
 * disk: sequential fsync'd atomic replaces of a small JSON file (write a temp file, datasync,
 * rename over).
 *
 * Deliberately not here: reads, the delivery worker, and a database with history (the scale
 * section fills one).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { open, rename } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { openEmbeddedDatabase } from '../../../lambda/adapters/embedded';
import { newEventId } from '../../../lambda/core/identity';
import { EventStatus, Limits } from '../../../lambda/core/protocol';
import type { EventRecord } from '../../../lambda/ports';
import { kib, perSecond, ratio, throughputStats, type Section } from '../support';

type Pair = 'putEvent' | 'outbox';

function record(): EventRecord {
  const createdAt = Date.now();
  return {
    eventId: newEventId(),
    status: EventStatus.queued,
    subscriptionId: 'sub_bench',
    generation: 'gen-bench',
    attempts: 0,
    createdAt,
    expiresAt: createdAt + Limits.eventRecordMs,
    body: '{"eventId":"bench","name":"message.created","data":{"message":"Hello dot."},"cursor":null}',
  };
}

async function storeTrial(pair: Pair, writers: number, durationMs: number): Promise<number> {
  const dir = mkdtempSync(join(tmpdir(), 'dmdot-bench-store-'));
  const db = await openEmbeddedDatabase(dir, { role: 'operator' });
  try {
    let ops = 0;
    const started = performance.now();
    const deadline = started + durationMs;
    await Promise.all(
      Array.from({ length: writers }, async () => {
        while (performance.now() < deadline) {
          const event = record();
          if (pair === 'putEvent') await db.store.putEvent(event);
          else
            await db.outbox.add(
              event,
              { eventId: event.eventId, subscriptionId: event.subscriptionId, generation: 'gen-bench', body: event.body! },
              { delayMs: 1_000 },
            );
          await db.store.updateEvent(
            event.eventId,
            { status: EventStatus.delivered, attempts: 1, deliveredAt: Date.now(), lastHttpStatus: 200, lastError: null, body: null },
            { status: EventStatus.queued, attempts: 0 },
          );
          ops += 2;
        }
      }),
    );
    return ops / ((performance.now() - started) / 1000);
  } finally {
    await db.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

/** What one durable write costs at the file level: write a temp file, datasync, rename over. */
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

export const embeddedWritesSection: Section = {
  key: 'store',
  title: 'embedded database write throughput',
  budgetMs: 45_000,
  async run(bench) {
    const writerCounts = [1, 10, 100];
    const pairs: Array<{ pair: Pair; label: string }> = [
      { pair: 'putEvent', label: 'putEvent+updateEvent' },
      { pair: 'outbox', label: 'outbox.add+updateEvent' },
    ];
    const trials = 5;
    const durationMs = 400;
    // A small JSON document (50 event records' worth, about 14 KiB): the baseline's durable write.
    const sample = JSON.stringify({
      version: 1,
      items: Array.from({ length: 50 }, () => ({
        pk: `EVENT#${newEventId()}`,
        eventId: newEventId(),
        status: 'delivered',
        subscriptionId: 'sub_bench',
        attempts: 1,
        createdAt: Date.now(),
        expiresAt: Date.now(),
        deliveredAt: Date.now(),
        lastHttpStatus: 200,
        lastError: null,
        ttl: 1,
      })),
    });
    const samples = new Map<string, number[]>();
    const keyOf = (pair: Pair, n: number) => `${pair}:${n}`;
    for (const { pair } of pairs) for (const n of writerCounts) samples.set(keyOf(pair, n), []);
    const baseline: number[] = [];
    await storeTrial('outbox', 4, 100); // warm-up: module code, file system paths
    for (let t = 0; t < trials; t++) {
      baseline.push(await rawWriteTrial(sample, durationMs));
      for (const { pair } of pairs) for (const n of writerCounts) samples.get(keyOf(pair, n))!.push(await storeTrial(pair, n, durationMs));
    }
    const base = throughputStats(baseline);
    const figures: Record<string, Record<string, number>> = {};
    for (const { pair, label } of pairs) {
      figures[pair] = {};
      for (const n of writerCounts) {
        const s = throughputStats(samples.get(keyOf(pair, n))!);
        figures[pair]![`writers${n}`] = s.median;
        bench.row({
          name: `embedded database ${label}, ${n} writer${n === 1 ? '' : 's'} (trials=${s.n})`,
          median: perSecond(s.median),
          p90: perSecond(s.p90),
          baseline: `sequential fsync'd atomic replace of ${kib(sample.length)} (trials=${base.n})`,
          baselineMedian: perSecond(base.median),
          ratio: ratio(s.median, base.median),
        });
      }
    }
    bench.record({
      embeddedWritesPerSecond: {
        putEventUpdateEvent: figures.putEvent,
        outboxAddUpdateEvent: figures.outbox,
        baselineFsyncReplace: base.median,
        trials: base.n,
        trialMs: durationMs,
      },
    });
    bench.note(
      `embedded database: an op is one store write call (a pair is 2 ops); each trial runs ${durationMs} ms on a fresh database; the p90 column of ops/s rows is the slow tail (10th percentile of throughput); ratio > 1 means more writes per second than one fsync'd file replace each.`,
    );
  },
};
