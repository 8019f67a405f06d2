/**
 * The send use case (docs/contract/delivery.md) against in-memory fakes: the event is recorded
 * under a lease, its job enqueued delayed as a safety net, and the first attempt made inline
 * through the scripted webhook client. The fake clock never moves unless a test moves it.
 */
import { deliver } from '../../../lambda/core/delivery';
import { DependencyUnavailable } from '../../../lambda/core/errors';
import { principalOf, subscriptionIdOf } from '../../../lambda/core/identity';
import { buildEvent, sendMessage, type MessageDeps } from '../../../lambda/core/messages';
import { EventStatus } from '../../../lambda/core/protocol';
import type { DeliveryMetric, EventRecord, SubscriptionRecord } from '../../../lambda/ports';
import { fakeOutbox, FakeClock, FakeQueue, FakeStore, respond, ScriptedWebhookClient, T0, transportFailure, type Scripted } from '../../support/fakes';

const DAY = 24 * 60 * 60 * 1000;
const PRINCIPAL = principalOf('test-api-key');
const CALLBACK_URL = 'https://dot.example.com/hooks?b=2&a=1';
const SUB_ID = subscriptionIdOf(PRINCIPAL, CALLBACK_URL, 'message.created', {});

function liveSubscription(overrides: Partial<SubscriptionRecord> = {}): SubscriptionRecord {
  return {
    id: SUB_ID,
    generation: 'gen-1',
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

function world(options: { subscription?: Partial<SubscriptionRecord> | null; deliveryWaitMs?: number; answers?: Scripted[] } = {}) {
  const clock = new FakeClock(T0);
  const store = new FakeStore();
  const queue = new FakeQueue();
  const webhook = new ScriptedWebhookClient(...(options.answers ?? []));
  if (options.subscription !== null) store.subscription = liveSubscription(options.subscription);
  const deps: MessageDeps = {
    store,
    outbox: fakeOutbox(store, queue),
    clock,
    webhook,
    retryDelaysS: [1, 4, 30, 120, 600],
    deliveryWaitMs: options.deliveryWaitMs ?? 3_000,
  };
  return { clock, store, queue, webhook, deps };
}

const onlyEvent = (store: FakeStore): EventRecord => {
  const events = [...store.events.values()];
  expect(events).toHaveLength(1);
  return events[0]!;
};

describe('buildEvent', () => {
  const EVENT_ID = 'evt_0123456789abcdef0123456789abcdef';

  test('DEL-EVT-2: is exactly the docs/contract/delivery.md envelope, in order, serialized compactly', () => {
    expect(buildEvent(EVENT_ID, 'hi', T0)).toBe(
      '{"eventId":"evt_0123456789abcdef0123456789abcdef","name":"message.created","timestamp":"2026-11-03T10:30:00.123Z","data":{"message":"hi"},"cursor":null}',
    );
  });

  test('DEL-EVT-4: has no top-level type (that marks control envelopes)', () => {
    const event = JSON.parse(buildEvent(EVENT_ID, 'hi', T0)) as Record<string, unknown>;
    expect(Object.keys(event).sort()).toEqual(['cursor', 'data', 'eventId', 'name', 'timestamp']);
    expect('type' in event).toBe(false);
  });

  test('DEL-EVT-3: the timestamp is when the event was built, ISO 8601 UTC', () => {
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

  test('DEL-PIPE-1: no subscription: no_subscription, with no event recorded and nothing queued', async () => {
    const { store, queue, deps } = world({ subscription: null });
    await expect(sendMessage(deps, { message: 'hi' })).resolves.toEqual({ kind: 'no_subscription' });
    expect(store.writes).toEqual([]);
    expect(queue.jobs).toEqual([]);
  });

  test('DEL-PIPE-1: an expired subscription counts as none', async () => {
    const { queue, deps } = world({ subscription: { expiresAt: T0 - 1 } });
    await expect(sendMessage(deps, { message: 'hi' })).resolves.toEqual({ kind: 'no_subscription' });
    expect(queue.jobs).toEqual([]);
  });

  test('ARCH-4, DEL-PIPE-2, STORE-4: records the event as queued, under no lease, before enqueueing it when there is no wait', async () => {
    const { store, queue, webhook, deps } = world({ deliveryWaitMs: 0 });
    let statusAtEnqueue: string | undefined;
    queue.onEnqueue = (job) => {
      statusAtEnqueue = store.events.get(job.eventId)?.status;
    };
    const outcome = await sendMessage(deps, { message: 'hi' });
    expect(statusAtEnqueue).toBe('queued');
    const event = onlyEvent(store);
    expect(outcome).toEqual({ kind: 'queued', eventId: event.eventId });
    expect(event).toEqual({
      eventId: event.eventId,
      status: 'queued',
      subscriptionId: SUB_ID,
      generation: 'gen-1',
      attempts: 0,
      createdAt: T0,
      expiresAt: T0 + 15 * DAY,
      notBefore: T0,
      // The exact bytes are kept with the record until it is delivered (for a resend).
      body: queue.jobs[0]!.body,
    });
    // No wait window: no inline attempt, and the worker takes the job at once.
    expect(webhook.requests).toEqual([]);
    expect(queue.delays).toEqual([0]);
  });

  test('DEL-EVT-1, DEL-PIPE-3, EV-GEN-3: the job carries the event id, the subscription id and the exact event bytes of the trimmed message', async () => {
    const { queue, deps } = world({ deliveryWaitMs: 0 });
    const outcome = await sendMessage(deps, { message: '  hello dot \n' });
    expect(queue.jobs).toHaveLength(1);
    const job = queue.jobs[0]!;
    expect(outcome).toMatchObject({ eventId: job.eventId });
    expect(job.eventId).toMatch(/^evt_[0-9a-f]{32}$/);
    expect(job.subscriptionId).toBe(SUB_ID);
    expect(job.generation).toBe('gen-1');
    expect(job.body).toBe(buildEvent(job.eventId, 'hello dot', T0));
  });

  test('DEL-PIPE-7: the event is leased for the whole inline POST plus a margin, and the safety net surfaces when attempt 2 would be due', async () => {
    const { store, queue, deps } = world({ deliveryWaitMs: 3_000, answers: [respond(200)] });
    let atEnqueue: EventRecord | undefined;
    queue.onEnqueue = (job) => {
      atEnqueue = { ...store.events.get(job.eventId)! };
    };
    await expect(sendMessage(deps, { message: 'hi' })).resolves.toMatchObject({ kind: 'delivered' });
    expect(atEnqueue).toMatchObject({ status: 'queued', attempts: 0, notBefore: T0 + 5_000 + 1_000 });
    expect(queue.delays).toEqual([1_000]);
  });

  test('ARCH-8, DEL-EVT-1, DEL-PIPE-5, DEL-PIPE-6: delivered when the inline attempt gets a 2xx: one POST, the exact job bytes, attempt 1 recorded', async () => {
    const { store, queue, webhook, deps } = world({ answers: [respond(202)] });
    const outcome = await sendMessage(deps, { message: 'hi' });
    const event = onlyEvent(store);
    expect(outcome).toEqual({ kind: 'delivered', eventId: event.eventId });
    expect(event).toMatchObject({ status: 'delivered', attempts: 1, deliveredAt: T0, lastHttpStatus: 202 });
    expect(webhook.requests).toHaveLength(1);
    expect(Buffer.from(webhook.last.body).toString()).toBe(queue.jobs[0]!.body);
    expect(webhook.last.headers['webhook-id']).toBe(event.eventId);
    expect(event.body).toBeUndefined();
  });

  test('a message delivered inline costs one read, one record write and one outcome write, and one queue send', async () => {
    const { store, queue, deps } = world({ answers: [respond(200)] });
    // The subscription's delivery status was written a moment ago: it is not rewritten.
    store.subscription = { ...store.subscription!, lastDeliveryAt: T0 - 1_000, lastError: null };
    await sendMessage(deps, { message: 'hi' });
    expect(store.calls.map((c) => c.method)).toEqual(['getSubscription', 'putEvent', 'updateEvent']);
    expect(queue.jobs).toHaveLength(1);
  });

  test("DEL-RUN-6: an inline decision emits the worker's metric with Via inline, and the worker's `delivery` line with via inline", async () => {
    const { store, clock, deps } = world({ answers: [() => (clock.advance(120), respond(200)), () => (clock.advance(30), respond(503))] });
    const metrics: DeliveryMetric[] = [];
    const lines: { level: string; event: string; fields?: Record<string, unknown> }[] = [];
    const log = {
      info: (event: string, fields?: Record<string, unknown>) => void lines.push({ level: 'info', event, ...(fields ? { fields } : {}) }),
      warn: (event: string, fields?: Record<string, unknown>) => void lines.push({ level: 'warn', event, ...(fields ? { fields } : {}) }),
      error: (event: string, fields?: Record<string, unknown>) => void lines.push({ level: 'error', event, ...(fields ? { fields } : {}) }),
    };
    const observed: MessageDeps = { ...deps, log, metrics: { delivery: (metric) => void metrics.push(metric) } };
    const delivered = await sendMessage(observed, { message: 'one' });
    const retried = await sendMessage(observed, { message: 'two' });
    expect(metrics).toEqual([
      { outcome: 'delivered', via: 'inline', durationMs: 120, latencyMs: 120 },
      { outcome: 'retry', via: 'inline', attempt: 1, durationMs: 30 },
    ]);
    expect(lines).toEqual([
      { level: 'info', event: 'delivery', fields: { eventId: (delivered as { eventId: string }).eventId, via: 'inline', action: 'delivered', attempt: 1 } },
      {
        level: 'info',
        event: 'delivery',
        fields: { eventId: (retried as { eventId: string }).eventId, via: 'inline', action: 'retry', attempt: 1, reason: 'http_5xx', delayS: 1 },
      },
    ]);
    // Still one read and two writes per message delivered inline: the metric costs no storage call.
    expect(store.calls.slice(0, 3).map((c) => c.method)).toEqual(['getSubscription', 'putEvent', 'updateEvent']);
  });

  test('DEL-PIPE-21: a POST that got no answer within its deadline is logged as a warning with outcomeUnknown and counted as outcome_unknown', async () => {
    const { store, clock, deps } = world({ answers: [() => (clock.advance(5_000), transportFailure('timeout'))] });
    const metrics: DeliveryMetric[] = [];
    const warnings: Record<string, unknown>[] = [];
    const log = { info: () => undefined, warn: (_: string, fields?: Record<string, unknown>) => void warnings.push(fields ?? {}), error: () => undefined };
    await sendMessage({ ...deps, log, metrics: { delivery: (metric) => void metrics.push(metric) } }, { message: 'hi' });
    expect(metrics).toEqual([{ outcome: 'outcome_unknown', via: 'inline', attempt: 1, durationMs: 5_000 }]);
    expect(warnings).toEqual([expect.objectContaining({ eventId: onlyEvent(store).eventId, action: 'retry', reason: 'timeout', outcomeUnknown: true })]);
  });

  test("DEL-PIPE-20: a failed inline POST rewrites the subscription's delivery status only when it changes (the item must not become hot)", async () => {
    const { store, deps } = world({ answers: [respond(503), respond(503), respond(400)] });
    store.subscription = { ...store.subscription!, lastDeliveryAt: T0 - 1_000, lastError: null };
    await sendMessage(deps, { message: 'one' });
    expect(store.calls.filter((c) => c.method === 'recordDeliveryOutcome')).toHaveLength(1);
    expect(store.subscription?.lastError).toBe('http_5xx');
    store.calls.length = 0;
    await sendMessage(deps, { message: 'two' });
    // The same error again: nothing to write; 3 storage calls as on the success path.
    expect(store.calls.map((c) => c.method)).toEqual(['getSubscription', 'putEvent', 'updateEvent']);
    await sendMessage(deps, { message: 'three' });
    expect(store.subscription?.lastError).toBe('http_4xx');
  });

  test('a message not valid as UTF-8 text (a lone surrogate) is refused with the one sentence both surfaces give', async () => {
    const { store, deps } = world();
    await expect(sendMessage(deps, { message: 'broken \ud800 text' })).resolves.toEqual({ kind: 'invalid', error: expect.stringMatching(/valid UTF-8/) });
    expect(store.calls).toEqual([]);
  });

  test('DEL-PIPE-5: the inline POST ends inside its lease, whatever the wait window: 5 s counted from the record, less what storage took', async () => {
    const { store, clock, webhook, deps } = world({ deliveryWaitMs: 3_000, answers: [respond(200)] });
    // Storage takes 700 ms in all before the POST starts; the lease counts from the start of the send.
    store.before.getSubscription = () => clock.advance(400);
    store.before.putEvent = () => clock.advance(300);
    await sendMessage({ ...deps, background: (work) => work() }, { message: 'hi' });
    expect(webhook.last.timeoutMs).toBe(5_000 - 700);
  });

  test('DEL-PIPE-5: where nothing may run after the answer, the POST ends within what is left of the wait window', async () => {
    const { store, clock, webhook, deps } = world({ deliveryWaitMs: 3_000, answers: [respond(200)] });
    store.before.getSubscription = () => clock.advance(400);
    store.before.putEvent = () => clock.advance(300);
    await sendMessage(deps, { message: 'hi' });
    expect(webhook.last.timeoutMs).toBe(3_000 - 700);
  });

  test('DEL-PIPE-9: the POST never asks for more than the outbound 5 s, whatever the window', async () => {
    const { webhook, deps } = world({ deliveryWaitMs: 60_000, answers: [respond(200)] });
    await sendMessage(deps, { message: 'hi' });
    expect(webhook.last.timeoutMs).toBeLessThanOrEqual(5_000);
  });

  test('DEL-PIPE-8: storage used up the whole window: answered queued at once, and the inline attempt still makes the one POST', async () => {
    const { store, clock, webhook, deps } = world({ deliveryWaitMs: 1_000, answers: [respond(200)] });
    store.before.putEvent = () => clock.advance(1_500);
    const running: Promise<unknown>[] = [];
    const background = <T>(work: () => Promise<T>): Promise<T> => {
      const p = work();
      running.push(p);
      return p;
    };
    await expect(sendMessage({ ...deps, background }, { message: 'hi' })).resolves.toMatchObject({ kind: expect.stringMatching(/^(queued|delivered)$/) });
    await Promise.all(running);
    expect(webhook.requests).toHaveLength(1);
    expect(onlyEvent(store)).toMatchObject({ status: 'delivered', attempts: 1 });
  });

  test('DEL-PIPE-6: a permanent failure answers failed with its category, and the event is failed after one attempt', async () => {
    const { store, deps } = world({ answers: [respond(400)] });
    const outcome = await sendMessage(deps, { message: 'hi' });
    expect(outcome).toEqual({ kind: 'failed', eventId: onlyEvent(store).eventId, reason: 'http_4xx' });
    expect(onlyEvent(store)).toMatchObject({ status: 'failed', attempts: 1, lastError: 'http_4xx', lastHttpStatus: 400 });
  });

  test('DEL-PIPE-16: a 410 answers failed and ends the subscription at once', async () => {
    const { store, deps } = world({ answers: [respond(410)] });
    await expect(sendMessage(deps, { message: 'hi' })).resolves.toMatchObject({ kind: 'failed', reason: 'http_4xx' });
    expect(store.subscription).toBeUndefined();
  });

  test('DEL-PIPE-6, DEL-PIPE-7: a transient failure answers queued; attempt 1 counts and the lease moves to when attempt 2 is due', async () => {
    const { store, clock, deps } = world({ answers: [() => (clock.advance(50), respond(503))] });
    const outcome = await sendMessage(deps, { message: 'hi' });
    expect(outcome).toEqual({ kind: 'queued', eventId: onlyEvent(store).eventId });
    expect(onlyEvent(store)).toMatchObject({ status: 'queued', attempts: 1, lastError: 'http_5xx', notBefore: T0 + 50 + 1_000 });
  });

  test('DEL-PIPE-8: an inline POST with no answer within its deadline counts as attempt 1, an unknown outcome: attempt 2 follows the schedule', async () => {
    const { store, clock, deps } = world({ answers: [() => (clock.advance(3_000), transportFailure('timeout'))] });
    const outcome = await sendMessage(deps, { message: 'hi' });
    expect(outcome).toEqual({ kind: 'queued', eventId: onlyEvent(store).eventId });
    expect(onlyEvent(store)).toMatchObject({ status: 'queued', attempts: 1, lastError: 'timeout', notBefore: T0 + 3_000 + 1_000 });
    expect(onlyEvent(store).log).toEqual([expect.objectContaining({ outcome: 'timeout', counted: true })]);
  });

  test('the inline attempt sends to the subscription the send read, even one ended a moment later: nothing is read back', async () => {
    const { store, webhook, deps } = world({ answers: [respond(200)] });
    store.before.putEvent = () => {
      store.subscription = undefined;
    };
    const outcome = await sendMessage(deps, { message: 'hi' });
    expect(outcome).toEqual({ kind: 'delivered', eventId: onlyEvent(store).eventId });
    expect(webhook.requests).toHaveLength(1);
  });

  test('a storage failure during the inline attempt does not undo the accepted event: queued, and the job is there', async () => {
    const { store, queue, deps } = world({ answers: [respond(200)] });
    store.failing.add('updateEvent');
    await expect(sendMessage(deps, { message: 'hi' })).resolves.toMatchObject({ kind: 'queued' });
    expect(queue.jobs).toHaveLength(1);
  });

  /** Runs the inline attempt as the runtimes do, keeping hold of it so the test can wait for it. */
  function tracking() {
    const running: Promise<unknown>[] = [];
    const background = <T>(work: () => Promise<T>): Promise<T> => {
      const p = work();
      running.push(p.catch(() => undefined));
      return p;
    };
    return { running, background };
  }

  test('with background, a 2xx is answered delivered at once and the writes that record it finish afterwards', async () => {
    const { store, deps } = world({ answers: [respond(200)] });
    let release: () => void = () => undefined;
    const gate = new Promise<void>((resolve) => (release = resolve));
    store.before.updateEvent = () => gate;
    const { running, background } = tracking();
    const outcome = await sendMessage({ ...deps, background }, { message: 'hi' });
    expect(outcome).toEqual({ kind: 'delivered', eventId: onlyEvent(store).eventId });
    // Answered while the record still says queued: the write is held at the gate.
    expect(onlyEvent(store).status).toBe('queued');
    expect(running).toHaveLength(1);
    release();
    await Promise.all(running);
    expect(onlyEvent(store)).toMatchObject({ status: 'delivered', attempts: 1 });
  });

  test('with background, anything but a 2xx within the window is answered once the attempt is recorded', async () => {
    const { store, deps } = world({ answers: [respond(503)] });
    const { background } = tracking();
    const outcome = await sendMessage({ ...deps, background }, { message: 'hi' });
    expect(outcome).toMatchObject({ kind: 'queued' });
    expect(onlyEvent(store)).toMatchObject({ status: 'queued', attempts: 1, lastError: 'http_5xx' });
  });

  test("DEL-PIPE-21: a dot answering after the wait window gets one POST: the caller is told queued, the attempt settles the event, the worker's copy skips it", async () => {
    let answer: (response: ReturnType<typeof respond>) => void = () => undefined;
    const late = new Promise<ReturnType<typeof respond>>((resolve) => (answer = resolve));
    const { store, queue, webhook, deps } = world({ deliveryWaitMs: 20, answers: [() => late] });
    const { running, background } = tracking();
    const outcome = await sendMessage({ ...deps, background }, { message: 'hi' });
    expect(outcome).toEqual({ kind: 'queued', eventId: onlyEvent(store).eventId });
    expect(onlyEvent(store)).toMatchObject({ status: 'queued', attempts: 0 });
    answer(respond(200));
    await Promise.all(running);
    expect(onlyEvent(store)).toMatchObject({ status: 'delivered', attempts: 1 });
    // The safety-net job surfaces later: it finds the event delivered and makes no POST.
    await expect(deliver(deps, queue.jobs[0]!)).resolves.toEqual({ action: 'done', status: 'already_final' });
    expect(webhook.requests).toHaveLength(1);
  });

  test("DEL-PIPE-21: while the inline attempt runs past the window, its lease keeps the worker's copy from a second POST", async () => {
    let answer: (response: ReturnType<typeof respond>) => void = () => undefined;
    const late = new Promise<ReturnType<typeof respond>>((resolve) => (answer = resolve));
    const { store, queue, clock, webhook, deps } = world({ deliveryWaitMs: 20, answers: [() => late] });
    const { running, background } = tracking();
    await sendMessage({ ...deps, background }, { message: 'hi' });
    // The safety net surfaces at 1 s (the first retry delay) while the POST is still out.
    clock.advance(1_000);
    await expect(deliver(deps, queue.jobs[0]!)).resolves.toEqual({ action: 'defer', delayMs: 5_000 });
    answer(respond(200));
    await Promise.all(running);
    expect(webhook.requests).toHaveLength(1);
    expect(onlyEvent(store)).toMatchObject({ status: 'delivered', attempts: 1 });
  });

  test('DEL-PIPE-21: a busy process records the outcome after the lease ran out: its worker still defers the event the inline attempt holds', async () => {
    let answer: (response: ReturnType<typeof respond>) => void = () => undefined;
    const late = new Promise<ReturnType<typeof respond>>((resolve) => (answer = resolve));
    const { store, queue, clock, webhook, deps } = world({ deliveryWaitMs: 20, answers: [() => late] });
    const inFlight = new Set<string>();
    const { running, background } = tracking();
    await sendMessage({ ...deps, background, inFlight }, { message: 'hi' });
    // Past the 6 s lease, the POST still unanswered (an event loop too busy to see its deadline).
    clock.advance(7_000);
    await expect(deliver({ ...deps, inFlight }, queue.jobs[0]!)).resolves.toEqual({ action: 'defer', delayMs: 1_000 });
    answer(respond(200));
    await Promise.all(running);
    expect(inFlight.size).toBe(0);
    expect(webhook.requests).toHaveLength(1);
    expect(onlyEvent(store)).toMatchObject({ status: 'delivered', attempts: 1 });
  });

  test('without background (Lambda), the delivered answer waits until the record says delivered', async () => {
    const { store, deps } = world({ answers: [respond(200)] });
    let release: () => void = () => undefined;
    let writing: () => void = () => undefined;
    const writeStarted = new Promise<void>((resolve) => (writing = resolve));
    store.before.updateEvent = () => {
      writing();
      return new Promise<void>((resolve) => (release = resolve));
    };
    let settled = false;
    const pending = sendMessage(deps, { message: 'hi' }).then((outcome) => ((settled = true), outcome));
    await writeStarted;
    for (let i = 0; i < 20; i++) await Promise.resolve();
    expect(settled).toBe(false);
    release();
    await expect(pending).resolves.toMatchObject({ kind: 'delivered' });
    expect(onlyEvent(store).status).toBe('delivered');
  });

  test('storage failure reading the subscription: DependencyUnavailable(storage), no event id, nothing queued', async () => {
    const { store, queue, deps } = world();
    store.failing.add('getSubscription');
    const failure = await sendMessage(deps, { message: 'hi' }).catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(DependencyUnavailable);
    expect(failure).toMatchObject({ dependency: 'storage', eventId: undefined });
    expect(queue.jobs).toEqual([]);
  });

  test('storage failure recording the event: DependencyUnavailable(storage), nothing queued', async () => {
    const { store, queue, deps } = world();
    store.failing.add('putEvent');
    await expect(sendMessage(deps, { message: 'hi' })).rejects.toMatchObject({ name: 'DependencyUnavailable', dependency: 'storage' });
    expect(queue.jobs).toEqual([]);
  });

  test('DEL-OUT-2: queue failure: DependencyUnavailable(queue) with the event id, and the record marked failed', async () => {
    const { store, queue, deps } = world();
    queue.fail = true;
    const failure = await sendMessage(deps, { message: 'hi' }).catch((error: unknown) => error);
    const event = onlyEvent(store);
    expect(failure).toMatchObject({ name: 'DependencyUnavailable', dependency: 'queue', eventId: event.eventId });
    expect(event.status).toBe('failed');
  });

  test('DEL-OUT-2: queue failure with storage failing too: "may still be delivered" with the event id, never a plain queued (the mark may have landed)', async () => {
    const { store, queue, deps } = world();
    queue.fail = true;
    store.failing.add('updateEvent');
    const error = await sendMessage(deps, { message: 'hi' }).then(
      () => undefined,
      (caught: unknown) => caught,
    );
    expect(error).toBeInstanceOf(DependencyUnavailable);
    expect(error).toMatchObject({ dependency: 'queue', undecided: true, willSettle: false, eventId: expect.stringMatching(/^evt_[0-9a-f]{32}$/) });
    // Still queued here: the reconciler requeues it, which "may still be delivered" allows.
    expect(store.events.get((error as DependencyUnavailable).eventId!)?.status).toBe('queued');
  });

  test('DEL-OUT-2: queue failure after the record moved on (the job did go out): queued with the event id', async () => {
    const { store, queue, deps } = world();
    queue.fail = true;
    store.before.updateEvent = (eventId) => {
      store.events.get(eventId as string)!.status = EventStatus.delivered;
    };
    const outcome = await sendMessage(deps, { message: 'hi' });
    expect(outcome).toEqual({ kind: 'queued', eventId: expect.stringMatching(/^evt_[0-9a-f]{32}$/) });
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

describe('DEL-OUT-3: a put whose fate is unknown', () => {
  test('the put and its settling write both fail: the answer is queued with the event id, and the job sent anyway delivers it', async () => {
    const { store, queue, webhook, deps, clock } = world({ answers: [respond(204)] });
    store.failing.add('putEvent');
    store.failing.add('restoreEvent');
    const outcome = await sendMessage(deps, { message: 'hi' });
    expect(outcome).toEqual({ kind: 'queued', eventId: expect.stringMatching(/^evt_[0-9a-f]{32}$/) });
    const eventId = (outcome as { eventId: string }).eventId;
    // No record landed and no inline attempt was made; the job is out.
    expect(store.events.has(eventId)).toBe(false);
    expect(webhook.requests).toHaveLength(0);
    expect(queue.jobs.map((job) => job.eventId)).toEqual([eventId]);
    // The storage recovers; the worker finds no record, restores it from the job and delivers it.
    store.failing.clear();
    clock.advance(5_000);
    await expect(deliver(deps, queue.jobs[0]!)).resolves.toMatchObject({ action: 'done', status: 'delivered' });
    expect(store.events.get(eventId)?.status).toBe('delivered');
    expect(webhook.requests).toHaveLength(1);
  });
});
