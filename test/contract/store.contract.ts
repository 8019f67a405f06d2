/**
 * The storage contract (docs/contract/storage.md, ports.Store) that every adapter passes: the embedded file store
 * and the DynamoDB adapter run this same suite, so the local runtime behaves as AWS does.
 *
 * Every time is an explicit `now` on the caller's clock, never a sleep. The clock starts a year
 * ahead of the wall clock on purpose: an adapter that consults the wall clock instead of the time
 * it is given gets caught, and DynamoDB Local's real TTL sweeper (which uses the wall clock) never
 * deletes a test item, so "stored but past its expiry" is really exercised.
 *
 * Deliberately not here: adapter internals (item shapes, TTL attributes); those are the adapters'
 * own tests.
 */
import type { EventRecord, IdempotencyRecord, IdempotencyStore, InboxStore, LogEntry, Store, SubscriptionRecord } from '../../lambda/ports';
import { Limits } from '../../lambda/core/protocol';

export type StoreFactory = () => Promise<{ store: Store & IdempotencyStore & InboxStore; cleanup(): Promise<void> }>;

const SECOND = 1000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;

/** The caller's clock: a whole second, a year ahead of the wall clock. */
const T0 = Math.floor(Date.now() / SECOND) * SECOND + 365 * DAY;

export function subscription(overrides: Partial<SubscriptionRecord> = {}): SubscriptionRecord {
  return {
    id: 'sub_a',
    generation: 'gen-a',
    url: 'https://a.example.com/hook',
    name: 'dot',
    secret: 'whsec_c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0',
    principal: 'principal-a',
    createdAt: T0,
    refreshedAt: T0,
    expiresAt: T0 + HOUR,
    ...overrides,
  };
}

export function event(overrides: Partial<EventRecord> = {}): EventRecord {
  return {
    eventId: 'evt_0123456789abcdef0123456789abcdef',
    status: 'queued',
    subscriptionId: 'sub_a',
    attempts: 0,
    createdAt: T0,
    expiresAt: T0 + Limits.eventRecordMs,
    ...overrides,
  };
}

export function describeStoreContract(name: string, factory: StoreFactory): void {
  describe(`CON-1, STORE-12, STORE-13: Store contract: ${name}`, () => {
    let store: Store & IdempotencyStore & InboxStore;
    let cleanup: (() => Promise<void>) | undefined;

    beforeEach(async () => {
      ({ store, cleanup } = await factory());
    });

    afterEach(async () => {
      await cleanup?.();
      cleanup = undefined;
    });

    /** A first subscribe: nothing stored. */
    const first = (record: SubscriptionRecord, now = T0) => store.putSubscription(record, now, { kind: 'absent' });
    /** A refresh (or a resubscribe after mere expiry) of the stored item of this URL and generation. */
    const same = (record: SubscriptionRecord, now: number, ...expected: [generation: string | undefined] | []) =>
      store.putSubscription(record, now, { kind: 'same', url: record.url, generation: expected.length > 0 ? expected[0] : record.generation });

    describe('subscription', () => {
      it('get on an empty store is undefined', async () => {
        await expect(store.getSubscription(T0)).resolves.toBeUndefined();
        await expect(store.getStoredSubscription()).resolves.toBeUndefined();
      });

      it('ARCH-11, STORE-3: put then get round-trips every field', async () => {
        const full = subscription({
          previousSecret: 'whsec_cHJldmlvdXMtcHJldmlvdXMtcHJldmlvdXM=',
          previousSecretUntil: T0 + 10 * MINUTE,
          refreshedAt: T0 + 5 * SECOND,
          lastDeliveryAt: T0 + 7 * SECOND,
          lastError: 'http_5xx',
        });
        await expect(first(full)).resolves.toEqual({ ok: true });
        await expect(store.getSubscription(T0)).resolves.toStrictEqual(full);
      });

      it('keeps absent optional fields absent and null lastError null', async () => {
        const minimal = subscription({ lastError: null });
        await first(minimal);
        const read = await store.getSubscription(T0);
        expect(read).toStrictEqual(minimal);
        expect(Object.keys(read ?? {}).sort()).toEqual(Object.keys(minimal).sort());
      });

      it('ARCH-9, STORE-9: a put for another url while one is live fails and returns the holder', async () => {
        const holder = subscription();
        await first(holder);
        const other = subscription({ id: 'sub_b', generation: 'gen-b', url: 'https://b.example.com/hook', secret: 'whsec_b' });
        await expect(store.putSubscription(other, T0 + MINUTE, { kind: 'absent' })).resolves.toStrictEqual({ ok: false, holder });
        // Believing it expired does not make it so: the condition judges expiry itself.
        await expect(store.putSubscription(other, T0 + MINUTE, { kind: 'expired', generation: holder.generation })).resolves.toStrictEqual({
          ok: false,
          holder,
        });
        await expect(store.getSubscription(T0 + MINUTE)).resolves.toStrictEqual(holder);
      });

      it('EV-GEN-2, STORE-9: a put for the same url and generation refreshes a live subscription', async () => {
        await first(subscription());
        const refreshed = subscription({
          id: 'sub_a2',
          secret: 'whsec_new',
          previousSecret: subscription().secret,
          previousSecretUntil: T0 + 11 * MINUTE,
          refreshedAt: T0 + MINUTE,
          expiresAt: T0 + 2 * HOUR,
        });
        await expect(same(refreshed, T0 + MINUTE)).resolves.toEqual({ ok: true });
        await expect(store.getSubscription(T0 + MINUTE)).resolves.toStrictEqual(refreshed);
      });

      it('a refresh planned against a generation that has since ended fails, and names what is stored now', async () => {
        // Read at gen-a, then cleared and subscribed anew (gen-b) before the refresh's put.
        await first(subscription({ generation: 'gen-b' }));
        const late = subscription({ refreshedAt: T0 + MINUTE });
        await expect(same(late, T0 + MINUTE, 'gen-a')).resolves.toStrictEqual({ ok: false, holder: subscription({ generation: 'gen-b' }) });
        await expect(store.getSubscription(T0 + MINUTE)).resolves.toStrictEqual(subscription({ generation: 'gen-b' }));
      });

      it('a refresh planned against an item that was deleted in between fails with no holder', async () => {
        await first(subscription());
        await store.deleteSubscription(subscription().url);
        await expect(same(subscription({ refreshedAt: T0 + MINUTE }), T0 + MINUTE)).resolves.toStrictEqual({ ok: false, holder: undefined });
        await expect(store.getStoredSubscription()).resolves.toBeUndefined();
      });

      it('EV-GEN-1: a first subscribe fails when an item is stored, even an expired one of the same url', async () => {
        const old = subscription({ expiresAt: T0 + SECOND });
        await first(old);
        await expect(first(subscription({ generation: 'gen-new' }), T0 + HOUR)).resolves.toStrictEqual({ ok: false, holder: old });
      });

      it('STORE-2: an expired subscription that is still stored is absent for get, present for getStoredSubscription, and replaceable', async () => {
        const old = subscription({ createdAt: T0 - 2 * HOUR, refreshedAt: T0 - 2 * HOUR, expiresAt: T0 - SECOND });
        await expect(first(old, T0 - 2 * HOUR)).resolves.toEqual({ ok: true });
        // Still stored: at a time before its expiry it is there.
        await expect(store.getSubscription(T0 - HOUR)).resolves.toStrictEqual(old);

        await expect(store.getSubscription(T0)).resolves.toBeUndefined();
        await expect(store.getStoredSubscription()).resolves.toStrictEqual(old);
        const next = subscription({ id: 'sub_b', generation: 'gen-b', url: 'https://b.example.com/hook' });
        await expect(store.putSubscription(next, T0, { kind: 'expired', generation: 'gen-other' })).resolves.toStrictEqual({ ok: false, holder: old });
        await expect(store.putSubscription(next, T0, { kind: 'expired', generation: old.generation })).resolves.toEqual({ ok: true });
        await expect(store.getSubscription(T0)).resolves.toStrictEqual(next);
      });

      it('EV-GEN-2: the same url after mere expiry keeps its generation', async () => {
        await first(subscription({ expiresAt: T0 + SECOND }));
        const again = subscription({ refreshedAt: T0 + HOUR, expiresAt: T0 + 2 * HOUR });
        await expect(same(again, T0 + HOUR)).resolves.toEqual({ ok: true });
        await expect(store.getSubscription(T0 + HOUR)).resolves.toStrictEqual(again);
      });

      it('an item from before generations is matched by an undefined generation only', async () => {
        const { generation: _none, ...legacy } = subscription();
        await first(legacy as SubscriptionRecord);
        await expect(same(subscription({ generation: 'gen-new', refreshedAt: T0 + MINUTE }), T0 + MINUTE, 'gen-a')).resolves.toMatchObject({ ok: false });
        await expect(same(subscription({ generation: 'gen-new', refreshedAt: T0 + MINUTE }), T0 + MINUTE, undefined)).resolves.toEqual({ ok: true });
        await expect(store.getSubscription(T0 + MINUTE)).resolves.toMatchObject({ generation: 'gen-new' });
      });

      it('STORE-2: at now == expiresAt the subscription is already expired, for get and for put alike', async () => {
        await first(subscription({ expiresAt: T0 + HOUR }));
        await expect(store.getSubscription(T0 + HOUR - 1)).resolves.toBeDefined();
        await expect(store.getSubscription(T0 + HOUR)).resolves.toBeUndefined();
        const next = subscription({ id: 'sub_b', generation: 'gen-b', url: 'https://b.example.com/hook', expiresAt: T0 + 2 * HOUR });
        await expect(store.putSubscription(next, T0 + HOUR - 1, { kind: 'expired', generation: 'gen-a' })).resolves.toMatchObject({ ok: false });
        await expect(store.putSubscription(next, T0 + HOUR, { kind: 'expired', generation: 'gen-a' })).resolves.toEqual({ ok: true });
      });

      it('ARCH-9, STORE-10: 50 concurrent puts for 50 distinct urls: exactly one wins and it is the one stored', async () => {
        const records = Array.from({ length: 50 }, (_, i) =>
          subscription({ id: `sub_${i}`, generation: `gen-${i}`, url: `https://c${i}.example.com/hook`, secret: `whsec_${i}` }),
        );
        const results = await Promise.all(records.map((record) => first(record)));
        const winners = records.filter((_, i) => results[i]?.ok);
        expect(winners).toHaveLength(1);
        const winner = winners[0]!;
        await expect(store.getSubscription(T0)).resolves.toStrictEqual(winner);
        for (const result of results) if (!result.ok) expect(result.holder).toStrictEqual(winner);
      });

      it('EV-UNSUB-2, STORE-11: delete only with the stored url, and only once', async () => {
        const live = subscription();
        await first(live);
        await expect(store.deleteSubscription('https://b.example.com/hook')).resolves.toBe(false);
        await expect(store.getSubscription(T0)).resolves.toStrictEqual(live);
        await expect(store.deleteSubscription(live.url)).resolves.toBe(true);
        await expect(store.getSubscription(T0)).resolves.toBeUndefined();
        await expect(store.deleteSubscription(live.url)).resolves.toBe(false);
      });

      it('delete on an empty store returns false', async () => {
        await expect(store.deleteSubscription('https://a.example.com/hook')).resolves.toBe(false);
      });

      it('DEL-PIPE-20: recordDeliveryOutcome touches only the subscription with that id', async () => {
        const live = subscription({ lastError: null });
        await first(live);

        await store.recordDeliveryOutcome('sub_other', { deliveredAt: T0 + SECOND, error: 'timeout' });
        await expect(store.getSubscription(T0)).resolves.toStrictEqual(live);

        await store.recordDeliveryOutcome(live.id, { deliveredAt: T0 + 2 * SECOND, error: null });
        await expect(store.getSubscription(T0)).resolves.toStrictEqual({ ...live, lastDeliveryAt: T0 + 2 * SECOND, lastError: null });

        // Without deliveredAt only lastError changes.
        await store.recordDeliveryOutcome(live.id, { error: 'http_5xx' });
        await expect(store.getSubscription(T0)).resolves.toStrictEqual({ ...live, lastDeliveryAt: T0 + 2 * SECOND, lastError: 'http_5xx' });
      });

      it('recordDeliveryOutcome with no subscription creates nothing that would block a subscribe', async () => {
        await store.recordDeliveryOutcome('sub_a', { deliveredAt: T0, error: null });
        await expect(store.getSubscription(T0)).resolves.toBeUndefined();
        await expect(first(subscription({ url: 'https://b.example.com/hook' }))).resolves.toEqual({ ok: true });
      });
    });

    describe('events', () => {
      it('DEL-PIPE-2: a second putEvent with the same id fails and leaves the first intact', async () => {
        const first = event();
        await store.putEvent(first);
        await expect(store.putEvent(event({ subscriptionId: 'sub_b', createdAt: T0 + SECOND }))).rejects.toThrow();
        await expect(store.getEvent(first.eventId, T0 + SECOND)).resolves.toStrictEqual(first);
      });

      it('getEvent and updateEvent round-trip', async () => {
        const queued = event();
        await store.putEvent(queued);
        await expect(store.getEvent(queued.eventId, T0)).resolves.toStrictEqual(queued);

        await store.updateEvent(queued.eventId, { attempts: 1, lastError: 'http_5xx', lastHttpStatus: 503 });
        await expect(store.getEvent(queued.eventId, T0)).resolves.toStrictEqual({ ...queued, attempts: 1, lastError: 'http_5xx', lastHttpStatus: 503 });

        await store.updateEvent(queued.eventId, { status: 'delivered', attempts: 2, lastError: null, lastHttpStatus: 200, deliveredAt: T0 + 5 * SECOND });
        await expect(store.getEvent(queued.eventId, T0)).resolves.toStrictEqual({
          ...queued,
          status: 'delivered',
          attempts: 2,
          lastError: null,
          lastHttpStatus: 200,
          deliveredAt: T0 + 5 * SECOND,
        });
      });

      it('the kept bytes, the generation and the delivery log round-trip', async () => {
        const log: LogEntry[] = [
          { at: T0 + 1, outcome: 'timeout', statusClass: null, durationMs: 2999, counted: false },
          { at: T0 + 2, note: 'resent' },
        ];
        const full = event({
          generation: 'gen-a',
          body: '{"eventId":"evt_x","data":{"message":"é 😀 \\u0000"}}',
          log,
          notBefore: T0 + 5,
          cancelledAt: T0 + 6,
          status: 'dropped',
        });
        await store.putEvent(full);
        await expect(store.getEvent(full.eventId, T0)).resolves.toStrictEqual(full);
      });

      it('appendLog appends in order, and body: null removes the kept bytes', async () => {
        const queued = event({ body: '{"a":1}' });
        await store.putEvent(queued);
        const first: LogEntry = { at: T0 + 1, outcome: 'http_5xx', statusClass: '5xx', durationMs: 12, counted: true };
        const second: LogEntry = { at: T0 + 2, outcome: 'delivered', statusClass: '2xx', durationMs: 7, counted: true };
        await expect(store.updateEvent(queued.eventId, { attempts: 1, appendLog: first }, { status: 'queued', attempts: 0 })).resolves.toBe(true);
        await expect(
          store.updateEvent(queued.eventId, { status: 'delivered', attempts: 2, body: null, appendLog: second }, { status: 'queued', attempts: 1 }),
        ).resolves.toBe(true);
        const { body: _removed, ...withoutBody } = queued;
        await expect(store.getEvent(queued.eventId, T0)).resolves.toStrictEqual({ ...withoutBody, status: 'delivered', attempts: 2, log: [first, second] });
      });

      it('a failed compare-and-set appends nothing to the log', async () => {
        const queued = event();
        await store.putEvent(queued);
        const entry: LogEntry = { at: T0 + 1, outcome: 'http_5xx', statusClass: '5xx', durationMs: 12, counted: true };
        await expect(store.updateEvent(queued.eventId, { attempts: 1, appendLog: entry }, { status: 'queued', attempts: 3 })).resolves.toBe(false);
        await expect(store.getEvent(queued.eventId, T0)).resolves.toStrictEqual(queued);
      });

      it('an expectation may name several statuses: delivered replaces a dropped event (an attempt in flight landed)', async () => {
        const dropped = event({ status: 'dropped', cancelledAt: T0 + 1 });
        await store.putEvent(dropped);
        await expect(store.updateEvent(dropped.eventId, { status: 'delivered', attempts: 1 }, { status: ['queued', 'dropped'], attempts: 0 })).resolves.toBe(
          true,
        );
        await expect(store.updateEvent(dropped.eventId, { status: 'failed' }, { status: ['queued', 'dropped'] })).resolves.toBe(false);
        await expect(store.getEvent(dropped.eventId, T0)).resolves.toStrictEqual({ ...dropped, status: 'delivered', attempts: 1 });
      });

      it('updateEvent leaves out undefined patch fields', async () => {
        const queued = event();
        await store.putEvent(queued);
        await store.updateEvent(queued.eventId, { status: 'failed', deliveredAt: undefined });
        await expect(store.getEvent(queued.eventId, T0)).resolves.toStrictEqual({ ...queued, status: 'failed' });
      });

      it('updateEvent of an unknown event creates nothing', async () => {
        const unknown = event({ eventId: 'evt_ffffffffffffffffffffffffffffffff' });
        await store.updateEvent(unknown.eventId, { status: 'delivered', attempts: 1 });
        await expect(store.getEvent(unknown.eventId, T0)).resolves.toBeUndefined();
        // No stub either: a put with that id still succeeds.
        await expect(store.putEvent(unknown)).resolves.toBeUndefined();
        await expect(store.getEvent(unknown.eventId, T0)).resolves.toStrictEqual(unknown);
      });

      it('an event past its expiresAt is absent', async () => {
        const queued = event();
        await store.putEvent(queued);
        await expect(store.getEvent(queued.eventId, queued.expiresAt - 1)).resolves.toStrictEqual(queued);
        await expect(store.getEvent(queued.eventId, queued.expiresAt)).resolves.toBeUndefined();
        await expect(store.getEvent(queued.eventId, queued.expiresAt + DAY)).resolves.toBeUndefined();
      });

      it('putEvent over an expired event with the same id succeeds (expiry judged on the record clock)', async () => {
        await store.putEvent(event());
        const again = event({ createdAt: T0 + Limits.eventRecordMs + DAY, expiresAt: T0 + 2 * Limits.eventRecordMs + DAY, subscriptionId: 'sub_b' });
        await expect(store.putEvent(again)).resolves.toBeUndefined();
        await expect(store.getEvent(again.eventId, again.createdAt)).resolves.toStrictEqual(again);
      });

      it('updateEvent with an expected status is a compare-and-set: it writes only from that status', async () => {
        const queued = event();
        await store.putEvent(queued);
        await expect(store.updateEvent(queued.eventId, { status: 'delivered', attempts: 1 }, { status: 'queued' })).resolves.toBe(true);
        // A second copy of the job, late: failed must never overwrite delivered.
        await expect(store.updateEvent(queued.eventId, { status: 'failed', attempts: 1, lastError: 'http_4xx' }, { status: 'queued' })).resolves.toBe(false);
        await expect(store.getEvent(queued.eventId, T0)).resolves.toStrictEqual({ ...queued, status: 'delivered', attempts: 1 });
      });

      it('updateEvent with an expected attempt count refuses a second commit of the same attempt', async () => {
        const queued = event();
        await store.putEvent(queued);
        await expect(store.updateEvent(queued.eventId, { attempts: 1, notBefore: T0 + SECOND }, { status: 'queued', attempts: 0 })).resolves.toBe(true);
        await expect(store.updateEvent(queued.eventId, { attempts: 1, notBefore: T0 + 9 * SECOND }, { status: 'queued', attempts: 0 })).resolves.toBe(false);
        await expect(store.getEvent(queued.eventId, T0)).resolves.toStrictEqual({ ...queued, attempts: 1, notBefore: T0 + SECOND });
      });

      it('DEL-LEASE-1: updateEvent with an expected lease (absent or a time) takes it for one of two copies that read the same record', async () => {
        const none = event();
        await store.putEvent(none);
        const lease = (until: number) => store.updateEvent(none.eventId, { notBefore: until }, { status: 'queued', attempts: 0, notBefore: null });
        const results = await Promise.all([lease(T0 + 8 * SECOND), lease(T0 + 9 * SECOND)]);
        expect(results.filter(Boolean)).toHaveLength(1);
        // Now it has one: an expectation of none, or of another time, no longer holds.
        await expect(lease(T0 + 10 * SECOND)).resolves.toBe(false);
        const held = (await store.getEvent(none.eventId, T0))?.notBefore;
        expect([T0 + 8 * SECOND, T0 + 9 * SECOND]).toContain(held);
        await expect(store.updateEvent(none.eventId, { notBefore: T0 + 20 * SECOND }, { status: 'queued', attempts: 0, notBefore: held! + 1 })).resolves.toBe(
          false,
        );
        await expect(store.updateEvent(none.eventId, { notBefore: T0 + 20 * SECOND }, { status: 'queued', attempts: 0, notBefore: held! })).resolves.toBe(true);
        await expect(store.getEvent(none.eventId, T0)).resolves.toMatchObject({ notBefore: T0 + 20 * SECOND });
      });

      it('a redrive reopens a failed event once: failed -> queued succeeds for one of two racing copies', async () => {
        await store.putEvent(event({ status: 'failed', attempts: 6, lastError: 'http_5xx' }));
        const reopen = () => store.updateEvent(event().eventId, { status: 'queued', attempts: 0, lastError: null }, { status: 'failed' });
        const results = await Promise.all([reopen(), reopen()]);
        expect(results.filter(Boolean)).toHaveLength(1);
      });

      it('updateEvent answers false for an unknown event, with or without an expectation', async () => {
        const id = 'evt_eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee';
        await expect(store.updateEvent(id, { attempts: 1 })).resolves.toBe(false);
        await expect(store.updateEvent(id, { attempts: 1 }, { status: 'queued' })).resolves.toBe(false);
        await expect(store.getEvent(id, T0)).resolves.toBeUndefined();
      });

      it('restoreEvent writes a record where none lives, and never over a live one', async () => {
        const restored = event({ eventId: 'evt_dddddddddddddddddddddddddddddddd' });
        await expect(store.restoreEvent(restored)).resolves.toBe(true);
        await expect(store.getEvent(restored.eventId, T0)).resolves.toStrictEqual(restored);
        await expect(store.restoreEvent({ ...restored, attempts: 3 })).resolves.toBe(false);
        await expect(store.getEvent(restored.eventId, T0)).resolves.toStrictEqual(restored);
      });

      it('restoreEvent replaces an expired record (a job redriven after its record expired)', async () => {
        const old = event({ status: 'failed', attempts: 6, lastError: 'http_5xx' });
        await store.putEvent(old);
        const later = T0 + Limits.eventRecordMs + DAY;
        const fresh = event({ createdAt: later, expiresAt: later + Limits.eventRecordMs });
        await expect(store.restoreEvent(fresh)).resolves.toBe(true);
        await expect(store.getEvent(fresh.eventId, later)).resolves.toStrictEqual(fresh);
      });

      it('getEvent of an unknown id is undefined', async () => {
        await expect(store.getEvent('evt_00000000000000000000000000000000', T0)).resolves.toBeUndefined();
      });
    });

    describe('LIM-8, STORE-5: verification cache', () => {
      it('is live for 24 h after markVerified and absent after', async () => {
        await expect(store.isVerified('k1', T0)).resolves.toBe(false);
        await store.markVerified('k1', T0);
        await expect(store.isVerified('k1', T0)).resolves.toBe(true);
        await expect(store.isVerified('k1', T0 + Limits.verificationCacheMs - 1)).resolves.toBe(true);
        await expect(store.isVerified('k1', T0 + Limits.verificationCacheMs)).resolves.toBe(false);
        await expect(store.isVerified('k2', T0)).resolves.toBe(false);
      });

      it('marking again restarts the window', async () => {
        await store.markVerified('k1', T0);
        await store.markVerified('k1', T0 + Limits.verificationCacheMs);
        await expect(store.isVerified('k1', T0 + Limits.verificationCacheMs + HOUR)).resolves.toBe(true);
      });
    });

    describe('STORE-6: replay guard', () => {
      const CLAIMED = { claimed: true };
      const HELD = { claimed: false, sameRequest: true };
      const ANSWER = { status: 200, body: '{ "jsonrpc":"2.0","id":1,"result":{"x":"\u00e9 é"} }' };

      it('LIM-9, PUP-10: claims an id once; a settled answer is kept for replays up to and including 10 min later, then the id is free again', async () => {
        await expect(store.claimReplayId('msg_1', T0, 'a', 'POST /pup/challenge')).resolves.toStrictEqual(CLAIMED);
        await store.settleReplayId('msg_1', 'a', ANSWER);
        await expect(store.claimReplayId('msg_1', T0, 'b', 'POST /pup/challenge')).resolves.toStrictEqual({
          claimed: false,
          sameRequest: true,
          answer: ANSWER,
        });
        await expect(store.claimReplayId('msg_1', T0 + Limits.replayMemoryMs - 1, 'b', 'POST /pup/challenge')).resolves.toStrictEqual({
          claimed: false,
          sameRequest: true,
          answer: ANSWER,
        });
        // The last instant the timestamp window could still accept the request: still held.
        await expect(store.claimReplayId('msg_1', T0 + Limits.replayMemoryMs, 'b', 'POST /pup/challenge')).resolves.toStrictEqual({
          claimed: false,
          sameRequest: true,
          answer: ANSWER,
        });
        await expect(store.claimReplayId('msg_2', T0, 'c', 'POST /pup/challenge')).resolves.toStrictEqual(CLAIMED);

        const later = T0 + Limits.replayMemoryMs + 1;
        await expect(store.claimReplayId('msg_1', later, 'd', 'POST /pup/challenge')).resolves.toStrictEqual(CLAIMED);
        await expect(store.claimReplayId('msg_1', later + SECOND, 'e', 'POST /pup/challenge')).resolves.toStrictEqual(HELD);
      });

      it('PUP-20: a claim presented again with its own token is still this request`s (a write whose answer was lost, retried)', async () => {
        await expect(store.claimReplayId('msg_lost', T0, 'mine', 'POST /pup/challenge')).resolves.toStrictEqual(CLAIMED);
        await expect(store.claimReplayId('msg_lost', T0 + 50, 'mine', 'POST /pup/challenge')).resolves.toStrictEqual(CLAIMED);
        await expect(store.claimReplayId('msg_lost', T0 + 50, 'theirs', 'POST /pup/challenge')).resolves.toStrictEqual(HELD);
      });

      it('PUP-21: an unsettled claim holds through its lease only; a released one is free at once', async () => {
        await store.claimReplayId('msg_died', T0, 'first', 'POST /pup/challenge');
        await expect(store.claimReplayId('msg_died', T0 + Limits.replayLeaseMs, 'retry', 'POST /pup/challenge')).resolves.toStrictEqual(HELD);
        await expect(store.claimReplayId('msg_died', T0 + Limits.replayLeaseMs + 1, 'retry', 'POST /pup/challenge')).resolves.toStrictEqual(CLAIMED);

        await store.claimReplayId('msg_failed', T0, 'first', 'POST /pup/challenge');
        await store.settleReplayId('msg_failed', 'first', undefined);
        await expect(store.claimReplayId('msg_failed', T0 + 1, 'retry', 'POST /pup/challenge')).resolves.toStrictEqual(CLAIMED);
      });

      it('PUP-21: settling with another request`s token changes nothing', async () => {
        await store.claimReplayId('msg_taken', T0, 'first', 'POST /pup/challenge');
        // The first request's lease ran out and a retry took the id over.
        await expect(store.claimReplayId('msg_taken', T0 + Limits.replayLeaseMs + 1, 'retry', 'POST /pup/challenge')).resolves.toStrictEqual(CLAIMED);
        await store.settleReplayId('msg_taken', 'first', undefined);
        await store.settleReplayId('msg_taken', 'first', ANSWER);
        await expect(store.claimReplayId('msg_taken', T0 + Limits.replayLeaseMs + 2, 'third', 'POST /pup/challenge')).resolves.toStrictEqual(HELD);
        await store.settleReplayId('msg_taken', 'retry', ANSWER);
        await expect(store.claimReplayId('msg_taken', T0 + Limits.replayLeaseMs + 3, 'third', 'POST /pup/challenge')).resolves.toStrictEqual({
          claimed: false,
          sameRequest: true,
          answer: ANSWER,
        });
      });

      it('PUP-22: an id held by a different request (another route or body) says so, and never hands over its answer', async () => {
        await store.claimReplayId('msg_other', T0, 'a', 'POST /pup/challenge');
        await store.settleReplayId('msg_other', 'a', ANSWER);
        await expect(store.claimReplayId('msg_other', T0 + 1, 'b', 'POST /pup/mcp')).resolves.toStrictEqual({ claimed: false, sameRequest: false });
      });

      it('a settled answer outlives the lease', async () => {
        await store.claimReplayId('msg_kept', T0, 'a', 'POST /pup/challenge');
        await store.settleReplayId('msg_kept', 'a', ANSWER);
        await expect(store.claimReplayId('msg_kept', T0 + Limits.replayLeaseMs + MINUTE, 'b', 'POST /pup/challenge')).resolves.toStrictEqual({
          claimed: false,
          sameRequest: true,
          answer: ANSWER,
        });
      });

      it('20 concurrent claims of one id: exactly one succeeds', async () => {
        const results = await Promise.all(Array.from({ length: 20 }, (_, i) => store.claimReplayId('msg_race', T0, `t${i}`, 'POST /pup/challenge')));
        expect(results.filter((r) => r.claimed)).toHaveLength(1);
      });

      it('replay ids and inbound answers are separate namespaces', async () => {
        await expect(store.claimReplayId('msg_shared', T0, 'a', 'POST /pup/challenge')).resolves.toStrictEqual(CLAIMED);
        await expect(store.putInboundAnswer('msg_shared', { status: 200, body: '{}' }, T0)).resolves.toEqual({ stored: true });
      });
    });

    describe('PUP-11: inbound event answers (pup /pup/events retries)', () => {
      // Bytes that a re-serialization would change: key order, spacing, escapes, multibyte text.
      const FIRST = { status: 200, body: '{ "b":1,"a":"\\u00e9 é 😀" }' };

      it('PUP-11: the first put stores; a second put with the same id returns the first answer byte for byte', async () => {
        await expect(store.putInboundAnswer('msg_evt_1', FIRST, T0)).resolves.toStrictEqual({ stored: true });
        await expect(store.putInboundAnswer('msg_evt_1', { status: 202, body: '{"other":true}' }, T0 + MINUTE)).resolves.toStrictEqual({
          stored: false,
          answer: FIRST,
        });
      });

      it('answers are kept per id', async () => {
        await store.putInboundAnswer('msg_evt_a', { status: 200, body: '{"a":1}' }, T0);
        await expect(store.putInboundAnswer('msg_evt_b', { status: 200, body: '{"b":1}' }, T0)).resolves.toStrictEqual({ stored: true });
        await expect(store.putInboundAnswer('msg_evt_a', FIRST, T0)).resolves.toStrictEqual({ stored: false, answer: { status: 200, body: '{"a":1}' } });
      });

      it('an answer is kept until its expiry (exclusive) and may be stored anew after it', async () => {
        await store.putInboundAnswer('msg_evt_2', FIRST, T0);
        const end = T0 + Limits.pupEventAnswerMs;
        await expect(store.putInboundAnswer('msg_evt_2', { status: 200, body: '{}' }, end - 1)).resolves.toStrictEqual({ stored: false, answer: FIRST });
        await expect(store.putInboundAnswer('msg_evt_2', { status: 200, body: '{}' }, end)).resolves.toStrictEqual({ stored: true });
        await expect(store.putInboundAnswer('msg_evt_2', FIRST, end + 1)).resolves.toStrictEqual({ stored: false, answer: { status: 200, body: '{}' } });
      });

      it('20 concurrent puts of one id: exactly one stores, and every other gets its answer', async () => {
        const results = await Promise.all(
          Array.from({ length: 20 }, (_, i) => store.putInboundAnswer('msg_evt_race', { status: 200, body: `{"n":${i}}` }, T0)),
        );
        const winners = results.flatMap((result, i) => (result.stored ? [i] : []));
        expect(winners).toHaveLength(1);
        const winning = { status: 200, body: `{"n":${winners[0]}}` };
        for (const result of results) if (!result.stored) expect(result.answer).toStrictEqual(winning);
      });
    });

    describe('listEvents (operator-only, read-only)', () => {
      const id = (n: number) => `evt_${n.toString(16).padStart(32, '0')}`;

      it('returns only live event records, newest first, and filters by status', async () => {
        await first(subscription());
        await store.markVerified('some-key', T0);
        await store.claimReplayId('msg_1', T0, 'token', 'POST /pup/challenge');
        await store.putEvent(event({ eventId: id(1), createdAt: T0 }));
        await store.putEvent(event({ eventId: id(2), createdAt: T0 + 2 * SECOND, status: 'failed', attempts: 6, lastError: 'http_5xx' }));
        await store.putEvent(event({ eventId: id(3), createdAt: T0 + SECOND, status: 'delivered', deliveredAt: T0 + SECOND }));
        // Past its own expiry at T0 + 1 h (TTL may not have removed it yet): never listed.
        await store.putEvent(event({ eventId: id(4), createdAt: T0, expiresAt: T0 + HOUR }));

        const all = await store.listEvents(T0 + HOUR);
        expect(all.map((e) => e.eventId)).toEqual([id(2), id(3), id(1)]);
        expect(all[0]).toStrictEqual(event({ eventId: id(2), createdAt: T0 + 2 * SECOND, status: 'failed', attempts: 6, lastError: 'http_5xx' }));
        expect((await store.listEvents(T0 + HOUR, { status: 'failed' })).map((e) => e.eventId)).toEqual([id(2)]);
        expect(await store.listEvents(T0 + HOUR, { status: 'dropped' })).toEqual([]);
        expect((await store.listEvents(T0)).map((e) => e.eventId)).toEqual([id(2), id(3), id(1), id(4)]);
      });

      it('changes nothing it reads', async () => {
        await store.putEvent(event({ eventId: id(1) }));
        const before = await store.getEvent(id(1), T0);
        await store.listEvents(T0);
        await expect(store.getEvent(id(1), T0)).resolves.toStrictEqual(before);
      });
    });

    describe('STORE-IDX-1: the queued index', () => {
      const id = (n: number) => `evt_${n.toString(16).padStart(32, '0')}`;

      it('lists queued records queued before a time, oldest first; a record that leaves queued, or is kept, is never in it', async () => {
        await store.putEvent(event({ eventId: id(1), createdAt: T0 + SECOND }));
        await store.putEvent(event({ eventId: id(2), createdAt: T0 }));
        await store.putEvent(event({ eventId: id(3), createdAt: T0, status: 'kept', inbox: true }));
        await store.putEvent(event({ eventId: id(4), createdAt: T0 }));
        await store.updateEvent(id(4), { status: 'delivered', deliveredAt: T0 }, { status: 'queued' });
        await expect(store.listQueuedBefore!(T0 + 2 * SECOND, 10)).resolves.toStrictEqual([
          { eventId: id(2), queuedSince: T0 },
          { eventId: id(1), queuedSince: T0 + SECOND },
        ]);
        await expect(store.listQueuedBefore!(T0 + SECOND, 10)).resolves.toStrictEqual([{ eventId: id(2), queuedSince: T0 }]);
        await expect(store.listEvents(T0, { status: 'kept' })).resolves.toStrictEqual([event({ eventId: id(3), createdAt: T0, status: 'kept', inbox: true })]);
      });

      it('markRequeued marks a queued record once, only under the lease it read, and restarts its queued time', async () => {
        await store.putEvent(event({ eventId: id(1) }));
        await expect(store.markRequeued!(id(1), 1, T0 + MINUTE, null)).resolves.toBe(false);
        // A lease the record does not hold (a worker took another since): not marked.
        await expect(store.markRequeued!(id(1), 0, T0 + MINUTE, T0)).resolves.toBe(false);
        await expect(store.markRequeued!(id(1), 0, T0 + MINUTE, null)).resolves.toBe(true);
        await expect(store.markRequeued!(id(1), 0, T0 + 2 * MINUTE, null)).resolves.toBe(false);
        await expect(store.getEvent(id(1), T0)).resolves.toMatchObject({ repairedAt: T0 + MINUTE });
        await expect(store.listQueuedBefore!(T0 + 2 * MINUTE, 10)).resolves.toStrictEqual([{ eventId: id(1), queuedSince: T0 + MINUTE }]);
      });
    });

    describe('STORE-IDX-4: the inbox`s pending index', () => {
      const id = (n: number) => `evt_${n.toString(16).padStart(32, '0')}`;
      const sent = (n: number, overrides: Partial<EventRecord> = {}) => event({ eventId: id(n), inbox: true, body: `{"n":${n}}`, ...overrides });

      it('lists live unacknowledged inbox events oldest first (creation time, then id), paged after a position', async () => {
        await store.putEvent(sent(3, { createdAt: T0 + SECOND }));
        await store.putEvent(sent(2, { createdAt: T0 + SECOND }));
        await store.putEvent(sent(1, { createdAt: T0 + 2 * SECOND }));
        await store.putEvent(sent(4, { createdAt: T0, expiresAt: T0 + HOUR }));
        await store.putEvent(event({ eventId: id(5), body: 'not in the inbox' }));
        await store.putEvent(sent(6, { createdAt: T0, status: 'kept' }));
        const ids = (records: EventRecord[]) => records.map((record) => record.eventId);
        await expect(store.listPending(T0 + HOUR, 10).then(ids)).resolves.toStrictEqual([id(6), id(2), id(3), id(1)]);
        await expect(store.listPending(T0, 10).then(ids)).resolves.toStrictEqual([id(4), id(6), id(2), id(3), id(1)]);
        const page = await store.listPending(T0 + HOUR, 2);
        expect(page).toStrictEqual([sent(6, { createdAt: T0, status: 'kept' }), sent(2, { createdAt: T0 + SECOND })]);
        await expect(store.listPending(T0 + HOUR, 2, { createdAt: T0 + SECOND, eventId: id(2) }).then(ids)).resolves.toStrictEqual([id(3), id(1)]);
        await expect(store.listPending(T0 + HOUR, 2, { createdAt: T0 + 2 * SECOND, eventId: id(1) })).resolves.toStrictEqual([]);
      });

      it('a pending event keeps its bytes when it is delivered; any other loses them', async () => {
        await store.putEvent(sent(1));
        await store.putEvent(event({ eventId: id(2), body: 'plain' }));
        const delivered = { status: 'delivered', deliveredAt: T0, body: null } as const;
        for (const n of [1, 2]) await expect(store.updateEvent(id(n), delivered, { status: 'queued' })).resolves.toBe(true);
        await expect(store.getEvent(id(1), T0)).resolves.toStrictEqual(sent(1, { status: 'delivered', deliveredAt: T0 }));
        await expect(store.getEvent(id(2), T0)).resolves.toStrictEqual(event({ eventId: id(2), status: 'delivered', deliveredAt: T0 }));
        // The expectation still guards it: a second commit of the same transition fails.
        await expect(store.updateEvent(id(1), { status: 'delivered', deliveredAt: T0, body: null }, { status: 'queued' })).resolves.toBe(false);
      });

      it('acknowledging records the first time once and takes the event out of the index; its bytes go unless it is queued', async () => {
        await store.putEvent(sent(1, { status: 'delivered', deliveredAt: T0 }));
        await store.putEvent(sent(2));
        await expect(store.acknowledgeEvent(id(1), T0 + SECOND, T0 + SECOND)).resolves.toBe('acknowledged');
        await expect(store.acknowledgeEvent(id(1), T0 + MINUTE, T0 + MINUTE)).resolves.toBe('already');
        const acknowledged = event({ eventId: id(1), inbox: true, status: 'delivered', deliveredAt: T0, acknowledgedAt: T0 + SECOND });
        await expect(store.getEvent(id(1), T0)).resolves.toStrictEqual(acknowledged);
        await expect(store.acknowledgeEvent(id(2), T0 + SECOND, T0 + SECOND)).resolves.toBe('acknowledged');
        await expect(store.getEvent(id(2), T0)).resolves.toStrictEqual(sent(2, { acknowledgedAt: T0 + SECOND }));
        await expect(store.listPending(T0 + SECOND, 10)).resolves.toStrictEqual([]);
        // Delivered after its acknowledgement: now its bytes go, as any delivered event's.
        await store.updateEvent(id(2), { status: 'delivered', deliveredAt: T0 + MINUTE, body: null }, { status: 'queued' });
        await expect(store.getEvent(id(2), T0)).resolves.not.toHaveProperty('body');
      });

      it('acknowledging an unknown or expired event says unknown and creates nothing', async () => {
        await store.putEvent(sent(1, { expiresAt: T0 + HOUR }));
        await expect(store.acknowledgeEvent(id(9), T0, T0)).resolves.toBe('unknown');
        await expect(store.acknowledgeEvent(id(1), T0 + HOUR, T0 + HOUR)).resolves.toBe('unknown');
        await expect(store.getEvent(id(9), T0)).resolves.toBeUndefined();
        await expect(store.listPending(T0, 10)).resolves.toStrictEqual([sent(1, { expiresAt: T0 + HOUR })]);
      });
    });

    describe('STORE-IDEM-1: idempotency keys', () => {
      const record = (overrides: Partial<IdempotencyRecord> = {}): IdempotencyRecord => ({
        eventId: 'evt_0123456789abcdef0123456789abcdef',
        messageHash: 'a'.repeat(64),
        state: 'in_progress',
        createdAt: T0,
        expiresAt: T0 + Limits.idempotencyMemoryMs,
        leaseUntil: T0 + 10 * SECOND,
        ...overrides,
      });

      it('a key is claimed once per caller; the loser gets the stored record from the same write', async () => {
        await expect(store.claimIdempotencyKey('connector', 'k1', record(), T0)).resolves.toStrictEqual({ claimed: true });
        const again = store.claimIdempotencyKey('connector', 'k1', record({ eventId: 'evt_other' }), T0 + SECOND);
        await expect(again).resolves.toStrictEqual({ claimed: false, existing: record() });
        await expect(store.claimIdempotencyKey('billing', 'k1', record({ eventId: 'evt_billing' }), T0)).resolves.toStrictEqual({ claimed: true });
      });

      it('done keeps the record without its lease; release frees the key; both only for the event it names', async () => {
        await store.claimIdempotencyKey('connector', 'k1', record(), T0);
        await store.settleIdempotencyKey('connector', 'k1', 'evt_other', 'done');
        await store.settleIdempotencyKey('connector', 'k1', 'evt_other', 'release');
        await expect(store.claimIdempotencyKey('connector', 'k1', record(), T0)).resolves.toStrictEqual({ claimed: false, existing: record() });
        await store.settleIdempotencyKey('connector', 'k1', record().eventId, 'done');
        const { leaseUntil: _lease, ...done } = record({ state: 'done' });
        await expect(store.claimIdempotencyKey('connector', 'k1', record({ eventId: 'evt_x' }), T0)).resolves.toStrictEqual({ claimed: false, existing: done });
        await store.claimIdempotencyKey('connector', 'k2', record(), T0);
        await store.settleIdempotencyKey('connector', 'k2', record().eventId, 'release');
        await expect(store.claimIdempotencyKey('connector', 'k2', record({ eventId: 'evt_x' }), T0)).resolves.toStrictEqual({ claimed: true });
      });

      it('a key is remembered until its expiry (exclusive), then claimed anew', async () => {
        await store.claimIdempotencyKey('connector', 'k1', record({ state: 'done', leaseUntil: undefined }), T0);
        const at = T0 + Limits.idempotencyMemoryMs;
        await expect(store.claimIdempotencyKey('connector', 'k1', record({ eventId: 'evt_x' }), at - 1)).resolves.toMatchObject({ claimed: false });
        const fresh = record({ eventId: 'evt_x', createdAt: at, expiresAt: at + DAY });
        await expect(store.claimIdempotencyKey('connector', 'k1', fresh, at)).resolves.toStrictEqual({ claimed: true });
      });

      it('a stale in-progress key is retaken once its lease ran out, only by naming its event, and never a done one', async () => {
        await store.claimIdempotencyKey('connector', 'k1', record(), T0);
        const next = record({ eventId: 'evt_next', createdAt: T0 + MINUTE, leaseUntil: T0 + MINUTE + 10 * SECOND });
        // Running until its leaseUntil (sendOnce's reading: held while now < leaseUntil).
        await expect(store.retakeIdempotencyKey('connector', 'k1', record().eventId, next, T0 + 10 * SECOND - 1)).resolves.toBe(false);
        await expect(store.retakeIdempotencyKey('connector', 'k1', 'evt_wrong', next, T0 + MINUTE)).resolves.toBe(false);
        await expect(store.retakeIdempotencyKey('connector', 'k1', record().eventId, next, T0 + MINUTE)).resolves.toBe(true);
        await expect(store.retakeIdempotencyKey('connector', 'k1', record().eventId, next, T0 + MINUTE)).resolves.toBe(false);
        await store.settleIdempotencyKey('connector', 'k1', 'evt_next', 'done');
        await expect(store.retakeIdempotencyKey('connector', 'k1', 'evt_next', record(), T0 + HOUR)).resolves.toBe(false);
      });

      it('20 concurrent claims of one key: exactly one wins, and every other is told its record', async () => {
        const claims = Array.from({ length: 20 }, (_, i) => store.claimIdempotencyKey('connector', 'race', record({ eventId: `evt_${i}` }), T0));
        const results = await Promise.all(claims);
        const winners = results.flatMap((result, i) => (result.claimed ? [i] : []));
        expect(winners).toHaveLength(1);
        for (const result of results) if (!result.claimed) expect(result.existing.eventId).toBe(`evt_${winners[0]}`);
      });
    });
  });
}

export const contractClock = { T0, SECOND, MINUTE, HOUR, DAY } as const;
