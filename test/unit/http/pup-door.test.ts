/**
 * The pup door (docs/contract/pup.md) in-process: the shared suite (pup-suite.ts) against the HTTP app and
 * against the MCP Lambda through the API Gateway translation, both over the in-memory fakes; plus
 * what only fakes can show (a storage outage) and the route table's edges.
 */
import { buildApp, liveSubscription, modernHeaders, send } from '../../support/app';
import { Limits } from '../../../lambda/core/protocol';
import { FakeClock, respond } from '../../support/fakes';
import { asApp, buildLambda } from '../../support/lambda';
import {
  describePupDoor,
  envelope,
  newPupSecret,
  newWebhookId,
  secretsAt,
  signedPost,
  mcpBody,
  mcpHeaders,
  type PupTargetOptions,
} from '../../support/pup-suite';

function pupConfig(options: PupTargetOptions, start: number) {
  const secrets = secretsAt(options, start);
  return { secrets: async () => secrets, ...(options.manifest !== undefined ? { manifest: options.manifest } : {}) };
}

describePupDoor('HTTP app', async (options) => {
  const clock = new FakeClock();
  const { app, logs } = buildApp({ pup: pupConfig(options, clock.now()) }, { clock });
  return { app, clock, logs, cleanup: () => app.close() };
});

describePupDoor('MCP Lambda (API Gateway translation, fakes)', async (options) => {
  const clock = new FakeClock();
  const { lambda, logs } = buildLambda({ pup: pupConfig(options, clock.now()) }, { clock });
  return { app: asApp(lambda), clock, logs };
});

describe('pup door: what only fakes show', () => {
  const { secret, key } = newPupSecret();

  test.each(['claimReplayId', 'putInboundAnswer'] as const)('storage down (%s) is 503 storage_unavailable, logged without the body', async (method) => {
    const clock = new FakeClock();
    const t = buildApp({ pup: { secrets: async () => ({ secrets: [secret] }) } }, { clock });
    t.store.failing.add(method);
    const target = { app: t.app, clock, logs: t.logs };
    const id = newWebhookId();
    const answer =
      method === 'claimReplayId'
        ? await signedPost(target, '/pup/mcp', mcpBody('server/discover'), key, { id, headers: mcpHeaders('server/discover') })
        : await signedPost(target, '/pup/events', envelope(id, 'member.joined'), key, { id });
    expect(answer.status).toBe(503);
    expect(answer.json).toMatchObject({ error: { code: 'storage_unavailable' } });
    expect(t.logs.some((l) => l.event === 'dependency_unavailable')).toBe(true);
    expect(t.logs.some((l) => l.event === 'pup_member_event')).toBe(false);
  });

  describe('PUP-21: a retry gets the same treatment as its first try', () => {
    function door() {
      const clock = new FakeClock();
      const t = buildApp({ pup: { secrets: async () => ({ secrets: [secret] }) } }, { clock });
      return { ...t, target: { app: t.app, clock, logs: t.logs } };
    }
    const sendBody = mcpBody('tools/call', { name: 'send_to_dot', arguments: { message: 'retry me' } });
    const sendHeaders = mcpHeaders('tools/call', 'send_to_dot');

    test('the claim was written but its answer lost (503): the retry waits out the lease, then is processed', async () => {
      const t = door();
      const id = newWebhookId();
      const claim = t.store.claimReplayId.bind(t.store);
      let lose = true;
      t.store.claimReplayId = async (...args) => {
        const result = await claim(...args);
        if (lose) {
          lose = false;
          throw new Error('fake store: the answer to claimReplayId was lost');
        }
        return result;
      };
      expect((await signedPost(t.target, '/pup/challenge', '"n"', key, { id })).status).toBe(503);
      const soon = await signedPost(t.target, '/pup/challenge', '"n"', key, { id });
      expect([soon.status, soon.headers.get('retry-after')]).toEqual([503, '1']);
      t.target.clock.advance(Limits.replayLeaseMs + 1);
      const retry = await signedPost(t.target, '/pup/challenge', '"n"', key, { id });
      expect([retry.status, retry.text]).toEqual([200, '"n"']);
    });

    test('a dependency failed inside the MCP answer (HTTP 200 tool error): the answer is not kept, and the retry is processed', async () => {
      const t = door();
      const id = newWebhookId();
      t.store.failing.add('getSubscription');
      const first = await signedPost(t.target, '/pup/mcp', sendBody, key, { id, headers: sendHeaders });
      expect(first.status).toBe(200);
      expect(first.json).toMatchObject({ result: { isError: true } });
      expect(first.text).toContain('storage is unavailable');
      t.store.failing.delete('getSubscription');
      const retry = await signedPost(t.target, '/pup/mcp', sendBody, key, { id, headers: sendHeaders });
      expect(retry.status).toBe(200);
      // Processed this time: the table answers, and nobody is subscribed.
      expect(retry.text).not.toContain('storage is unavailable');
      expect(retry.text).toContain('No dot is subscribed');
      expect(t.logs.filter((l) => l.event === 'pup_request')).toHaveLength(2);
    });

    test('a retry while the first try is still being answered is told to come back (503 in_progress, Retry-After), and nothing runs twice', async () => {
      const t = door();
      const id = newWebhookId();
      let release!: () => void;
      const held = new Promise<void>((done) => (release = done));
      t.store.before.getSubscription = () => held;
      const first = signedPost(t.target, '/pup/mcp', sendBody, key, { id, headers: sendHeaders });
      for (let i = 0; i < 100 && !t.store.calls.some((c) => c.method === 'getSubscription'); i++) await new Promise((done) => setTimeout(done, 5));
      const during = await signedPost(t.target, '/pup/mcp', sendBody, key, { id, headers: sendHeaders });
      expect(during.status).toBe(503);
      expect(during.headers.get('retry-after')).toBe('1');
      expect(during.json).toMatchObject({ error: { code: 'in_progress' } });
      release();
      const answered = await first;
      expect(answered.status).toBe(200);
      // Processed now: the same request again is a replay, refused (PUP-10).
      const after = await signedPost(t.target, '/pup/mcp', sendBody, key, { id, headers: sendHeaders });
      expect(after.status).toBe(401);
      expect(after.json).toMatchObject({ error: { code: 'replayed' } });
      expect(t.logs.filter((l) => l.event === 'pup_request')).toHaveLength(1);
    });

    test('the answer could not be kept: it is given all the same, and the failure is logged', async () => {
      const t = door();
      t.store.failing.add('settleReplayId');
      const answer = await signedPost(t.target, '/pup/challenge', '"kept?"', key);
      expect([answer.status, answer.text]).toEqual([200, '"kept?"']);
      expect(t.logs.some((l) => l.event === 'pup_claim_not_settled')).toBe(true);
    });
  });

  test('HTTP-KEY-3: a send through the pup door is recorded as sender pup, never as the connector', async () => {
    const clock = new FakeClock();
    const t = buildApp({ pup: { secrets: async () => ({ secrets: [secret] }) } }, { clock });
    t.store.subscription = liveSubscription(clock.now());
    const body = mcpBody('tools/call', { name: 'send_to_dot', arguments: { message: 'from discord' } });
    const answer = await signedPost({ app: t.app, clock, logs: t.logs }, '/pup/mcp', body, key, { headers: mcpHeaders('tools/call', 'send_to_dot') });
    expect(answer.json).toMatchObject({ result: { isError: false } });
    expect([...t.store.events.values()].map((event) => event.sender)).toEqual(['pup']);
  });

  test('a refused request never reaches the store', async () => {
    const clock = new FakeClock();
    const t = buildApp({ pup: { secrets: async () => ({ secrets: [secret] }) } }, { clock });
    await signedPost({ app: t.app, clock, logs: t.logs }, '/pup/events', envelope('x', 'member.joined'), newPupSecret().key, { id: 'x' });
    expect(t.store.calls).toEqual([]);
  });

  test('PUP-14: the MCP call runs as the pup principal, not as the API key', async () => {
    const clock = new FakeClock();
    const t = buildApp({ pup: { secrets: async () => ({ secrets: [secret] }) } }, { clock });
    const target = { app: t.app, clock, logs: t.logs };
    const dotSecret = `whsec_${Buffer.alloc(32, 9).toString('base64')}`;
    const body = mcpBody('events/subscribe', {
      name: 'message.created',
      arguments: {},
      delivery: { mode: 'webhook', url: 'https://dot.example/hook', secret: dotSecret },
    });
    await signedPost(target, '/pup/mcp', body, key, { headers: mcpHeaders('events/subscribe', 'message.created') });
    const { PUP_PRINCIPAL } = await import('../../../lambda/core/pup');
    const { principalOf } = await import('../../../lambda/core/identity');
    const verificationKeys = t.store.callsOf('isVerified').map((call) => call.args[0]);
    const { verificationKeyOf } = await import('../../../lambda/core/identity');
    expect(verificationKeys).toEqual([verificationKeyOf(PUP_PRINCIPAL, 'https://dot.example/hook', dotSecret)]);
    expect(PUP_PRINCIPAL).not.toBe(principalOf('test-api-key-0123456789abcdef'));
  });

  test('PUP-2: /pup/ paths outside the four routes are 404', async () => {
    const t = buildApp({ pup: { secrets: async () => ({ secrets: [secret] }) } });
    const response = await t.app.handle(
      new Request('https://dmdot.example/pup/other', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' }),
    );
    expect(response.status).toBe(404);
  });

  test('an Origin header from a browser is refused 403 before the door', async () => {
    const t = buildApp({ pup: { secrets: async () => ({ secrets: [secret] }) } });
    const response = await t.app.handle(new Request('https://dmdot.example/pup/manifest.json', { headers: { origin: 'https://evil.example' } }));
    expect(response.status).toBe(403);
  });

  test('PUP-18, TASK-2, TASK-6: MCP Tasks work through the pup door too: a task for a slow delivery, read back with tasks/get, bound to the pup principal', async () => {
    const clock = new FakeClock();
    const t = buildApp({ pup: { secrets: async () => ({ secrets: [secret] }) } }, { clock, deliveryWaitMs: 0, webhook: { post: async () => respond(503) } });
    t.store.subscription = liveSubscription(clock.now());
    const target = { app: t.app, clock, logs: t.logs };
    const withTasks = {
      'io.modelcontextprotocol/protocolVersion': '2026-07-28',
      'io.modelcontextprotocol/clientCapabilities': { extensions: { 'io.modelcontextprotocol/tasks': {} } },
      'io.puphq/context': { installationId: 'inst_1' },
    };
    const rpcBody = (method: string, params: Record<string, unknown>) =>
      JSON.stringify({ jsonrpc: '2.0', id: 1, method, params: { ...params, _meta: withTasks } });

    const created = await signedPost(target, '/pup/mcp', rpcBody('tools/call', { name: 'send_to_dot', arguments: { message: 'slow dot' } }), key, {
      headers: mcpHeaders('tools/call', 'send_to_dot'),
    });
    const task = (created.json as { result: { resultType: string; taskId: string; status: string } }).result;
    expect(task).toMatchObject({ resultType: 'task', status: 'working' });

    const get = await signedPost(target, '/pup/mcp', rpcBody('tasks/get', { taskId: task.taskId }), key, { headers: mcpHeaders('tasks/get', task.taskId) });
    expect((get.json as { result: { status: string } }).result.status).toBe('working');
    const [eventId] = [...t.store.events.keys()];
    Object.assign(t.store.events.get(eventId!)!, { status: 'delivered', deliveredAt: clock.now() + 1 });
    const done = await signedPost(target, '/pup/mcp', rpcBody('tasks/get', { taskId: task.taskId }), key, { headers: mcpHeaders('tasks/get', task.taskId) });
    expect((done.json as { result: { status: string; result: { content: { text: string }[] } } }).result).toMatchObject({ status: 'completed' });
    expect(JSON.stringify(done.json)).toContain(`ChatGPT accepted event ${eventId}`);

    // The same task id through /mcp with the API key is another principal: not found.
    const viaKey = await send(t.app, {
      headers: modernHeaders('tasks/get', { 'mcp-name': task.taskId }),
      body: rpcBody('tasks/get', { taskId: task.taskId }),
    });
    expect(JSON.stringify(viaKey.json)).toContain('-32602');
  });
});

describe('pup door: refusals before the body is read, and a cap on bodies in flight', () => {
  const { secret, key } = newPupSecret();

  /** A request whose body stream records whether anyone pulled from it. */
  function streamingRequest(headers: Record<string, string>, path = '/pup/mcp') {
    const pulled = { count: 0 };
    // highWaterMark 0: nothing is pulled until someone reads.
    const body = new ReadableStream<Uint8Array>(
      {
        pull(controller) {
          pulled.count++;
          controller.enqueue(new TextEncoder().encode('{"jsonrpc":"2.0","id":1,"method":"server/discover"}'));
          controller.close();
        },
      },
      { highWaterMark: 0 },
    );
    return {
      pulled,
      request: new Request(`https://dmdot.example${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...headers },
        body,
        duplex: 'half',
      } as RequestInit),
    };
  }

  test.each([
    ['every signature header missing', {}],
    ['a malformed signature', { 'webhook-id': 'msg_1', 'webhook-timestamp': 'now', 'webhook-signature': 'v1,abc' }],
    ['a signature of another version only', { 'webhook-id': 'msg_1', 'webhook-timestamp': '1', 'webhook-signature': `v2,${'A'.repeat(43)}=` }],
  ])('PUP-7: %s: 401 invalid_signature without reading a byte of the body', async (_label, headers) => {
    const clock = new FakeClock();
    const t = buildApp({ pup: { secrets: async () => ({ secrets: [secret] }) } }, { clock });
    const { pulled, request } = streamingRequest(headers);
    const response = await t.app.handle(request);
    expect(response.status).toBe(401);
    expect(await response.json()).toMatchObject({ error: { code: 'invalid_signature' } });
    expect(pulled.count).toBe(0);
  });

  test('LIM-9, PUP-8: a timestamp outside the window: 401 stale_timestamp without reading the body', async () => {
    const clock = new FakeClock();
    const t = buildApp({ pup: { secrets: async () => ({ secrets: [secret] }) } }, { clock });
    const ts = String(Math.floor(clock.now() / 1000) - 3600);
    const { pulled, request } = streamingRequest({ 'webhook-id': 'msg_1', 'webhook-timestamp': ts, 'webhook-signature': `v1,${'A'.repeat(43)}=` });
    const response = await t.app.handle(request);
    expect(await response.json()).toMatchObject({ error: { code: 'stale_timestamp' } });
    expect(pulled.count).toBe(0);
  });

  test('past the cap on bodies in flight a signed-looking POST is answered 503 busy at once, unread', async () => {
    const clock = new FakeClock();
    const t = buildApp({ pup: { secrets: async () => ({ secrets: [secret] }), maxBodiesInFlight: 1 } }, { clock });
    const ts = String(Math.floor(clock.now() / 1000));
    const headers = { 'webhook-id': 'msg_1', 'webhook-timestamp': ts, 'webhook-signature': `v1,${'A'.repeat(43)}=` };
    // One body that never ends holds the only slot.
    const stalled = new Request('https://dmdot.example/pup/mcp', {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: new ReadableStream({ pull: () => new Promise(() => undefined) }),
      duplex: 'half',
    } as RequestInit);
    const holding = t.app.handle(stalled);
    await new Promise((r) => setImmediate(r));
    const { pulled, request } = streamingRequest({ ...headers, 'webhook-id': 'msg_2' });
    const response = await t.app.handle(request);
    expect(response.status).toBe(503);
    expect(response.headers.get('retry-after')).toBe('1');
    expect(await response.json()).toMatchObject({ error: { code: 'busy' } });
    expect(pulled.count).toBe(0);
    void holding;
  });

  test('a validly signed body is verified as it streams in, and then served', async () => {
    const clock = new FakeClock();
    const t = buildApp({ pup: { secrets: async () => ({ secrets: [secret] }) } }, { clock });
    const answer = await signedPost({ app: t.app, clock, logs: t.logs }, '/pup/mcp', mcpBody('server/discover'), key, {
      headers: mcpHeaders('server/discover'),
    });
    expect(answer.status).toBe(200);
  });

  test('a signed challenge nested 5,000 deep is a 400 with a generic sentence, never a 5xx', async () => {
    const clock = new FakeClock();
    const t = buildApp({ pup: { secrets: async () => ({ secrets: [secret] }) } }, { clock });
    const deep = `{"challenge":${'['.repeat(5000)}${']'.repeat(5000)}}`;
    const answer = await signedPost({ app: t.app, clock, logs: t.logs }, '/pup/challenge', deep, key);
    expect(answer.status).toBe(400);
    expect(answer.json).toMatchObject({ error: { code: 'invalid_challenge', message: expect.stringMatching(/deeper than 64 levels/) } });
    expect(answer.text).not.toMatch(/RangeError|stack/);
  });
});
