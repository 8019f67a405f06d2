/**
 * The `dm-dot` operator CLI end to end (SPEC 9.1), run as the executable (`lambda/cli/dm-dot.mjs`)
 * against the local runtime started as `npm start` does: `dot` receives and verifies what `send`
 * sends; a receiver answering 500 leaves a `failed` event in `events` and `redrive` delivers it
 * once the receiver recovers; `subscription clear` lets a second callback subscribe at once; the
 * admin routes refuse the API key; a stopped server's state directory is read and written
 * directly. No output of any command ever holds the API key, the admin token or a `whsec_` secret.
 */
import { afterEach, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { echoing, newSecret, ROOT, rpc, startReceiver, startServer, waitFor, type RunningServer } from '../support/e2e';

const CLI = join(ROOT, 'lambda/cli/dm-dot.mjs');

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  while (cleanups.length) await cleanups.pop()!();
});

/** Everything any command printed in this file, checked for secrets at the end of each test. */
const printed: string[] = [];
function assertNothingSecretPrinted(server: RunningServer) {
  const token = existsSync(join(server.stateDir, 'admin-token')) ? readFileSync(join(server.stateDir, 'admin-token'), 'utf8').trim() : undefined;
  const all = printed.join('\n');
  assert.ok(!all.includes(server.key), 'the API key is never printed');
  assert.ok(!token || !all.includes(token), 'the admin token is never printed');
  assert.ok(!/whsec_/.test(all), 'no signing secret is ever printed');
}

interface Run {
  code: number | null;
  out: string;
  err: string;
}

function envOf(server: RunningServer, extra: Record<string, string> = {}): Record<string, string> {
  return { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', DMDOT_STATE_DIR: server.stateDir, MCP_API_KEY: server.key, ...extra };
}

function cli(args: string[], env: Record<string, string>): Promise<Run> {
  return new Promise((done, fail) => {
    const child = spawn(process.execPath, [CLI, ...args], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.setEncoding('utf8').on('data', (c: string) => (out += c));
    child.stderr.setEncoding('utf8').on('data', (c: string) => (err += c));
    const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
    child.once('error', fail);
    child.once('exit', (code) => {
      clearTimeout(timer);
      printed.push(out, err);
      done({ code, out, err });
    });
  });
}

/** `dm-dot dot` as a child process; resolves once it has subscribed. */
async function startDot(args: string[], env: Record<string, string>) {
  const child: ChildProcess = spawn(process.execPath, [CLI, 'dot', '--port', '0', ...args], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout!.setEncoding('utf8').on('data', (c: string) => (out += c));
  child.stderr!.setEncoding('utf8').on('data', (c: string) => (err += c));
  const exited = new Promise<number | null>((done) => child.once('exit', (code) => done(code)));
  cleanups.push(async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await exited;
  });
  const callback = await Promise.race([
    waitFor('dot subscribed', () => /subscribed sub_[0-9a-f]{32} for (http:\/\/127\.0\.0\.1:\d+\/dot)/.exec(err)?.[1], 30_000),
    exited.then((code) => {
      throw new Error(`dot exited ${code}: ${err}`);
    }),
  ]);
  return {
    callback,
    out: () => out,
    err: () => err,
    async stop(): Promise<number | null> {
      child.kill('SIGINT');
      const code = await exited;
      printed.push(out, err);
      return code;
    },
  };
}

async function server(env: Record<string, string> = {}, options: { stateDir?: string } = {}) {
  const s = await startServer(env, options);
  cleanups.push(() => s.stop());
  return s;
}

function subscribeParams(url: string, secret = newSecret()) {
  return { name: 'message.created', arguments: {}, delivery: { mode: 'webhook', url, secret } };
}

describe('dm-dot dot and send', () => {
  it('dot receives and verifies a message sent with send, refuses a forged one, and unsubscribes on Ctrl-C', async () => {
    const s = await server();
    const env = envOf(s);
    const dot = await startDot([], env);

    const sent = await cli(['send', 'hello from the CLI'], env);
    assert.equal(sent.code, 0, sent.err);
    const eventId = /^delivered (evt_[0-9a-f]{32})/.exec(sent.out)?.[1];
    assert.ok(eventId, sent.out);
    await waitFor('the dot prints the message', () => dot.out().includes(eventId!));
    assert.match(dot.out(), new RegExp(`^${eventId}  \\d+ ms  hello from the CLI$`, 'm'));

    // A request the server did not sign is refused and never printed as a message.
    const forged = await fetch(dot.callback, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'webhook-id': 'evt_forged', 'webhook-timestamp': String(Math.floor(Date.now() / 1000)), 'webhook-signature': 'v1,AAAA' },
      body: JSON.stringify({ eventId: 'evt_forged', name: 'message.created', data: { message: 'forged' } }),
    });
    assert.equal(forged.status, 401);
    assert.ok(!dot.out().includes('forged'));

    const json = await cli(['send', 'second', '--json'], env);
    assert.equal(json.code, 0, json.err);
    const answer = JSON.parse(json.out);
    assert.equal(answer.status, 'delivered');
    await waitFor('the second message', () => dot.out().includes(answer.eventId));

    assert.equal(await dot.stop(), 0);
    assert.match(dot.err(), /unsubscribed/);
    const show = await cli(['subscription', '--json'], env);
    assert.deepEqual(JSON.parse(show.out), { subscription: null }, 'Ctrl-C ended the subscription');

    const noDot = await cli(['send', 'nobody listens'], env);
    assert.equal(noDot.code, 1);
    assert.match(noDot.err, /no dot is subscribed/);
    assertNothingSecretPrinted(s);
  });

  it('dot --status 410: send reports failed (exit 1) and the subscription is gone, the second way out of the lock-out', async () => {
    const s = await server();
    const env = envOf(s);
    const dot = await startDot(['--status', '410'], env);
    const sent = await cli(['send', 'are you there?'], env);
    assert.equal(sent.code, 1, sent.out + sent.err);
    assert.match(sent.out, /^failed evt_[0-9a-f]{32}: http_4xx\./);
    await waitFor('the dot saw it', () => /answered 410 \(attempt 1\)/.test(dot.out()));
    const show = await cli(['subscription', '--json'], env);
    assert.deepEqual(JSON.parse(show.out), { subscription: null });
    const failed = JSON.parse((await cli(['events', '--json'], env)).out);
    assert.equal(failed[0].status, 'failed');
    assert.equal(failed[0].lastError, 'http_4xx');
    assert.equal(await dot.stop(), 0, 'unsubscribing what is already gone is fine');
    assertNothingSecretPrinted(s);
  });

  it('dot says clearly that the server must allow loopback callbacks', async () => {
    const s = await server({ DMDOT_ALLOW_LOOPBACK_CALLBACKS: '' });
    const child = await cli(['dot', '--port', '0'], envOf(s));
    assert.equal(child.code, 1);
    assert.match(child.err, /DMDOT_ALLOW_LOOPBACK_CALLBACKS=1 npm start/);
    assertNothingSecretPrinted(s);
  });

  it('send with a wrong key, an empty message or no server', async () => {
    const s = await server();
    const wrongKey = await cli(['send', 'hi', '--key', 'not-the-key-0123456789'], envOf(s));
    assert.equal(wrongKey.code, 1);
    assert.match(wrongKey.err, /refused the API key/);
    assert.ok(!wrongKey.err.includes('not-the-key-0123456789'));
    const empty = await cli(['send', '   '], envOf(s));
    assert.equal(empty.code, 2);
    assert.match(empty.err, /message is empty/);
    // A port that was free a moment ago (fetch refuses some well-known ports outright).
    const closed = await startReceiver();
    await closed.close();
    const nobody = await cli(['send', 'hi', '--url', `http://127.0.0.1:${closed.port}/mcp`], envOf(s));
    assert.equal(nobody.code, 1);
    assert.match(nobody.err, new RegExp(`no server at http://127\\.0\\.0\\.1:${closed.port}`));
    assertNothingSecretPrinted(s);
  });
});

describe('dm-dot events and redrive', () => {
  it('a receiver answering 500 leaves a failed event in events; redrive delivers it after the receiver recovers', async () => {
    const stateDir = mkdtempSync(join(tmpdir(), 'dmdot-cli-'));
    cleanups.push(async () => rmSync(stateDir, { recursive: true, force: true }));
    // The wait window (200 ms) ends well before the second attempt (1 s later): send says queued.
    const s = await server({ DMDOT_RETRY_DELAYS: '1,1', DMDOT_DELIVERY_WAIT_MS: '200' }, { stateDir });
    const env = envOf(s);
    const receiver = await startReceiver((r) => (r.json?.type === 'verification' ? { status: 200, body: JSON.stringify({ challenge: r.json.challenge }) } : { status: 500 }));
    cleanups.push(() => receiver.close());
    assert.ok((await rpc(s, 'events/subscribe', subscribeParams(receiver.url()))).body.result.id);

    const sent = await cli(['send', 'try me three times'], env);
    assert.equal(sent.code, 0, sent.out + sent.err);
    const eventId = /^queued (evt_[0-9a-f]{32})/.exec(sent.out)?.[1];
    assert.ok(eventId, `a 500 leaves the event queued: ${sent.out}`);
    await waitFor('the dead letter', () => readdirSync(join(stateDir, 'dead-letter')).includes(`${eventId}.json`), 20_000);

    const failed = await cli(['events', '--status', 'failed', '--json'], env);
    assert.equal(failed.code, 0, failed.err);
    const [row, ...others] = JSON.parse(failed.out);
    assert.equal(others.length, 0);
    assert.equal(row.eventId, eventId);
    assert.equal(row.status, 'failed');
    assert.equal(row.attempts, 3, 'three attempts with DMDOT_RETRY_DELAYS=1,1');
    assert.equal(row.lastError, 'http_5xx');
    assert.equal(row.deliveredAt, null);
    const table = await cli(['events'], env);
    assert.match(table.out, /^EVENT +STATUS +ATTEMPTS +LAST ERROR +CREATED +DELIVERED$/m);
    assert.match(table.out, new RegExp(`^${eventId}  failed +3 +http_5xx +\\S+Z +-$`, 'm'));

    receiver.setResponder(echoing());
    const redrive = await cli(['redrive'], env);
    assert.equal(redrive.code, 0, redrive.err);
    assert.match(redrive.out, /Moved 1 dead letter\(s\) back; the running server .* is delivering them now/);
    await waitFor('the redriven delivery', () => receiver.events().length === 4, 20_000);
    assert.equal(receiver.events()[3]!.headers['webhook-id'], eventId, 'the same event, the same webhook-id');
    let delivered: { eventId: string; status: string; deliveredAt: string | null } | undefined;
    for (let i = 0; i < 50 && delivered?.status !== 'delivered'; i++) {
      if (i > 0) await new Promise((r) => setTimeout(r, 200));
      delivered = JSON.parse((await cli(['events', '--json', '--last', '1'], env)).out)[0];
    }
    assert.ok(delivered);
    assert.equal(delivered.eventId, eventId);
    assert.equal(delivered.status, 'delivered');
    assert.ok(delivered.deliveredAt);
    assert.deepEqual(readdirSync(join(stateDir, 'dead-letter')), []);

    // With the server stopped, the CLI reads the state directory itself.
    assert.equal(await s.stop(), 0);
    assert.ok(!existsSync(join(stateDir, 'runtime.json')) && !existsSync(join(stateDir, 'admin-token')), 'stop withdraws the admin files');
    const offline = await cli(['events', '--json'], env);
    assert.equal(offline.code, 0, offline.err);
    assert.equal(JSON.parse(offline.out)[0].status, 'delivered');
    const offlineTable = await cli(['events'], env);
    assert.match(offlineTable.out, new RegExp(`^${eventId}  delivered`, 'm'));
    assertNothingSecretPrinted(s);
  });
});

describe('dm-dot subscription', () => {
  it('show names the callback host only; clear asks, --yes clears, and a second callback subscribes at once', async () => {
    const stateDir = mkdtempSync(join(tmpdir(), 'dmdot-cli-'));
    cleanups.push(async () => rmSync(stateDir, { recursive: true, force: true }));
    const s = await server({}, { stateDir });
    const env = envOf(s);
    const first = await startReceiver(echoing());
    const second = await startReceiver(echoing());
    cleanups.push(() => first.close(), () => second.close());
    const firstSecret = newSecret();
    const id = (await rpc(s, 'events/subscribe', subscribeParams(first.url('/hook/path-secret?token=abc'), firstSecret))).body.result.id;
    assert.equal((await rpc(s, 'events/subscribe', subscribeParams(second.url()))).body.error.code, -32000, 'the lock-out');

    const show = await cli(['subscription', 'show'], env);
    assert.equal(show.code, 0, show.err);
    assert.match(show.out, new RegExp(`^id +${id}$`, 'm'));
    assert.match(show.out, new RegExp(`^callback host +127\\.0\\.0\\.1:${first.port}$`, 'm'));
    assert.ok(!show.out.includes('path-secret') && !show.out.includes('token=abc'), 'never the path or query of the callback');
    assert.ok(!show.out.includes(firstSecret.slice(6)), 'never the secret');

    const unconfirmed = await cli(['subscription', 'clear'], env);
    assert.equal(unconfirmed.code, 2, 'no terminal to confirm on: --yes is required');
    assert.match(unconfirmed.err, /--yes/);
    assert.equal((await cli(['subscription', '--json'], env)).out.includes(id), true, 'still there');

    const cleared = await cli(['subscription', 'clear', '--yes'], env);
    assert.equal(cleared.code, 0, cleared.err);
    assert.match(cleared.out, new RegExp(`Cleared subscription ${id}`));
    assert.ok((await rpc(s, 'events/subscribe', subscribeParams(second.url()))).body.result.id, 'the second callback subscribes at once');

    // Stopped server: clear writes the state directory itself, and the next start sees it.
    assert.equal(await s.stop(), 0);
    const offline = await cli(['subscription', 'clear', '--yes', '--json'], env);
    assert.equal(offline.code, 0, offline.err);
    assert.equal(JSON.parse(offline.out).cleared, true);
    const again = await server({}, { stateDir });
    assert.ok((await rpc(again, 'events/subscribe', subscribeParams(first.url()))).body.result.id, 'the first callback can subscribe again');
    assertNothingSecretPrinted(s);
  });

  it('admin routes answer the admin token only: never the API key, never a cross-origin request', async () => {
    const s = await server();
    const token = readFileSync(join(s.stateDir, 'admin-token'), 'utf8').trim();
    assert.equal(statSync(join(s.stateDir, 'admin-token')).mode & 0o777, 0o600);
    assert.notEqual(token, s.key);
    const withKey = await fetch(`${s.url}/admin/subscription`, { method: 'DELETE', headers: { authorization: `Bearer ${s.key}` } });
    assert.equal(withKey.status, 401);
    const withQueryKey = await fetch(`${s.url}/admin/events?key=${encodeURIComponent(s.key)}`);
    assert.equal(withQueryKey.status, 401);
    const none = await fetch(`${s.url}/admin/redrive`, { method: 'POST' });
    assert.equal(none.status, 401);
    const ok = await fetch(`${s.url}/admin/events`, { headers: { authorization: `Bearer ${token}` } });
    assert.equal(ok.status, 200);
    assert.deepEqual(await ok.json(), { events: [] });
    const crossOrigin = await fetch(`${s.url}/admin/events`, { headers: { authorization: `Bearer ${token}`, origin: 'http://evil.example' } });
    assert.equal(crossOrigin.status, 403);
    const badStatus = await fetch(`${s.url}/admin/events?status=lost`, { headers: { authorization: `Bearer ${token}` } });
    assert.equal(badStatus.status, 400);
    const wrongMethod = await fetch(`${s.url}/admin/redrive`, { headers: { authorization: `Bearer ${token}` } });
    assert.equal(wrongMethod.status, 405);
  });
});
