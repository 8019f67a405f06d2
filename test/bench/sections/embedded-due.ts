/**
 * The embedded job table under a backlog (LMDB, lambda/adapters/embedded): what one send's writes
 * (`outbox.add`: the record and its job, one durable commit) plus the worker's due-jobs query cost
 * on a database holding 200,000 pending jobs (each scheduled 10 days ahead, so none is due),
 * against the same on an empty database in this run; and what `nextDueAt` and a server open
 * (claim, repair scan, sweep) cost there.
 *
 * Deliberately not here: delivered history (the scale section fills the database with delivered
 * records and times whole sends and server starts), the HTTP server, and the worker's loop.
 */
import { stat } from 'node:fs/promises';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { openEmbeddedDatabase, type EmbeddedDatabase } from '../../../lambda/adapters/embedded';
import { EventStatus, Limits } from '../../../lambda/core/protocol';
import type { DeliveryJob, EventRecord } from '../../../lambda/ports';
import { mib, ms, progress, stats, type Section } from '../support';

const PENDING = 200_000;
const SAMPLES = 200;
const DAY = 24 * 3600 * 1000;

let counter = 0;
function event(now: number): { record: EventRecord; job: DeliveryJob } {
  const eventId = `evt_${(counter++).toString(16).padStart(32, '0')}`;
  // About the size of a real event: a 200-character message in the kept bytes.
  const body = JSON.stringify({ eventId, name: 'message.created', timestamp: new Date(now).toISOString(), data: { message: 'm'.repeat(200) }, cursor: null });
  return {
    record: {
      eventId,
      status: EventStatus.queued,
      subscriptionId: 'sub_a',
      generation: 'gen-a',
      attempts: 0,
      createdAt: now,
      expiresAt: now + Limits.eventRecordMs,
      body,
      notBefore: now + 3500,
    },
    job: { eventId, subscriptionId: 'sub_a', generation: 'gen-a', body },
  };
}

/** One add followed by one due query, sequentially, per sample (ms); the job is completed again so each sample measures the same. */
async function sample(db: EmbeddedDatabase): Promise<number[]> {
  const times: number[] = [];
  for (let i = 0; i < SAMPLES; i++) {
    const now = Date.now();
    const { record, job } = event(now);
    const start = performance.now();
    await db.outbox.add(record, job);
    await db.jobs.due(now, 100);
    times.push(performance.now() - start);
    await db.jobs.complete(record.eventId);
  }
  return times;
}

export const embeddedDueSection: Section = {
  key: 'due',
  title: 'embedded job table: empty vs 200,000 pending jobs',
  budgetMs: 300_000,
  async run(bench) {
    const emptyDir = bench.tempDir('due-empty');
    const fullDir = bench.tempDir('due-full');
    const empty = await openEmbeddedDatabase(emptyDir, { role: 'server' });
    let full = await openEmbeddedDatabase(fullDir, { role: 'server' });
    bench.cleanup(() => empty.close());
    const fillStart = performance.now();
    const batch = 2000;
    for (let done = 0; done < PENDING; done += batch) {
      const now = Date.now();
      // Issued together: lmdb-js commits them as one transaction (one fsync).
      await Promise.all(
        Array.from({ length: Math.min(batch, PENDING - done) }, () => {
          const { record, job } = event(now);
          return full.outbox.add(record, job, { delayMs: 10 * DAY });
        }),
      );
    }
    const fillS = (performance.now() - fillStart) / 1000;
    progress(`due: ${PENDING.toLocaleString('en-US')} pending jobs written in ${fillS.toFixed(1)} s`);

    // Alternated, so drift of a noisy machine hits both alike.
    const subject: number[] = [];
    const baseline: number[] = [];
    for (let round = 0; round < 4; round++) {
      baseline.push(...(await sample(empty)));
      subject.push(...(await sample(full)));
    }
    const pending = PENDING.toLocaleString('en-US');
    const s = stats(subject);
    const b = stats(baseline);
    bench.timeRow(`embedded outbox.add + due query, ${pending} pending jobs`, s, 'the same, empty database', b);

    const nextStart = performance.now();
    await full.jobs.nextDueAt();
    const nextDueAtMs = performance.now() - nextStart;
    await full.close();
    const openStart = performance.now();
    full = await openEmbeddedDatabase(fullDir, { role: 'server' });
    const openMs = performance.now() - openStart;
    await full.close();
    const fileBytes = (await stat(join(fullDir, 'dm-dot.lmdb'))).size;
    // One call each: no baseline of their own (the scale section times server starts against an empty one).
    const once = (name: string, value: number) => bench.row({ name, median: ms(value), p90: 'n/a', baseline: 'one call', baselineMedian: 'n/a', ratio: 'n/a' });
    once(`embedded nextDueAt, ${pending} pending jobs`, nextDueAtMs);
    once(`embedded server open (claim, repair scan, sweep), ${pending} pending jobs`, openMs);
    bench.record({
      embeddedDue: { pending: PENDING, fillS, addDueMedianMs: s.median, addDueEmptyMedianMs: b.median, nextDueAtMs, openMs, fileMiB: fileBytes / 2 ** 20 },
    });
    bench.note(`due: the ${pending}-job database file is ${mib(fileBytes)}; each sample is one outbox.add and one due query, the job completed after it.`);
  },
};
