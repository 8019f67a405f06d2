/**
 * Idempotency keys, read receipts and the inbox at the door of the HTTP app (docs/contract/http.md
 * IDEM-*, RCPT-*; docs/contract/mcp.md INBOX-*), over the in-memory fakes: the header on
 * POST /v1/messages, GET /v1/messages/{eventId}, the inbox tools per key and era, kept messages on
 * both surfaces, the announcement through events/subscribe, and pup's callId.
 */
import { addSender } from '../../../lambda/operator/access';
import { EVENT_NAME } from '../../../lambda/core/protocol';
import type { App } from '../../../lambda/http/app';
import { sha256Hex } from '../../../lambda/core/identity';
import { API_KEY, buildApp, echoingWebhook, keyQuery, liveSubscription, modernBody, modernHeaders, SECRET, send, type Answer } from '../../support/app';
import { FakeAccessStore, FakeClock, T0 } from '../../support/fakes';
import { mcpBody, mcpHeaders, newPupSecret, signedPost } from '../../support/pup-suite';

function setup(options: { inbox?: boolean; pup?: boolean } = {}) {
  const access = new FakeAccessStore();
  const clock = new FakeClock(T0);
  const pupSecret = newPupSecret();
  const built = buildApp(options.pup ? { pup: { secrets: async () => ({ secrets: [pupSecret.secret] }) } } : {}, {
    access,
    clock,
    webhook: echoingWebhook,
    ...(options.inbox ? { inbox: true } : {}),
  });
  return { ...built, access, clock, pupKey: pupSecret.key };
}

async function senderKey(access: FakeAccessStore, name: string): Promise<string> {
  const added = await addSender(access, name, null, T0);
  if (!added.added) throw new Error(added.message);
  return added.key;
}

function post(app: App, key: string, message: string, idempotencyKey?: string): Promise<Answer> {
  const headers: Record<string, string> = { 'content-type': 'application/json', authorization: `Bearer ${key}` };
  if (idempotencyKey !== undefined) headers['idempotency-key'] = idempotencyKey;
  return send(app, { path: '/v1/messages', query: '', headers, body: JSON.stringify({ message }) });
}

function receipt(app: App, key: string, eventId: string, method = 'GET'): Promise<Answer> {
  return send(app, { method, path: `/v1/messages/${eventId}`, query: '', headers: { authorization: `Bearer ${key}` } });
}

function call(app: App, key: string, method: string, params: Record<string, unknown> = {}): Promise<Answer> {
  const extra: Record<string, string> = method === 'tools/call' ? { 'mcp-name': String(params.name) } : {};
  return send(app, { query: keyQuery(key), headers: modernHeaders(method, extra), body: modernBody(method, params) });
}

/** The legacy era as ChatGPT's older path speaks it: initialize (2025-03-26), then plain JSON-RPC. */
async function legacyCall(app: App, key: string, method: string, params: Record<string, unknown> = {}): Promise<Answer> {
  const headers = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
  const init = await send(app, {
    query: keyQuery(key),
    headers,
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 0,
      method: 'initialize',
      params: { protocolVersion: '2025-03-26', capabilities: {}, clientInfo: { name: 't', version: '1' } },
    }),
  });
  expect(init.status).toBe(200);
  return send(app, {
    query: keyQuery(key),
    headers: { ...headers, 'mcp-protocol-version': '2025-03-26' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
  });
}

const toolNames = (answer: Answer) => ((answer.json as { result: { tools: { name: string }[] } }).result.tools ?? []).map((t) => t.name);
const result = (answer: Answer) =>
  (answer.json as { result: { isError?: boolean; structuredContent?: Record<string, unknown>; content: { text: string }[] } }).result;

describe('IDEM-*: Idempotency-Key on POST /v1/messages', () => {
  test('IDEM-4: a repeat answers the first event with its current status and makes no second event', async () => {
    const { app, store, queue } = setup();
    store.subscription = liveSubscription();
    const first = await post(app, API_KEY, 'hello', 'key-1');
    expect(first.status).toBe(202);
    const eventId = (first.json as { eventId: string }).eventId;
    const again = await post(app, API_KEY, 'hello', 'key-1');
    expect([again.status, again.json]).toEqual([202, { eventId, status: 'queued' }]);
    await store.updateEvent(eventId, { status: 'delivered', deliveredAt: T0 });
    const delivered = await post(app, API_KEY, 'hello', 'key-1');
    expect([delivered.status, delivered.json]).toEqual([200, { eventId, status: 'delivered' }]);
    await store.updateEvent(eventId, { status: 'failed', lastError: 'http_4xx' });
    const failed = await post(app, API_KEY, 'hello', '"key-1"');
    expect(failed.status).toBe(502);
    expect(failed.json).toMatchObject({ error: { code: 'delivery_failed', eventId, reason: 'http_4xx' } });
    expect(store.events.size).toBe(1);
    expect(queue.jobs).toHaveLength(1);
  });

  test('IDEM-5: the same key with another message is 422 idempotency_key_reused', async () => {
    const { app, store } = setup();
    store.subscription = liveSubscription();
    await post(app, API_KEY, 'one', 'k');
    const reused = await post(app, API_KEY, 'two', 'k');
    expect(reused.status).toBe(422);
    expect(reused.json).toMatchObject({ error: { code: 'idempotency_key_reused', message: expect.stringMatching(/another message/) } });
    expect(store.events.size).toBe(1);
  });

  test('IDEM-6: while the first is being answered, 409 in_progress with Retry-After', async () => {
    const { app, store } = setup();
    store.subscription = liveSubscription();
    // A first request with the same message that claimed the key and is still being answered.
    const first = {
      eventId: 'evt_00000000000000000000000000000001',
      messageHash: sha256Hex('hello'),
      state: 'in_progress',
      createdAt: T0,
      expiresAt: T0 + 1e8,
      leaseUntil: T0 + 3000,
    } as const;
    await store.claimIdempotencyKey('connector', 'k', first, T0);
    const busy = await post(app, API_KEY, 'hello', 'k');
    expect(busy.status).toBe(409);
    expect(busy.headers.get('retry-after')).toBe('3');
    expect(busy.json).toMatchObject({ error: { code: 'in_progress' } });
    expect(store.events.size).toBe(0);
  });

  test.each([
    ['empty', ''],
    ['too long', 'k'.repeat(256)],
    ['non-ASCII', 'clé'],
  ])('IDEM-1: a %s key is 400 invalid_idempotency_key and records nothing', async (_, key) => {
    const { app, store } = setup();
    store.subscription = liveSubscription();
    // A Request header holds bytes: a non-ASCII key arrives as its latin1 reading, as node:http gives it.
    const answer = await post(app, API_KEY, 'hello', Buffer.from(key, 'utf8').toString('latin1'));
    expect(answer.status).toBe(400);
    expect(answer.json).toMatchObject({ error: { code: 'invalid_idempotency_key' } });
    expect(store.events.size).toBe(0);
    expect(store.idempotencyKeys.size).toBe(0);
  });

  test('IDEM-2: the same key from two callers makes two events', async () => {
    const { app, store, access } = setup();
    store.subscription = liveSubscription();
    const alice = await senderKey(access, 'alice');
    const a = await post(app, API_KEY, 'same', 'shared');
    const b = await post(app, alice, 'same', 'shared');
    expect((a.json as { eventId: string }).eventId).not.toBe((b.json as { eventId: string }).eventId);
    expect(store.events.size).toBe(2);
  });

  test('IDEM-7: a 409 no_subscription releases the key; the retry after a dot subscribed is processed', async () => {
    const { app, store } = setup();
    expect((await post(app, API_KEY, 'hello', 'k')).status).toBe(409);
    store.subscription = liveSubscription();
    expect((await post(app, API_KEY, 'hello', 'k')).status).toBe(202);
  });

  test('a 429 (a sender past its rate) claims nothing', async () => {
    const { app, store, access } = setup();
    store.subscription = liveSubscription();
    const added = await addSender(access, 'slow', 1, T0);
    if (!added.added) throw new Error('not added');
    expect((await post(app, added.key, 'one', 'k1')).status).toBe(202);
    expect((await post(app, added.key, 'two', 'k2')).status).toBe(429);
    expect(store.idempotencyKeys.has('slow\u0000k2')).toBe(false);
  });
});

describe('RCPT-*: GET /v1/messages/{eventId}', () => {
  test('RCPT-1, RCPT-2: the sender and the connector read it; another sender, unknown and malformed ids get one same 404', async () => {
    const { app, store, access, clock } = setup({ inbox: true });
    store.subscription = liveSubscription();
    const alice = await senderKey(access, 'alice');
    const bob = await senderKey(access, 'bob');
    const eventId = ((await post(app, alice, 'hi')).json as { eventId: string }).eventId;
    const own = await receipt(app, alice, eventId);
    expect(own.status).toBe(200);
    expect(own.json).toEqual({
      eventId,
      status: 'queued',
      sender: 'alice',
      createdAt: new Date(T0).toISOString(),
      deliveredAt: null,
      acknowledgedAt: null,
      attempts: 0,
    });
    clock.advance(2000);
    await store.acknowledgeEvent(eventId, clock.now(), clock.now());
    expect(((await receipt(app, API_KEY, eventId)).json as { acknowledgedAt: string }).acknowledgedAt).toBe(new Date(T0 + 2000).toISOString());
    const refusals = await Promise.all([
      receipt(app, bob, eventId),
      receipt(app, alice, 'evt_ffffffffffffffffffffffffffffffff'),
      receipt(app, alice, 'not-an-id'),
      receipt(app, API_KEY, 'evt_%2e%2e'),
    ]);
    for (const refusal of refusals) {
      expect(refusal.status).toBe(404);
      expect(refusal.json).toEqual(refusals[0]!.json);
    }
    expect(refusals[0]!.json).toMatchObject({ error: { code: 'not_found' } });
  });

  test('RCPT-1: the route exists with the inbox off (acknowledgedAt null)', async () => {
    const { app, store } = setup();
    store.subscription = liveSubscription();
    const eventId = ((await post(app, API_KEY, 'hi')).json as { eventId: string }).eventId;
    const answer = await receipt(app, API_KEY, eventId);
    expect(answer.status).toBe(200);
    expect(answer.json).toMatchObject({ eventId, acknowledgedAt: null });
  });

  test('RCPT-3: a wrong key is 401 before anything is read; another method is 405 Allow: GET', async () => {
    const { app, store } = setup();
    const reads = store.callsOf('getEvent').length;
    const refused = await receipt(app, 'wrong-key-0123456789', 'evt_ffffffffffffffffffffffffffffffff');
    expect(refused.status).toBe(401);
    expect(store.callsOf('getEvent')).toHaveLength(reads);
    const put = await send(app, {
      method: 'PUT',
      path: '/v1/messages/evt_ffffffffffffffffffffffffffffffff',
      query: '',
      headers: { authorization: `Bearer ${API_KEY}` },
    });
    expect([put.status, put.headers.get('allow')]).toEqual([405, 'GET']);
  });

  test('storage down: 503, logged once', async () => {
    const { app, store, logs } = setup();
    store.failing.add('getEvent');
    const answer = await receipt(app, API_KEY, 'evt_ffffffffffffffffffffffffffffffff');
    expect(answer.status).toBe(503);
    expect(logs.filter((l) => l.event === 'dependency_unavailable')).toHaveLength(1);
  });
});

describe('INBOX-1: who sees the inbox tools', () => {
  test('inbox off: tools/list is exactly send_to_dot for the connector, a sender, and over legacy initialize', async () => {
    const { app, access } = setup();
    const alice = await senderKey(access, 'alice');
    expect(toolNames(await call(app, API_KEY, 'tools/list'))).toEqual(['send_to_dot']);
    expect(toolNames(await call(app, alice, 'tools/list'))).toEqual(['send_to_dot']);
    expect(toolNames(await legacyCall(app, API_KEY, 'tools/list'))).toEqual(['send_to_dot']);
  });

  test('inbox on: the connector sees three tools on both eras; a sender sees send_to_dot alone and cannot call the others', async () => {
    const { app, access, store } = setup({ inbox: true });
    const alice = await senderKey(access, 'alice');
    const all = ['send_to_dot', 'get_pending_messages', 'acknowledge_messages'];
    expect(toolNames(await call(app, API_KEY, 'tools/list')).sort()).toEqual([...all].sort());
    expect(toolNames(await legacyCall(app, API_KEY, 'tools/list')).sort()).toEqual([...all].sort());
    expect(toolNames(await call(app, alice, 'tools/list'))).toEqual(['send_to_dot']);
    const reads = store.callsOf('listPending').length;
    const refused = await call(app, alice, 'tools/call', { name: 'get_pending_messages', arguments: {} });
    const text = JSON.stringify(refused.json);
    expect(text).toMatch(/get_pending_messages/);
    expect(text).toMatch(/not found|unknown/i);
    const ack = await call(app, alice, 'tools/call', { name: 'acknowledge_messages', arguments: { eventIds: ['evt_ffffffffffffffffffffffffffffffff'] } });
    expect(JSON.stringify(ack.json)).toMatch(/not found|unknown/i);
    expect(store.callsOf('listPending')).toHaveLength(reads);
    expect(store.callsOf('acknowledgeEvent')).toHaveLength(0);
  });

  test('INBOX-9: schemas and annotations of the inbox tools; send_to_dot`s output lists kept', async () => {
    const { app } = setup({ inbox: true });
    const tools = (await call(app, API_KEY, 'tools/list')).json as { result: { tools: Record<string, any>[] } };
    const byName = Object.fromEntries(tools.result.tools.map((t) => [t.name, t]));
    expect(byName.get_pending_messages.annotations).toMatchObject({ readOnlyHint: true, idempotentHint: true });
    expect(byName.get_pending_messages.outputSchema.required).toEqual(['messages', 'nextCursor']);
    expect(byName.get_pending_messages.inputSchema.properties.limit).toMatchObject({ minimum: 1, maximum: 50 });
    expect(byName.acknowledge_messages.annotations).toMatchObject({ readOnlyHint: false, destructiveHint: false, idempotentHint: true });
    expect(byName.acknowledge_messages.inputSchema.properties.eventIds).toMatchObject({ minItems: 1, maxItems: 50 });
    expect(byName.acknowledge_messages.outputSchema.required).toEqual(['acknowledged', 'alreadyAcknowledged', 'unknown']);
    expect(byName.send_to_dot.outputSchema.properties.status.enum).toEqual(['delivered', 'queued', 'failed', 'kept']);
  });
});

describe('INBOX-5: kept while no dot listens, on both surfaces', () => {
  test('REST: 202 kept; MCP: a result that is not an error and says the message waits in the inbox', async () => {
    const { app, store, queue } = setup({ inbox: true });
    const rest = await post(app, API_KEY, 'are you there?');
    expect(rest.status).toBe(202);
    expect(rest.json).toEqual({ eventId: expect.stringMatching(/^evt_/), status: 'kept' });
    const tool = result(await call(app, API_KEY, 'tools/call', { name: 'send_to_dot', arguments: { message: 'still there?' } }));
    expect(tool.isError).toBe(false);
    expect(tool.structuredContent).toEqual({ eventId: expect.stringMatching(/^evt_/), status: 'kept' });
    expect(tool.content[0]!.text).toMatch(/No dot is subscribed now.*waits|kept in the inbox/);
    expect(queue.jobs).toEqual([]);
    expect([...store.events.values()].map((e) => e.status)).toEqual(['kept', 'kept']);
  });

  test('inbox off: no subscription is still 409 / a tool error', async () => {
    const { app } = setup();
    expect((await post(app, API_KEY, 'hi')).status).toBe(409);
    expect(result(await call(app, API_KEY, 'tools/call', { name: 'send_to_dot', arguments: { message: 'hi' } })).isError).toBe(true);
  });
});

describe('INBOX-2, INBOX-4, INBOX-10: reading and acknowledging through /mcp, on both eras', () => {
  test.each(['modern', 'legacy'] as const)(
    '%s: a sender`s kept message is read (framed as its words), acknowledged, and the sender`s receipt shows it',
    async (era) => {
      const { app, access, clock } = setup({ inbox: true });
      const alice = await senderKey(access, 'alice');
      const eventId = ((await post(app, alice, 'lunch at noon?')).json as { eventId: string }).eventId;
      const rpc = (method: string, params: Record<string, unknown>) =>
        era === 'modern' ? call(app, API_KEY, method, params) : legacyCall(app, API_KEY, method, params);
      const page = result(await rpc('tools/call', { name: 'get_pending_messages', arguments: { limit: 5 } }));
      expect(page.isError).toBe(false);
      expect(page.structuredContent).toEqual({
        messages: [{ eventId, sender: 'alice', createdAt: new Date(T0).toISOString(), message: 'lunch at noon?' }],
        nextCursor: null,
      });
      expect(page.content[0]!.text).toContain('from "alice"');
      expect(page.content[0]!.text).toContain('> lunch at noon?');
      clock.advance(60_000);
      const ack = result(await rpc('tools/call', { name: 'acknowledge_messages', arguments: { eventIds: [eventId] } }));
      expect(ack.structuredContent).toEqual({ acknowledged: [eventId], alreadyAcknowledged: [], unknown: [] });
      expect(((await receipt(app, alice, eventId)).json as { acknowledgedAt: string }).acknowledgedAt).toBe(new Date(T0 + 60_000).toISOString());
      expect(result(await rpc('tools/call', { name: 'get_pending_messages', arguments: {} })).structuredContent).toEqual({ messages: [], nextCursor: null });
    },
  );

  test('INBOX-8: a bad cursor and 51 ids are tool errors, not JSON-RPC errors', async () => {
    const { app } = setup({ inbox: true });
    const cursor = await call(app, API_KEY, 'tools/call', { name: 'get_pending_messages', arguments: { cursor: 'nope' } });
    expect(result(cursor).isError).toBe(true);
    const many = Array.from({ length: 51 }, (_, i) => `evt_${i.toString(16).padStart(32, '0')}`);
    const ack = await call(app, API_KEY, 'tools/call', { name: 'acknowledge_messages', arguments: { eventIds: many } });
    expect(result(ack).isError).toBe(true);
    expect(result(ack).content[0]!.text).toMatch(/1 to 50 event ids/);
  });

  test('INBOX-9: a failed store is a tool error, logged once', async () => {
    const { app, store, logs } = setup({ inbox: true });
    store.failing.add('listPending');
    const answer = result(await call(app, API_KEY, 'tools/call', { name: 'get_pending_messages', arguments: {} }));
    expect(answer.isError).toBe(true);
    expect(answer.content[0]!.text).toMatch(/unavailable.*again is safe/);
    expect(logs.filter((l) => l.event === 'dependency_unavailable')).toHaveLength(1);
  });
});

describe('INBOX-7: the announcement through events/subscribe', () => {
  const subscribe = { name: EVENT_NAME, delivery: { mode: 'webhook', url: 'https://dot.example/hook', secret: SECRET } };

  test('a new subscription with kept messages gets one event from dm-dot; a refresh gets none', async () => {
    const { app, store, queue } = setup({ inbox: true });
    await post(app, API_KEY, 'one');
    await post(app, API_KEY, 'two');
    const subscribed = await call(app, API_KEY, 'events/subscribe', subscribe);
    expect((subscribed.json as { result?: unknown }).result).toBeDefined();
    expect(queue.jobs).toHaveLength(1);
    const announced = store.events.get(queue.jobs[0]!.eventId)!;
    expect(announced.sender).toBe('dm-dot');
    expect((JSON.parse(queue.jobs[0]!.body) as { data: { message: string } }).data.message).toMatch(/^2 messages wait/);
    await call(app, API_KEY, 'events/subscribe', subscribe);
    expect(queue.jobs).toHaveLength(1);
  });

  test('inbox off: no announcement', async () => {
    const { app, queue } = setup();
    await call(app, API_KEY, 'events/subscribe', subscribe);
    expect(queue.jobs).toEqual([]);
  });
});

describe('IDEM-8: the pup door', () => {
  const context = (callId?: string) => ({ installationId: 'inst-1', askerId: 'u1', channelId: 'c1', ...(callId !== undefined ? { callId } : {}) });
  const sendCall = (message: string, callId?: string) => mcpBody('tools/call', { name: 'send_to_dot', arguments: { message } }, context(callId));

  test('pup`s callId makes one event however often pup calls; the sends are recorded as pup', async () => {
    const { app, clock, logs, store, pupKey } = setup({ pup: true });
    store.subscription = liveSubscription();
    const target = { app, clock, logs };
    const first = await signedPost(target, '/pup/mcp', sendCall('hi from discord', 'call-77'), pupKey, { headers: mcpHeaders('tools/call', 'send_to_dot') });
    const again = await signedPost(target, '/pup/mcp', sendCall('hi from discord', 'call-77'), pupKey, { headers: mcpHeaders('tools/call', 'send_to_dot') });
    const firstResult = (first.json as { result: { structuredContent: { eventId: string } } }).result;
    expect((again.json as { result: unknown }).result).toEqual(firstResult);
    expect(store.events.size).toBe(1);
    expect([...store.events.values()][0]!.sender).toBe('pup');
    expect(store.idempotencyKeys.has('pup\u0000call-77')).toBe(true);
    const reused = await signedPost(target, '/pup/mcp', sendCall('something else', 'call-77'), pupKey, { headers: mcpHeaders('tools/call', 'send_to_dot') });
    expect((reused.json as { result: { isError: boolean; content: { text: string }[] } }).result).toMatchObject({
      isError: true,
      content: [{ text: expect.stringMatching(/another message/) }],
    });
  });

  test('a callId that cannot be a key (over 255 characters) is a tool error that names the key, and sends nothing', async () => {
    const { app, clock, logs, store, pupKey } = setup({ pup: true });
    store.subscription = liveSubscription();
    const headers = mcpHeaders('tools/call', 'send_to_dot');
    const answer = await signedPost({ app, clock, logs }, '/pup/mcp', sendCall('hi', 'c'.repeat(256)), pupKey, { headers });
    const text = expect.stringMatching(/^Invalid Idempotency-Key: it has 256 characters/);
    expect((answer.json as { result: unknown }).result).toMatchObject({ isError: true, content: [{ text }] });
    expect(store.events.size).toBe(0);
  });

  test('a call without callId is an ordinary send', async () => {
    const { app, clock, logs, store, pupKey } = setup({ pup: true });
    store.subscription = liveSubscription();
    const headers = mcpHeaders('tools/call', 'send_to_dot');
    for (let i = 0; i < 2; i++) await signedPost({ app, clock, logs }, '/pup/mcp', sendCall('twice'), pupKey, { headers });
    expect(store.events.size).toBe(2);
    expect(store.idempotencyKeys.size).toBe(0);
  });

  test('INBOX-1: with the inbox on, the pup door sees send_to_dot alone', async () => {
    const { app, clock, logs, pupKey } = setup({ pup: true, inbox: true });
    const listed = await signedPost({ app, clock, logs }, '/pup/mcp', mcpBody('tools/list', {}, context()), pupKey, { headers: mcpHeaders('tools/list') });
    expect(toolNames(listed as Answer)).toEqual(['send_to_dot']);
  });
});
