/**
 * A measurement, not a test: what one send's writes (outbox.add: the record and its job, one
 * durable commit) plus a due-jobs query cost on an empty database and on one holding 200,000
 * event records (each with a job scheduled later), and what a server start costs there. It
 * asserts nothing about time; it prints the numbers. Skipped unless asked for:
 *
 *   DM_DOT_MEASURE=1 npx jest test/unit/adapters/embedded/measure.test.ts
 *
 * (DM_DOT_MEASURE_RECORDS changes the 200,000.)
 */
import { mkdtemp, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { openEmbeddedDatabase, type EmbeddedDatabase } from '../../../../lambda/adapters/embedded';
import { Limits } from '../../../../lambda/core/protocol';
import type { DeliveryJob, EventRecord } from '../../../../lambda/ports';

const run = process.env.DM_DOT_MEASURE ? describe : describe.skip;
const RECORDS = Number(process.env.DM_DOT_MEASURE_RECORDS ?? 200_000);
const SAMPLES = 200;
const DAY = 24 * 3600 * 1000;

let counter = 0;
function event(now: number): { record: EventRecord; job: DeliveryJob } {
  const eventId = `evt_${(counter++).toString(16).padStart(32, '0')}`;
  // About the size of a real event: a 200-character message in the kept bytes.
  const body = JSON.stringify({ eventId, name: 'message.created', timestamp: new Date(now).toISOString(), data: { message: 'm'.repeat(200) }, cursor: null });
  return {
    record: { eventId, status: 'queued', subscriptionId: 'sub_a', generation: 'gen-a', attempts: 0, createdAt: now, expiresAt: now + Limits.eventRecordMs, body, notBefore: now + 3500 },
    job: { eventId, subscriptionId: 'sub_a', generation: 'gen-a', body },
  };
}

/** Median and 95th percentile (ms) of one add followed by one due query, sequentially. */
async function sample(db: EmbeddedDatabase): Promise<{ median: number; p95: number; dueRows: number }> {
  const times: number[] = [];
  let dueRows = 0;
  for (let i = 0; i < SAMPLES; i++) {
    const now = Date.now();
    const { record, job } = event(now);
    const start = performance.now();
    await db.outbox.add(record, job);
    dueRows = (await db.jobs.due(now, 100)).length;
    times.push(performance.now() - start);
    // Settled again, so the due set stays one row and the sample measures the same thing each time.
    await db.jobs.complete(record.eventId);
  }
  times.sort((a, b) => a - b);
  return { median: times[Math.floor(times.length / 2)]!, p95: times[Math.floor(times.length * 0.95)]!, dueRows };
}

run('measurement: one send at 0 and at many records', () => {
  it('prints the numbers', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'dm-dot-measure-'));
    const lines: string[] = [];
    try {
      let db = await openEmbeddedDatabase(dir, { role: 'server' });
      const empty = await sample(db);
      lines.push(`empty database: outbox.add + due query median ${empty.median.toFixed(2)} ms, p95 ${empty.p95.toFixed(2)} ms (${SAMPLES} samples, ${empty.dueRows} due row)`);

      const fillStart = performance.now();
      const batch = 2000;
      for (let done = 0; done < RECORDS; done += batch) {
        const now = Date.now();
        // Issued together: lmdb-js commits them as one transaction (one fsync).
        await Promise.all(
          Array.from({ length: Math.min(batch, RECORDS - done) }, () => {
            const { record, job } = event(now);
            return db.outbox.add(record, job, { delayMs: 10 * DAY });
          }),
        );
      }
      lines.push(`filled ${RECORDS} event records, each with a job due in 10 days, in ${((performance.now() - fillStart) / 1000).toFixed(1)} s`);

      const full = await sample(db);
      lines.push(`${RECORDS} records: outbox.add + due query median ${full.median.toFixed(2)} ms, p95 ${full.p95.toFixed(2)} ms (${SAMPLES} samples, ${full.dueRows} due row)`);

      const nextStart = performance.now();
      await db.jobs.nextDueAt();
      lines.push(`${RECORDS} records: nextDueAt ${(performance.now() - nextStart).toFixed(3)} ms`);

      await db.close();
      const openStart = performance.now();
      db = await openEmbeddedDatabase(dir, { role: 'server' });
      lines.push(`${RECORDS} records: server open (claim, repair scan, sweep) ${(performance.now() - openStart).toFixed(0)} ms`);
      lines.push(`database file: ${((await stat(join(dir, 'dm-dot.lmdb'))).size / 1024 / 1024).toFixed(1)} MiB`);
      await db.close();
    } finally {
      await rm(dir, { recursive: true, force: true });
      process.stdout.write(`\n${lines.join('\n')}\n`);
    }
  }, 600_000);
});
