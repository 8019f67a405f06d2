/**
 * How the local CLI picks where to read and write (lambda/cli/operator.ts): the state directory
 * itself when no server runs, when `runtime.json` names a dead process, or when the recorded
 * server does not answer (it died without cleaning up); the running server's admin routes, with
 * the admin token, when it does. And `subscription clear` asks before it deletes.
 */
import { spawnSync } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FileStore } from '../../../lambda/adapters/file-store';
import { main } from '../../../lambda/cli/main';
import { clearSubscription } from '../../../lambda/local/admin';
import type { CliIo } from '../../../lambda/cli/common';
import type { SubscriptionRecord } from '../../../lambda/ports';
import { API_KEY, BASE, buildApp } from '../../support/app';

let stateDir: string;
beforeEach(async () => {
  stateDir = await mkdtemp(join(tmpdir(), 'dmdot-cli-local-'));
});
afterEach(() => rm(stateDir, { recursive: true, force: true }));

const NOW = Date.now();
const record: SubscriptionRecord = {
  id: `sub_${'c'.repeat(32)}`,
  url: 'http://127.0.0.1:1234/dot',
  name: 'message.created',
  secret: 'whsec_c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0',
  principal: 'p',
  createdAt: NOW,
  refreshedAt: NOW,
  expiresAt: NOW + 3_600_000,
};

async function run(argv: string[], answer?: string) {
  let out = '';
  let err = '';
  const io: CliIo = { out: (t) => (out += t), err: (t) => (err += t), env: { DMDOT_STATE_DIR: stateDir }, ...(answer !== undefined ? { ask: async () => answer } : {}) };
  return { code: await main(argv, io), out, err };
}

async function seed() {
  const store = await FileStore.open(stateDir);
  await store.putSubscription(record, NOW);
}

/** A pid that existed a moment ago and no longer does. */
function deadPid(): number {
  return spawnSync(process.execPath, ['-e', '0']).pid!;
}

describe('local CLI without a running server', () => {
  it('reads and clears the state directory itself; clear asks first', async () => {
    await seed();
    const show = await run(['subscription', '--json']);
    expect(show.code).toBe(0);
    expect(JSON.parse(show.out).subscription.id).toBe(record.id);

    const declined = await run(['subscription', 'clear'], 'no');
    expect(declined.code).toBe(1);
    expect(declined.err).toMatch(/not cleared/);
    expect((await (await FileStore.open(stateDir)).getSubscription(Date.now()))?.id).toBe(record.id);

    const accepted = await run(['subscription', 'clear'], 'y');
    expect(accepted.code).toBe(0);
    expect(accepted.out).toMatch(/Cleared subscription sub_c{32}/);
    expect(await (await FileStore.open(stateDir)).getSubscription(Date.now())).toBeUndefined();
    expect(JSON.stringify(JSON.parse(await readFile(join(stateDir, 'store.json'), 'utf8')))).not.toContain('SUBSCRIPTION');
  });

  it('a runtime.json naming a dead process is ignored', async () => {
    await seed();
    await writeFile(join(stateDir, 'runtime.json'), JSON.stringify({ pid: deadPid(), url: 'http://127.0.0.1:1' }));
    const events = await run(['events']);
    expect(events.code).toBe(0);
    expect(events.out).toMatch(/No events \(state directory .* \(no server running\)\)/);
  });

  it('a live pid whose server does not answer falls back to the state directory', async () => {
    await seed();
    const closed = http.createServer();
    await new Promise<void>((r) => closed.listen(0, '127.0.0.1', r));
    const port = (closed.address() as AddressInfo).port;
    await new Promise<void>((r) => closed.close(() => r()));
    await writeFile(join(stateDir, 'runtime.json'), JSON.stringify({ pid: process.pid, url: `http://127.0.0.1:${port}` }));
    await writeFile(join(stateDir, 'admin-token'), 'some-token\n');
    const show = await run(['subscription', '--json']);
    expect(show.code).toBe(0);
    expect(JSON.parse(show.out).subscription.id).toBe(record.id);
  });

  it('a missing state directory is 1 and names it', async () => {
    await rm(stateDir, { recursive: true, force: true });
    const r = await run(['events']);
    expect(r.code).toBe(1);
    expect(r.err).toContain(`no state directory at ${stateDir}`);
  });
});

describe('local CLI with a running server', () => {
  it('asks the server with the admin token and never opens store.json', async () => {
    const seen: { method?: string; url?: string; auth?: string }[] = [];
    const server = http.createServer((req, res) => {
      seen.push({ method: req.method, url: req.url, auth: req.headers.authorization });
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(req.url === '/admin/redrive' ? { moved: 3 } : { events: [] }));
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    try {
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      await writeFile(join(stateDir, 'runtime.json'), JSON.stringify({ pid: process.pid, url }));
      await writeFile(join(stateDir, 'admin-token'), 'the-admin-token\n');
      // A store.json the CLI must not read: the running server owns the state.
      await writeFile(join(stateDir, 'store.json'), 'not json at all');

      const events = await run(['events', '--status', 'failed']);
      expect(events.code).toBe(0);
      expect(events.out).toBe(`No events with status failed (the running server at ${url}).\n`);
      const redrive = await run(['redrive', '--json']);
      expect(JSON.parse(redrive.out)).toEqual({ moved: 3, deliveredBy: 'running server' });
      expect(seen).toEqual([
        { method: 'GET', url: '/admin/events?status=failed', auth: 'Bearer the-admin-token' },
        { method: 'POST', url: '/admin/redrive', auth: 'Bearer the-admin-token' },
      ]);
      expect(events.out + events.err + redrive.out + redrive.err).not.toContain('the-admin-token');
    } finally {
      server.close();
    }
  });
});

describe('the app the Lambdas run', () => {
  it('has no admin routes: /admin/* is 404 even with the API key, and touches no storage', async () => {
    const { app, store } = buildApp();
    for (const [method, path] of [
      ['GET', '/admin/events'],
      ['GET', '/admin/subscription'],
      ['DELETE', '/admin/subscription'],
      ['POST', '/admin/redrive'],
    ] as const) {
      const response = await app.handle(new Request(`${BASE}${path}`, { method, headers: { authorization: `Bearer ${API_KEY}` } }));
      expect(response.status).toBe(404);
    }
    expect(store.calls).toEqual([]);
  });
});

describe('clearSubscription', () => {
  it('clears only the subscription the operator confirmed', async () => {
    await seed();
    const store = await FileStore.open(stateDir);
    await expect(clearSubscription(store, Date.now(), `sub_${'d'.repeat(32)}`)).resolves.toEqual({ cleared: false, id: record.id });
    expect((await store.getSubscription(Date.now()))?.id).toBe(record.id);
    await expect(clearSubscription(store, Date.now(), record.id)).resolves.toEqual({ cleared: true, id: record.id });
    await expect(clearSubscription(store, Date.now(), record.id)).resolves.toEqual({ cleared: false, id: null });
  });
});
