/**
 * The events profile (docs/contract/events.md, profiles): under `sep-3415` the codes -32023..-32027
 * and SEP-3415's three behaviours (NotFound for an unknown unsubscribe, NotFound with
 * `data.kind: "event"` for an unknown event name, a short ttlMs clamped); under the default
 * `chatgpt` everything stays as it was.
 */
import { EVENT_NAME, Limits, type EventsProfileName } from '../../../lambda/core/protocol';
import { buildApp, echoingWebhook, rpcErrorCode, rpcModern, SECRET } from '../../support/app';
import { FakeClock, ScriptedWebhookClient } from '../../support/fakes';

const HOOK = 'https://dot.example/hook';
const subscribe = (extra: Record<string, unknown> = {}) => ({ name: EVENT_NAME, delivery: { mode: 'webhook', url: HOOK, secret: SECRET }, ...extra });
const errorOf = (json: unknown) => (json as { error?: { code: number; message: string; data?: unknown } }).error;

function app(profile?: EventsProfileName, webhook = echoingWebhook) {
  const clock = new FakeClock();
  return { ...buildApp({}, { clock, webhook, ...(profile ? { eventsProfile: profile } : {}) }), clock };
}

describe('sep-3415', () => {
  test('EV-PROF-1: an unknown event name is NotFound (-32023) with data.kind "event" (SEP-3415)', async () => {
    const t = app('sep-3415');
    for (const method of ['events/subscribe', 'events/unsubscribe']) {
      const answer = await rpcModern(t.app, method, { ...subscribe(), name: 'message.deleted' });
      expect(errorOf(answer.json)).toMatchObject({ code: -32023, data: { kind: 'event' } });
    }
  });

  test('EV-PROF-2: unsubscribing a subscription that does not exist is NotFound (-32023) (SEP-3415); an existing one is removed', async () => {
    const t = app('sep-3415');
    expect(rpcErrorCode((await rpcModern(t.app, 'events/unsubscribe', { name: EVENT_NAME, delivery: { url: HOOK } })).json)).toBe(-32023);
    expect(rpcErrorCode((await rpcModern(t.app, 'events/subscribe', subscribe())).json)).toBeUndefined();
    expect(rpcErrorCode((await rpcModern(t.app, 'events/unsubscribe', { name: EVENT_NAME, delivery: { url: 'https://other.example/hook' } })).json)).toBe(
      -32023,
    );
    expect(t.store.subscription).toBeDefined();
    expect(rpcErrorCode((await rpcModern(t.app, 'events/unsubscribe', { name: EVENT_NAME, delivery: { url: HOOK } })).json)).toBeUndefined();
    expect(t.store.subscription).toBeUndefined();
  });

  test('EV-PROF-3: a ttlMs below 60 s is clamped to 60 s instead of refused (SEP-3415)', async () => {
    const t = app('sep-3415');
    const answer = await rpcModern(t.app, 'events/subscribe', subscribe({ ttlMs: 1000 }));
    expect(rpcErrorCode(answer.json)).toBeUndefined();
    expect((answer.json as { result: { refreshBefore: string } }).result.refreshBefore).toBe(new Date(t.clock.now() + Limits.ttlMinMs).toISOString());
    expect(rpcErrorCode((await rpcModern(t.app, 'events/subscribe', subscribe({ ttlMs: -5 }))).json)).toBe(-32602);
  });

  test('EV-PROF-4: a failed callback challenge is CallbackEndpointError -32027 with its reason (SEP-3415)', async () => {
    const webhook = new ScriptedWebhookClient({ kind: 'response', status: 500, body: new Uint8Array() });
    const t = app('sep-3415', webhook);
    const answer = await rpcModern(t.app, 'events/subscribe', subscribe());
    expect(errorOf(answer.json)).toMatchObject({ code: -32027, message: 'CallbackEndpointError', data: { reason: 'http_5xx' } });
  });
});

describe('chatgpt (the default): nothing changes', () => {
  test('EV-PROF-5: unknown event -32602, unknown unsubscribe complete, short ttlMs -32602, challenge failure -32015', async () => {
    const t = app();
    expect(rpcErrorCode((await rpcModern(t.app, 'events/subscribe', { ...subscribe(), name: 'message.deleted' })).json)).toBe(-32602);
    expect(rpcErrorCode((await rpcModern(t.app, 'events/unsubscribe', { name: EVENT_NAME, delivery: { url: HOOK } })).json)).toBeUndefined();
    expect(rpcErrorCode((await rpcModern(t.app, 'events/subscribe', subscribe({ ttlMs: 1000 }))).json)).toBe(-32602);
    const webhook = new ScriptedWebhookClient({ kind: 'response', status: 500, body: new Uint8Array() });
    const failing = app('chatgpt', webhook);
    expect(rpcErrorCode((await rpcModern(failing.app, 'events/subscribe', subscribe())).json)).toBe(-32015);
  });
});
