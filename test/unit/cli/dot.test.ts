/**
 * `dm-dot dot` in-process. Against a small fake MCP endpoint that subscribes it, challenges it and
 * posts deliveries signed by an independent node:crypto signer (so the dot's use of
 * `standardwebhooks` is checked, not trusted), and whose refresh answers a test scripts; and
 * against a real local server for what only the server can do: end the subscription on a 410,
 * hang up on a slow answer, take the typed lines as messages, drop the subscription on Ctrl-C.
 */
import { createHmac, randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Logger } from '../../../lambda/ports';
import { expectNoSecrets, keyOf, postMessage, run, start, startLocalServer, StdinScript, tempDir, until, type LocalServer } from './support';

const KEY = `test-key-${randomBytes(12).toString('hex')}`;
const SUB = `sub_${'a'.repeat(32)}`;

/** Standard Webhooks signing with node:crypto only: independent of the library under test. */
function sign(secret: string, id: string, timestamp: number, body: string): string {
  const key = Buffer.from(secret.slice('whsec_'.length), 'base64');
  return `v1,${createHmac('sha256', key).update(`${id}.${timestamp}.${body}`).digest('base64')}`;
}

interface RpcCall {
  method: string;
  headers: http.IncomingHttpHeaders;
  params: any;
}

type Answer = { result?: object; error?: object } | 'unauthorized';

/**
 * An MCP endpoint: every events/subscribe challenges the callback with the secret it carries, then
 * answers `subscribeAnswers[n]` (default: a grant of `grantMs`, with deliveryStatus from the second
 * subscribe on, as a refresh of a live subscription gets).
 */
async function fakeServer(options: { grantMs?: number; subscribeAnswers?: (n: number) => Answer | undefined; first?: Answer } = {}) {
  const calls: RpcCall[] = [];
  const secrets: string[] = [];
  let subscribes = 0;
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', async () => {
      const message = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      const call = { method: message.method, headers: req.headers, params: message.params };
      calls.push(call);
      const reply = (body: Answer) => {
        if (body === 'unauthorized') return void res.writeHead(401).end();
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ jsonrpc: '2.0', id: message.id, ...body }));
      };
      if (req.headers.authorization !== `Bearer ${KEY}`) return reply('unauthorized');
      if (message.method !== 'events/subscribe') return reply({ result: { resultType: 'complete' } });
      const n = subscribes++;
      const scripted = n === 0 ? options.first : options.subscribeAnswers?.(n);
      if (scripted && (scripted === 'unauthorized' || scripted.error)) return reply(scripted);
      const { url, secret } = message.params.delivery;
      secrets.push(secret);
      const challenge = randomBytes(16).toString('hex');
      const body = JSON.stringify({ type: 'verification', challenge });
      const id = `msg_verification_${randomBytes(8).toString('hex')}`;
      const ts = Math.floor(Date.now() / 1000);
      const answer = await fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'webhook-id': id, 'webhook-timestamp': String(ts), 'webhook-signature': sign(secret, id, ts, body) },
        body,
      });
      const echoed = (await answer.json()) as { challenge?: string };
      if (echoed.challenge !== challenge) return reply({ error: { code: -32015, message: 'CallbackEndpointError', data: { reason: 'challenge_failed' } } });
      const refreshBefore = new Date(Date.now() + (options.grantMs ?? 7 * 86_400_000)).toISOString();
      const granted = { resultType: 'complete', id: SUB, refreshBefore, cursor: null, truncated: false };
      if (scripted?.result) return reply({ result: { ...granted, ...scripted.result } });
      return reply({ result: n > 0 ? { ...granted, deliveryStatus: { active: true, lastDeliveryAt: null, lastError: null } } : granted });
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    calls,
    secrets,
    methods: () => calls.map((c) => c.method),
    close: () =>
      new Promise<void>((r) => {
        server.close(() => r());
        server.closeAllConnections();
      }),
  };
}

function eventBody(eventId: string, message: string) {
  return JSON.stringify({ eventId, name: 'message.created', timestamp: new Date().toISOString(), data: { message }, cursor: null });
}

async function deliver(
  callback: string,
  secret: string,
  eventId: string,
  message: string,
  options: { timestamp?: number; signature?: string; abortAfterMs?: number } = {},
) {
  const body = eventBody(eventId, message);
  const ts = options.timestamp ?? Math.floor(Date.now() / 1000);
  const response = await fetch(callback, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      'webhook-id': eventId,
      'webhook-timestamp': String(ts),
      'webhook-signature': options.signature ?? sign(secret, eventId, ts, body),
      'x-mcp-subscription-id': SUB,
    },
    body,
    ...(options.abortAfterMs ? { signal: AbortSignal.timeout(options.abortAfterMs) } : {}),
  });
  return response.status;
}

const evt = (n: number) => `evt_${n.toString(16).padStart(32, '0')}`;

let fake: Awaited<ReturnType<typeof fakeServer>> | undefined;
afterEach(async () => {
  await fake?.close();
  fake = undefined;
});

async function startDot(extra: string[] = [], fakeOptions: Parameters<typeof fakeServer>[0] = {}, runOptions: Parameters<typeof start>[1] = {}) {
  fake = await fakeServer(fakeOptions);
  const dot = start(['dot', '--port', '0', '--url', `${fake.url}/mcp`, '--key', KEY, ...extra], runOptions);
  const callback = await Promise.race([
    until('subscribed', () => /subscribed sub_a{32} for (http:\/\/127\.0\.0\.1:\d+\/dot)/.exec(dot.err())?.[1]),
    dot.code.then((code) => {
      throw new Error(`dot exited ${code}: ${dot.err()}`);
    }),
  ]);
  return { ...dot, callback, fake };
}

function assertNoSecrets(text: string) {
  expectNoSecrets(text, [KEY, ...(fake?.secrets.map((s) => s.slice(6)) ?? [])]);
}

describe('CLI-2: dm-dot dot against an MCP endpoint', () => {
  it('subscribes with a fresh whsec_ secret on the 2026-07-28 era with the required _meta', async () => {
    const dot = await startDot();
    const [subscribe] = dot.fake.calls;
    expect(subscribe!.method).toBe('events/subscribe');
    expect(subscribe!.headers['mcp-protocol-version']).toBe('2026-07-28');
    expect(subscribe!.headers['mcp-method']).toBe('events/subscribe');
    expect(subscribe!.params._meta['io.modelcontextprotocol/protocolVersion']).toBe('2026-07-28');
    expect(subscribe!.params._meta['io.modelcontextprotocol/clientCapabilities']).toEqual({});
    expect(subscribe!.params).toMatchObject({ name: 'message.created', arguments: {}, delivery: { mode: 'webhook', url: dot.callback } });
    expect(Buffer.from(dot.fake.secrets[0]!.slice(6), 'base64')).toHaveLength(32);
    dot.interrupt();
    expect(await dot.code).toBe(0);
  });

  it('says when the subscription expires and when it will refresh it, as what they are', async () => {
    const dot = await startDot([], { grantMs: 3_600_000 });
    const [, expires, refreshes] = /the subscription expires at (\S+Z) \(in \d+ \w+\) unless refreshed; this dot refreshes it at (\S+Z)/.exec(dot.err()) ?? [];
    expect(Math.abs(Date.parse(expires!) - (Date.now() + 3_600_000))).toBeLessThan(10_000);
    const refreshIn = Date.parse(refreshes!) - Date.now();
    expect(refreshIn).toBeGreaterThan(0.7 * 3_600_000);
    expect(refreshIn).toBeLessThan(0.9 * 3_600_000);
    dot.interrupt();
    await dot.code;
  });

  it('prints a verified delivery once with its latency, drops a duplicate, refuses forged, stale and unsigned ones', async () => {
    const dot = await startDot();
    const secret = dot.fake.secrets[0]!;
    expect(await deliver(dot.callback, secret, evt(1), 'hello dot')).toBe(200);
    expect(dot.out()).toMatch(new RegExp(`^${evt(1)}  \\d+ ms  hello dot\\n$`));
    expect(await deliver(dot.callback, secret, evt(1), 'hello dot')).toBe(200);
    expect(dot.out().split('\n').filter(Boolean)).toHaveLength(1);
    expect(dot.err()).toContain(`dropped a duplicate of ${evt(1)}`);
    const other = `whsec_${randomBytes(32).toString('base64')}`;
    expect(await deliver(dot.callback, other, evt(2), 'forged')).toBe(401);
    expect(await deliver(dot.callback, secret, evt(3), 'stale', { timestamp: Math.floor(Date.now() / 1000) - 3600 })).toBe(401);
    expect(await deliver(dot.callback, secret, evt(4), 'no signature', { signature: '' })).toBe(401);
    expect(dot.out()).not.toMatch(/forged|stale|no signature/);
    dot.interrupt();
    expect(await dot.code).toBe(0);
    assertNoSecrets(dot.out() + dot.err());
  });

  it('Ctrl-C unsubscribes its callback (no secret in the call) and exits 0', async () => {
    const dot = await startDot();
    dot.interrupt();
    expect(await dot.code).toBe(0);
    const unsubscribe = dot.fake.calls.at(-1)!;
    expect(unsubscribe.method).toBe('events/unsubscribe');
    expect(unsubscribe.params.delivery).toEqual({ mode: 'webhook', url: dot.callback });
    expect(dot.err()).toMatch(/unsubscribed sub_a{32}; events still queued for it end dropped at their next attempt, not delivered\n$/);
  });

  it('--status 500 answers 500 each time and prints each attempt', async () => {
    const dot = await startDot(['--status', '500']);
    const secret = dot.fake.secrets[0]!;
    expect(await deliver(dot.callback, secret, evt(7), 'retry me')).toBe(500);
    expect(await deliver(dot.callback, secret, evt(7), 'retry me')).toBe(500);
    expect(dot.out()).toBe(`${evt(7)}  answered 500 (attempt 1)\n${evt(7)}  answered 500 (attempt 2)\n`);
    dot.interrupt();
    await dot.code;
  });

  it('--json prints one document when it stops, with what it received; the live lines go to stderr', async () => {
    const dot = await startDot(['--json']);
    expect(await deliver(dot.callback, dot.fake.secrets[0]!, evt(9), 'in json')).toBe(200);
    expect(dot.out()).toBe('');
    expect(dot.err()).toContain(`received ${evt(9)}`);
    dot.interrupt();
    expect(await dot.code).toBe(0);
    const doc = JSON.parse(dot.out());
    expect(dot.out()).toBe(`${JSON.stringify(doc, null, 2)}\n`);
    expect(doc).toMatchObject({
      subscription: { id: SUB, callbackUrl: dot.callback },
      ended: { reason: 'interrupted' },
      unsubscribed: true,
      received: [{ eventId: evt(9), message: 'in json', attempt: 1, answered: 200, hungUp: false }],
      sent: [],
    });
  });

  it('a delivery whose request the sender closed before the answer (--delay past its deadline) is reported as hung up, not as received', async () => {
    const dot = await startDot(['--delay', '600']);
    await expect(deliver(dot.callback, dot.fake.secrets[0]!, evt(12), 'too slow', { abortAfterMs: 150 })).rejects.toThrow();
    await until('the hung-up line', () => /had already hung up/.test(dot.err()), 5000);
    expect(dot.err()).toContain(
      `${evt(12)} (attempt 1) arrived, but the server had already hung up before this dot answered (--delay 600 ms is longer than it waits)`,
    );
    expect(dot.out()).toBe('');
    dot.interrupt();
    await dot.code;
  });

  it('refreshes before the expiry with a new secret, and still accepts the old one during the overlap', async () => {
    const dot = await startDot([], { grantMs: 1500 });
    await until('refreshed line', () => /refreshed sub_a{32}: it now expires at \S+Z; next refresh at \S+Z/.test(dot.err()), 5000);
    const [old, fresh] = dot.fake.secrets;
    expect(fresh).not.toBe(old);
    expect(dot.fake.calls[1]!.params.delivery.url).toBe(dot.callback);
    expect(await deliver(dot.callback, fresh!, evt(10), 'new secret')).toBe(200);
    expect(await deliver(dot.callback, old!, evt(11), 'old secret, in the overlap')).toBe(200);
    dot.interrupt();
    expect(await dot.code).toBe(0);
    assertNoSecrets(dot.out() + dot.err());
  });

  it('EV-SUB-14: a refresh that comes back without deliveryStatus: the subscription had ended; it says so, removes the new one, never re-subscribes, exit 1', async () => {
    const dot = await startDot([], { grantMs: 1500, subscribeAnswers: () => ({ result: {} }) });
    expect(await dot.code).toBe(1);
    expect(dot.err()).toContain(
      'the subscription had ended before this refresh (cleared with dm-dot subscription clear, ended by a 410, or expired), so the refresh created a new one',
    );
    expect(dot.err()).toContain('Run dm-dot dot again to subscribe anew');
    expect(dot.fake.methods()).toEqual(['events/subscribe', 'events/subscribe', 'events/unsubscribe']);
    expect(dot.fake.calls[2]!.params.delivery).toEqual({ mode: 'webhook', url: dot.callback });
  });

  it('a refresh refused with -32000: another callback holds the subscription now; it says so and stops, exit 1', async () => {
    const dot = await startDot([], {
      grantMs: 1500,
      subscribeAnswers: () => ({ error: { code: -32000, message: 'A subscription for another callback is active.' } }),
    });
    expect(await dot.code).toBe(1);
    expect(dot.err()).toContain('the subscription ended: another callback holds the subscription now');
    expect(dot.fake.methods()).toEqual(['events/subscribe', 'events/subscribe']);
  });

  it('a refresh refused with 401: the key was rotated; it says so and stops, exit 1', async () => {
    const dot = await startDot([], { grantMs: 1500, subscribeAnswers: () => 'unauthorized' });
    expect(await dot.code).toBe(1);
    expect(dot.err()).toMatch(/the subscription can no longer be refreshed: the server refused the API key \(rotated with dm-dot key rotate\?\)/);
    // A rotation changes no subscription id (EV-ID-4): the message must not say it does.
    expect(dot.err()).toContain('its subscription (whose id does not change with the key) goes on');
  });

  it.each([
    [
      { error: { code: -32602, message: 'Invalid params: delivery.url must use https:' } },
      'the server refuses loopback callbacks: its switch DMDOT_ALLOW_LOOPBACK_CALLBACKS is off. Restart the local server with DMDOT_ALLOW_LOOPBACK_CALLBACKS=1 npm start',
    ],
    [
      { error: { code: -32000, message: 'A subscription for another callback is active.' } },
      'another callback holds the subscription (one dot per deployment), so this dot cannot subscribe. If it is stale, end it with dm-dot subscription clear',
    ],
    [{ error: { code: -32015, message: 'CallbackEndpointError', data: { reason: 'timeout' } } }, 'the server could not verify this receiver (timeout)'],
  ])('a first subscribe refused (%j) is exit 1 with what to do', async (first, message) => {
    fake = await fakeServer({ first });
    const dot = start(['dot', '--port', '0', '--url', fake.url, '--key', KEY]);
    expect(await dot.code).toBe(1);
    expect(dot.err()).toContain(`dm-dot dot: ${message}`);
    expect(dot.err().trim().split('\n')).toHaveLength(1);
  });

  it('a wrong key is exit 1 and never printed', async () => {
    fake = await fakeServer();
    const dot = start(['dot', '--port', '0', '--url', fake.url, '--key', 'wrong-key-0123456789']);
    expect(await dot.code).toBe(1);
    expect(dot.err()).toMatch(/^dm-dot dot: the server refused the API key/);
    expect(dot.err()).not.toContain('wrong-key-0123456789');
  });

  it('a port in use is exit 1 with a way out, and nothing is subscribed', async () => {
    const blocker = http.createServer();
    await new Promise<void>((r) => blocker.listen(0, '127.0.0.1', r));
    try {
      fake = await fakeServer();
      const dot = start(['dot', '--port', String((blocker.address() as AddressInfo).port), '--url', fake.url, '--key', KEY]);
      expect(await dot.code).toBe(1);
      expect(dot.err()).toMatch(/is in use: pass --port N \(0 picks a free one\)/);
      expect(fake.calls).toHaveLength(0);
    } finally {
      blocker.close();
    }
  });
});

describe('dm-dot dot against a real local server', () => {
  let dir: Awaited<ReturnType<typeof tempDir>>;
  let server: LocalServer;
  beforeEach(async () => {
    dir = await tempDir();
  });
  afterEach(async () => {
    await server?.stop();
    await dir.remove();
  });

  async function dotOn(extra: string[], serverEnv: Record<string, string> = {}, stdin?: StdinScript, log?: Logger) {
    server = await startLocalServer(dir.dir, serverEnv, log);
    const dot = start(['dot', '--port', '0', ...extra], { env: server.env, ...(stdin ? { stdin } : {}) });
    await Promise.race([
      until('subscribed', () => /subscribed sub_/.test(dot.err())),
      dot.code.then((code) => {
        throw new Error(`dot exited ${code}: ${dot.err()}`);
      }),
    ]);
    return dot;
  }

  it('sends each line typed on its standard input as a message and prints the outcome; at the end of input it keeps running', async () => {
    const stdin = new StdinScript();
    const dot = await dotOn([], {}, stdin);
    stdin.type('hello from the keyboard');
    const eventId = await until('the sent line', () => /sent: delivered (evt_[0-9a-f]{32}): the dot accepted it/.exec(dot.err())?.[1]);
    await until('received', () => dot.out().includes(eventId));
    expect(dot.out()).toMatch(new RegExp(`^${eventId}  \\d+ ms  hello from the keyboard$`, 'm'));
    stdin.end();
    // Still running: a message sent after the end of input arrives.
    const later = await postMessage(server, await keyOf(server), 'after EOF');
    expect(later.body.status).toBe('delivered');
    await until('the later message', () => dot.out().includes(later.body.eventId));
    dot.interrupt();
    expect(await dot.code).toBe(0);
    expect(await server.runtime.db.store.getSubscription(Date.now())).toBeUndefined();
    expectNoSecrets(dot.out() + dot.err(), [await keyOf(server)]);
  });

  it('DEL-PIPE-16: answering 410 ends the subscription on the server: the dot says so and stops, exit 1, without subscribing again', async () => {
    const dot = await dotOn(['--status', '410']);
    const sent = await postMessage(server, await keyOf(server), 'are you there?');
    expect(sent.status).toBe(502);
    expect(await dot.code).toBe(1);
    expect(dot.err()).toContain(
      `the subscription ended: this dot answered 410 Gone to ${sent.body.error.eventId}, and the server ends the subscription on a 410`,
    );
    expect(await server.runtime.db.store.getSubscription(Date.now())).toBeUndefined();
  });

  it('DEL-PIPE-16: a line typed into a dot that answers 410 keeps its "sent:" line, printed before the dot stops', async () => {
    const stdin = new StdinScript();
    const dot = await dotOn(['--status', '410'], {}, stdin);
    stdin.type('are you there?');
    expect(await dot.code).toBe(1);
    const err = dot.err();
    expect(err).toMatch(/dm-dot dot: sent: /);
    expect(err.indexOf('dm-dot dot: sent: ')).toBeLessThan(err.indexOf('the subscription ended: this dot answered 410 Gone'));
  });

  it('DEL-PIPE-21: --delay longer than the wait window: the caller is told queued, and the one POST is still received and settles the event', async () => {
    const dot = await dotOn(['--delay', '1200'], { DMDOT_DELIVERY_WAIT_MS: '200' });
    const sent = await postMessage(server, await keyOf(server), 'slow');
    expect(sent.body.status).toBe('queued');
    await until('the received line', () => new RegExp(`^${sent.body.eventId}  \\d+ ms  slow$`, 'm').test(dot.out()), 5000);
    await until('delivered', async () => (await server.runtime.db.store.getEvent(sent.body.eventId, Date.now()))?.status === 'delivered', 5000);
    expect(await server.runtime.db.store.getEvent(sent.body.eventId, Date.now())).toMatchObject({ attempts: 1 });
    expect(dot.err()).not.toContain('had already hung up');
    dot.interrupt();
    await dot.code;
  });

  it('CLI-2: the dot, the server log and events show number the attempts alike; a resend starts a new round at attempt 1', async () => {
    const logged: { eventId: unknown; attempt: unknown }[] = [];
    const line = (event: string, fields?: Record<string, unknown>) => {
      if (event === 'delivery') logged.push({ eventId: fields?.eventId, attempt: fields?.attempt });
    };
    const dot = await dotOn(['--status', '400'], {}, undefined, { info: line, warn: line, error: line });
    const sent = await postMessage(server, await keyOf(server), 'refused twice');
    const eventId = sent.body.error.eventId as string;
    await until('failed', async () => (await server.runtime.db.store.getEvent(eventId, Date.now()))?.status === 'failed', 5000);
    expect((await run(['events', 'resend', eventId], { env: server.env })).code).toBe(0);
    await until('the second answer', () => dot.out().split('\n').length > 2, 5000);
    await until('failed again', async () => (await server.runtime.db.store.getEvent(eventId, Date.now()))?.status === 'failed', 5000);
    // Each round has one attempt (400 is not retried): attempt 1 twice, the same number in all three places.
    expect(dot.out()).toBe(`${eventId}  answered 400 (attempt 1)\n${eventId}  answered 400 (attempt 1)\n`);
    expect(logged.filter((l) => l.eventId === eventId).map((l) => l.attempt)).toEqual([1, 1]);
    const shown = JSON.parse((await run(['events', 'show', eventId, '--json'], { env: server.env })).out).event;
    expect(shown.attempts).toBe(1);
    expect(shown.log.map((e: { kind: string; note?: string }) => e.note ?? e.kind)).toEqual(['attempt', 'resent', 'attempt']);
    dot.interrupt();
    await dot.code;
  });

  it('CLI-2: a subscription clear is noticed by its check within --check: it says so, removes what the check created, stops with exit 1', async () => {
    const dot = await dotOn(['--check', '1000']);
    expect(dot.err()).toContain('it checks the subscription every 1 s: a subscription clear, a key rotation or another dot taking over is noticed within that');
    const cleared = await run(['subscription', 'clear', '--yes'], { env: server.env });
    expect(cleared.code).toBe(0);
    expect(await Promise.race([dot.code, new Promise((r) => setTimeout(() => r('still running'), 5000))])).toBe(1);
    expect(dot.err()).toContain("the subscription had ended (cleared with dm-dot subscription clear, or ended by a 410): this dot's check found none");
    expect(await server.runtime.db.store.getSubscription(Date.now())).toBeUndefined();
  });

  it('CLI-2: a key rotation is noticed by its check within --check: it says the key was refused and stops with exit 1', async () => {
    const dot = await dotOn(['--check', '1000']);
    const rotated = await run(['key', 'rotate', '--yes'], { env: server.env });
    expect(rotated.code).toBe(0);
    expect(await Promise.race([dot.code, new Promise((r) => setTimeout(() => r('still running'), 5000))])).toBe(1);
    expect(dot.err()).toContain('the server refused the API key (rotated with dm-dot key rotate?)');
  });

  it('EV-UNSUB-4: Ctrl-C unsubscribes: the subscription is gone and its queued events are dropped', async () => {
    const dot = await dotOn(['--status', '500'], { DMDOT_RETRY_DELAYS: '2,2', DMDOT_DELIVERY_WAIT_MS: '500' });
    const sent = await postMessage(server, await keyOf(server), 'stays queued');
    expect(sent.body.status).toBe('queued');
    dot.interrupt();
    expect(await dot.code).toBe(0);
    expect(await server.runtime.db.store.getSubscription(Date.now())).toBeUndefined();
    // Its next attempt finds no live subscription: the event is dropped, not sent.
    await until('dropped', async () => (await server.runtime.db.store.getEvent(sent.body.eventId, Date.now()))?.status === 'dropped', 8000);
  });
});
