/**
 * Delivery (docs/contract/delivery.md): classification, the backoff schedule with Retry-After, and one
 * attempt against in-memory fakes of the store, the clock and the webhook client.
 */
import { randomBytes } from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import { commit, deliver, prepare, send, type DeliveryDeps, type Ready } from '../../../lambda/core/delivery';
import { classify, nextDelayMs, parseRetryAfter } from '../../../lambda/core/retry-policy';
import { principalOf, subscriptionIdOf } from '../../../lambda/core/identity';
import { buildEvent } from '../../../lambda/core/messages';
import { DEFAULT_RETRY_DELAYS_S, FailureReasons } from '../../../lambda/core/protocol';
import type { DeliveryJob, EventRecord, SubscriptionRecord, TransportFailure } from '../../../lambda/ports';
import { FakeClock, FakeStore, ScriptedWebhookClient, T0, respond, transportFailure } from '../../support/fakes';

const MINUTE = 60_000;
const DAY = 24 * 60 * MINUTE;
const SCHEDULE = [1, 4, 30, 120, 600];

const newSecret = () => `whsec_${randomBytes(32).toString('base64')}`;
const CURRENT_SECRET = newSecret();
const PREVIOUS_SECRET = newSecret();
const PRINCIPAL = principalOf('test-api-key');
const CALLBACK_URL = 'https://dot.example.com/hooks?b=2&a=1&x=%2F';
const SUB_ID = subscriptionIdOf(PRINCIPAL, CALLBACK_URL, 'message.created', {});
const EVENT_ID = 'evt_0123456789abcdef0123456789abcdef';

function liveSubscription(start: number, overrides: Partial<SubscriptionRecord> = {}): SubscriptionRecord {
  return {
    id: SUB_ID,
    url: CALLBACK_URL,
    name: 'message.created',
    secret: CURRENT_SECRET,
    principal: PRINCIPAL,
    createdAt: start - DAY,
    refreshedAt: start - DAY,
    expiresAt: start + 6 * DAY,
    ...overrides,
  };
}

function queuedEvent(start: number, overrides: Partial<EventRecord> = {}): EventRecord {
  return { eventId: EVENT_ID, status: 'queued', subscriptionId: SUB_ID, attempts: 0, createdAt: start, expiresAt: start + 7 * DAY, ...overrides };
}

interface World {
  store: FakeStore;
  clock: FakeClock;
  webhook: ScriptedWebhookClient;
  deps: DeliveryDeps;
  job: DeliveryJob;
}

/** A live subscription and one queued event; `start` defaults to the real time so standardwebhooks accepts the timestamps. */
function world(options: { start?: number; subscription?: Partial<SubscriptionRecord> | null; event?: Partial<EventRecord> | null } = {}): World {
  const start = options.start ?? Date.now();
  const clock = new FakeClock(start);
  const store = new FakeStore();
  if (options.subscription !== null) store.subscription = liveSubscription(start, options.subscription);
  if (options.event !== null) store.events.set(EVENT_ID, queuedEvent(start, options.event));
  const webhook = new ScriptedWebhookClient();
  const deps: DeliveryDeps = { store, webhook, clock, retryDelaysS: DEFAULT_RETRY_DELAYS_S };
  const job: DeliveryJob = { eventId: EVENT_ID, subscriptionId: SUB_ID, body: buildEvent(EVENT_ID, 'héllo dot 😀', start) };
  return { store, clock, webhook, deps, job };
}

const signaturesOf = (headers: Record<string, string>) => (headers['webhook-signature'] ?? '').split(' ');

function verifiesWith(secret: string, body: Uint8Array, headers: Record<string, string>, signature: string): boolean {
  try {
    new Webhook(secret).verify(Buffer.from(body), { ...headers, 'webhook-signature': signature });
    return true;
  } catch {
    return false;
  }
}

describe('DEL-PIPE-15: classify', () => {
  test.each([200, 201, 202, 204, 299])('%i is delivered', (status) => {
    expect(classify(respond(status), T0)).toEqual({ kind: 'delivered' });
  });

  test.each([100, 101, 199])('an informational %i as a final answer is transient, not delivered', (status) => {
    expect(classify(respond(status), T0)).toEqual({ kind: 'transient', reason: 'http_5xx' });
  });

  test.each([300, 301, 302, 303, 304, 307, 308])('a redirect %i is never followed: transient', (status) => {
    expect(classify(respond(status), T0)).toEqual({ kind: 'transient', reason: 'http_5xx' });
  });

  test.each([400, 401, 403, 404, 405, 409, 410, 413, 415, 422, 451, 499])('%i is permanent (http_4xx)', (status) => {
    expect(classify(respond(status), T0)).toEqual({ kind: 'permanent', reason: 'http_4xx' });
  });

  test.each([408, 425, 429])('%i is the transient exception among 4xx', (status) => {
    expect(classify(respond(status), T0)).toEqual({ kind: 'transient', reason: 'http_4xx' });
  });

  test.each([500, 502, 503, 504, 599])('%i is transient (http_5xx)', (status) => {
    expect(classify(respond(status), T0)).toEqual({ kind: 'transient', reason: 'http_5xx' });
  });

  test.each<[TransportFailure, string]>([
    ['timeout', 'timeout'],
    ['tls_error', 'tls_error'],
    ['connection_refused', 'connection_refused'],
    ['bad_response', 'http_5xx'],
  ])('transport failure %s is transient with reason %s', (failure, reason) => {
    expect(classify(transportFailure(failure), T0)).toEqual({ kind: 'transient', reason });
  });

  test('every reason classify gives is one of the stored categories', () => {
    const responses = [
      ...[100, 302, 404, 429, 503].map((s) => respond(s)),
      ...(['timeout', 'tls_error', 'connection_refused', 'bad_response'] as const).map(transportFailure),
    ];
    for (const response of responses) {
      const verdict = classify(response, T0);
      if (verdict.kind !== 'delivered') expect(FailureReasons).toContain(verdict.reason);
    }
  });

  test('Retry-After in delta seconds is carried on a transient 503', () => {
    expect(classify(respond(503, '', '120'), T0)).toEqual({ kind: 'transient', reason: 'http_5xx', retryAfterMs: 120_000 });
  });

  test('Retry-After is carried on a 429', () => {
    expect(classify(respond(429, '', '7'), T0)).toEqual({ kind: 'transient', reason: 'http_4xx', retryAfterMs: 7_000 });
  });

  test('Retry-After does not make a permanent failure retry', () => {
    expect(classify(respond(410, '', '5'), T0)).toEqual({ kind: 'permanent', reason: 'http_4xx' });
  });
});

describe('parseRetryAfter', () => {
  const NOW = Date.UTC(2026, 10, 3, 10, 30, 0);

  test('delta seconds', () => {
    expect(parseRetryAfter('30', NOW)).toBe(30_000);
  });

  test('an HTTP-date in the future gives the time until it', () => {
    expect(parseRetryAfter(new Date(NOW + 90_000).toUTCString(), NOW)).toBe(90_000);
  });

  test('an HTTP-date in the past gives zero', () => {
    expect(parseRetryAfter(new Date(NOW - 90_000).toUTCString(), NOW)).toBe(0);
  });

  test('absent or unparseable gives nothing', () => {
    expect(parseRetryAfter(undefined, NOW)).toBeUndefined();
    expect(parseRetryAfter('', NOW)).toBeUndefined();
    expect(parseRetryAfter('soon', NOW)).toBeUndefined();
  });
});

describe('DEL-PIPE-17: nextDelayMs', () => {
  test.each([
    [1, 1_000],
    [2, 4_000],
    [3, 30_000],
    [4, 120_000],
    [5, 600_000],
  ])('after attempt %i the next attempt waits %i ms', (attempt, delay) => {
    expect(nextDelayMs(SCHEDULE, attempt)).toBe(delay);
  });

  test('LIM-10: the schedule is exhausted after attempt 6', () => {
    expect(nextDelayMs(SCHEDULE, 6)).toBeUndefined();
  });

  test('LIM-10: the default schedule is 1, 4, 30, 120, 600 seconds: 6 attempts', () => {
    expect(DEFAULT_RETRY_DELAYS_S).toEqual(SCHEDULE);
  });

  test('Retry-After longer than the scheduled delay lengthens it', () => {
    expect(nextDelayMs(SCHEDULE, 1, 10_000)).toBe(10_000);
  });

  test('Retry-After shorter than the scheduled delay never shortens it', () => {
    expect(nextDelayMs(SCHEDULE, 3, 5_000)).toBe(30_000);
  });

  test('Retry-After of zero never shortens the delay', () => {
    expect(nextDelayMs(SCHEDULE, 2, 0)).toBe(4_000);
  });

  test('Retry-After is capped at what is left of the schedule', () => {
    expect(nextDelayMs(SCHEDULE, 1, 3_600_000)).toBe((1 + 4 + 30 + 120 + 600) * 1000);
    expect(nextDelayMs(SCHEDULE, 4, 3_600_000)).toBe((120 + 600) * 1000);
    expect(nextDelayMs(SCHEDULE, 5, 3_600_000)).toBe(600_000);
  });

  test('Retry-After cannot extend an exhausted schedule', () => {
    expect(nextDelayMs(SCHEDULE, 6, 1_000)).toBeUndefined();
  });

  test('Retry-After as an HTTP-date lengthens the delay', () => {
    const now = Date.UTC(2026, 10, 3, 10, 30, 0);
    const verdict = classify(respond(503, '', new Date(now + 90_000).toUTCString()), now);
    expect(verdict.kind === 'transient' && nextDelayMs(SCHEDULE, 2, verdict.retryAfterMs)).toBe(90_000);
  });
});

describe('deliver', () => {
  test('ARCH-6, DEL-PIPE-20: a 2xx marks the event delivered and records the outcome on the subscription', async () => {
    const { store, clock, webhook, deps, job } = world();
    webhook.add(respond(200));
    await expect(deliver(deps, job)).resolves.toEqual({ action: 'done', status: 'delivered', attempt: 1 });
    expect(webhook.requests).toHaveLength(1);
    expect(store.events.get(EVENT_ID)).toMatchObject({ status: 'delivered', attempts: 1, deliveredAt: clock.now(), lastHttpStatus: 200, lastError: null });
    expect(store.subscription).toMatchObject({ lastDeliveryAt: clock.now(), lastError: null });
  });

  test('DEL-PIPE-20: a success within a minute of a recorded success leaves the subscription alone (one write fewer per event)', async () => {
    const start = Date.now();
    const { store, clock, webhook, deps, job } = world({ start, subscription: { lastDeliveryAt: start - 59_000, lastError: null } });
    webhook.add(respond(200));
    await expect(deliver(deps, job)).resolves.toEqual({ action: 'done', status: 'delivered', attempt: 1 });
    expect(store.events.get(EVENT_ID)).toMatchObject({ status: 'delivered', deliveredAt: clock.now() });
    expect(store.subscription).toMatchObject({ lastDeliveryAt: start - 59_000, lastError: null });
    expect(store.callsOf('recordDeliveryOutcome')).toEqual([]);
  });

  test.each([
    ['the recorded success is a minute old', { lastDeliveryAt: Date.now() - 60_000, lastError: null }],
    ['the last attempt failed', { lastDeliveryAt: Date.now() - 1_000, lastError: 'timeout' as const }],
    ['nothing was delivered yet', { lastError: null }],
  ])('DEL-PIPE-20: a success is written to the subscription when %s', async (_name, status) => {
    const { store, clock, webhook, deps, job } = world({ start: Date.now(), subscription: status });
    webhook.add(respond(200));
    await deliver(deps, job);
    expect(store.subscription).toMatchObject({ lastDeliveryAt: clock.now(), lastError: null });
  });

  test('DEL-EVT-1, DEL-PIPE-14: the request goes to the subscription url exactly as given, with the exact event bytes', async () => {
    const { webhook, deps, job } = world();
    webhook.add(respond(204));
    await deliver(deps, job);
    expect(webhook.last.url).toBe(CALLBACK_URL);
    expect(Buffer.from(webhook.last.body).toString('utf8')).toBe(job.body);
  });

  test('DEL-PIPE-14: headers: content-type, webhook-id = eventId, webhook-timestamp from the clock, x-mcp-subscription-id', async () => {
    const { clock, webhook, deps, job } = world();
    webhook.add(respond(200));
    await deliver(deps, job);
    const { headers } = webhook.last;
    expect(headers['content-type']).toBe('application/json');
    expect(headers['webhook-id']).toBe(EVENT_ID);
    expect(headers['webhook-timestamp']).toBe(String(Math.floor(clock.now() / 1000)));
    expect(headers['x-mcp-subscription-id']).toBe(SUB_ID);
  });

  test('ARCH-6, DEL-PIPE-13: the signature verifies with standardwebhooks under the subscription secret', async () => {
    const { webhook, deps, job } = world();
    webhook.add(respond(200));
    await deliver(deps, job);
    const { headers, body } = webhook.last;
    expect(signaturesOf(headers)).toHaveLength(1);
    expect(new Webhook(CURRENT_SECRET).verify(Buffer.from(body), headers)).toEqual(JSON.parse(job.body));
  });

  test('DEL-PIPE-13: webhook-timestamp is taken at send time, not when the attempt started', async () => {
    const { store, clock, webhook, deps, job } = world({ start: T0 });
    let sentAt = 0;
    store.before.getSubscription = () => clock.advance(7_000); // a slow storage read
    webhook.add((_request) => {
      sentAt = clock.now();
      return respond(200);
    });
    await deliver(deps, job);
    expect(webhook.last.headers['webhook-timestamp']).toBe(String(Math.floor(sentAt / 1000)));
    expect(webhook.last.headers['webhook-timestamp']).toBe(String(Math.floor((T0 + 7_000) / 1000)));
  });

  test('DEL-PIPE-13, EV-REF-2: the rotation overlap is judged at send time: an overlap that ended during a slow read gives one signature', async () => {
    const start = Date.now();
    const { store, clock, webhook, deps, job } = world({ start, subscription: { previousSecret: PREVIOUS_SECRET, previousSecretUntil: start + 5_000 } });
    store.before.getSubscription = () => clock.advance(6_000);
    webhook.add(respond(200));
    await deliver(deps, job);
    expect(signaturesOf(webhook.last.headers)).toHaveLength(1);
  });

  test('DEL-PIPE-13: a retried attempt is signed with a new timestamp', async () => {
    const { clock, webhook, deps, job } = world();
    webhook.add(respond(503), respond(200));
    const first = await deliver(deps, job);
    expect(first).toMatchObject({ action: 'retry', delayMs: 1_000 });
    clock.advance(30_000);
    await deliver(deps, job);
    const [a, b] = webhook.requests;
    expect(Number(b!.headers['webhook-timestamp']) - Number(a!.headers['webhook-timestamp'])).toBe(30);
    expect(new Webhook(CURRENT_SECRET).verify(Buffer.from(b!.body), b!.headers)).toEqual(JSON.parse(job.body));
  });

  test('DEL-PIPE-13, EV-REF-2: during the rotation overlap two signatures are sent, new first, each valid under one secret', async () => {
    const start = Date.now();
    const { webhook, deps, job } = world({ start, subscription: { previousSecret: PREVIOUS_SECRET, previousSecretUntil: start + 10 * MINUTE - 1 } });
    webhook.add(respond(200));
    await deliver(deps, job);
    const { headers, body } = webhook.last;
    const [first, second, ...rest] = signaturesOf(headers);
    expect(rest).toEqual([]);
    expect(verifiesWith(CURRENT_SECRET, body, headers, first!)).toBe(true);
    expect(verifiesWith(PREVIOUS_SECRET, body, headers, first!)).toBe(false);
    expect(verifiesWith(PREVIOUS_SECRET, body, headers, second!)).toBe(true);
    expect(verifiesWith(CURRENT_SECRET, body, headers, second!)).toBe(false);
  });

  test('EV-REF-2: after the rotation overlap only the new secret signs', async () => {
    const start = Date.now();
    const { webhook, deps, job } = world({ start, subscription: { previousSecret: PREVIOUS_SECRET, previousSecretUntil: start } });
    webhook.add(respond(200));
    await deliver(deps, job);
    const { headers, body } = webhook.last;
    expect(signaturesOf(headers)).toHaveLength(1);
    expect(new Webhook(CURRENT_SECRET).verify(Buffer.from(body), headers)).toEqual(JSON.parse(job.body));
    expect(() => new Webhook(PREVIOUS_SECRET).verify(Buffer.from(body), headers)).toThrow();
  });

  test('DEL-PIPE-11: an event already delivered is skipped with no POST and no write', async () => {
    const { store, webhook, deps, job } = world({ event: { status: 'delivered', attempts: 1 } });
    await expect(deliver(deps, job)).resolves.toEqual({ action: 'done', status: 'already_final' });
    expect(webhook.requests).toHaveLength(0);
    expect(store.writes).toEqual([]);
  });

  test('DEL-PIPE-12: an event already dropped is not sent again', async () => {
    const { webhook, deps, job } = world({ event: { status: 'dropped' } });
    await expect(deliver(deps, job)).resolves.toEqual({ action: 'done', status: 'already_final' });
    expect(webhook.requests).toHaveLength(0);
  });

  test('DEL-RUN-4: an event already failed (even with no attempt: a receive limit whose dead-letter send failed) is not sent again; its job becomes its dead-letter copy', async () => {
    const { webhook, deps, job } = world({ event: { status: 'failed' } });
    await expect(deliver(deps, job)).resolves.toEqual({ action: 'dead_letter', reason: 'receive_limit', attempt: 0, copy: true });
    expect(webhook.requests).toHaveLength(0);
  });

  test('DEL-OUT-6: a 2xx is recorded over a `stranded` failure the reconciler wrote while the POST was in flight; not over a failure an attempt made', async () => {
    const { store, webhook, deps, job } = world();
    webhook.add(async () => {
      // The reconciler's compare-and-set, as it lands mid-POST: status only, with its note.
      await store.updateEvent(EVENT_ID, { status: 'failed', appendLog: { at: Date.now(), note: 'stranded' } }, { status: 'queued', attempts: 0 });
      return respond(200);
    });
    await expect(deliver(deps, job)).resolves.toEqual({ action: 'done', status: 'delivered', attempt: 1 });
    expect(store.events.get(EVENT_ID)).toMatchObject({ status: 'delivered', attempts: 1 });
    expect(webhook.requests).toHaveLength(1);

    // Another copy's attempt failed it (attempts moved on): that outcome stands.
    const other = world();
    other.webhook.add(async () => {
      await other.store.updateEvent(EVENT_ID, { status: 'failed', attempts: 1, lastError: 'http_4xx' }, { status: 'queued', attempts: 0 });
      return respond(200);
    });
    await expect(deliver(other.deps, other.job)).resolves.toEqual({ action: 'done', status: 'duplicate' });
    expect(other.store.events.get(EVENT_ID)).toMatchObject({ status: 'failed', lastError: 'http_4xx' });
  });

  test('DEL-OUT-7: a job of an event failed with no attempt carries the true reason: `stranded` from the reconciler, `receive_limit` after an earlier error', async () => {
    const stranded = world({ event: { status: 'failed', log: [{ at: T0, note: 'stranded' }] } });
    await expect(deliver(stranded.deps, stranded.job)).resolves.toEqual({ action: 'dead_letter', reason: 'stranded', attempt: 0, copy: true });
    const attempt5xx = { at: T0, outcome: 'http_5xx', statusClass: '5xx', durationMs: 5, counted: true } as const;
    const limit = world({ event: { status: 'failed', attempts: 2, lastError: 'http_5xx', log: [attempt5xx, { at: T0 + 1, note: 'receive_limit' }] } });
    await expect(deliver(limit.deps, limit.job)).resolves.toEqual({ action: 'dead_letter', reason: 'receive_limit', attempt: 2, copy: true });
    const attempt4xx = { at: T0, outcome: 'http_4xx', statusClass: '4xx', durationMs: 5, counted: true } as const;
    const attempted = world({ event: { status: 'failed', attempts: 1, lastError: 'http_4xx', log: [attempt4xx] } });
    await expect(deliver(attempted.deps, attempted.job)).resolves.toEqual({ action: 'dead_letter', reason: 'http_4xx', attempt: 1, copy: true });
    expect([stranded, limit, attempted].flatMap((w) => w.webhook.requests)).toHaveLength(0);
  });

  test('DEL-PIPE-12: no subscription: the event is dropped with no POST', async () => {
    const { store, webhook, deps, job } = world({ subscription: null });
    await expect(deliver(deps, job)).resolves.toEqual({ action: 'done', status: 'dropped' });
    expect(webhook.requests).toHaveLength(0);
    expect(store.events.get(EVENT_ID)?.status).toBe('dropped');
  });

  test('DEL-PIPE-12: an expired subscription: the event is dropped with no POST', async () => {
    const start = Date.now();
    const { store, webhook, deps, job } = world({ start, subscription: { expiresAt: start - 1 } });
    await expect(deliver(deps, job)).resolves.toEqual({ action: 'done', status: 'dropped' });
    expect(webhook.requests).toHaveLength(0);
    expect(store.events.get(EVENT_ID)?.status).toBe('dropped');
  });

  test('DEL-PIPE-12: a subscription with a different id: the event is dropped with no POST', async () => {
    const { store, webhook, deps, job } = world({ subscription: { id: 'sub_ffffffffffffffffffffffffffffffff', url: 'https://other.example.com/cb' } });
    await expect(deliver(deps, job)).resolves.toEqual({ action: 'done', status: 'dropped' });
    expect(webhook.requests).toHaveLength(0);
    expect(store.events.get(EVENT_ID)?.status).toBe('dropped');
    expect(store.subscription?.lastError).toBeUndefined();
  });

  test('DEL-PIPE-15, DEL-PIPE-18: 410 is permanent: dead_letter with status failed after exactly one POST', async () => {
    const { store, webhook, deps, job } = world();
    webhook.add(respond(410));
    await expect(deliver(deps, job)).resolves.toEqual({ action: 'dead_letter', reason: 'http_4xx', attempt: 1, subscriptionEnded: true });
    expect(webhook.requests).toHaveLength(1);
    expect(store.events.get(EVENT_ID)).toMatchObject({ status: 'failed', attempts: 1, lastHttpStatus: 410, lastError: 'http_4xx' });
    // Standard Webhooks: 410 Gone ends the subscription, so a re-added dot can subscribe at once.
    expect(store.subscription).toBeUndefined();
  });

  test('DEL-PIPE-18: 413 is permanent: dead_letter after one POST', async () => {
    const { webhook, deps, job } = world();
    webhook.add(respond(413));
    await expect(deliver(deps, job)).resolves.toEqual({ action: 'dead_letter', reason: 'http_4xx', attempt: 1 });
    expect(webhook.requests).toHaveLength(1);
  });

  test('DEL-PIPE-17: 503 retries with the scheduled delay and keeps the event queued', async () => {
    const { store, webhook, deps, job } = world();
    webhook.add(respond(503));
    await expect(deliver(deps, job)).resolves.toEqual({ action: 'retry', delayMs: 1_000, reason: 'http_5xx', attempt: 1 });
    expect(store.events.get(EVENT_ID)).toMatchObject({ status: 'queued', attempts: 1, lastHttpStatus: 503, lastError: 'http_5xx' });
    expect(store.subscription?.lastError).toBe('http_5xx');
  });

  test('DEL-PIPE-17: a transport failure retries with its category and no HTTP status', async () => {
    const { store, webhook, deps, job } = world();
    webhook.add(transportFailure('timeout'));
    await expect(deliver(deps, job)).resolves.toEqual({ action: 'retry', delayMs: 1_000, reason: 'timeout', attempt: 1 });
    expect(store.events.get(EVENT_ID)).toMatchObject({ status: 'queued', lastHttpStatus: null, lastError: 'timeout' });
  });

  test('DEL-PIPE-17: 503 with a longer Retry-After retries after the Retry-After', async () => {
    const { webhook, deps, job } = world();
    webhook.add(respond(503, '', '120'));
    await expect(deliver(deps, job)).resolves.toEqual({ action: 'retry', delayMs: 120_000, reason: 'http_5xx', attempt: 1 });
  });

  test('DEL-PIPE-17, DEL-PIPE-18, LIM-10: the delays follow the schedule and the 6th transient failure goes to the dead letter', async () => {
    const { store, clock, webhook, deps, job } = world();
    const decisions = [];
    for (let i = 0; i < 6; i += 1) {
      webhook.add(respond(503));
      const decision = await deliver(deps, job);
      decisions.push(decision);
      if (decision.action === 'retry') clock.advance(decision.delayMs);
    }
    expect(decisions.slice(0, 5)).toEqual(SCHEDULE.map((s, i) => ({ action: 'retry', delayMs: s * 1000, reason: 'http_5xx', attempt: i + 1 })));
    expect(decisions[5]).toEqual({ action: 'dead_letter', reason: 'http_5xx', attempt: 6 });
    expect(webhook.requests).toHaveLength(6);
    expect(store.events.get(EVENT_ID)).toMatchObject({ status: 'failed', attempts: 6, lastError: 'http_5xx' });
  });

  test('a success after a transient failure is delivered on attempt 2', async () => {
    const { store, clock, webhook, deps, job } = world();
    webhook.add(transportFailure('connection_refused'), respond(200));
    await deliver(deps, job);
    clock.advance(1_000);
    await expect(deliver(deps, job)).resolves.toEqual({ action: 'done', status: 'delivered', attempt: 2 });
    expect(store.events.get(EVENT_ID)).toMatchObject({ status: 'delivered', attempts: 2, lastError: null });
    expect(store.subscription?.lastError).toBeNull();
  });

  test('DEL-PIPE-11: a second copy of a delivered job (SQS at-least-once) does not POST again', async () => {
    const { webhook, deps, job } = world();
    webhook.add(respond(200));
    await deliver(deps, job);
    await expect(deliver(deps, job)).resolves.toEqual({ action: 'done', status: 'already_final' });
    expect(webhook.requests).toHaveLength(1);
  });

  test('GUARD-11, LIM-3: a body over 256 KiB is refused without a POST', async () => {
    const { webhook, deps, job } = world();
    await expect(deliver(deps, { ...job, body: 'x'.repeat(256 * 1024 + 1) })).rejects.toThrow();
    expect(webhook.requests).toHaveLength(0);
  });
});

describe('deliver after an operator redrive', () => {
  test('a redriven job of a failed event gets a new round: attempts restart at 1', async () => {
    const { store, webhook, deps, job } = world();
    store.events.set(EVENT_ID, { ...store.events.get(EVENT_ID)!, status: 'failed', attempts: 6, lastError: 'http_5xx' });
    webhook.add(respond(503));
    await expect(deliver(deps, { ...job, redriven: true })).resolves.toMatchObject({ action: 'retry', attempt: 1 });
    expect(webhook.requests).toHaveLength(1);
    expect(store.events.get(EVENT_ID)).toMatchObject({ status: 'queued', attempts: 1, lastError: 'http_5xx' });
  });

  test('the same failed event without the redrive mark stays final, nothing is sent, and the job goes back to the DLQ', async () => {
    const { store, webhook, deps, job } = world();
    store.events.set(EVENT_ID, { ...store.events.get(EVENT_ID)!, status: 'failed', attempts: 6, lastError: 'http_5xx' });
    await expect(deliver(deps, job)).resolves.toEqual({ action: 'dead_letter', reason: 'http_5xx', attempt: 6, copy: true });
    expect(webhook.requests).toHaveLength(0);
    expect(store.events.get(EVENT_ID)?.status).toBe('failed');
  });

  test('DEL-PIPE-12: a redriven failed event whose subscription ended is dropped as it failed: nothing is reopened, its attempts, last error and log stay', async () => {
    const { store, webhook, deps, job } = world();
    const attemptLog = [{ at: T0, outcome: 'http_4xx', statusClass: '4xx', durationMs: 5, counted: true }] as const;
    store.events.set(EVENT_ID, {
      ...store.events.get(EVENT_ID)!,
      status: 'failed',
      attempts: 1,
      lastError: 'http_4xx',
      lastHttpStatus: 400,
      log: [...attemptLog],
    });
    store.subscription = { ...store.subscription!, id: `sub_${'e'.repeat(32)}`, generation: 'another' };
    await expect(deliver(deps, { ...job, redriven: true })).resolves.toEqual({ action: 'done', status: 'dropped' });
    expect(webhook.requests).toHaveLength(0);
    expect(store.events.get(EVENT_ID)).toMatchObject({ status: 'dropped', attempts: 1, lastError: 'http_4xx', lastHttpStatus: 400, log: [...attemptLog] });
  });

  test('a redriven job of a delivered event is still skipped', async () => {
    const { store, webhook, deps, job } = world();
    store.events.set(EVENT_ID, { ...store.events.get(EVENT_ID)!, status: 'delivered', attempts: 1 });
    await expect(deliver(deps, { ...job, redriven: true })).resolves.toEqual({ action: 'done', status: 'already_final' });
    expect(webhook.requests).toHaveLength(0);
  });
});

describe('deliver: leases, compare-and-set transitions and expired records', () => {
  test('DEL-PIPE-7: a lease in the future defers the worker: no POST, no attempt counted, the delay is what is left of it', async () => {
    const { store, clock, webhook, deps, job } = world({ start: T0, event: { notBefore: T0 + 2_000 } });
    clock.advance(500);
    await expect(deliver(deps, job)).resolves.toEqual({ action: 'defer', delayMs: 1_500 });
    expect(webhook.requests).toHaveLength(0);
    expect(store.events.get(EVENT_ID)).toMatchObject({ status: 'queued', attempts: 0 });
  });

  test('ARCH-8, DEL-PIPE-7: the inline attempt holds the lease: send and commit only, with its own shorter deadline on the POST', async () => {
    const { store, webhook, deps, job } = world({ start: T0, event: { notBefore: T0 + 4_000 } });
    webhook.add(respond(200));
    const ready: Ready = { kind: 'ready', event: store.events.get(EVENT_ID)!, subscription: store.subscription! };
    store.calls.length = 0;
    const sent = await send(deps, ready, job, { timeoutMs: 2_500 });
    await expect(commit(deps, ready, sent)).resolves.toEqual({ action: 'done', status: 'delivered', attempt: 1 });
    expect(webhook.last.timeoutMs).toBe(2_500);
    // Nothing is read back: the caller holds the event it wrote and the subscription it read.
    expect(store.calls.map((c) => c.method).filter((m) => m.startsWith('get'))).toEqual([]);
  });

  test('the worker POST carries no deadline of its own (the guard applies its 5 s)', async () => {
    const { webhook, deps, job } = world();
    webhook.add(respond(200));
    await deliver(deps, job);
    expect(webhook.last.timeoutMs).toBeUndefined();
  });

  test('DEL-PIPE-7, DEL-PIPE-17: after a transient failure the lease moves to when the next attempt is due, Retry-After included', async () => {
    const { store, clock, webhook, deps, job } = world();
    const start = clock.now();
    webhook.add(respond(429, '', '7'));
    await expect(deliver(deps, job)).resolves.toMatchObject({ action: 'retry', delayMs: 7_000 });
    expect(store.events.get(EVENT_ID)?.notBefore).toBe(start + 7_000);
    // A duplicate copy surfacing early defers instead of sending attempt 2 ahead of time.
    clock.advance(1_000);
    await expect(deliver(deps, job)).resolves.toEqual({ action: 'defer', delayMs: 6_000 });
  });

  test('DEL-PIPE-4: a copy that loses the race to commit its outcome is a duplicate: failed never overwrites delivered', async () => {
    const { store, webhook, deps, job } = world();
    // While this copy's POST is in flight, another copy delivers the event.
    webhook.add(() => {
      Object.assign(store.events.get(EVENT_ID)!, { status: 'delivered', attempts: 1 });
      return respond(404);
    });
    await expect(deliver(deps, job)).resolves.toEqual({ action: 'done', status: 'duplicate' });
    expect(store.events.get(EVENT_ID)).toMatchObject({ status: 'delivered', attempts: 1 });
  });

  test('DEL-LEASE-1: two copies counting the same attempt: the second commit is refused (attempt counts are compared)', async () => {
    const { store, webhook, deps, job } = world();
    webhook.add(() => {
      Object.assign(store.events.get(EVENT_ID)!, { attempts: 1, lastError: 'http_5xx' });
      return respond(503);
    });
    await expect(deliver(deps, job)).resolves.toEqual({ action: 'done', status: 'duplicate' });
    expect(store.events.get(EVENT_ID)).toMatchObject({ attempts: 1 });
  });

  test('two redriven copies of one failed event start one round between them', async () => {
    const { store, webhook, deps, job } = world();
    store.events.set(EVENT_ID, { ...store.events.get(EVENT_ID)!, status: 'failed', attempts: 6, lastError: 'http_5xx' });
    webhook.add(respond(503), respond(503));
    await expect(deliver(deps, { ...job, redriven: true })).resolves.toMatchObject({ action: 'retry', attempt: 1 });
    // The second copy finds the event queued again, under the first copy's lease: it waits its turn
    // instead of resetting the round.
    await expect(deliver(deps, { ...job, redriven: true })).resolves.toMatchObject({ action: 'defer' });
    expect(store.events.get(EVENT_ID)).toMatchObject({ status: 'queued', attempts: 1 });
    expect(webhook.requests).toHaveLength(1);
  });

  test('a job whose record expired (redriven after the record lived out its days) is restored and delivered, not looped', async () => {
    const { store, clock, webhook, deps, job } = world({ start: T0, event: { expiresAt: T0 - 1 } });
    webhook.add(respond(200));
    await expect(deliver(deps, { ...job, redriven: true })).resolves.toEqual({ action: 'done', status: 'delivered', attempt: 1 });
    expect(store.events.get(EVENT_ID)).toMatchObject({ status: 'delivered', attempts: 1, createdAt: clock.now() });
    expect(store.events.get(EVENT_ID)!.expiresAt).toBe(clock.now() + 15 * DAY);
  });

  test('a job with no record at all gets one and its attempts count from 1', async () => {
    const { store, webhook, deps, job } = world({ event: null });
    webhook.add(respond(503));
    await expect(deliver(deps, job)).resolves.toMatchObject({ action: 'retry', attempt: 1 });
    await expect(store.getEvent(EVENT_ID, Date.now())).resolves.toMatchObject({ status: 'queued', attempts: 1 });
  });
});

describe('prepare: what a job may do now', () => {
  test('DEL-PIPE-12, EV-GEN-3: a job of another generation of the same subscription is dropped, not sent (an ended subscription takes its queue with it)', async () => {
    const { store, webhook, deps, job } = world({ subscription: { generation: 'gen-new' } });
    const old = { ...job, generation: 'gen-old' };
    await expect(prepare(deps, old)).resolves.toMatchObject({ kind: 'drop' });
    await expect(deliver(deps, old)).resolves.toEqual({ action: 'done', status: 'dropped' });
    expect(store.events.get(EVENT_ID)).toMatchObject({ status: 'dropped', attempts: 0 });
    expect(webhook.requests).toHaveLength(0);
  });

  test('a job of the live generation is ready with the event and the subscription', async () => {
    const { store, deps, job } = world({ subscription: { generation: 'gen-1' } });
    await expect(prepare(deps, { ...job, generation: 'gen-1' })).resolves.toEqual({
      kind: 'ready',
      event: store.events.get(EVENT_ID),
      subscription: store.subscription,
    });
  });

  test('a job from before generations is judged by the subscription id alone', async () => {
    const { deps, job } = world({ subscription: { generation: 'gen-1' } });
    await expect(prepare(deps, job)).resolves.toMatchObject({ kind: 'ready' });
  });

  test('DEL-PIPE-12, TASK-8: an event whose task was cancelled (dropped) is skipped: no further attempt', async () => {
    const { webhook, deps, job } = world({ event: { status: 'dropped', cancelledAt: Date.now() } });
    await expect(deliver(deps, job)).resolves.toEqual({ action: 'done', status: 'already_final' });
    expect(webhook.requests).toHaveLength(0);
  });
});

describe('commit: the delivery log and the kept bytes', () => {
  test('STORE-7: each attempt is logged with its time, outcome, status class and duration, and the bytes go once delivered', async () => {
    const { store, clock, webhook, deps, job } = world({ event: { body: 'the bytes' } });
    webhook.add(() => {
      clock.advance(40);
      return respond(503);
    });
    await deliver(deps, job);
    clock.advance(1_000);
    webhook.add(() => {
      clock.advance(12);
      return respond(204);
    });
    await expect(deliver(deps, job)).resolves.toEqual({ action: 'done', status: 'delivered', attempt: 2 });
    const record = store.events.get(EVENT_ID)!;
    expect(record.log).toEqual([
      { at: expect.any(Number), outcome: 'http_5xx', statusClass: '5xx', durationMs: 40, counted: true },
      { at: expect.any(Number), outcome: 'delivered', statusClass: '2xx', durationMs: 12, counted: true },
    ]);
    expect(record.body).toBeUndefined();
  });

  test('STORE-7: a transport failure is logged without a status class', async () => {
    const { store, webhook, deps, job } = world();
    webhook.add(transportFailure('connection_refused'));
    await deliver(deps, job);
    expect(store.events.get(EVENT_ID)!.log).toEqual([expect.objectContaining({ outcome: 'connection_refused', statusClass: null, counted: true })]);
  });

  test('DEL-PIPE-8: a POST with no answer within its deadline counts as an attempt (a timeout: the dot may have it) and schedules the next', async () => {
    const { store, clock, webhook, deps, job } = world({ start: T0, event: { notBefore: T0 + 6_000 } });
    webhook.add(() => {
      clock.advance(5_000);
      return transportFailure('timeout');
    });
    const ready: Ready = { kind: 'ready', event: store.events.get(EVENT_ID)!, subscription: store.subscription! };
    const sent = await send(deps, ready, job, { timeoutMs: 5_000 });
    await expect(commit(deps, ready, sent)).resolves.toEqual({ action: 'retry', delayMs: 1_000, reason: 'timeout', attempt: 1 });
    expect(store.events.get(EVENT_ID)).toMatchObject({ attempts: 1, notBefore: clock.now() + 1_000 });
    expect(store.events.get(EVENT_ID)!.log).toEqual([expect.objectContaining({ outcome: 'timeout', statusClass: null, durationMs: 5_000, counted: true })]);
  });

  test('TASK-8: a 2xx that lands after the task was cancelled is recorded as delivered: the dot did get it', async () => {
    const { store, webhook, deps, job } = world();
    webhook.add(() => {
      Object.assign(store.events.get(EVENT_ID)!, { status: 'dropped', cancelledAt: Date.now() });
      return respond(200);
    });
    await expect(deliver(deps, job)).resolves.toEqual({ action: 'done', status: 'delivered', attempt: 1 });
    expect(store.events.get(EVENT_ID)).toMatchObject({ status: 'delivered', attempts: 1 });
  });

  test('TASK-8: a failure that lands after the task was cancelled changes nothing: the event stays dropped', async () => {
    const { store, webhook, deps, job } = world();
    webhook.add(() => {
      Object.assign(store.events.get(EVENT_ID)!, { status: 'dropped', cancelledAt: Date.now() });
      return respond(503);
    });
    await expect(deliver(deps, job)).resolves.toEqual({ action: 'done', status: 'duplicate' });
    expect(store.events.get(EVENT_ID)).toMatchObject({ status: 'dropped', attempts: 0 });
  });
});
