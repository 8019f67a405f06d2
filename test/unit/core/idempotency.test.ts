/**
 * Idempotency keys (docs/contract/http.md, IDEM-*) as a use case: `sendOnce` over the in-memory
 * store, outbox and a scripted dot. The fake clock only moves when a test moves it.
 */
import { checkIdempotencyKey, sendOnce, type IdempotencyDeps } from '../../../lambda/core/idempotency';
import { sha256Hex } from '../../../lambda/core/identity';
import { IDEMPOTENCY_LEASE_MS, Limits } from '../../../lambda/core/protocol';
import { liveSubscription } from '../../support/app';
import { fakeOutbox, FakeClock, FakeQueue, FakeStore, respond, ScriptedWebhookClient, T0, type Scripted } from '../../support/fakes';

function world(options: { subscribed?: boolean; answers?: Scripted[]; deliveryWaitMs?: number; inbox?: boolean } = {}) {
  const clock = new FakeClock(T0);
  const store = new FakeStore();
  const queue = new FakeQueue();
  const webhook = new ScriptedWebhookClient(...(options.answers ?? []));
  if (options.subscribed !== false) store.subscription = liveSubscription();
  const warnings: string[] = [];
  const deps: IdempotencyDeps = {
    store,
    outbox: fakeOutbox(store, queue),
    clock,
    webhook,
    retryDelaysS: [1, 4, 30, 120, 600],
    deliveryWaitMs: options.deliveryWaitMs ?? 0,
    idempotency: store,
    ...(options.inbox ? { inbox: store } : {}),
    log: { info: () => undefined, warn: (event) => void warnings.push(event), error: () => undefined },
  };
  return { clock, store, queue, webhook, deps, warnings };
}

const ALICE = { sender: 'alice' };

describe('IDEM-1: the key as the header carries it', () => {
  test.each([
    ['a', 'a'],
    ['8e03978e-40d5-43e8-bc93-6894a57f9324', '8e03978e-40d5-43e8-bc93-6894a57f9324'],
    ['with inner space', 'with inner space'],
    ["~!#$%&'()*+,-./:;<=>?@[]^_`{|}", "~!#$%&'()*+,-./:;<=>?@[]^_`{|}"],
    ['"quoted"', 'quoted'],
    ['"a \\"b\\" \\\\ c"', 'a "b" \\ c'],
    ['x'.repeat(255), 'x'.repeat(255)],
    [`"${'y'.repeat(255)}"`, 'y'.repeat(255)],
  ])('%j is the key %j', (raw, key) => {
    expect(checkIdempotencyKey(raw)).toEqual({ ok: true, key });
  });

  test.each([
    ['', /empty/],
    ['""', /empty/],
    ['x'.repeat(256), /256 characters; the limit is 255/],
    [`"${'y'.repeat(256)}"`, /256 characters/],
    ['café', /printable ASCII/],
    ['tab\there', /printable ASCII/],
    ['nul\u0000', /printable ASCII/],
    ['emoji 🙂', /printable ASCII/],
    ['del\u007f', /printable ASCII/],
    ['"bad " quote"', /escaped/],
    ['"bad \\x escape"', /escaped/],
    ['"trailing \\"', /escaped/],
  ])('%j is refused: %s', (raw, why) => {
    const checked = checkIdempotencyKey(raw);
    expect(checked.ok).toBe(false);
    if (!checked.ok) expect(checked.error).toMatch(why);
  });

  test('a refused key claims nothing and records nothing', async () => {
    const { deps, store, queue } = world();
    for (const raw of ['', 'x'.repeat(256), 'ключ']) {
      expect(await sendOnce(deps, { message: 'hi' }, ALICE, raw)).toEqual({ kind: 'invalid_key', error: expect.stringMatching(/Invalid Idempotency-Key/) });
    }
    expect(store.writes).toEqual([]);
    expect(store.events.size).toBe(0);
    expect(queue.jobs).toEqual([]);
  });
});

describe('IDEM-3, IDEM-4: one event per key and message', () => {
  test('the first request claims the key under the event id it makes, and settles it done', async () => {
    const { deps, store, queue } = world();
    const first = await sendOnce(deps, { message: '  hello  ' }, ALICE, 'k1');
    expect(first.kind).toBe('queued');
    const eventId = (first as { eventId: string }).eventId;
    expect(store.events.has(eventId)).toBe(true);
    expect(queue.jobs).toHaveLength(1);
    const held = store.idempotencyKeys.get('alice\u0000k1')!;
    expect(held).toEqual({ eventId, messageHash: sha256Hex('hello'), state: 'done', createdAt: T0, expiresAt: T0 + Limits.idempotencyMemoryMs });
  });

  test('a repeat (same key, same trimmed message) makes no event and no job, and answers the event`s current status', async () => {
    const { deps, store, queue, clock } = world();
    const first = (await sendOnce(deps, { message: 'hello' }, ALICE, 'k1')) as { kind: string; eventId: string };
    clock.advance(1000);
    const again = await sendOnce(deps, { message: 'hello ' }, ALICE, 'k1');
    expect(again).toEqual({ kind: 'queued', eventId: first.eventId });
    expect(store.events.size).toBe(1);
    expect(queue.jobs).toHaveLength(1);
    // The event moves on; the repeat reports where it is now.
    await store.updateEvent(first.eventId, { status: 'delivered', deliveredAt: clock.now() });
    expect(await sendOnce(deps, { message: 'hello' }, ALICE, 'k1')).toEqual({ kind: 'delivered', eventId: first.eventId });
    await store.updateEvent(first.eventId, { status: 'failed', lastError: 'http_4xx' });
    expect(await sendOnce(deps, { message: 'hello' }, ALICE, 'k1')).toEqual({ kind: 'failed', eventId: first.eventId, reason: 'http_4xx' });
    expect(store.events.size).toBe(1);
  });

  test('a repeat of a delivered send makes no second POST', async () => {
    const { deps, webhook } = world({ deliveryWaitMs: 3000, answers: [respond(200)] });
    const first = await sendOnce(deps, { message: 'once' }, ALICE, 'k');
    expect(first.kind).toBe('delivered');
    expect(await sendOnce(deps, { message: 'once' }, ALICE, 'k')).toEqual(first);
    expect(webhook.requests).toHaveLength(1);
  });

  test('the key is remembered 24 hours: after that, the same key makes a new event', async () => {
    const { deps, store, clock } = world();
    const first = (await sendOnce(deps, { message: 'hello' }, ALICE, 'k1')) as { eventId: string };
    clock.advance(Limits.idempotencyMemoryMs - 1);
    expect(await sendOnce(deps, { message: 'hello' }, ALICE, 'k1')).toMatchObject({ eventId: first.eventId });
    clock.advance(1);
    const later = (await sendOnce(deps, { message: 'hello' }, ALICE, 'k1')) as { eventId: string };
    expect(later.eventId).not.toBe(first.eventId);
    expect(store.events.size).toBe(2);
  });

  test('INBOX-5: a repeat of a kept send answers kept', async () => {
    const { deps } = world({ subscribed: false, inbox: true });
    const first = await sendOnce(deps, { message: 'while away' }, ALICE, 'k');
    expect(first.kind).toBe('kept');
    expect(await sendOnce(deps, { message: 'while away' }, ALICE, 'k')).toEqual(first);
  });
});

describe('IDEM-2: keys are scoped to the caller', () => {
  test('another caller`s same key makes its own event', async () => {
    const { deps, store } = world();
    const a = (await sendOnce(deps, { message: 'same' }, ALICE, 'shared')) as { eventId: string };
    const b = (await sendOnce(deps, { message: 'same' }, { sender: 'bob' }, 'shared')) as { eventId: string };
    const c = (await sendOnce(deps, { message: 'same' }, { sender: 'connector' }, 'shared')) as { eventId: string };
    expect(new Set([a.eventId, b.eventId, c.eventId]).size).toBe(3);
    expect(store.events.size).toBe(3);
    expect([...store.events.values()].map((e) => e.sender).sort()).toEqual(['alice', 'bob', 'connector']);
  });
});

describe('IDEM-5: the same key with another message', () => {
  test('is key_reused and records nothing', async () => {
    const { deps, store, queue } = world();
    await sendOnce(deps, { message: 'first' }, ALICE, 'k');
    const writes = store.writes.length;
    expect(await sendOnce(deps, { message: 'second' }, ALICE, 'k')).toEqual({ kind: 'key_reused' });
    expect(store.events.size).toBe(1);
    expect(queue.jobs).toHaveLength(1);
    // Only the failed claim was attempted.
    expect(store.writes.slice(writes).map((w) => w.method)).toEqual(['claimIdempotencyKey']);
  });
});

describe('IDEM-6: while the first request is still being answered', () => {
  test('a repeat is in_progress, told when to come back, and makes nothing', async () => {
    const { deps, store, clock } = world();
    // A first request that claimed the key and has not settled yet.
    store.idempotencyKeys.set('alice\u0000k', {
      eventId: 'evt_00000000000000000000000000000001',
      messageHash: sha256Hex('hello'),
      state: 'in_progress',
      createdAt: T0,
      expiresAt: T0 + Limits.idempotencyMemoryMs,
      leaseUntil: T0 + IDEMPOTENCY_LEASE_MS,
    });
    expect(await sendOnce(deps, { message: 'hello' }, ALICE, 'k')).toEqual({ kind: 'in_progress', retryAfterSeconds: 5 });
    clock.advance(IDEMPOTENCY_LEASE_MS - 1500);
    expect(await sendOnce(deps, { message: 'hello' }, ALICE, 'k')).toEqual({ kind: 'in_progress', retryAfterSeconds: 2 });
    expect(store.events.size).toBe(0);
  });

  test('a concurrent repeat, while the first waits for the dot, is in_progress; afterwards it gets the first`s answer', async () => {
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    const { deps, store } = world({ deliveryWaitMs: 3000, answers: [async () => (await held, respond(200))] });
    const first = sendOnce(deps, { message: 'slow dot' }, ALICE, 'k');
    await new Promise((resolve) => setImmediate(resolve));
    expect(await sendOnce(deps, { message: 'slow dot' }, ALICE, 'k')).toMatchObject({ kind: 'in_progress' });
    release();
    const answered = await first;
    expect(answered.kind).toBe('delivered');
    expect(await sendOnce(deps, { message: 'slow dot' }, ALICE, 'k')).toEqual(answered);
    expect(store.events.size).toBe(1);
  });
});

describe('IDEM-7: a first request that made nothing releases its key', () => {
  test('no subscription (409): the key is released, and a retry once a dot subscribed is processed anew', async () => {
    const { deps, store } = world({ subscribed: false });
    expect(await sendOnce(deps, { message: 'hi' }, ALICE, 'k')).toEqual({ kind: 'no_subscription' });
    expect(store.idempotencyKeys.size).toBe(0);
    store.subscription = liveSubscription();
    expect((await sendOnce(deps, { message: 'hi' }, ALICE, 'k')).kind).toBe('queued');
    expect(store.events.size).toBe(1);
  });

  test('invalid input (400): nothing is claimed at all', async () => {
    const { deps, store } = world();
    expect((await sendOnce(deps, { message: '   ' }, ALICE, 'k')).kind).toBe('invalid');
    expect(store.writes).toEqual([]);
  });

  test('storage unavailable before the record (503): the key is released and the error goes up', async () => {
    const { deps, store } = world();
    store.failing.add('putEvent');
    await expect(sendOnce(deps, { message: 'hi' }, ALICE, 'k')).rejects.toMatchObject({ name: 'DependencyUnavailable', dependency: 'storage' });
    expect(store.idempotencyKeys.size).toBe(0);
    store.failing.delete('putEvent');
    expect((await sendOnce(deps, { message: 'hi' }, ALICE, 'k')).kind).toBe('queued');
  });

  test('a record made but its job refused (503 naming the event): the key keeps naming that event', async () => {
    const { deps, store, queue } = world();
    queue.fail = true;
    const error = await sendOnce(deps, { message: 'hi' }, ALICE, 'k').catch((e: unknown) => e);
    const eventId = (error as { eventId?: string }).eventId!;
    expect(eventId).toMatch(/^evt_/);
    queue.fail = false;
    expect(await sendOnce(deps, { message: 'hi' }, ALICE, 'k')).toMatchObject({ eventId });
    expect(store.events.size).toBe(1);
  });

  test('a stale claim whose request died before making its event is retaken with a new event id', async () => {
    const { deps, store, clock } = world();
    const stale = 'evt_00000000000000000000000000000002';
    store.idempotencyKeys.set('alice\u0000k', {
      eventId: stale,
      messageHash: sha256Hex('hi'),
      state: 'in_progress',
      createdAt: T0,
      expiresAt: T0 + Limits.idempotencyMemoryMs,
      leaseUntil: T0 + IDEMPOTENCY_LEASE_MS,
    });
    clock.advance(IDEMPOTENCY_LEASE_MS);
    const outcome = (await sendOnce(deps, { message: 'hi' }, ALICE, 'k')) as { kind: string; eventId: string };
    expect(outcome.kind).toBe('queued');
    expect(outcome.eventId).not.toBe(stale);
    expect(store.idempotencyKeys.get('alice\u0000k')).toMatchObject({ eventId: outcome.eventId, state: 'done' });
  });

  test('a stale claim whose request died after making its event answers that event, and marks it done', async () => {
    const { deps, store, clock } = world();
    const made = (await sendOnce(deps, { message: 'hi' }, ALICE, 'k')) as { eventId: string };
    // As if the first request had died before settling: the claim is still in progress.
    Object.assign(store.idempotencyKeys.get('alice\u0000k')!, { state: 'in_progress', leaseUntil: clock.now() + IDEMPOTENCY_LEASE_MS });
    clock.advance(IDEMPOTENCY_LEASE_MS);
    expect(await sendOnce(deps, { message: 'hi' }, ALICE, 'k')).toEqual({ kind: 'queued', eventId: made.eventId });
    expect(store.events.size).toBe(1);
    expect(store.idempotencyKeys.get('alice\u0000k')!.state).toBe('done');
  });

  test('a settle that fails does not change the answer', async () => {
    const { deps, store, warnings } = world();
    store.failing.add('settleIdempotencyKey');
    expect((await sendOnce(deps, { message: 'hi' }, ALICE, 'k')).kind).toBe('queued');
    expect(warnings).toContain('idempotency_key_not_settled');
  });
});

describe('without a key, or without a store for keys', () => {
  test('no key: every send is its own event', async () => {
    const { deps, store } = world();
    await sendOnce(deps, { message: 'hi' }, ALICE, undefined);
    await sendOnce(deps, { message: 'hi' }, ALICE, undefined);
    expect(store.events.size).toBe(2);
    expect(store.idempotencyKeys.size).toBe(0);
  });

  test('no IdempotencyStore wired: the key is not honoured, and a warning says so', async () => {
    const { deps, store, warnings } = world();
    const { idempotency: _none, ...without } = deps;
    await sendOnce(without, { message: 'hi' }, ALICE, 'k');
    expect(warnings).toEqual(['idempotency_unavailable']);
    expect(store.events.size).toBe(1);
  });
});
