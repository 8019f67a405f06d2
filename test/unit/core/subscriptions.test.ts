/**
 * Subscribe, refresh and unsubscribe (docs/contract/events.md) against in-memory fakes: the callback
 * challenge, the 24 h verification cache, the single-subscriber rule and secret rotation.
 */
import { randomBytes } from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import { runWithDeadline, webhookWithinDeadline } from '../../../lambda/adapters/deadline';
import { Budgets } from '../../../lambda/core/budgets';
import { deliver } from '../../../lambda/core/delivery';
import { DependencyUnavailable, ProtocolFault } from '../../../lambda/core/errors';
import { principalOf, subscriptionIdOf } from '../../../lambda/core/identity';
import { verifyInbound } from '../../../lambda/core/inbound';
import { DEFAULT_RETRY_DELAYS_S, type FailureReason } from '../../../lambda/core/protocol';
import { subscribe, unsubscribe, type SubscriptionDeps } from '../../../lambda/core/subscriptions';
import type { SubscriptionRecord, TransportFailure, WebhookResponse } from '../../../lambda/ports';
import { FakeClock, FakeStore, ScriptedWebhookClient, bodyText, echoChallenge, respond, transportFailure } from '../../support/fakes';

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;
const ISO_UTC = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

const newSecret = () => `whsec_${randomBytes(32).toString('base64')}`;
const SECRET = newSecret();
const PRINCIPAL = principalOf('test-api-key');
const URL_A = 'https://dot.example.com/hooks?b=2&a=1&x=%2F';
const URL_B = 'https://other-dot.example.net/private/callback?token=abc';
const ID_A = subscriptionIdOf(PRINCIPAL, URL_A, 'message.created', {});

function params(overrides: { url?: string; secret?: string; ttlMs?: number | null } = {}): Record<string, unknown> {
  const base: Record<string, unknown> = {
    name: 'message.created',
    arguments: {},
    delivery: { mode: 'webhook', url: overrides.url ?? URL_A, secret: overrides.secret ?? SECRET },
  };
  if ('ttlMs' in overrides) base.ttlMs = overrides.ttlMs;
  return base;
}

function unsubscribeParams(url: string): Record<string, unknown> {
  return { name: 'message.created', arguments: {}, delivery: { mode: 'webhook', url } };
}

function world(start = Date.now()) {
  const clock = new FakeClock(start);
  const store = new FakeStore();
  const webhook = new ScriptedWebhookClient();
  const deps: SubscriptionDeps = { store, webhook, clock, urlPolicy: { allowLoopbackCallbacks: false } };
  return { clock, store, webhook, deps, start };
}

function otherSubscription(now: number, overrides: Partial<SubscriptionRecord> = {}): SubscriptionRecord {
  return {
    id: subscriptionIdOf(PRINCIPAL, URL_B, 'message.created', {}),
    url: URL_B,
    name: 'message.created',
    secret: newSecret(),
    principal: PRINCIPAL,
    createdAt: now - HOUR,
    refreshedAt: now - HOUR,
    expiresAt: now + DAY,
    ...overrides,
  };
}

async function faultOf(promise: Promise<unknown>): Promise<ProtocolFault> {
  try {
    await promise;
  } catch (error) {
    if (error instanceof ProtocolFault) return error;
    throw error;
  }
  throw new Error('expected a ProtocolFault, the call succeeded');
}

/** A 2xx answer that echoes something computed from the nonce. */
function echoing(status: number, make: (nonce: string) => string): (request: { body: Uint8Array }) => WebhookResponse {
  return (request) => {
    const { challenge } = JSON.parse(new TextDecoder().decode(request.body)) as { challenge: string };
    return respond(status, make(challenge));
  };
}

describe('callback challenge', () => {
  test('ARCH-4, EV-CHAL-1, EV-CHAL-2, EV-CHAL-3, EV-CHAL-4, EV-CHAL-6: is one POST to the url exactly as given, with the Standard Webhooks and MCP headers', async () => {
    const { clock, webhook, deps } = world();
    webhook.add(echoChallenge);
    await subscribe(deps, PRINCIPAL, params());
    expect(webhook.requests).toHaveLength(1);
    const { url, headers } = webhook.last;
    expect(url).toBe(URL_A);
    expect(headers['content-type']).toBe('application/json');
    expect(headers['webhook-id']).toMatch(/^msg_verification_[A-Za-z0-9_-]{32}$/);
    expect(headers['webhook-timestamp']).toBe(String(Math.floor(clock.now() / 1000)));
    expect(headers['x-mcp-subscription-id']).toBe(ID_A);
  });

  test('EV-CHAL-2: the body is exactly {type:"verification", challenge}', async () => {
    const { webhook, deps } = world();
    webhook.add(echoChallenge);
    await subscribe(deps, PRINCIPAL, params());
    const body = JSON.parse(bodyText(webhook.last)) as Record<string, unknown>;
    expect(Object.keys(body).sort()).toEqual(['challenge', 'type']);
    expect(body.type).toBe('verification');
    expect(typeof body.challenge).toBe('string');
    expect((body.challenge as string).length).toBeGreaterThanOrEqual(32);
  });

  test('EV-CHAL-5: the signature verifies with standardwebhooks under the subscription secret', async () => {
    const { webhook, deps } = world();
    webhook.add(echoChallenge);
    await subscribe(deps, PRINCIPAL, params());
    const { headers, body } = webhook.last;
    expect(new Webhook(SECRET).verify(Buffer.from(body), headers)).toMatchObject({ type: 'verification' });
    expect(() => new Webhook(newSecret()).verify(Buffer.from(body), headers)).toThrow();
  });

  test('EV-CHAL-3, EV-CHAL-7: each challenge carries a fresh nonce and a fresh message id', async () => {
    const { clock, webhook, deps } = world();
    webhook.add(echoChallenge, echoChallenge);
    await subscribe(deps, PRINCIPAL, params());
    clock.advance(DAY);
    await subscribe(deps, PRINCIPAL, params());
    const [first, second] = webhook.requests;
    expect(JSON.parse(bodyText(first!)).challenge).not.toBe(JSON.parse(bodyText(second!)).challenge);
    expect(first!.headers['webhook-id']).not.toBe(second!.headers['webhook-id']);
  });

  test('EV-CHAL-8, EV-SUB-13: passes on an exact echo and writes the subscription', async () => {
    const { store, webhook, deps, start } = world();
    webhook.add(echoChallenge);
    await expect(subscribe(deps, PRINCIPAL, params())).resolves.toEqual({
      id: ID_A,
      refreshBefore: new Date(start + 7 * DAY).toISOString(),
      cursor: null,
      truncated: false,
    });
    expect(store.subscription).toMatchObject({
      id: ID_A,
      url: URL_A,
      name: 'message.created',
      secret: SECRET,
      principal: PRINCIPAL,
      expiresAt: start + 7 * DAY,
    });
  });

  test('EV-CHAL-8: an echo with extra fields in the response still passes', async () => {
    const { webhook, deps } = world();
    webhook.add(echoing(200, (nonce) => JSON.stringify({ ok: true, challenge: nonce })));
    await expect(subscribe(deps, PRINCIPAL, params())).resolves.toMatchObject({ id: ID_A });
  });

  const failures: Array<[string, FailureReason, WebhookResponse | ((request: { body: Uint8Array }) => WebhookResponse)]> = [
    ['a wrong echo', 'challenge_failed', respond(200, { challenge: 'not-the-nonce' })],
    ['an echo with a trailing space', 'challenge_failed', echoing(200, (nonce) => JSON.stringify({ challenge: `${nonce} ` }))],
    ['an echo of a prefix', 'challenge_failed', echoing(200, (nonce) => JSON.stringify({ challenge: nonce.slice(0, -1) }))],
    ['an echo that is not a string', 'challenge_failed', respond(200, { challenge: 12345 })],
    ['a missing echo', 'challenge_failed', respond(200, {})],
    ['an empty 204', 'challenge_failed', respond(204)],
    ['a non-JSON body', 'challenge_failed', respond(200, 'OK')],
    ['the nonce as plain text', 'challenge_failed', echoing(200, (nonce) => nonce)],
    ['JSON null', 'challenge_failed', respond(200, 'null')],
    ['a 3xx with a correct echo (never followed)', 'challenge_failed', echoing(302, (nonce) => JSON.stringify({ challenge: nonce }))],
    ['a 1xx', 'challenge_failed', respond(100)],
    ['400', 'http_4xx', respond(400)],
    ['404', 'http_4xx', respond(404)],
    ['410', 'http_4xx', respond(410)],
    ['429', 'http_4xx', respond(429)],
    ['a 4xx with a correct echo', 'http_4xx', echoing(403, (nonce) => JSON.stringify({ challenge: nonce }))],
    ['500', 'http_5xx', respond(500)],
    ['503', 'http_5xx', respond(503)],
  ];

  test.each(failures)('EV-CHAL-8, EV-CHAL-9, EV-SUB-16: %s fails with -32015 and data.reason %s', async (_label, reason, answer) => {
    const { store, webhook, deps } = world();
    webhook.add(answer);
    const fault = await faultOf(subscribe(deps, PRINCIPAL, params()));
    expect(fault.code).toBe(-32015);
    expect(fault.message).toBe('CallbackEndpointError');
    expect(fault.data).toEqual({ reason });
    expect(store.subscription).toBeUndefined();
    expect(store.verified.size).toBe(0);
  });

  test.each<[TransportFailure, FailureReason]>([
    ['timeout', 'timeout'],
    ['tls_error', 'tls_error'],
    ['connection_refused', 'connection_refused'],
    ['bad_response', 'challenge_failed'],
  ])('EV-CHAL-9: transport failure %s maps to data.reason %s', async (failure, reason) => {
    const { store, webhook, deps } = world();
    webhook.add(transportFailure(failure));
    const fault = await faultOf(subscribe(deps, PRINCIPAL, params()));
    expect(fault.code).toBe(-32015);
    expect(fault.data).toEqual({ reason });
    expect(store.subscription).toBeUndefined();
  });

  test('EV-CHAL-9: a challenge the request deadline left no time to start is a timeout, not an internal error', async () => {
    const { store, webhook, deps } = world();
    // What the runtimes wire: the POST gets what is left of the request deadline, here too little to start.
    const onDeadline = { ...deps, webhook: webhookWithinDeadline(webhook, 0) };
    const fault = await faultOf(runWithDeadline(Date.now() + Budgets.minPostMs - 1, () => subscribe(onDeadline, PRINCIPAL, params())));
    expect(fault).toMatchObject({ code: -32015, data: { reason: 'timeout' } });
    expect(webhook.requests).toHaveLength(0);
    expect(store.subscription).toBeUndefined();
    expect(store.verified.size).toBe(0);
  });

  test('EV-CHAL-10: the error never carries the endpoint status line or body', async () => {
    const { webhook, deps } = world();
    webhook.add(respond(500, 'Internal error: stack trace at /srv/app.js:12 token=hunter2'));
    const fault = await faultOf(subscribe(deps, PRINCIPAL, params()));
    const shown = JSON.stringify({ message: fault.message, data: fault.data });
    expect(shown).not.toMatch(/hunter2|stack trace|500/);
  });
});

describe('EV-SUB-11, STORE-8: verification cache', () => {
  test('LIM-8: a second subscribe within 24 h sends no second challenge', async () => {
    const { clock, webhook, deps } = world();
    webhook.add(echoChallenge);
    await subscribe(deps, PRINCIPAL, params());
    clock.advance(DAY - 1);
    await expect(subscribe(deps, PRINCIPAL, params())).resolves.toMatchObject({ id: ID_A });
    expect(webhook.requests).toHaveLength(1);
  });

  test('LIM-8: after 24 h a new challenge is sent', async () => {
    const { clock, webhook, deps } = world();
    webhook.add(echoChallenge, echoChallenge);
    await subscribe(deps, PRINCIPAL, params());
    clock.advance(DAY);
    await subscribe(deps, PRINCIPAL, params());
    expect(webhook.requests).toHaveLength(2);
  });

  test('after 24 h a failing challenge fails the refresh', async () => {
    const { clock, webhook, deps } = world();
    webhook.add(echoChallenge, respond(404));
    await subscribe(deps, PRINCIPAL, params());
    clock.advance(DAY);
    const fault = await faultOf(subscribe(deps, PRINCIPAL, params()));
    expect(fault.data).toEqual({ reason: 'http_4xx' });
  });

  test('after 24 h a refresh challenge answered 410 ends the live subscription: a new callback can subscribe at once', async () => {
    const { clock, store, webhook, deps } = world();
    webhook.add(echoChallenge, respond(410), echoChallenge);
    await subscribe(deps, PRINCIPAL, params());
    clock.advance(DAY);
    const fault = await faultOf(subscribe(deps, PRINCIPAL, params()));
    expect(fault.data).toEqual({ reason: 'http_4xx' });
    expect(store.subscription).toBeUndefined();
    await expect(subscribe(deps, PRINCIPAL, params({ url: URL_B }))).resolves.toMatchObject({ id: subscriptionIdOf(PRINCIPAL, URL_B, 'message.created', {}) });
  });

  test('a 404 from the refresh challenge leaves the live subscription in place (only 410 means gone)', async () => {
    const { clock, store, webhook, deps } = world();
    webhook.add(echoChallenge, respond(404));
    await subscribe(deps, PRINCIPAL, params());
    clock.advance(DAY);
    await faultOf(subscribe(deps, PRINCIPAL, params()));
    expect(store.subscription?.url).toBe(URL_A);
  });

  test('the cache is per principal: another API key is challenged again', async () => {
    const { store, webhook, deps } = world();
    webhook.add(echoChallenge, echoChallenge);
    await subscribe(deps, PRINCIPAL, params());
    await unsubscribe(deps, unsubscribeParams(URL_A));
    await subscribe(deps, principalOf('another-api-key'), params());
    expect(webhook.requests).toHaveLength(2);
    expect(store.subscription?.id).toBe(subscriptionIdOf(principalOf('another-api-key'), URL_A, 'message.created', {}));
  });

  test('the cache is per url: another callback is challenged again', async () => {
    const { webhook, deps } = world();
    webhook.add(echoChallenge, echoChallenge);
    await subscribe(deps, PRINCIPAL, params());
    await unsubscribe(deps, unsubscribeParams(URL_A));
    await subscribe(deps, PRINCIPAL, params({ url: URL_B }));
    expect(webhook.requests.map((r) => r.url)).toEqual([URL_A, URL_B]);
  });

  test('a failed challenge is not cached', async () => {
    const { webhook, deps } = world();
    webhook.add(respond(503), echoChallenge);
    await faultOf(subscribe(deps, PRINCIPAL, params()));
    await expect(subscribe(deps, PRINCIPAL, params())).resolves.toMatchObject({ id: ID_A });
    expect(webhook.requests).toHaveLength(2);
  });
});

describe('single subscriber', () => {
  test('ARCH-9, EV-SUB-15: another live callback: -32000 without revealing its URL, and no challenge to the new URL', async () => {
    const { store, webhook, deps, start } = world();
    const holder = otherSubscription(start);
    store.subscription = holder;
    const fault = await faultOf(subscribe(deps, PRINCIPAL, params()));
    expect(fault.code).toBe(-32000);
    expect(fault.message).toMatch(/another callback/);
    expect(fault.message).not.toContain(URL_B);
    expect(fault.message).not.toContain('other-dot.example.net');
    expect(JSON.stringify(fault.data ?? null)).not.toContain('other-dot.example.net');
    expect(webhook.requests).toHaveLength(0);
    expect(store.subscription).toEqual(holder);
  });

  test('an expired subscription does not block a new callback', async () => {
    const { store, webhook, deps, start } = world();
    store.subscription = otherSubscription(start, { expiresAt: start - 1 });
    webhook.add(echoChallenge);
    await expect(subscribe(deps, PRINCIPAL, params())).resolves.toMatchObject({ id: ID_A });
    expect(webhook.requests).toHaveLength(1);
    expect(store.subscription?.url).toBe(URL_A);
  });

  test('subscribing over an expired subscription is a fresh subscribe, not a refresh', async () => {
    const { store, webhook, deps, start } = world();
    store.subscription = otherSubscription(start, { expiresAt: start - 1, lastError: 'http_5xx' });
    webhook.add(echoChallenge);
    const result = await subscribe(deps, PRINCIPAL, params());
    expect(result.deliveryStatus).toBeUndefined();
    expect(store.subscription?.previousSecret).toBeUndefined();
  });

  test('ARCH-9, EV-SUB-15: losing the conditional put to a concurrent subscribe gives -32000 without revealing the winner', async () => {
    const { store, webhook, deps, start } = world();
    store.before.putSubscription = () => {
      store.subscription = otherSubscription(start);
    };
    webhook.add(echoChallenge);
    const fault = await faultOf(subscribe(deps, PRINCIPAL, params()));
    expect(fault.code).toBe(-32000);
    expect(fault.message).not.toContain(URL_B);
    expect(store.subscription?.url).toBe(URL_B);
  });
});

describe('refresh', () => {
  async function subscribed() {
    const w = world();
    w.webhook.add(echoChallenge);
    await subscribe(w.deps, PRINCIPAL, params());
    return w;
  }

  test('EV-REF-1, EV-REF-2, LIM-7: a new secret moves the old one to previousSecret until now + 10 minutes', async () => {
    const { store, clock, webhook, deps } = await subscribed();
    clock.advance(5 * MINUTE);
    const newer = newSecret();
    webhook.add(echoChallenge);
    await subscribe(deps, PRINCIPAL, params({ secret: newer }));
    expect(store.subscription).toMatchObject({ secret: newer, previousSecret: SECRET, previousSecretUntil: clock.now() + 10 * MINUTE });
  });

  test('the same secret sets no previous secret', async () => {
    const { store, clock, deps } = await subscribed();
    clock.advance(MINUTE);
    await subscribe(deps, PRINCIPAL, params());
    expect(store.subscription?.previousSecret).toBeUndefined();
    expect(store.subscription?.previousSecretUntil).toBeUndefined();
  });

  test('refreshing with the same secret during an overlap keeps the overlap as it was', async () => {
    const { store, clock, webhook, deps } = await subscribed();
    const newer = newSecret();
    clock.advance(MINUTE);
    webhook.add(echoChallenge);
    await subscribe(deps, PRINCIPAL, params({ secret: newer }));
    const until = clock.now() + 10 * MINUTE;
    clock.advance(MINUTE);
    await subscribe(deps, PRINCIPAL, params({ secret: newer }));
    expect(store.subscription).toMatchObject({ secret: newer, previousSecret: SECRET, previousSecretUntil: until });
  });

  test('DEL-PIPE-20, EV-SUB-14: a refresh returns deliveryStatus from the stored outcome', async () => {
    const { store, clock, webhook, deps } = await subscribed();
    webhook.add(echoChallenge);
    const deliveredAt = clock.now() + 1_000;
    store.subscription!.lastDeliveryAt = deliveredAt;
    store.subscription!.lastError = 'timeout';
    clock.advance(MINUTE);
    const result = await subscribe(deps, PRINCIPAL, params({ secret: newSecret() }));
    expect(result.deliveryStatus).toEqual({ active: true, lastDeliveryAt: new Date(deliveredAt).toISOString(), lastError: 'timeout' });
  });

  test('EV-SUB-14: a refresh with no delivery yet reports null lastDeliveryAt and lastError', async () => {
    const { clock, deps } = await subscribed();
    clock.advance(MINUTE);
    const result = await subscribe(deps, PRINCIPAL, params());
    expect(result.deliveryStatus).toEqual({ active: true, lastDeliveryAt: null, lastError: null });
  });

  test('EV-SUB-14: a first subscribe carries no deliveryStatus', async () => {
    const { webhook, deps } = world();
    webhook.add(echoChallenge);
    const result = await subscribe(deps, PRINCIPAL, params());
    expect('deliveryStatus' in result).toBe(false);
  });

  test('EV-REF-1: a refresh keeps the id and createdAt and extends expiresAt', async () => {
    const { store, clock, deps, start } = await subscribed();
    clock.advance(HOUR);
    const result = await subscribe(deps, PRINCIPAL, params({ ttlMs: 2 * HOUR }));
    expect(result.id).toBe(ID_A);
    expect(store.subscription).toMatchObject({ id: ID_A, createdAt: start, refreshedAt: start + HOUR, expiresAt: start + 3 * HOUR });
  });
});

describe('refreshBefore', () => {
  test.each([
    ['absent ttlMs', undefined, 7 * DAY],
    ['null ttlMs', null, 7 * DAY],
    ['60,000', 60_000, 60_000],
    ['over 7 days', 30 * DAY, 7 * DAY],
  ])('EV-SUB-9, EV-SUB-10: is ISO 8601 UTC ending in Z and equals now + the grant (%s)', async (_label, ttlMs, grant) => {
    const { store, webhook, deps, start } = world();
    webhook.add(echoChallenge);
    const result = await subscribe(deps, PRINCIPAL, ttlMs === undefined ? params() : params({ ttlMs }));
    expect(result.refreshBefore).toMatch(ISO_UTC);
    expect(result.refreshBefore).toBe(new Date(start + grant).toISOString());
    expect(Date.parse(result.refreshBefore)).toBe(store.subscription!.expiresAt);
  });
});

describe('refreshBefore under an operator TTL policy', () => {
  test.each([
    ['absent ttlMs gets the configured default', undefined, HOUR],
    ['a request over the cap gets the cap', 7 * DAY, 2 * HOUR],
  ])('%s', async (_label, ttlMs, grant) => {
    const { store, webhook, deps, start } = world();
    webhook.add(echoChallenge);
    const result = await subscribe({ ...deps, ttlPolicy: { defaultMs: HOUR, maxMs: 2 * HOUR } }, PRINCIPAL, ttlMs === undefined ? params() : params({ ttlMs }));
    expect(result.refreshBefore).toBe(new Date(start + grant).toISOString());
    expect(store.subscription!.expiresAt).toBe(start + grant);
  });
});

describe('subscribe failures before any I/O', () => {
  test('invalid params fail with -32602 with no challenge and no storage access', async () => {
    const { store, webhook, deps } = world();
    const fault = await faultOf(subscribe(deps, PRINCIPAL, params({ url: 'http://dot.example.com/cb' })));
    expect(fault.code).toBe(-32602);
    expect(webhook.requests).toHaveLength(0);
    expect(store.calls).toEqual([]);
  });

  test('EV-SUB-17: storage unavailable on the read: DependencyUnavailable(storage) and no challenge', async () => {
    const { store, webhook, deps } = world();
    store.failing.add('getStoredSubscription');
    await expect(subscribe(deps, PRINCIPAL, params())).rejects.toMatchObject({ name: 'DependencyUnavailable', dependency: 'storage' });
    expect(webhook.requests).toHaveLength(0);
  });

  test('EV-SUB-17: storage unavailable on the write: DependencyUnavailable(storage)', async () => {
    const { store, webhook, deps } = world();
    store.failing.add('putSubscription');
    webhook.add(echoChallenge);
    const error = await subscribe(deps, PRINCIPAL, params()).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(DependencyUnavailable);
    expect((error as DependencyUnavailable).dependency).toBe('storage');
  });
});

describe('unsubscribe', () => {
  test('EV-UNSUB-2: deletes the subscription with the matching url', async () => {
    const { store, webhook, deps } = world();
    webhook.add(echoChallenge);
    await subscribe(deps, PRINCIPAL, params());
    await expect(unsubscribe(deps, unsubscribeParams(URL_A))).resolves.toBeUndefined();
    expect(store.subscription).toBeUndefined();
  });

  test('EV-UNSUB-3: is idempotent: a second unsubscribe succeeds too', async () => {
    const { store, webhook, deps } = world();
    webhook.add(echoChallenge);
    await subscribe(deps, PRINCIPAL, params());
    await unsubscribe(deps, unsubscribeParams(URL_A));
    await expect(unsubscribe(deps, unsubscribeParams(URL_A))).resolves.toBeUndefined();
    expect(store.subscription).toBeUndefined();
  });

  test('EV-UNSUB-2, EV-UNSUB-3: never deletes a different url’s subscription', async () => {
    const { store, deps, start } = world();
    const holder = otherSubscription(start);
    store.subscription = holder;
    await expect(unsubscribe(deps, unsubscribeParams(URL_A))).resolves.toBeUndefined();
    expect(store.subscription).toEqual(holder);
  });

  test('EV-UNSUB-2: the url must match byte-exact: a reordered query string deletes nothing', async () => {
    const { store, webhook, deps } = world();
    webhook.add(echoChallenge);
    await subscribe(deps, PRINCIPAL, params());
    await unsubscribe(deps, unsubscribeParams('https://dot.example.com/hooks?a=1&b=2&x=%2F'));
    expect(store.subscription?.url).toBe(URL_A);
  });

  test('sends nothing to the callback', async () => {
    const { webhook, deps } = world();
    webhook.add(echoChallenge);
    await subscribe(deps, PRINCIPAL, params());
    await unsubscribe(deps, unsubscribeParams(URL_A));
    expect(webhook.requests).toHaveLength(1);
  });

  test('invalid params fail with -32602 and touch no storage', async () => {
    const { store, deps } = world();
    const fault = await faultOf(unsubscribe(deps, { name: 'other.event', delivery: { url: URL_A } }));
    expect(fault.code).toBe(-32602);
    expect(store.calls).toEqual([]);
  });

  test('storage unavailable: DependencyUnavailable(storage)', async () => {
    const { store, deps } = world();
    store.failing.add('deleteSubscription');
    await expect(unsubscribe(deps, unsubscribeParams(URL_A))).rejects.toMatchObject({ dependency: 'storage' });
  });

  test('EV-UNSUB-4: queued deliveries for the removed subscription are dropped, not sent', async () => {
    const { store, clock, webhook, deps } = world();
    webhook.add(echoChallenge);
    await subscribe(deps, PRINCIPAL, params());
    const eventId = 'evt_00000000000000000000000000000001';
    store.events.set(eventId, { eventId, status: 'queued', subscriptionId: ID_A, attempts: 0, createdAt: clock.now(), expiresAt: clock.now() + 7 * DAY });
    await unsubscribe(deps, unsubscribeParams(URL_A));
    const decision = await deliver({ store, webhook, clock, retryDelaysS: DEFAULT_RETRY_DELAYS_S }, { eventId, subscriptionId: ID_A, body: '{}' });
    expect(decision).toEqual({ action: 'done', status: 'dropped' });
    expect(webhook.requests).toHaveLength(1);
    expect(store.events.get(eventId)?.status).toBe('dropped');
  });
});

describe('a new secret is proven before it signs anything', () => {
  test('EV-SUB-12: a refresh with a new secret within 24 h is challenged, and the challenge is signed with the new secret', async () => {
    const { store, clock, webhook, deps } = world();
    webhook.add(echoChallenge);
    await subscribe(deps, PRINCIPAL, params());
    clock.advance(HOUR);
    const newer = newSecret();
    webhook.add(echoChallenge);
    await subscribe(deps, PRINCIPAL, params({ secret: newer }));
    expect(webhook.requests).toHaveLength(2);
    const challenge = webhook.requests[1]!;
    const headers = {
      id: challenge.headers['webhook-id'],
      timestamp: challenge.headers['webhook-timestamp'],
      signature: challenge.headers['webhook-signature'],
    };
    expect(verifyInbound({ secrets: [newer] }, headers, challenge.body, clock.now())).toMatchObject({ ok: true });
    expect(verifyInbound({ secrets: [SECRET] }, headers, challenge.body, clock.now())).toMatchObject({ ok: false });
    expect(store.subscription?.secret).toBe(newer);
  });

  test('EV-SUB-12: a refresh whose new secret the callback cannot prove is refused, and the old secret stays in force', async () => {
    const { store, clock, webhook, deps } = world();
    webhook.add(echoChallenge);
    await subscribe(deps, PRINCIPAL, params());
    clock.advance(HOUR);
    // The real dot does not know this secret: it answers with a wrong echo.
    webhook.add(respond(200, { challenge: 'not-the-nonce' }));
    const fault = await faultOf(subscribe(deps, PRINCIPAL, params({ secret: newSecret() })));
    expect(fault).toMatchObject({ code: -32015, data: { reason: 'challenge_failed' } });
    expect(store.subscription).toMatchObject({ secret: SECRET });
    expect(store.subscription?.previousSecret).toBeUndefined();
  });

  test('the same secret within 24 h is not challenged again', async () => {
    const { clock, webhook, deps } = world();
    webhook.add(echoChallenge);
    await subscribe(deps, PRINCIPAL, params());
    clock.advance(23 * HOUR);
    await subscribe(deps, PRINCIPAL, params());
    expect(webhook.requests).toHaveLength(1);
  });
});

describe('generation', () => {
  test('EV-GEN-1, EV-GEN-2: a first subscribe starts a generation; a refresh keeps it', async () => {
    const { store, clock, webhook, deps } = world();
    webhook.add(echoChallenge);
    await subscribe(deps, PRINCIPAL, params());
    const generation = store.subscription!.generation;
    expect(generation).toMatch(/^[0-9a-f]{16}$/);
    clock.advance(MINUTE);
    await subscribe(deps, PRINCIPAL, params());
    expect(store.subscription!.generation).toBe(generation);
  });

  test('EV-GEN-1, EV-UNSUB-4: after an unsubscribe the same callback gets a new generation (its old queue is dropped)', async () => {
    const { store, webhook, deps } = world();
    webhook.add(echoChallenge);
    await subscribe(deps, PRINCIPAL, params());
    const first = store.subscription!.generation;
    await unsubscribe(deps, unsubscribeParams(URL_A));
    await subscribe(deps, PRINCIPAL, params());
    expect(store.subscription!.generation).not.toBe(first);
    expect(store.subscription!.id).toBe(ID_A);
  });

  test('EV-GEN-2: after mere expiry, with the item still stored, the same callback keeps its generation', async () => {
    const { store, clock, webhook, deps } = world();
    webhook.add(echoChallenge);
    await subscribe(deps, PRINCIPAL, params({ ttlMs: 60_000 }));
    const first = store.subscription!.generation;
    clock.advance(2 * MINUTE);
    const result = await subscribe(deps, PRINCIPAL, params());
    expect(store.subscription!.generation).toBe(first);
    // Not a refresh for everything else: the subscription starts over.
    expect(result.deliveryStatus).toBeUndefined();
  });

  test('EV-GEN-2: another callback over an expired item gets a generation of its own', async () => {
    const { store, webhook, deps, start } = world();
    store.subscription = otherSubscription(start, { expiresAt: start - 1, generation: 'gen-other' });
    webhook.add(echoChallenge);
    await subscribe(deps, PRINCIPAL, params());
    expect(store.subscription!.generation).not.toBe('gen-other');
  });

  test('EV-GEN-1: an unsubscribe that lands while the refresh challenge runs is not undone: the refresh starts a new generation', async () => {
    const { store, clock, webhook, deps } = world();
    webhook.add(echoChallenge);
    await subscribe(deps, PRINCIPAL, params());
    const first = store.subscription!.generation;
    clock.advance(MINUTE);
    webhook.add((request) => {
      // The operator clears the subscription while the (new secret's) challenge is in flight.
      store.subscription = undefined;
      return echoChallenge(request);
    });
    await subscribe(deps, PRINCIPAL, params({ secret: newSecret() }));
    expect(store.subscription!.generation).not.toBe(first);
    expect(store.callsOf('putSubscription')).toHaveLength(3);
  });

  test('a subscription item from before generations gets one at its next subscribe', async () => {
    const { store, webhook, deps, start } = world();
    webhook.add(echoChallenge);
    await subscribe(deps, PRINCIPAL, params());
    delete store.subscription!.generation;
    void start;
    await subscribe(deps, PRINCIPAL, params());
    expect(store.subscription!.generation).toMatch(/^[0-9a-f]{16}$/);
  });
});
