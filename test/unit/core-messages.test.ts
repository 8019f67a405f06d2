/**
 * The send use case (SPEC 6.1, 6.2 steps 1-3) against in-memory fakes. The fake clock's sleep
 * advances time, so the delivery wait never waits for real.
 */
import { principalOf, subscriptionIdOf } from '../../lambda/core/identity';
import { buildEvent, sendMessage, type MessageDeps } from '../../lambda/core/messages';
import type { EventRecord, SubscriptionRecord } from '../../lambda/ports';
import { FakeClock, FakeQueue, FakeStore, T0 } from './fakes';

const DAY = 24 * 60 * 60 * 1000;
const PRINCIPAL = principalOf('test-api-key');
const CALLBACK_URL = 'https://dot.example.com/hooks?b=2&a=1';
const SUB_ID = subscriptionIdOf(PRINCIPAL, CALLBACK_URL, 'message.created', {});

function liveSubscription(overrides: Partial<SubscriptionRecord> = {}): SubscriptionRecord {
  return {
    id: SUB_ID,
    url: CALLBACK_URL,
    name: 'message.created',
    secret: `whsec_${Buffer.alloc(32, 1).toString('base64')}`,
    principal: PRINCIPAL,
    createdAt: T0 - DAY,
    refreshedAt: T0 - DAY,
    expiresAt: T0 + DAY,
    ...overrides,
  };
}

function world(options: { subscription?: Partial<SubscriptionRecord> | null; deliveryWaitMs?: number } = {}) {
  const clock = new FakeClock(T0);
  const store = new FakeStore();
  const queue = new FakeQueue();
  if (options.subscription !== null) store.subscription = liveSubscription(options.subscription);
  const deps: MessageDeps = { store, queue, clock, deliveryWaitMs: options.deliveryWaitMs ?? 3_000 };
  return { clock, store, queue, deps };
}

/** A fake delivery worker: once the clock reaches `at`, it settles the only event with `patch`. */
function workerSettles(store: FakeStore, clock: FakeClock, at: number, patch: Partial<EventRecord>): void {
  store.before.getEvent = (eventId) => {
    const event = store.events.get(eventId as string);
    if (event && clock.now() >= at) Object.assign(event, patch);
  };
}

const onlyEvent = (store: FakeStore): EventRecord => {
  const events = [...store.events.values()];
  expect(events).toHaveLength(1);
  return events[0]!;
};

describe('buildEvent', () => {
  const EVENT_ID = 'evt_0123456789abcdef0123456789abcdef';

  test('is exactly the SPEC 6.1 envelope, in order, serialized compactly', () => {
    expect(buildEvent(EVENT_ID, 'hi', T0)).toBe(
      '{"eventId":"evt_0123456789abcdef0123456789abcdef","name":"message.created","timestamp":"2026-11-03T10:30:00.123Z","data":{"message":"hi"},"cursor":null}',
    );
  });

  test('has no top-level type (that marks control envelopes)', () => {
    const event = JSON.parse(buildEvent(EVENT_ID, 'hi', T0)) as Record<string, unknown>;
    expect(Object.keys(event).sort()).toEqual(['cursor', 'data', 'eventId', 'name', 'timestamp']);
    expect('type' in event).toBe(false);
  });

  test('the timestamp is when the event was built, ISO 8601 UTC', () => {
    const event = JSON.parse(buildEvent(EVENT_ID, 'hi', T0 + 5)) as { timestamp: string };
    expect(event.timestamp).toBe(new Date(T0 + 5).toISOString());
  });

  test('the message round-trips byte for byte, quotes and multibyte characters included', () => {
    const message = 'say "héllo" \\ 😀\nline two';
    const event = JSON.parse(buildEvent(EVENT_ID, message, T0)) as { data: { message: string } };
    expect(event.data).toEqual({ message });
  });
});

describe('sendMessage', () => {
  test('invalid input is refused with no store access and nothing queued', async () => {
    const { store, queue, deps } = world();
    const outcome = await sendMessage(deps, { message: '   ' });
    expect(outcome.kind).toBe('invalid');
    expect(store.calls).toEqual([]);
    expect(queue.jobs).toEqual([]);
  });

  test('extra arguments are refused with no store writes', async () => {
    const { store, queue, deps } = world();
    expect((await sendMessage(deps, { message: 'hi', urgent: true })).kind).toBe('invalid');
    expect(store.writes).toEqual([]);
    expect(queue.jobs).toEqual([]);
  });

  test('no subscription: no_subscription, with no event recorded and nothing queued', async () => {
    const { store, queue, deps } = world({ subscription: null });
    await expect(sendMessage(deps, { message: 'hi' })).resolves.toEqual({ kind: 'no_subscription' });
    expect(store.writes).toEqual([]);
    expect(queue.jobs).toEqual([]);
  });

  test('an expired subscription counts as none', async () => {
    const { queue, deps } = world({ subscription: { expiresAt: T0 - 1 } });
    await expect(sendMessage(deps, { message: 'hi' })).resolves.toEqual({ kind: 'no_subscription' });
    expect(queue.jobs).toEqual([]);
  });

  test('records the event as queued before enqueueing it', async () => {
    const { store, queue, deps } = world({ deliveryWaitMs: 0 });
    let statusAtEnqueue: string | undefined;
    queue.onEnqueue = (job) => {
      statusAtEnqueue = store.events.get(job.eventId)?.status;
    };
    const outcome = await sendMessage(deps, { message: 'hi' });
    expect(statusAtEnqueue).toBe('queued');
    const event = onlyEvent(store);
    expect(outcome).toEqual({ kind: 'queued', eventId: event.eventId });
    expect(event).toEqual({ eventId: event.eventId, status: 'queued', subscriptionId: SUB_ID, attempts: 0, createdAt: T0, expiresAt: T0 + 7 * DAY });
  });

  test('the job carries the event id, the subscription id and the exact event bytes of the trimmed message', async () => {
    const { queue, deps } = world({ deliveryWaitMs: 0 });
    const outcome = await sendMessage(deps, { message: '  hello dot \n' });
    expect(queue.jobs).toHaveLength(1);
    const job = queue.jobs[0]!;
    expect(outcome).toMatchObject({ eventId: job.eventId });
    expect(job.eventId).toMatch(/^evt_[0-9a-f]{32}$/);
    expect(job.subscriptionId).toBe(SUB_ID);
    expect(job.body).toBe(buildEvent(job.eventId, 'hello dot', T0));
  });

  test('delivered when the worker marks the event delivered within the wait', async () => {
    const { store, clock, deps } = world();
    workerSettles(store, clock, T0 + 450, { status: 'delivered', deliveredAt: T0 + 450 });
    const outcome = await sendMessage(deps, { message: 'hi' });
    expect(outcome).toEqual({ kind: 'delivered', eventId: onlyEvent(store).eventId });
    expect(clock.now()).toBeLessThan(T0 + 3_000);
  });

  test('delivered at once when the worker is done before the first poll: no sleep at all', async () => {
    const { store, clock, queue, deps } = world();
    queue.onEnqueue = (job) => void Object.assign(store.events.get(job.eventId)!, { status: 'delivered' });
    await expect(sendMessage(deps, { message: 'hi' })).resolves.toMatchObject({ kind: 'delivered' });
    expect(clock.sleeps).toEqual([]);
  });

  test('queued when nothing happens within deliveryWaitMs (the fake clock advances exactly that long)', async () => {
    const { store, clock, deps } = world({ deliveryWaitMs: 3_000 });
    const outcome = await sendMessage(deps, { message: 'hi' });
    expect(outcome).toEqual({ kind: 'queued', eventId: onlyEvent(store).eventId });
    expect(clock.now() - T0).toBe(3_000);
  });

  test('polls about every 100 ms with consistent reads of the event', async () => {
    const { store, clock, deps } = world({ deliveryWaitMs: 1_000 });
    await sendMessage(deps, { message: 'hi' });
    expect(clock.sleeps.every((ms) => ms > 0 && ms <= 100)).toBe(true);
    expect(store.callsOf('getEvent').length).toBeGreaterThanOrEqual(10);
  });

  test('the wait is capped so a request never runs past 5 s', async () => {
    const { clock, deps } = world({ deliveryWaitMs: 60_000 });
    await expect(sendMessage(deps, { message: 'hi' })).resolves.toMatchObject({ kind: 'queued' });
    expect(clock.now() - T0).toBeLessThan(5_000);
  });

  test('a wait of 0 reports queued after a single look', async () => {
    const { store, clock, deps } = world({ deliveryWaitMs: 0 });
    await expect(sendMessage(deps, { message: 'hi' })).resolves.toMatchObject({ kind: 'queued' });
    expect(clock.sleeps).toEqual([]);
    expect(store.callsOf('getEvent')).toHaveLength(1);
  });

  test('failed with its reason when the worker marks the event failed', async () => {
    const { store, clock, deps } = world();
    workerSettles(store, clock, T0 + 200, { status: 'failed', lastError: 'http_4xx', lastHttpStatus: 410 });
    const outcome = await sendMessage(deps, { message: 'hi' });
    expect(outcome).toEqual({ kind: 'failed', eventId: onlyEvent(store).eventId, reason: 'http_4xx' });
  });

  test('failed with no reason when the event was dropped', async () => {
    const { store, clock, deps } = world();
    workerSettles(store, clock, T0, { status: 'dropped' });
    const outcome = await sendMessage(deps, { message: 'hi' });
    expect(outcome).toEqual({ kind: 'failed', eventId: onlyEvent(store).eventId, reason: null });
  });

  test('a failing read while waiting does not undo the accepted event: it is reported queued', async () => {
    const { store, deps } = world({ deliveryWaitMs: 500 });
    store.failing.add('getEvent');
    await expect(sendMessage(deps, { message: 'hi' })).resolves.toMatchObject({ kind: 'queued' });
  });

  test('storage failure reading the subscription: unavailable storage, nothing queued', async () => {
    const { store, queue, deps } = world();
    store.failing.add('getSubscription');
    const outcome = await sendMessage(deps, { message: 'hi' });
    expect(outcome).toMatchObject({ kind: 'unavailable', dependency: 'storage' });
    expect(outcome).not.toHaveProperty('eventId');
    expect(queue.jobs).toEqual([]);
  });

  test('storage failure recording the event: unavailable storage, nothing queued', async () => {
    const { store, queue, deps } = world();
    store.failing.add('putEvent');
    const outcome = await sendMessage(deps, { message: 'hi' });
    expect(outcome).toMatchObject({ kind: 'unavailable', dependency: 'storage' });
    expect(queue.jobs).toEqual([]);
  });

  test('queue failure: unavailable queue with the event id, and the record marked failed', async () => {
    const { store, queue, deps } = world();
    queue.fail = true;
    const outcome = await sendMessage(deps, { message: 'hi' });
    const event = onlyEvent(store);
    expect(outcome).toMatchObject({ kind: 'unavailable', dependency: 'queue', eventId: event.eventId });
    expect(event.status).toBe('failed');
  });

  test('queue failure with storage failing too still reports unavailable queue with the event id', async () => {
    const { store, queue, deps } = world();
    queue.fail = true;
    store.failing.add('updateEvent');
    await expect(sendMessage(deps, { message: 'hi' })).resolves.toMatchObject({ kind: 'unavailable', dependency: 'queue', eventId: expect.stringMatching(/^evt_[0-9a-f]{32}$/) });
  });

  test('every send gets a fresh event id', async () => {
    const { queue, deps } = world({ deliveryWaitMs: 0 });
    await sendMessage(deps, { message: 'one' });
    await sendMessage(deps, { message: 'two' });
    expect(queue.jobs[0]!.eventId).not.toBe(queue.jobs[1]!.eventId);
  });
});

describe('buildEvent and characters queues refuse', () => {
  test('U+FFFE and U+FFFF are written as \\u escapes; the parsed message is unchanged', () => {
    const json = buildEvent('evt_00000000000000000000000000000000', 'a\uFFFEb\uFFFF', 0);
    expect(json).not.toMatch(/[\uFFFE\uFFFF]/);
    expect(json).toContain('a\\ufffeb\\uffff');
    expect(JSON.parse(json).data.message).toBe('a\uFFFEb\uFFFF');
  });
});
