/**
 * The reconciler's decision (lambda/core/reconcile.ts), pure: what it does with one record the
 * index listed as queued since a given time. Runs against DynamoDB Local and fauxqs are
 * test/integration/outbox-strand.test.ts.
 */
import { Budgets } from '../../../lambda/core/budgets';
import { EventStatus } from '../../../lambda/core/protocol';
import { lastSignOfLife, repairOf, strandedAfterMs } from '../../../lambda/core/reconcile';
import { DEFAULT_RETRY_DELAYS_S } from '../../../lambda/core/protocol';
import type { EventRecord } from '../../../lambda/ports';

const DELAYS = DEFAULT_RETRY_DELAYS_S;
const T0 = Date.UTC(2026, 11, 1);
const STALE = strandedAfterMs(DELAYS);
const EVENT_ID = 'evt_0123456789abcdef0123456789abcdef';

function record(overrides: Partial<EventRecord> = {}): EventRecord {
  return {
    eventId: EVENT_ID,
    status: EventStatus.queued,
    subscriptionId: 'sub_a',
    generation: 'g1',
    attempts: 0,
    createdAt: T0,
    expiresAt: T0 + 1e9,
    body: '{"eventId":"x"}',
    ...overrides,
  };
}
const entry = { eventId: EVENT_ID, queuedSince: T0 };

describe('repairOf (DEL-OUT-4)', () => {
  test('the bound with the default schedule: stranded after about 28 minutes, repaired within about 33', () => {
    expect(STALE).toBe(755_000 + 4_000 + 1_000 + 15 * 60_000);
    expect(Budgets.reconcileEveryMs).toBe(5 * 60_000);
  });

  test('not yet stranded, or no longer queued, or gone: nothing', () => {
    expect(repairOf(record(), entry, T0 + STALE - 1, DELAYS)).toEqual({ kind: 'skip' });
    for (const status of [EventStatus.delivered, EventStatus.failed, EventStatus.dropped])
      expect(repairOf(record({ status }), entry, T0 + STALE, DELAYS)).toEqual({ kind: 'skip' });
    expect(repairOf(undefined, entry, T0 + STALE, DELAYS)).toEqual({ kind: 'skip' });
  });

  test('stranded the first time with attempts left: requeued with its own bytes, subscription and generation', () => {
    expect(repairOf(record({ attempts: DELAYS.length }), entry, T0 + STALE, DELAYS)).toEqual({
      kind: 'requeue',
      job: { eventId: EVENT_ID, subscriptionId: 'sub_a', generation: 'g1', body: '{"eventId":"x"}' },
    });
  });

  test('requeued moments ago (the index lags): nothing; stranded again after its requeue: failed', () => {
    expect(repairOf(record({ repairedAt: T0 + STALE }), entry, T0 + STALE + 1_000, DELAYS)).toEqual({ kind: 'skip' });
    expect(repairOf(record({ repairedAt: T0 + STALE }), entry, T0 + 2 * STALE, DELAYS)).toMatchObject({ kind: 'fail', job: { eventId: EVENT_ID } });
  });

  test('no attempt left: failed, not requeued; no body to send: failed without a job', () => {
    expect(repairOf(record({ attempts: DELAYS.length + 1 }), entry, T0 + STALE, DELAYS)).toMatchObject({ kind: 'fail', job: { eventId: EVENT_ID } });
    const { body: _body, ...bodiless } = record();
    expect(repairOf(bodiless, entry, T0 + STALE, DELAYS)).toEqual({ kind: 'fail', job: undefined });
  });

  test('DEL-OUT-6: a live lease is left alone, however long the record has been queued: a worker is making an attempt, or the next is not due', () => {
    const requeuedLongAgo = record({ repairedAt: T0 + STALE });
    const now = T0 + 3 * STALE;
    expect(repairOf({ ...requeuedLongAgo, notBefore: now + 8_000 }, entry, now, DELAYS)).toEqual({ kind: 'skip' });
    expect(repairOf({ ...requeuedLongAgo, notBefore: now + 1 }, entry, now, DELAYS)).toEqual({ kind: 'skip' });
  });

  test('DEL-OUT-6: staleness is judged on the last sign of life (the lease every attempt moves), not on when it was queued', () => {
    const lastAttempt = T0 + 2 * STALE;
    const worked = record({ repairedAt: T0 + STALE, notBefore: lastAttempt });
    expect(lastSignOfLife(worked, entry)).toBe(lastAttempt);
    expect(repairOf(worked, entry, lastAttempt + STALE - 1, DELAYS)).toEqual({ kind: 'skip' });
    expect(repairOf(worked, entry, lastAttempt + STALE, DELAYS)).toMatchObject({ kind: 'fail' });
    // A lease older than the queued time does not make a record look older than it is.
    expect(lastSignOfLife(record({ notBefore: T0 - 5_000 }), entry)).toBe(T0);
  });
});
