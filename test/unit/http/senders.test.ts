/**
 * Keys at the door of the HTTP app (docs/contract/http.md, keys): sender keys (send-only,
 * revocable, rate-limited, named in the delivery log), the connector key's rotation with an
 * overlap, the deployment's stable principal, and the events profile's Forbidden code.
 */
import { createAuthenticator, keyHashOf, newSenderKey, senderNameOf } from '../../../lambda/core/access';
import { principalOf, subscriptionIdOf } from '../../../lambda/core/identity';
import { AccessLimits, EVENT_NAME, type EventsProfileName } from '../../../lambda/core/protocol';
import { addSender, recordRotation, revokeSender } from '../../../lambda/operator/access';
import {
  API_KEY,
  buildApp,
  echoingWebhook,
  keyQuery,
  liveSubscription,
  modernBody,
  modernHeaders,
  rpcErrorCode,
  SECRET,
  send,
  type Answer,
} from '../../support/app';
import { FakeAccessStore, FakeClock, FakeStore, T0 } from '../../support/fakes';
import type { App } from '../../../lambda/http/app';

const HOOK = 'https://dot.example/hook';
const subscribeParams = { name: EVENT_NAME, delivery: { mode: 'webhook', url: HOOK, secret: SECRET } };

function call(app: App, key: string, method: string, params: Record<string, unknown> = {}, via: 'query' | 'bearer' = 'query'): Promise<Answer> {
  const extra: Record<string, string> =
    method === 'tools/call' ? { 'mcp-name': String(params.name) } : typeof params.taskId === 'string' ? { 'mcp-name': params.taskId } : {};
  return send(app, {
    query: via === 'query' ? keyQuery(key) : '',
    headers: modernHeaders(method, via === 'bearer' ? { ...extra, authorization: `Bearer ${key}` } : extra),
    body: modernBody(method, params),
  });
}

function post(app: App, key: string, message = 'hello'): Promise<Answer> {
  return send(app, {
    path: '/v1/messages',
    query: '',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
    body: JSON.stringify({ message }),
  });
}

const sendTool = (message = 'hello') => ({ name: 'send_to_dot', arguments: { message } });

function setup(options: { eventsProfile?: EventsProfileName; apiKey?: string; access?: FakeAccessStore; clock?: FakeClock; store?: FakeStore } = {}) {
  const access = options.access ?? new FakeAccessStore();
  const clock = options.clock ?? new FakeClock();
  const built = buildApp(options.apiKey ? { apiKey: options.apiKey } : {}, {
    access,
    clock,
    webhook: echoingWebhook,
    ...(options.store ? { store: options.store } : {}),
    ...(options.eventsProfile ? { eventsProfile: options.eventsProfile } : {}),
  });
  return { ...built, access, clock };
}

async function withSender(access: FakeAccessStore, name: string, rate: number | null = null): Promise<string> {
  const added = await addSender(access, name, rate, T0);
  if (!added.added) throw new Error(added.message);
  return added.key;
}

describe('sender keys', () => {
  test('HTTP-KEY-1: a sender key has its name in it, and only its hash is stored', async () => {
    const access = new FakeAccessStore();
    const key = await withSender(access, 'billing');
    expect(senderNameOf(key)).toBe('billing');
    expect(senderNameOf(newSenderKey('a-b-1'))).toBe('a-b-1');
    expect(senderNameOf(API_KEY)).toBeUndefined();
    const stored = access.senders.get('billing')!;
    expect(stored.keyHash).toBe(keyHashOf(key));
    expect(JSON.stringify(stored)).not.toContain(key.slice(-43));
  });

  test('HTTP-KEY-2: a sender key lists the tools and sends through /mcp and POST /v1/messages, and each event names it', async () => {
    const { app, access, store } = setup();
    store.subscription = liveSubscription();
    const key = await withSender(access, 'billing');
    const tools = await call(app, key, 'tools/list', {}, 'bearer');
    expect(tools.status).toBe(200);
    expect(JSON.stringify(tools.json)).toContain('send_to_dot');
    const tool = await call(app, key, 'tools/call', sendTool());
    expect(rpcErrorCode(tool.json)).toBeUndefined();
    const rest = await post(app, key);
    expect(rest.status).toBe(202);
    const senders = [...store.events.values()].map((e) => e.sender);
    expect(senders).toStrictEqual(['billing', 'billing']);
  });

  test("HTTP-KEY-3: the connector key's events say connector", async () => {
    const { app, store } = setup();
    store.subscription = liveSubscription();
    expect((await post(app, API_KEY)).status).toBe(202);
    expect([...store.events.values()].map((e) => e.sender)).toStrictEqual(['connector']);
  });

  test.each([
    ['chatgpt', -32012],
    ['sep-3415', -32024],
  ] as const)(
    'HTTP-KEY-4: under %s a sender key is Forbidden (%d) on subscribe, unsubscribe, events/list and tasks; nothing is subscribed',
    async (profile, code) => {
      const { app, access, store } = setup({ eventsProfile: profile });
      const key = await withSender(access, 'billing');
      expect(rpcErrorCode((await call(app, key, 'events/subscribe', subscribeParams)).json)).toBe(code);
      expect(store.subscription).toBeUndefined();
      store.subscription = liveSubscription();
      expect(rpcErrorCode((await call(app, key, 'events/unsubscribe', { name: EVENT_NAME, delivery: { url: store.subscription.url } })).json)).toBe(code);
      expect(store.subscription).toBeDefined();
      expect(rpcErrorCode((await call(app, key, 'events/list')).json)).toBe(code);
      expect(rpcErrorCode((await call(app, key, 'tasks/get', { taskId: 'task_x' })).json)).toBe(code);
    },
  );

  test('HTTP-KEY-5: a revoked sender, a wrong secret under a real name and an unknown name are 401; revocation holds at the next request', async () => {
    const { app, access, store } = setup();
    store.subscription = liveSubscription();
    const key = await withSender(access, 'billing');
    expect((await post(app, key)).status).toBe(202);
    const forged = `${key.slice(0, -43)}${'A'.repeat(43)}`;
    expect((await post(app, forged)).status).toBe(401);
    expect((await post(app, newSenderKey('nobody'))).status).toBe(401);
    await revokeSender(access, 'billing', T0 + 1);
    const refused = await post(app, key);
    expect(refused.status).toBe(401);
    expect(refused.headers.get('www-authenticate')).toBe('Bearer');
    // Its holder is told it was revoked; a forged key under the same name still gets the generic hint.
    const messageOf = (answer: Answer) => (answer.json as { error: { message: string } }).error.message;
    expect(messageOf(refused)).toBe('This sender key (billing) was revoked: ask the operator for a new one (dm-dot senders add).');
    expect(messageOf(await post(app, forged))).toMatch(/^Missing or wrong API key/);
    expect((await call(app, key, 'tools/list')).status).toBe(401);
    expect(store.events.size).toBe(1);
  });

  test('HTTP-KEY-6: lastUsedAt is written at most once a minute, not at every send', async () => {
    const { app, access, store, clock } = setup();
    store.subscription = liveSubscription();
    const key = await withSender(access, 'billing');
    for (let i = 0; i < 5; i++) {
      expect((await post(app, key)).status).toBe(202);
      clock.advance(1000);
    }
    expect(access.touches).toBe(1);
    expect(access.senders.get('billing')!.lastUsedAt).toBe(T0);
    clock.advance(AccessLimits.senderLastUsedRefreshMs);
    await post(app, key);
    expect(access.touches).toBe(2);
  });

  test('HTTP-KEY-7: storage down while checking a sender key is 503, never 401 or a send', async () => {
    const { app, access, store } = setup();
    store.subscription = liveSubscription();
    const key = await withSender(access, 'billing');
    access.failing = true;
    expect((await post(app, key)).status).toBe(503);
    expect((await call(app, key, 'tools/list')).status).toBe(503);
    // The app's own connector key still opens what needs no storage (HTTP-KEY-14).
    expect((await call(app, API_KEY, 'tools/list')).status).toBe(200);
    expect(store.events.size).toBe(0);
  });
});

describe('sender rate', () => {
  test('HTTP-KEY-8: past its rate: 429 with Retry-After on REST, a tool error with retryAfterMs on /mcp; nothing recorded; next minute it sends', async () => {
    const clock = new FakeClock(Math.floor(T0 / 60_000) * 60_000 + 50_000);
    const { app, access, store } = setup({ clock });
    store.subscription = liveSubscription(clock.now());
    const key = await withSender(access, 'alerts', 2);
    expect((await post(app, key)).status).toBe(202);
    expect(rpcErrorCode((await call(app, key, 'tools/call', sendTool())).json)).toBeUndefined();
    const refused = await post(app, key);
    expect(refused.status).toBe(429);
    expect(refused.headers.get('retry-after')).toBe('10');
    const rpc = await call(app, key, 'tools/call', sendTool());
    expect(rpc.status).toBe(200);
    expect(rpcErrorCode(rpc.json)).toBeUndefined();
    const result = (rpc.json as { id: unknown; result: { isError: boolean; structuredContent: unknown; content: { text: string }[] } }).result;
    expect(result.isError).toBe(true);
    expect(result.structuredContent).toStrictEqual({ retryAfterMs: 10_000 });
    expect(result.content[0]!.text).toMatch(/rate \(2 messages per minute\).*nothing was sent.*10 s/);
    expect((rpc.json as { id: unknown }).id).toBe(1);
    // What is not a send is not counted, and is still answered.
    expect((await call(app, key, 'tools/list')).status).toBe(200);
    expect(store.events.size).toBe(2);
    // The connector is never counted.
    expect((await post(app, API_KEY)).status).toBe(202);
    clock.advance(10_000);
    expect((await post(app, key)).status).toBe(202);
  });

  test('HTTP-KEY-RATE-1: every tools/call of a JSON-RPC batch counts: 100 sends in one batch at a rate of 1 record 1 event, 99 say when', async () => {
    const clock = new FakeClock(Math.floor(T0 / 60_000) * 60_000);
    const { app, access, store } = setup({ clock });
    store.subscription = liveSubscription(clock.now());
    const key = await withSender(access, 'burst', 1);
    const batch = Array.from({ length: 100 }, (_, i) => ({ jsonrpc: '2.0', id: i + 1, method: 'tools/call', params: sendTool(`batched ${i}`) }));
    const answer = await send(app, {
      query: '',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'mcp-protocol-version': '2025-03-26',
        authorization: `Bearer ${key}`,
      },
      body: JSON.stringify(batch),
    });
    expect(answer.status).toBe(200);
    type Reply = { id: number; error?: unknown; result?: { isError: boolean; structuredContent?: { retryAfterMs?: number } } };
    const results = ([] as unknown[]).concat(answer.json).flat() as Reply[];
    expect(results).toHaveLength(100);
    expect(results.filter((r) => r.error !== undefined)).toEqual([]);
    expect(results.filter((r) => r.result?.isError === false)).toHaveLength(1);
    expect(results.filter((r) => r.result?.isError === true && r.result.structuredContent?.retryAfterMs === 60_000)).toHaveLength(99);
    expect(store.events.size).toBe(1);
  });

  test('HTTP-KEY-RATE-1: a send that asks for a task counts too, and the connector is never counted', async () => {
    const clock = new FakeClock(Math.floor(T0 / 60_000) * 60_000);
    const { app, access, store } = setup({ clock });
    store.subscription = liveSubscription(clock.now());
    const key = await withSender(access, 'tasker', 1);
    const withTasks = { 'io.modelcontextprotocol/clientCapabilities': { extensions: { 'io.modelcontextprotocol/tasks': {} } } };
    const ask = (k: string, id: number) => {
      const headers = modernHeaders('tools/call', { 'mcp-name': 'send_to_dot', authorization: `Bearer ${k}` });
      return send(app, { query: '', headers, body: modernBody('tools/call', sendTool(), id, withTasks) });
    };
    const first = await ask(key, 1);
    expect((first.json as { result: { isError?: boolean } }).result.isError).not.toBe(true);
    const second = await ask(key, 2);
    const refused = (second.json as { result: { isError: boolean; structuredContent: unknown } }).result;
    expect(refused).toMatchObject({ isError: true, structuredContent: { retryAfterMs: 60_000 } });
    for (let i = 0; i < 3; i++) expect((await ask(API_KEY, 10 + i)).status).toBe(200);
    expect(store.events.size).toBe(4);
  });
});

describe('connector key rotation and the stable principal', () => {
  const NEW_KEY = 'new-connector-key-0123456789abcdef';

  test('EV-ID-1, HTTP-KEY-9: an existing deployment keeps the principal its subscription ids were made from (the hash of its key)', async () => {
    const { app, access, store } = setup();
    const answer = await call(app, API_KEY, 'events/subscribe', subscribeParams);
    expect(rpcErrorCode(answer.json)).toBeUndefined();
    expect(store.subscription!.id).toBe(subscriptionIdOf(principalOf(API_KEY), HOOK, EVENT_NAME, {}));
    expect(access.deployment).toMatchObject({ principal: principalOf(API_KEY), keyHash: keyHashOf(API_KEY) });
  });

  test('EV-ID-4, HTTP-KEY-10: after a rotation with an overlap both keys work and the subscription id stays; after the overlap the old key is 401', async () => {
    const access = new FakeAccessStore();
    const clock = new FakeClock();
    const store = new FakeStore();
    const before = setup({ access, clock, store });
    expect(rpcErrorCode((await call(before.app, API_KEY, 'events/subscribe', subscribeParams)).json)).toBeUndefined();
    const id = store.subscription!.id;

    await recordRotation(access, API_KEY, NEW_KEY, 3_600_000, clock.now());
    // The runtime then serves the new key (a new app, as after a key file swap or a cold start).
    const after = setup({ access, clock, store, apiKey: NEW_KEY });
    for (const key of [NEW_KEY, API_KEY]) {
      const refreshed = await call(after.app, key, 'events/subscribe', subscribeParams);
      expect((refreshed.json as { result?: { id?: string } }).result?.id).toBe(id);
    }
    store.subscription = { ...store.subscription!, expiresAt: clock.now() + 10 * 3_600_000 };
    expect((await post(after.app, API_KEY)).status).toBe(202);
    expect((await post(after.app, NEW_KEY)).status).toBe(202);

    clock.advance(3_600_000);
    expect((await post(after.app, API_KEY)).status).toBe(401);
    expect((await post(after.app, NEW_KEY)).status).toBe(202);
    expect(access.deployment!.principal).toBe(principalOf(API_KEY));
  });

  test('HTTP-KEY-11: without an overlap the old key stops at once; a later rotation without one ends an earlier overlap', async () => {
    const access = new FakeAccessStore();
    const clock = new FakeClock();
    await recordRotation(access, API_KEY, NEW_KEY, 3_600_000, clock.now());
    const third = 'third-connector-key-0123456789abcdef';
    await recordRotation(access, NEW_KEY, third, 0, clock.now());
    const { app, store } = setup({ access, clock, apiKey: third });
    store.subscription = liveSubscription(clock.now());
    expect((await post(app, API_KEY)).status).toBe(401);
    expect((await post(app, NEW_KEY)).status).toBe(401);
    expect((await post(app, third)).status).toBe(202);
  });

  test('HTTP-KEY-12: two first requests creating the DEPLOYMENT item at once agree on the principal', async () => {
    const access = new FakeAccessStore();
    const clock = new FakeClock();
    const one = createAuthenticator({ apiKey: API_KEY, access, clock });
    const two = createAuthenticator({ apiKey: API_KEY, access, clock });
    const [a, b] = await Promise.all([one.identify([API_KEY]), two.identify([API_KEY])]);
    const [pa, pb] = await Promise.all([a!.principal(), b!.principal()]);
    expect(pa).toBe(pb);
    expect(pa).toBe(principalOf(API_KEY));
  });

  test('HTTP-KEY-13: the previous key is compared only while its overlap lasts, and unknown keys cost at most one read a second', async () => {
    const access = new FakeAccessStore();
    const clock = new FakeClock();
    await recordRotation(access, API_KEY, NEW_KEY, 60_000, clock.now());
    const reads = jest.spyOn(access, 'getDeployment');
    const auth = createAuthenticator({ apiKey: NEW_KEY, access, clock });
    for (let i = 0; i < 5; i++) expect(await auth.identify(['stranger-key'])).toBeUndefined();
    expect(reads).toHaveBeenCalledTimes(1);
    clock.advance(AccessLimits.deploymentRecheckMs);
    for (let i = 0; i < 5; i++) expect(await auth.identify([`stranger-key-${i}`])).toBeUndefined();
    expect(reads).toHaveBeenCalledTimes(2);
    expect(await auth.identify([API_KEY])).toMatchObject({ role: 'connector', sender: 'connector' });
    clock.advance(60_000);
    expect(await auth.identify([API_KEY])).toBeUndefined();
  });
  test('HTTP-KEY-14: an app built before a rotation takes the new key at once and drops its own once the item says it was superseded without overlap', async () => {
    const access = new FakeAccessStore();
    const clock = new FakeClock();
    const auth = createAuthenticator({ apiKey: API_KEY, access, clock });
    expect(await auth.identify([API_KEY])).toMatchObject({ role: 'connector' });
    clock.advance(10);
    await recordRotation(access, API_KEY, NEW_KEY, 0, clock.now());
    clock.advance(AccessLimits.deploymentRecheckMs);
    expect(await auth.identify([NEW_KEY])).toMatchObject({ role: 'connector' });
    expect(await auth.identify([API_KEY])).toBeUndefined();
    // Storage down: the app's own key goes on, the read is not tried again within the window, a previous key is 503's.
    const reads = jest.spyOn(access, 'getDeployment');
    const down = createAuthenticator({ apiKey: NEW_KEY, access, clock });
    access.failing = true;
    expect(await down.identify([NEW_KEY])).toMatchObject({ role: 'connector' });
    expect(await down.identify([NEW_KEY])).toMatchObject({ role: 'connector' });
    expect(reads).toHaveBeenCalledTimes(1);
    await expect(down.identify([API_KEY])).rejects.toMatchObject({ dependency: 'storage' });
    access.failing = false;
    // A key changed by hand (no rotation recorded since the app was built) is still the app's own.
    const byHand = createAuthenticator({ apiKey: 'typed-in-by-hand-0123456789abcdef', access, clock });
    clock.advance(1);
    expect(await byHand.identify(['typed-in-by-hand-0123456789abcdef'])).toMatchObject({ role: 'connector' });
  });
});
