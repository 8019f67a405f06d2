/**
 * The operator CLI in-process (lambda/cli/main.ts): the exit-code contract (0 ok, 1 failed,
 * 2 bad usage), `--help` on every command, and `dm-dot dot` against a small fake MCP endpoint
 * that subscribes it, challenges it and then posts deliveries signed by an independent node:crypto
 * signer (so the dot's use of `standardwebhooks` is checked, not trusted): verified deliveries are
 * printed once, duplicates by webhook-id are dropped, forged or stale ones are refused, `--status`
 * answers as told, the subscription is refreshed with a new secret (the old one accepted during
 * the overlap) and unsubscribed on abort. Neither the key nor a secret is ever printed.
 */
import { createHmac, randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { COMMANDS, main } from '../../../lambda/cli/main';
import type { CliIo } from '../../../lambda/cli/common';

interface Captured {
  code: Promise<number>;
  out: () => string;
  err: () => string;
  abort: () => void;
}

function start(argv: string[], env: NodeJS.ProcessEnv = {}): Captured {
  let out = '';
  let err = '';
  const controller = new AbortController();
  const io: CliIo = { out: (t) => (out += t), err: (t) => (err += t), env, signal: controller.signal };
  return { code: main(argv, io), out: () => out, err: () => err, abort: () => controller.abort() };
}

async function run(argv: string[], env: NodeJS.ProcessEnv = {}) {
  const c = start(argv, env);
  return { code: await c.code, out: c.out(), err: c.err() };
}

async function until<T>(what: string, probe: () => T | undefined | false, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = probe();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

describe('exit codes and help', () => {
  it('no command is usage (2) with the list on stderr; --help is 0 on stdout', async () => {
    const none = await run([]);
    expect(none.code).toBe(2);
    expect(none.err).toMatch(/^Usage: dm-dot <command>/);
    const help = await run(['--help']);
    expect(help.code).toBe(0);
    for (const c of COMMANDS) expect(help.out).toContain(`  ${c.name}`);
  });

  it('an unknown command is 2', async () => {
    const r = await run(['status']);
    expect(r.code).toBe(2);
    expect(r.err).toMatch(/unknown command "status"/);
  });

  it.each(COMMANDS.map((c) => c.name))('%s --help is 0 and documents --json', async (name) => {
    const r = await run([name, '--help']);
    expect(r.code).toBe(0);
    expect(r.out).toMatch(new RegExp(`^Usage: dm-dot ${name}`));
    expect(r.out).toContain('--json');
  });

  it.each([
    [['events', '--last', '0'], /--last must be an integer from 1/],
    [['events', '--last', '2.5'], /--last must be an integer/],
    [['events', '--status', 'lost'], /--status must be one of queued, delivered, failed, dropped/],
    [['events', '--bogus'], /Unknown option '--bogus'/],
    [['subscription', 'remove'], /unknown action "remove": use show or clear/],
    [['subscription', 'show', '--yes'], /--yes only goes with clear/],
    [['subscription', 'show', 'clear'], /expected one action/],
    [['send'], /missing the message/],
    [['send', 'a', 'b'], /one message only/],
    [['send', 'hi', '--url', 'ftp://example.com'], /--url must be an http: or https: URL/],
    [['send', 'hi', '--url', 'https://example.com/mcp?key=abc'], /--url must not carry user info, a query or a fragment/],
    [['send', 'hi', '--url', 'not a url'], /--url must be an absolute http\(s\) URL/],
    [['dot', '--status', '99'], /--status must be an integer from 200 to 599/],
    [['dot', '--ttl', '1000'], /--ttl must be an integer from 60000/],
    [['dot', '--delay=-1'], /--delay must be an integer from 0 to 60000/],
    [['dot', '--delay'], /argument missing/],
    [['redrive', '--region', 'eu-west-1'], /--region needs --aws/],
  ])('%j is bad usage (2): %s', async (argv, message) => {
    const r = await run(argv as string[], { MCP_API_KEY: 'k'.repeat(20) });
    expect(r.code).toBe(2);
    expect(r.err).toMatch(message);
    expect(r.err).toMatch(/--help for usage/);
  });

  it('a bad local setting is bad usage naming the setting', async () => {
    const r = await run(['events'], { PORT: 'eighty' });
    expect(r.code).toBe(2);
    expect(r.err).toMatch(/PORT must be an integer/);
  });

  it('send without any key is 1 and says where the key comes from', async () => {
    const r = await run(['send', 'hi'], { DMDOT_STATE_DIR: `/tmp/dmdot-no-such-dir-${randomBytes(4).toString('hex')}` });
    expect(r.code).toBe(1);
    expect(r.err).toMatch(/no API key: pass --key, set MCP_API_KEY, or start the local server once/);
  });
});

// ------------------------------------------------------------------------------------------------
// dm-dot dot against a fake MCP endpoint

const KEY = `test-key-${randomBytes(12).toString('hex')}`;

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

async function fakeServer(options: { refreshInMs?: number; answer?: (call: RpcCall) => object | undefined } = {}) {
  const calls: RpcCall[] = [];
  const secrets: string[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', async () => {
      const message = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      const call = { method: message.method, headers: req.headers, params: message.params };
      calls.push(call);
      const reply = (body: object) => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ jsonrpc: '2.0', id: message.id, ...body }));
      };
      const custom = options.answer?.(call);
      if (custom) return reply(custom);
      if (req.headers.authorization !== `Bearer ${KEY}`) {
        res.writeHead(401).end();
        return;
      }
      if (message.method === 'events/subscribe') {
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
        const refreshBefore = new Date(Date.now() + (options.refreshInMs ?? 7 * 86_400_000)).toISOString();
        return reply({ result: { resultType: 'complete', id: `sub_${'a'.repeat(32)}`, refreshBefore, cursor: null, truncated: false } });
      }
      return reply({ result: { resultType: 'complete' } });
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    calls,
    secrets,
    close: () => new Promise<void>((r) => {
      server.close(() => r());
      server.closeAllConnections();
    }),
  };
}

function eventBody(eventId: string, message: string, builtAt = Date.now()) {
  return JSON.stringify({ eventId, name: 'message.created', timestamp: new Date(builtAt).toISOString(), data: { message }, cursor: null });
}

async function deliver(callback: string, secret: string, eventId: string, message: string, options: { timestamp?: number; signature?: string } = {}) {
  const body = eventBody(eventId, message);
  const ts = options.timestamp ?? Math.floor(Date.now() / 1000);
  const response = await fetch(callback, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      'webhook-id': eventId,
      'webhook-timestamp': String(ts),
      'webhook-signature': options.signature ?? sign(secret, eventId, ts, body),
      'x-mcp-subscription-id': `sub_${'a'.repeat(32)}`,
    },
    body,
  });
  return response.status;
}

const evt = (n: number) => `evt_${n.toString(16).padStart(32, '0')}`;

describe('dm-dot dot', () => {
  let fake: Awaited<ReturnType<typeof fakeServer>>;
  afterEach(() => fake?.close());

  async function startDot(extra: string[] = [], fakeOptions: Parameters<typeof fakeServer>[0] = {}) {
    fake = await fakeServer(fakeOptions);
    const dot = start(['dot', '--port', '0', '--url', `${fake.url}/mcp`, '--key', KEY, ...extra]);
    const callback = await Promise.race([
      until('subscribed', () => /subscribed sub_a{32} for (http:\/\/127\.0\.0\.1:\d+\/dot)/.exec(dot.err())?.[1]),
      dot.code.then((code) => {
        throw new Error(`dot exited ${code}: ${dot.err()}`);
      }),
    ]);
    return { ...dot, callback };
  }

  function assertNoSecrets(text: string) {
    expect(text).not.toContain(KEY);
    expect(text).not.toMatch(/whsec_/);
    for (const secret of fake.secrets) expect(text).not.toContain(secret.slice(6));
  }

  it('subscribes with a fresh whsec_ secret on the 2026-07-28 era with the required _meta', async () => {
    const dot = await startDot();
    const [subscribe] = fake.calls;
    expect(subscribe!.method).toBe('events/subscribe');
    expect(subscribe!.headers['mcp-protocol-version']).toBe('2026-07-28');
    expect(subscribe!.headers['mcp-method']).toBe('events/subscribe');
    expect(subscribe!.params._meta['io.modelcontextprotocol/protocolVersion']).toBe('2026-07-28');
    expect(subscribe!.params._meta['io.modelcontextprotocol/clientCapabilities']).toEqual({});
    expect(subscribe!.params).toMatchObject({ name: 'message.created', arguments: {}, delivery: { mode: 'webhook', url: dot.callback } });
    expect(Buffer.from(fake.secrets[0]!.slice(6), 'base64')).toHaveLength(32);
    dot.abort();
    expect(await dot.code).toBe(0);
  });

  it('prints a verified delivery once with its latency, drops a duplicate, refuses forged and stale ones, unsubscribes on abort', async () => {
    const dot = await startDot();
    const secret = fake.secrets[0]!;
    expect(await deliver(dot.callback, secret, evt(1), 'hello dot')).toBe(200);
    expect(dot.out()).toMatch(new RegExp(`^${evt(1)}  \\d+ ms  hello dot\\n$`));

    expect(await deliver(dot.callback, secret, evt(1), 'hello dot')).toBe(200);
    expect(dot.out().split('\n').filter(Boolean)).toHaveLength(1);
    expect(dot.err()).toMatch(new RegExp(`dropped a duplicate of ${evt(1)}`));

    const other = `whsec_${randomBytes(32).toString('base64')}`;
    expect(await deliver(dot.callback, other, evt(2), 'forged')).toBe(401);
    expect(await deliver(dot.callback, secret, evt(3), 'stale', { timestamp: Math.floor(Date.now() / 1000) - 3600 })).toBe(401);
    expect(await deliver(dot.callback, secret, evt(4), 'no signature', { signature: '' })).toBe(401);
    expect(dot.out()).not.toMatch(/forged|stale|no signature/);

    dot.abort();
    expect(await dot.code).toBe(0);
    const unsubscribe = fake.calls.at(-1)!;
    expect(unsubscribe.method).toBe('events/unsubscribe');
    expect(unsubscribe.params.delivery).toEqual({ mode: 'webhook', url: dot.callback });
    expect(unsubscribe.params.delivery.secret).toBeUndefined();
    assertNoSecrets(dot.out() + dot.err());
  });

  it('--status 500 answers 500 each time and prints the attempts; --json gives one line per delivery', async () => {
    const dot = await startDot(['--status', '500', '--json']);
    const secret = fake.secrets[0]!;
    expect(await deliver(dot.callback, secret, evt(7), 'retry me')).toBe(500);
    expect(await deliver(dot.callback, secret, evt(7), 'retry me')).toBe(500);
    const lines = dot.out().trim().split('\n').map((l) => JSON.parse(l));
    expect(lines).toEqual([
      { eventId: evt(7), message: 'retry me', latencyMs: expect.any(Number), attempt: 1, answered: 500 },
      { eventId: evt(7), message: 'retry me', latencyMs: expect.any(Number), attempt: 2, answered: 500 },
    ]);
    dot.abort();
    expect(await dot.code).toBe(0);
  });

  it('--delay holds the answer', async () => {
    const dot = await startDot(['--delay', '300']);
    const started = Date.now();
    expect(await deliver(dot.callback, fake.secrets[0]!, evt(8), 'slow')).toBe(200);
    expect(Date.now() - started).toBeGreaterThanOrEqual(290);
    dot.abort();
    await dot.code;
  });

  it('refreshes before refreshBefore with a new secret and still accepts the old one during the overlap', async () => {
    const dot = await startDot([], { refreshInMs: 1500 });
    await until('the refresh', () => fake.secrets.length >= 2, 5000);
    await until('refreshed line', () => /refreshed sub_a{32}/.test(dot.err()));
    const [old, fresh] = fake.secrets;
    expect(fresh).not.toBe(old);
    expect(fake.calls[1]!.params.delivery.url).toBe(dot.callback);
    expect(await deliver(dot.callback, fresh!, evt(10), 'new secret')).toBe(200);
    expect(await deliver(dot.callback, old!, evt(11), 'old secret, in the overlap')).toBe(200);
    dot.abort();
    expect(await dot.code).toBe(0);
    assertNoSecrets(dot.out() + dot.err());
  });

  it('says what to do when the server refuses loopback callbacks, another callback holds the subscription, or the key is wrong', async () => {
    const cases: [object, RegExp][] = [
      [{ error: { code: -32602, message: 'Invalid params: delivery.url must use https:' } }, /DMDOT_ALLOW_LOOPBACK_CALLBACKS=1 npm start/],
      [{ error: { code: -32000, message: 'A subscription for another callback is active.' } }, /dm-dot subscription clear/],
    ];
    for (const [answer, expected] of cases) {
      fake = await fakeServer({ answer: (call) => (call.method === 'events/subscribe' ? answer : undefined) });
      const r = await run(['dot', '--port', '0', '--url', fake.url, '--key', KEY]);
      expect(r.code).toBe(1);
      expect(r.err).toMatch(expected);
      await fake.close();
    }
    fake = await fakeServer();
    const wrong = await run(['dot', '--port', '0', '--url', fake.url, '--key', 'wrong-key-0123456789']);
    expect(wrong.code).toBe(1);
    expect(wrong.err).toMatch(/refused the API key/);
    expect(wrong.err).not.toContain('wrong-key-0123456789');
  });

  it('a port in use is 1 with a way out', async () => {
    const blocker = http.createServer();
    await new Promise<void>((r) => blocker.listen(0, '127.0.0.1', r));
    try {
      fake = await fakeServer();
      const r = await run(['dot', '--port', String((blocker.address() as AddressInfo).port), '--url', fake.url, '--key', KEY]);
      expect(r.code).toBe(1);
      expect(r.err).toMatch(/is in use: pass --port N/);
      expect(fake.calls).toHaveLength(0);
    } finally {
      blocker.close();
    }
  });
});
