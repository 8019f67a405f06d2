/**
 * The operator's actions (lambda/operator/actions.ts) over the in-memory FakeStore and the
 * outbox AWS uses (test/support/fakes.ts): show and clear the subscription (CLI-6: a clear
 * confirmed for one id never removes another), the delivery log with its status filter and its
 * counts (CLI-4, CLI-7), one event with its attempt log (CLI-5), and resend (CLI-5: the same
 * event id and the very same bytes, queued again for the subscription that is live now, with
 * one compare-and-set). No view an action returns ever carries the subscription's secret.
 */
import { DependencyUnavailable } from '../../../lambda/core/errors';
import { EventStatus } from '../../../lambda/core/protocol';
import { clearSubscription, eventCounts, listEventViews, resendEvent, showEvent, showSubscription } from '../../../lambda/operator/actions';
import type { EventRecord, SubscriptionRecord } from '../../../lambda/ports';
import { fakeOutbox, FakeQueue, FakeStore, T0 } from '../../support/fakes';

const SECOND = 1000;
const DAY = 24 * 3600 * SECOND;
const NOW = T0 + 60 * SECOND;

const SECRET = 'whsec_c2VjcmV0LW9mLXRoZS1zdWJzY3JpcHRpb24tMDEyMzQ1Njc4OQ==';
const PREVIOUS_SECRET = 'whsec_cHJldmlvdXMtc2VjcmV0LW9mLXRoZS1zdWJzY3JpcHRpb24=';

function subscription(overrides: Partial<SubscriptionRecord> = {}): SubscriptionRecord {
  return {
    id: 'sub_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa',
    generation: 'gen-a',
    url: 'https://dot-a.example/hook?token=t0k3n',
    name: 'message.created',
    secret: SECRET,
    previousSecret: PREVIOUS_SECRET,
    previousSecretUntil: T0 + 600 * SECOND,
    principal: 'principal-a',
    createdAt: T0,
    refreshedAt: T0,
    expiresAt: T0 + 7 * DAY,
    ...overrides,
  };
}

const SUB_B = { id: 'sub_bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb', generation: 'gen-b', url: 'https://dot-b.example/hook' } as const;

const id = (n: number) => `evt_${n.toString(16).padStart(32, '0')}`;

/** Bytes with characters that any re-serialization would change: escapes, non-ASCII, key order. */
const bodyOf = (n: number) =>
  `{"eventId":"${id(n)}","name":"message.created","timestamp":"2026-11-03T10:30:00.123Z","data":{"message":"h\\u00e9llo \u00e9 \u2603 \\"q\\""},"cursor":null}`;

function event(n: number, overrides: Partial<EventRecord> = {}): EventRecord {
  return {
    eventId: id(n),
    status: EventStatus.failed,
    subscriptionId: 'sub_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa',
    generation: 'gen-a',
    attempts: 6,
    lastError: 'http_5xx',
    lastHttpStatus: 503,
    createdAt: T0 + n * SECOND,
    expiresAt: T0 + 15 * DAY,
    body: bodyOf(n),
    log: [{ at: T0 + n * SECOND, outcome: 'http_5xx', statusClass: '5xx', durationMs: 40, counted: true }],
    ...overrides,
  };
}

let store: FakeStore;
let queue: FakeQueue;
const deps = () => ({ store, outbox: fakeOutbox(store, queue) });

beforeEach(() => {
  store = new FakeStore();
  queue = new FakeQueue();
});

const put = (...records: EventRecord[]) => {
  for (const record of records) store.events.set(record.eventId, structuredClone(record));
};

function expectNoSecret(value: unknown): void {
  const json = JSON.stringify(value);
  expect(json).not.toContain(SECRET);
  expect(json).not.toContain(PREVIOUS_SECRET);
  expect(json).not.toContain('whsec_');
}

describe('showSubscription', () => {
  it('CLI-6: shows the live subscription as its view, without the secret or the callback’s path and query', async () => {
    store.subscription = subscription();
    const view = await showSubscription(store, NOW);
    expect(view).toMatchObject({ id: 'sub_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa', callbackHost: 'dot-a.example' });
    expectNoSecret(view);
    expect(JSON.stringify(view)).not.toContain('t0k3n');
  });

  it('is null when there is none, and null at and after its expiry (STORE-2: expired is absent)', async () => {
    await expect(showSubscription(store, NOW)).resolves.toBeNull();
    store.subscription = subscription({ expiresAt: NOW });
    await expect(showSubscription(store, NOW)).resolves.toBeNull();
    await expect(showSubscription(store, NOW - 1)).resolves.not.toBeNull();
  });

  it('only reads', async () => {
    store.subscription = subscription();
    await showSubscription(store, NOW);
    expect(store.writes).toEqual([]);
  });
});

describe('clearSubscription', () => {
  it('CLI-6: clears the live subscription and says which one', async () => {
    store.subscription = subscription();
    await expect(clearSubscription(store, NOW)).resolves.toStrictEqual({ cleared: true, id: 'sub_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa' });
    expect(store.subscription).toBeUndefined();
    // STORE-11: the delete is conditional on the URL that was read.
    expect(store.callsOf('deleteSubscription').map((call) => call.args)).toStrictEqual([['https://dot-a.example/hook?token=t0k3n']]);
  });

  it('with the id the operator confirmed, clears it', async () => {
    store.subscription = subscription();
    await expect(clearSubscription(store, NOW, 'sub_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa')).resolves.toStrictEqual({
      cleared: true,
      id: 'sub_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa',
    });
    expect(store.subscription).toBeUndefined();
  });

  it('CLI-6: with an expected id that no longer matches (another dot subscribed since), the new one is not cleared', async () => {
    store.subscription = subscription({ ...SUB_B });
    await expect(clearSubscription(store, NOW, 'sub_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa')).resolves.toStrictEqual({ cleared: false, id: SUB_B.id });
    expect(store.subscription?.id).toBe(SUB_B.id);
    expect(store.callsOf('deleteSubscription')).toEqual([]);
    expect(store.writes).toEqual([]);
  });

  it('STORE-11: a subscription that replaces the one read, between the read and the delete, is left alone', async () => {
    store.subscription = subscription();
    store.before.deleteSubscription = () => {
      store.subscription = subscription({ ...SUB_B });
    };
    await expect(clearSubscription(store, NOW, 'sub_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa')).resolves.toStrictEqual({
      cleared: false,
      id: 'sub_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa',
    });
    expect(store.subscription?.id).toBe(SUB_B.id);
  });

  it('with nothing live, nothing is deleted, not even an expired item', async () => {
    await expect(clearSubscription(store, NOW)).resolves.toStrictEqual({ cleared: false, id: null });
    store.subscription = subscription({ expiresAt: NOW - 1 });
    await expect(clearSubscription(store, NOW, 'sub_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa')).resolves.toStrictEqual({ cleared: false, id: null });
    expect(store.subscription).toBeDefined();
    expect(store.callsOf('deleteSubscription')).toEqual([]);
  });
});

describe('the delivery log', () => {
  beforeEach(() => {
    put(
      event(1, { status: EventStatus.delivered, attempts: 1, lastError: null, lastHttpStatus: 200, deliveredAt: T0 + 2 * SECOND, body: undefined }),
      event(2, { status: EventStatus.queued, attempts: 0, lastError: null, lastHttpStatus: null }),
      event(3, { status: EventStatus.failed }),
      event(4, { status: EventStatus.dropped, attempts: 0, lastError: null, lastHttpStatus: null }),
      event(5, { status: EventStatus.failed, lastError: 'http_4xx', lastHttpStatus: 404 }),
      // Expired: reads as absent everywhere.
      event(6, { status: EventStatus.failed, expiresAt: NOW }),
    );
  });

  it('CLI-4: lists every live event, newest first, as views without the kept bytes', async () => {
    const views = await listEventViews(store, NOW);
    expect(views.map((view) => view.eventId)).toStrictEqual([id(5), id(4), id(3), id(2), id(1)]);
    expect(views[4]).toStrictEqual({
      eventId: id(1),
      status: 'delivered',
      attempts: 1,
      lastError: null,
      lastHttpStatus: 200,
      createdAt: new Date(T0 + SECOND).toISOString(),
      deliveredAt: new Date(T0 + 2 * SECOND).toISOString(),
      sender: null,
      acknowledgedAt: null,
    });
    const json = JSON.stringify(views);
    expect(json).not.toContain('message.created');
    expectNoSecret(views);
  });

  it.each([
    [EventStatus.failed, [5, 3]],
    [EventStatus.queued, [2]],
    [EventStatus.delivered, [1]],
    [EventStatus.dropped, [4]],
  ])('CLI-4: the status filter %s lists only those', async (status, expected) => {
    const views = await listEventViews(store, NOW, status);
    expect(views.map((view) => view.eventId)).toStrictEqual(expected.map(id));
    expect(views.every((view) => view.status === status)).toBe(true);
    expect(store.callsOf('listEvents').at(-1)?.args).toStrictEqual([NOW, { status }]);
  });

  it('no filter is passed when none is asked for', async () => {
    await listEventViews(store, NOW);
    expect(store.callsOf('listEvents')[0]?.args).toStrictEqual([NOW, {}]);
  });

  it('CLI-7: counts the live events of each status, every status present', async () => {
    await expect(eventCounts(store, NOW)).resolves.toStrictEqual({ queued: 1, delivered: 1, failed: 2, dropped: 1, kept: 0 });
  });

  it('CLI-7: counts an event kept in the inbox as kept', async () => {
    put(event(7, { status: EventStatus.kept, attempts: 0, lastError: null, lastHttpStatus: null }));
    await expect(eventCounts(store, NOW)).resolves.toMatchObject({ kept: 1, queued: 1 });
  });

  it('counts zeros for an empty log', async () => {
    await expect(eventCounts(new FakeStore(), NOW)).resolves.toStrictEqual({ queued: 0, delivered: 0, failed: 0, dropped: 0, kept: 0 });
  });

  it('reading the log writes nothing', async () => {
    await listEventViews(store, NOW);
    await listEventViews(store, NOW, EventStatus.failed);
    await eventCounts(store, NOW);
    await showEvent(store, NOW, id(3));
    expect(store.writes).toEqual([]);
  });
});

describe('showEvent', () => {
  it('CLI-5: shows the event with its attempt log and whether it can be resent', async () => {
    put(
      event(3, {
        log: [
          { at: T0, outcome: 'timeout', statusClass: null, durationMs: 3000, counted: false },
          { at: T0 + 4 * SECOND, outcome: 'http_5xx', statusClass: '5xx', durationMs: 40, counted: true },
          { at: T0 + 30 * SECOND, note: 'redriven' },
        ],
      }),
    );
    const detail = await showEvent(store, NOW, id(3));
    expect(detail).toMatchObject({ eventId: id(3), status: 'failed', attempts: 6, lastError: 'http_5xx', lastHttpStatus: 503, resendable: true });
    expect(detail?.log).toStrictEqual([
      { at: new Date(T0).toISOString(), kind: 'attempt', outcome: 'timeout', statusClass: null, durationMs: 3000, counted: false },
      { at: new Date(T0 + 4 * SECOND).toISOString(), kind: 'attempt', outcome: 'http_5xx', statusClass: '5xx', durationMs: 40, counted: true },
      { at: new Date(T0 + 30 * SECOND).toISOString(), kind: 'note', note: 'redriven' },
    ]);
    expect(JSON.stringify(detail)).not.toContain('message.created');
  });

  it('is null for an unknown event and for an expired one', async () => {
    put(event(6, { expiresAt: NOW }));
    await expect(showEvent(store, NOW, id(7))).resolves.toBeNull();
    await expect(showEvent(store, NOW, id(6))).resolves.toBeNull();
  });
});

describe('resendEvent', () => {
  it('CLI-5: the same event id and the same bytes, queued again for the live subscription', async () => {
    store.subscription = subscription({ ...SUB_B });
    put(event(3));
    await expect(resendEvent(deps(), NOW, id(3))).resolves.toStrictEqual({ resent: true, eventId: id(3), subscriptionId: SUB_B.id });

    // The job: byte for byte the kept body, under the live subscription and its generation, at once.
    expect(queue.jobs).toStrictEqual([{ eventId: id(3), subscriptionId: SUB_B.id, generation: SUB_B.generation, body: bodyOf(3) }]);
    expect(Buffer.from(queue.jobs[0]!.body, 'utf8').equals(Buffer.from(bodyOf(3), 'utf8'))).toBe(true);
    expect(queue.delays).toStrictEqual([undefined]);

    // The record: queued again with a fresh round of the schedule, its bytes kept, the resend noted.
    const record = store.events.get(id(3))!;
    expect(record).toMatchObject({
      eventId: id(3),
      status: 'queued',
      attempts: 0,
      lastError: null,
      notBefore: NOW,
      subscriptionId: SUB_B.id,
      generation: SUB_B.generation,
      body: bodyOf(3),
      createdAt: event(3).createdAt,
    });
    expect(record.log).toStrictEqual([...event(3).log!, { at: NOW, note: 'resent' }]);
  });

  it('one compare-and-set from the status and attempt count just read', async () => {
    store.subscription = subscription();
    put(event(3));
    await resendEvent(deps(), NOW, id(3));
    const updates = store.callsOf('updateEvent');
    // The compare-and-set, then the log's note once the job is out (the outbox's second write).
    expect(updates).toHaveLength(2);
    expect(updates[0]?.args[2]).toStrictEqual({ status: 'failed', attempts: 6 });
  });

  it('a dropped event can be resent too', async () => {
    store.subscription = subscription();
    put(event(4, { status: EventStatus.dropped, attempts: 0, lastError: null }));
    await expect(resendEvent(deps(), NOW, id(4))).resolves.toMatchObject({ resent: true, eventId: id(4) });
    expect(store.events.get(id(4))?.status).toBe('queued');
    expect(queue.jobs.map((job) => job.body)).toStrictEqual([bodyOf(4)]);
  });

  it('afterwards the event shows the resend, and is no longer resendable until it settles', async () => {
    store.subscription = subscription();
    put(event(3));
    await resendEvent(deps(), NOW, id(3));
    const detail = await showEvent(store, NOW, id(3));
    expect(detail).toMatchObject({ status: 'queued', attempts: 0, lastError: null, resendable: false });
    expect(detail?.log.at(-1)).toStrictEqual({ at: new Date(NOW).toISOString(), kind: 'note', note: 'resent' });
    await expect(resendEvent(deps(), NOW, id(3))).resolves.toStrictEqual({ resent: false, eventId: id(3), why: 'not_settled' });
    expect(queue.jobs).toHaveLength(1);
  });

  it('a subscription from before generations: the job carries none', async () => {
    const { generation: _none, ...legacy } = subscription();
    store.subscription = legacy;
    put(event(3));
    await resendEvent(deps(), NOW, id(3));
    expect(queue.jobs[0]).toStrictEqual({ eventId: id(3), subscriptionId: legacy.id, body: bodyOf(3) });
    expect('generation' in queue.jobs[0]!).toBe(false);
  });

  const refusals: Array<[why: string, what: string, arrange: () => void]> = [
    ['not_found', 'an unknown event', () => undefined],
    ['not_found', 'an expired event', () => put(event(3, { expiresAt: NOW }))],
    ['delivered', 'a delivered event', () => put(event(3, { status: EventStatus.delivered, body: undefined }))],
    ['not_settled', 'a queued event', () => put(event(3, { status: EventStatus.queued }))],
    ['no_bytes', 'a failed event whose bytes are gone', () => put(event(3, { body: undefined }))],
    ['no_bytes', 'a dropped event whose bytes are gone', () => put(event(3, { status: EventStatus.dropped, body: undefined }))],
  ];

  it.each(refusals)('refuses (%s) %s, and changes and queues nothing', async (why, _what, arrange) => {
    store.subscription = subscription();
    arrange();
    const before = structuredClone([...store.events.entries()]);
    await expect(resendEvent(deps(), NOW, id(3))).resolves.toStrictEqual({ resent: false, eventId: id(3), why });
    expect(store.writes).toEqual([]);
    expect(queue.jobs).toEqual([]);
    expect([...store.events.entries()]).toStrictEqual(before);
  });

  it('refuses (no_subscription) when no dot is subscribed now, and changes nothing', async () => {
    put(event(3));
    store.subscription = subscription({ expiresAt: NOW });
    await expect(resendEvent(deps(), NOW, id(3))).resolves.toStrictEqual({ resent: false, eventId: id(3), why: 'no_subscription' });
    expect(store.writes).toEqual([]);
    expect(queue.jobs).toEqual([]);
    expect(store.events.get(id(3))).toStrictEqual(event(3));
  });

  it('refuses (changed) when the event moved between the read and the write, and queues nothing', async () => {
    store.subscription = subscription();
    put(event(3));
    // A redrive (or another operator) gets there first.
    store.before.updateEvent = () => {
      store.events.get(id(3))!.attempts = 7;
    };
    await expect(resendEvent(deps(), NOW, id(3))).resolves.toStrictEqual({ resent: false, eventId: id(3), why: 'changed' });
    expect(queue.jobs).toEqual([]);
    expect(store.events.get(id(3))).toMatchObject({ status: 'failed', attempts: 7 });
  });

  it('a queue that cannot take the job: DependencyUnavailable(queue) naming the event, and the record is failed again, not queued', async () => {
    store.subscription = subscription();
    put(event(3));
    queue.fail = true;
    const error = await resendEvent(deps(), NOW, id(3)).then(
      () => undefined,
      (caught: unknown) => caught,
    );
    expect(error).toBeInstanceOf(DependencyUnavailable);
    expect(error).toMatchObject({ dependency: 'queue', eventId: id(3) });
    expect(store.events.get(id(3))?.status).toBe('failed');
    // So the operator can simply try again once the queue is back.
    queue.fail = false;
    await expect(resendEvent(deps(), NOW + SECOND, id(3))).resolves.toMatchObject({ resent: true });
    expect(queue.jobs).toHaveLength(1);
  });

  it('nothing a resend returns carries a secret', async () => {
    store.subscription = subscription();
    put(event(3));
    const results = [await resendEvent(deps(), NOW, id(3)), await resendEvent(deps(), NOW, id(9))];
    expectNoSecret(results);
  });
});

describe('no view an action returns ever shows the secret', () => {
  it('across every action', async () => {
    store.subscription = subscription();
    put(event(1, { status: EventStatus.delivered, body: undefined }), event(3), event(4, { status: EventStatus.dropped }));
    const everything = [
      await showSubscription(store, NOW),
      await listEventViews(store, NOW),
      await listEventViews(store, NOW, EventStatus.failed),
      await eventCounts(store, NOW),
      await showEvent(store, NOW, id(3)),
      await showEvent(store, NOW, id(1)),
      await resendEvent(deps(), NOW, id(3)),
      await showEvent(store, NOW, id(3)),
      await clearSubscription(store, NOW, 'sub_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa'),
    ];
    expectNoSecret(everything);
    expect(JSON.stringify(everything)).not.toContain('principal-a');
  });
});
