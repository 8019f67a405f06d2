/**
 * The local admin routes (lambda/local/admin-routes.ts) stay on this machine: the server's own
 * loopback Host only, never a request that came through a proxy or tunnel (forwarding headers),
 * never a browser page (Origin), and only with the admin token, never the API key. One rule per
 * test, on a real node:http server over the in-memory fakes.
 */
import { newSenderKey } from '../../../lambda/core/access';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { handleAdmin, type AdminDeps } from '../../../lambda/local/admin-routes';
import { FakeAccessStore, fakeOutbox, FakeQueue, FakeStore, T0 } from '../../support/fakes';
import { API_KEY, liveSubscription } from '../../support/app';

const TOKEN = 'admin-token-0123456789abcdef0123456789';

async function adminServer(overrides: Partial<AdminDeps> = {}) {
  const store = new FakeStore();
  store.subscription = liveSubscription(T0);
  const queue = new FakeQueue();
  let port = 0;
  const deps: AdminDeps = {
    store,
    outbox: fakeOutbox(store, queue),
    now: () => T0,
    token: TOKEN,
    get hosts() {
      return new Set([`127.0.0.1:${port}`, `localhost:${port}`, `[::1]:${port}`]);
    },
    redrive: async () => 0,
    queueCounts: async () => ({ queued: 0, deadLetters: 0 }),
    describe: () => ({ switches: { loopbackCallbacks: false } }),
    ...overrides,
  };
  const server = http.createServer((req, res) => void handleAdmin(deps, req, res));
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  port = (server.address() as AddressInfo).port;
  return {
    store,
    port,
    close: () => new Promise<void>((done) => server.close(() => done())),
    async get(path: string, headers: Record<string, string> = {}, method = 'GET') {
      return new Promise<{ status: number; body: any }>((resolve, reject) => {
        const req = http.request(
          { host: '127.0.0.1', port, path, method, headers: { authorization: `Bearer ${TOKEN}`, host: `127.0.0.1:${port}`, ...headers } },
          (res) => {
            const chunks: Buffer[] = [];
            res.on('data', (c: Buffer) => chunks.push(c));
            res.on('end', () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}') }));
          },
        );
        req.on('error', reject);
        req.end();
      });
    },
  };
}

describe('CLI-14: admin routes are for this machine only', () => {
  let s: Awaited<ReturnType<typeof adminServer>>;
  beforeEach(async () => {
    s = await adminServer();
  });
  afterEach(() => s.close());

  test('the control: the admin token on the loopback Host is served', async () => {
    expect(await s.get('/admin/subscription')).toMatchObject({ status: 200, body: { subscription: { callbackHost: 'dot.example' } } });
  });

  test('a foreign Host is refused 403, even with the admin token', async () => {
    expect(await s.get('/admin/events', { host: 'evil.example' })).toMatchObject({ status: 403, body: { error: { code: 'forbidden_host' } } });
  });

  test("a tunnel's host name (allowed on the public routes) is refused 403 here", async () => {
    expect(await s.get('/admin/events', { host: 'abc.example-tunnel.dev' })).toMatchObject({ status: 403, body: { error: { code: 'forbidden_host' } } });
  });

  test.each(['x-forwarded-for', 'forwarded', 'x-forwarded-host', 'x-forwarded-proto', 'x-real-ip', 'via'])(
    'a request carrying %s (it came through a proxy or tunnel) is refused 403',
    async (header) => {
      expect(await s.get('/admin/events', { [header]: '203.0.113.9' })).toMatchObject({ status: 403, body: { error: { code: 'forwarded' } } });
    },
  );

  test('a request with an Origin (a browser page) is refused 403', async () => {
    expect(await s.get('/admin/events', { origin: `http://127.0.0.1:${s.port}` })).toMatchObject({
      status: 403,
      body: { error: { code: 'forbidden_origin' } },
    });
  });

  test('CLI-14: the API key is not the admin token: 401', async () => {
    expect(await s.get('/admin/events', { authorization: `Bearer ${API_KEY}` })).toMatchObject({ status: 401, body: { error: { code: 'unauthorized' } } });
  });

  test('HTTP-KEY-4: a sender key is refused 403 on every admin route, before any storage', async () => {
    const key = newSenderKey('billing');
    for (const path of ['/admin/events', '/admin/subscription', '/admin/senders', '/admin/status']) {
      expect(await s.get(path, { authorization: `Bearer ${key}` })).toMatchObject({ status: 403, body: { error: { code: 'forbidden_sender' } } });
    }
    expect(s.store.calls).toEqual([]);
  });

  test('a refused request touches no storage', async () => {
    await s.get('/admin/subscription', { host: 'evil.example' }, 'DELETE');
    await s.get('/admin/subscription', { 'x-forwarded-for': '1.2.3.4' }, 'DELETE');
    expect(s.store.calls).toEqual([]);
    expect(s.store.subscription).toBeDefined();
  });
});

describe('admin routes over the operator actions', () => {
  test('events/<id> shows one event with its log; an unknown id is 404', async () => {
    const s = await adminServer();
    try {
      const eventId = `evt_${'a'.repeat(32)}`;
      s.store.events.set(eventId, {
        eventId,
        status: 'failed',
        subscriptionId: 's',
        attempts: 1,
        createdAt: T0,
        expiresAt: T0 + 1_000_000,
        lastError: 'http_4xx',
        body: '{}',
        log: [{ at: T0, outcome: 'http_4xx', statusClass: '4xx', durationMs: 5, counted: true }],
      });
      const shown = await s.get(`/admin/events/${eventId}`);
      expect(shown).toMatchObject({
        status: 200,
        body: { event: { eventId, resendable: true, log: [{ kind: 'attempt', outcome: 'http_4xx', statusClass: '4xx', durationMs: 5, counted: true }] } },
      });
      expect(await s.get(`/admin/events/evt_${'b'.repeat(32)}`)).toMatchObject({ status: 404 });
    } finally {
      await s.close();
    }
  });

  test('HTTP-KEY-ROT-4: an overlap over 7 days is a 400 that says the limit, and nothing is rotated', async () => {
    const asked: number[] = [];
    const s = await adminServer({ rotateKey: async (overlapMs = 0) => (asked.push(overlapMs), { keyFile: '/state/api-key', overlapUntil: null }) });
    try {
      const refused = await s.get(`/admin/key?overlapMs=${7 * 86_400_000 + 1}`, {}, 'POST');
      expect(refused).toMatchObject({ status: 400, body: { error: { code: 'invalid_overlap' } } });
      expect(refused.body.error.message).toMatch(/7 days/);
      expect(asked).toEqual([]);
      expect(await s.get(`/admin/key?overlapMs=${7 * 86_400_000}`, {}, 'POST')).toMatchObject({ status: 200, body: { rotated: true } });
      expect(asked).toEqual([7 * 86_400_000]);
    } finally {
      await s.close();
    }
  });

  test('HTTP-KEY-NAME-1: adding a sender of a reserved name is a 400; a taken name is still an answer', async () => {
    const access = new FakeAccessStore();
    const s = await adminServer({ access });
    try {
      for (const name of ['connector', 'pup', 'dm-dot']) {
        expect(await s.get(`/admin/senders?name=${name}`, {}, 'POST')).toMatchObject({ status: 400, body: { error: { code: 'invalid_name' } } });
      }
      expect(access.senders.size).toBe(0);
      expect(await s.get('/admin/senders?name=ok', {}, 'POST')).toMatchObject({ status: 200, body: { added: true } });
      expect(await s.get('/admin/senders?name=ok', {}, 'POST')).toMatchObject({ status: 200, body: { added: false, why: 'exists' } });
    } finally {
      await s.close();
    }
  });

  test('key rotation is refused with 409 when the key comes from MCP_API_KEY', async () => {
    const s = await adminServer();
    try {
      expect(await s.get('/admin/key', {}, 'POST')).toMatchObject({ status: 409, body: { error: { code: 'key_from_environment' } } });
    } finally {
      await s.close();
    }
  });
});
