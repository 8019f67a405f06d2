/**
 * The `dm-dot` operator CLI end to end (docs/contract/local-runtime.md), run as the executable (the bin,
 * `lambda/cli/dm-dot.mjs`, over the built bundle) against the local runtime started as `npm start`
 * does: the two-terminal walkthrough (`dot` receives and verifies what `send` sends and what is
 * typed on its own standard input); a receiver answering 500 leaves a failed, dead-lettered event
 * and `redrive` delivers it once the receiver recovers; `subscription clear` lets a second
 * callback subscribe at once; the admin routes refuse the API key; a stopped server's database is
 * read and written directly; the project's state directory is found from a subfolder. No output
 * of any command ever holds the API key, the admin token or a `whsec_` secret.
 */
import { after, afterEach, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { spawnGroup as spawn } from '../support/processes';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildCli, CLI, runCli, type CliRun } from '../support/cli-run';
import { echoing, newSecret, ROOT, rpc, startReceiver, startServer, waitFor, type RunningServer } from '../support/e2e';

before(buildCli);

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
after(() => {
  printed.length = 0;
});

function envOf(server: RunningServer, extra: Record<string, string> = {}): Record<string, string> {
  return { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', DMDOT_STATE_DIR: server.stateDir, MCP_API_KEY: server.key, ...extra };
}

function cli(args: string[], env: Record<string, string>, options: { cwd?: string } = {}): Promise<CliRun> {
  return runCli(args, env, { ...options, onOutput: (out, err) => printed.push(out, err) });
}

/** `dm-dot dot` as a child process with a pipe for its standard input; resolves once it has subscribed. */
async function startDot(args: string[], env: Record<string, string>) {
  const child: ChildProcess = spawn(process.execPath, [CLI, 'dot', '--port', '0', ...args], { cwd: ROOT, env, stdio: ['pipe', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout!.setEncoding('utf8').on('data', (c: string) => (out += c));
  child.stderr!.setEncoding('utf8').on('data', (c: string) => (err += c));
  // Once its pipes are drained too (cli-run.ts says why).
  const exited = new Promise<number | null>((done) => child.once('close', (code) => done(code)));
  cleanups.push(async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await exited;
    printed.push(out, err);
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
    type: (line: string) => child.stdin!.write(`${line}\n`),
    endInput: () => child.stdin!.end(),
    exited,
    async stop(): Promise<number | null> {
      child.kill('SIGINT');
      return exited;
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

describe('CLI-2, CLI-3: dm-dot dot and send: the walkthrough in two terminals', () => {
  it('dot receives and verifies what send sends and what is typed on its standard input, refuses a forged request, and unsubscribes on Ctrl-C', async () => {
    const s = await server();
    const env = envOf(s);
    const dot = await startDot([], env);

    const sent = await cli(['send', 'hello from the CLI'], env);
    assert.equal(sent.code, 0, sent.err);
    const eventId = /^delivered (evt_[0-9a-f]{32}): the dot accepted it$/m.exec(sent.out)?.[1];
    assert.ok(eventId, sent.out);
    await waitFor('the dot prints the message', () => dot.out().includes(eventId!));
    assert.match(dot.out(), new RegExp(`^${eventId}  \\d+ ms  hello from the CLI$`, 'm'));

    dot.type('typed in the dot terminal');
    const typedId = await waitFor('the typed line sent', () => /sent: delivered (evt_[0-9a-f]{32})/.exec(dot.err())?.[1]);
    await waitFor('the typed line received', () => dot.out().includes(typedId));
    assert.match(dot.out(), new RegExp(`^${typedId}  \\d+ ms  typed in the dot terminal$`, 'm'));
    dot.endInput();

    // A request the server did not sign is refused and never printed as a message.
    const forged = await fetch(dot.callback, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'webhook-id': 'evt_forged',
        'webhook-timestamp': String(Math.floor(Date.now() / 1000)),
        'webhook-signature': 'v1,AAAA',
      },
      body: JSON.stringify({ eventId: 'evt_forged', name: 'message.created', data: { message: 'forged' } }),
    });
    assert.equal(forged.status, 401);
    assert.ok(!dot.out().includes('forged'));

    const json = await cli(['send', 'after the end of its input', '--json'], env);
    assert.equal(json.code, 0, json.err);
    const answer = JSON.parse(json.out);
    assert.equal(answer.status, 'delivered');
    await waitFor('still receiving after the end of its input', () => dot.out().includes(answer.eventId));

    assert.equal(await dot.stop(), 0);
    assert.match(dot.err(), /unsubscribed sub_[0-9a-f]{32}; events still queued for it end dropped at their next attempt, not delivered/);
    const show = await cli(['subscription', '--json'], env);
    assert.deepEqual(JSON.parse(show.out), { subscription: null }, 'Ctrl-C ended the subscription');

    const noDot = await cli(['send', 'nobody listens'], env);
    assert.equal(noDot.code, 1);
    assert.match(noDot.err, /^dm-dot send: not accepted: no dot is subscribed/);
    assertNothingSecretPrinted(s);
  });

  it('DEL-PIPE-16: dot --status 410: send reports failed (exit 1), the dot says its subscription ended and stops (exit 1), and the subscription is gone', async () => {
    const s = await server();
    const env = envOf(s);
    const dot = await startDot(['--status', '410'], env);
    const sent = await cli(['send', 'are you there?'], env);
    assert.equal(sent.code, 1, sent.out + sent.err);
    assert.match(sent.out, /^failed evt_[0-9a-f]{32}: the delivery failed for good \(http_4xx\)/, sent.err);
    assert.equal(await dot.exited, 1);
    assert.match(dot.err(), /the subscription ended: this dot answered 410 Gone to evt_[0-9a-f]{32}, and the server ends the subscription on a 410/);
    assert.deepEqual(JSON.parse((await cli(['subscription', '--json'], env)).out), { subscription: null });
    const [failed] = JSON.parse((await cli(['events', '--json'], env)).out).events;
    assert.equal(failed.status, 'failed');
    assert.equal(failed.lastError, 'http_4xx');
    assertNothingSecretPrinted(s);
  });

  it('LOCAL-11: dot says clearly that the server must allow loopback callbacks', async () => {
    const s = await server({ DMDOT_ALLOW_LOOPBACK_CALLBACKS: '' });
    const child = await cli(['dot', '--port', '0'], envOf(s));
    assert.equal(child.code, 1);
    assert.match(child.err, /DMDOT_ALLOW_LOOPBACK_CALLBACKS=1 npm start/);
    assertNothingSecretPrinted(s);
  });

  it('CLI-3: send with a wrong key, an empty message or no server', async () => {
    const s = await server();
    const wrongKey = await cli(['send', 'hi', '--key', 'not-the-key-0123456789'], envOf(s));
    assert.equal(wrongKey.code, 1);
    assert.match(wrongKey.err, /refused the API key/);
    assert.ok(!wrongKey.err.includes('not-the-key-0123456789'));
    const empty = await cli(['send', '   '], envOf(s));
    assert.equal(empty.code, 2);
    assert.equal(empty.err, 'dm-dot send: the message is empty\nRun dm-dot send --help for usage.\n');
    const closed = await startReceiver();
    await closed.close();
    const nobody = await cli(['send', 'hi', '--url', `http://127.0.0.1:${closed.port}/mcp`], envOf(s));
    assert.equal(nobody.code, 1);
    assert.match(nobody.err, new RegExp(`no server at http://127\\.0\\.0\\.1:${closed.port}`));
    assertNothingSecretPrinted(s);
  });
});

describe('dm-dot events, status and redrive', () => {
  it('CLI-4, CLI-5, CLI-7, CLI-9: a receiver answering 500 leaves a failed, dead-lettered event; redrive delivers it after the receiver recovers; a stopped server is read directly', async () => {
    const stateDir = mkdtempSync(join(tmpdir(), 'dmdot-cli-'));
    cleanups.push(async () => rmSync(stateDir, { recursive: true, force: true }));
    // The wait window (200 ms) ends well before the second attempt (1 s later): send says queued.
    const s = await server({ DMDOT_RETRY_DELAYS: '1,1', DMDOT_DELIVERY_WAIT_MS: '200' }, { stateDir });
    const env = envOf(s);
    const receiver = await startReceiver((r) =>
      r.json?.type === 'verification' ? { status: 200, body: JSON.stringify({ challenge: r.json.challenge }) } : { status: 500 },
    );
    cleanups.push(() => receiver.close());
    assert.ok((await rpc(s, 'events/subscribe', subscribeParams(receiver.url()))).body.result.id);

    const sent = await cli(['send', 'try me three times'], env);
    assert.equal(sent.code, 0, sent.out + sent.err);
    const eventId = /^queued (evt_[0-9a-f]{32})/.exec(sent.out)?.[1];
    assert.ok(eventId, `a 500 leaves the event queued: ${sent.out}`);
    let status: any;
    for (let i = 0; i < 100 && status?.jobs?.deadLetters !== 1; i++) {
      if (i > 0) await new Promise((r) => setTimeout(r, 200));
      status = JSON.parse((await cli(['status', '--json'], env)).out);
    }
    assert.equal(status.jobs.deadLetters, 1, 'dead-lettered after the last attempt');
    assert.equal(status.events.failed, 1);
    assert.equal(status.server.running, true);

    const failed = await cli(['events', '--status', 'failed', '--json'], env);
    assert.equal(failed.code, 0, failed.err);
    const [row, ...others] = JSON.parse(failed.out).events;
    assert.equal(others.length, 0);
    assert.equal(row.eventId, eventId);
    assert.equal(row.attempts, 3, 'three attempts with DMDOT_RETRY_DELAYS=1,1');
    assert.equal(row.lastError, 'http_5xx');
    const table = await cli(['events'], env);
    assert.match(table.out, /^EVENT +STATUS +ATTEMPTS +LAST ERROR +CREATED +DELIVERED +SENDER +READ$/m);
    assert.match(table.out, new RegExp(`^${eventId}  failed +3 +http_5xx +\\S+Z +- +connector +-$`, 'm'));
    const show = await cli(['events', 'show', eventId!], env);
    assert.equal((show.out.match(/^\S+Z +http_5xx +5xx +\d+ ms +(yes|no)/gm) ?? []).length, 3, show.out);

    receiver.setResponder(echoing());
    const redrive = await cli(['redrive'], env);
    assert.equal(redrive.code, 0, redrive.err);
    assert.match(redrive.out, /Moved 1 dead letter\(s\) back; the running server .* is delivering them now/);
    await waitFor('the redriven delivery', () => receiver.events().length === 4, 20_000);
    assert.equal(receiver.events()[3]!.headers['webhook-id'], eventId, 'the same event, the same webhook-id');
    let delivered: { eventId: string; status: string } | undefined;
    for (let i = 0; i < 50 && delivered?.status !== 'delivered'; i++) {
      if (i > 0) await new Promise((r) => setTimeout(r, 200));
      delivered = JSON.parse((await cli(['events', '--json', '--last', '1'], env)).out).events[0];
    }
    assert.equal(delivered?.status, 'delivered');

    // With the server stopped, the CLI reads the database itself.
    assert.equal(await s.stop(), 0);
    assert.ok(!existsSync(join(stateDir, 'admin-token')), 'stop withdraws the admin token');
    const offline = await cli(['events', '--json'], env);
    assert.equal(offline.code, 0, offline.err);
    assert.equal(JSON.parse(offline.out).events[0].status, 'delivered');
    const offlineStatus = await cli(['status'], env);
    assert.match(offlineStatus.out, /^server +not running \(what follows is read from its database/m);
    assertNothingSecretPrinted(s);
  });
});

describe('dm-dot subscription', () => {
  it('CLI-6: show names the callback host only; clear without a terminal needs --yes; --yes clears, and a second callback subscribes at once', async () => {
    const stateDir = mkdtempSync(join(tmpdir(), 'dmdot-cli-'));
    cleanups.push(async () => rmSync(stateDir, { recursive: true, force: true }));
    const s = await server({}, { stateDir });
    const env = envOf(s);
    const first = await startReceiver(echoing());
    const second = await startReceiver(echoing());
    cleanups.push(
      () => first.close(),
      () => second.close(),
    );
    const firstSecret = newSecret();
    const id = (await rpc(s, 'events/subscribe', subscribeParams(first.url('/hook/path-secret?token=abc'), firstSecret))).body.result.id;
    assert.equal((await rpc(s, 'events/subscribe', subscribeParams(second.url()))).body.error.code, -32000, 'the lock-out');

    const show = await cli(['subscription', 'show'], env);
    assert.equal(show.code, 0, show.err);
    assert.match(show.out, new RegExp(`^id +${id}$`, 'm'));
    assert.match(show.out, new RegExp(`^callback host +127\\.0\\.0\\.1:${first.port}$`, 'm'));
    assert.ok(!show.out.includes('path-secret') && !show.out.includes('token=abc'), 'never the path or query of the callback');

    const unconfirmed = await cli(['subscription', 'clear'], env);
    assert.equal(unconfirmed.code, 1);
    // A call that takes more than a second adds a progress line ("reading ...") first: on a loaded machine it may.
    assert.equal(
      unconfirmed.err.replace(/^dm-dot subscription clear: .*\.\.\.\n/m, ''),
      'dm-dot subscription clear: not cleared: there is no terminal to confirm on; pass --yes to do it without asking\n',
    );
    assert.equal(unconfirmed.out, '');
    assert.ok((await cli(['subscription', '--json'], env)).out.includes(id), 'still there');

    const cleared = await cli(['subscription', 'clear', '--yes'], env);
    assert.equal(cleared.code, 0, cleared.err);
    assert.match(cleared.out, new RegExp(`Cleared subscription ${id}`));
    assert.ok((await rpc(s, 'events/subscribe', subscribeParams(second.url()))).body.result.id, 'the second callback subscribes at once');

    // Stopped server: clear writes the database itself, and the next start sees it.
    assert.equal(await s.stop(), 0);
    const offline = await cli(['subscription', 'clear', '--yes', '--json'], env);
    assert.equal(offline.code, 0, offline.err);
    assert.equal(JSON.parse(offline.out).cleared, true);
    const nothing = await cli(['subscription', 'clear', '--yes'], env);
    assert.equal(nothing.code, 1, 'nothing to clear');
    const again = await server({}, { stateDir });
    assert.ok((await rpc(again, 'events/subscribe', subscribeParams(first.url()))).body.result.id, 'the first callback can subscribe again');
    assertNothingSecretPrinted(s);
  });

  it('CLI-14: admin routes answer the admin token only: never the API key, never a cross-origin request', async () => {
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
    const crossOrigin = await fetch(`${s.url}/admin/events`, { headers: { authorization: `Bearer ${token}`, origin: 'http://evil.example' } });
    assert.equal(crossOrigin.status, 403);
  });
});

describe('the project state directory', () => {
  it('LOCAL-10: a relative DMDOT_STATE_DIR is taken from the project root, as npm start takes it: the CLI finds the running server from a subfolder', async () => {
    const name = `.dm-dot-e2e-${process.pid}`;
    const stateDir = join(ROOT, name);
    cleanups.push(async () => rmSync(stateDir, { recursive: true, force: true }));
    const s = await server({ DMDOT_STATE_DIR: name }, { stateDir });
    const env = { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', DMDOT_STATE_DIR: name };
    for (const cwd of [join(ROOT, 'lambda'), join(ROOT, 'test', 'e2e')]) {
      const status = await cli(['status', '--json'], env, { cwd });
      assert.equal(status.code, 0, status.err);
      const doc = JSON.parse(status.out);
      assert.equal(doc.stateDir, stateDir);
      assert.deepEqual(doc.server, { running: true, url: s.url, pid: s.child.pid, version: doc.server.version });
      const connect = await cli(['connect'], env, { cwd });
      assert.ok(connect.out.includes(`  ${s.url}/mcp?key=<KEY>\n`), connect.out);
    }
    assertNothingSecretPrinted(s);
  });
});

describe('--aws says what is wrong when no AWS call can be made, and connect goes through the tunnel', () => {
  /** An environment with no AWS configuration at all: no profile files, no instance metadata. */
  function bareAws(extra: Record<string, string> = {}): Record<string, string> {
    const home = mkdtempSync(join(tmpdir(), 'dmdot-cli-home-'));
    cleanups.push(async () => rmSync(home, { recursive: true, force: true }));
    return {
      PATH: process.env.PATH ?? '',
      HOME: home,
      AWS_CONFIG_FILE: join(home, 'no-config'),
      AWS_SHARED_CREDENTIALS_FILE: join(home, 'no-credentials'),
      AWS_EC2_METADATA_DISABLED: 'true',
      ...extra,
    };
  }

  it('CLI-13: no region, no credentials and an unreachable endpoint each say so, never "name another stack"', async () => {
    const noRegion = await cli(['status', '--aws'], bareAws());
    assert.equal(noRegion.code, 1);
    assert.match(noRegion.err, /^dm-dot status: could not read stack DmDot: no AWS region: pass --region, or set AWS_REGION/m);

    const noCredentials = await cli(['status', '--aws', '--json'], bareAws({ AWS_REGION: 'eu-west-1' }));
    assert.equal(noCredentials.code, 1);
    assert.match(noCredentials.err, /^dm-dot status: could not read stack DmDot: no AWS credentials found \(.*\): set AWS_PROFILE/m);
    assert.equal(JSON.parse(noCredentials.out).error.code, 'no_credentials');

    const closed = await startReceiver();
    await closed.close();
    const unreachable = await cli(
      ['events', 'show', `evt_${'0'.repeat(32)}`, '--aws'],
      bareAws({
        AWS_REGION: 'eu-west-1',
        AWS_ACCESS_KEY_ID: 'AKIDEXAMPLE',
        AWS_SECRET_ACCESS_KEY: 'secret-example',
        AWS_ENDPOINT_URL: `http://127.0.0.1:${closed.port}`,
      }),
    );
    assert.equal(unreachable.code, 1);
    assert.match(
      unreachable.err,
      new RegExp(
        `^dm-dot events show: could not read stack DmDot: the AWS endpoint cannot be reached \\(connect ECONNREFUSED 127\\.0\\.0\\.1:${closed.port}\\): check the network`,
        'm',
      ),
    );
    for (const r of [noRegion, noCredentials, unreachable]) assert.doesNotMatch(r.err, /name another with --stack/);
  });

  it('CLI-12: a switch set to a word it does not take is bad usage (exit 2), and the message lists exactly what it takes', async () => {
    for (const word of ['yes', 'on']) {
      const r = await cli(['status'], { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', DMDOT_ALLOW_LOOPBACK_CALLBACKS: word });
      assert.equal(r.code, 2);
      assert.equal(
        r.err,
        `dm-dot status: DMDOT_ALLOW_LOOPBACK_CALLBACKS must be 1 or true (on), or 0, false or empty (off), got "${word}"\nRun dm-dot status --help for usage.\n`,
      );
    }
    const stateDir = mkdtempSync(join(tmpdir(), 'dmdot-cli-'));
    cleanups.push(async () => rmSync(stateDir, { recursive: true, force: true }));
    const accepted = await cli(['status', '--json'], {
      PATH: process.env.PATH ?? '',
      HOME: process.env.HOME ?? '',
      DMDOT_STATE_DIR: stateDir,
      DMDOT_ALLOW_LOOPBACK_CALLBACKS: 'true',
    });
    assert.equal(accepted.code, 0, accepted.err);
    assert.equal(JSON.parse(accepted.out).switches.loopbackCallbacks, true);
  });

  it('CLI-8: with a tunnel host in DMDOT_ALLOWED_HOSTS, connect prints https://<host>/mcp?key=<KEY>', async () => {
    const s = await server({ DMDOT_ALLOWED_HOSTS: 'abc.example-tunnel.dev' });
    const connect = await cli(['connect'], envOf(s));
    assert.equal(connect.code, 0, connect.err);
    assert.ok(connect.out.includes('  https://abc.example-tunnel.dev/mcp?key=<KEY>\n'), connect.out);
    assert.ok(connect.out.includes(`the tunnel must forward https://abc.example-tunnel.dev to ${s.url}`), connect.out);
    assertNothingSecretPrinted(s);
  });
});

describe('redrive and dot tell the truth about an ended subscription', () => {
  /** waitFor for a probe that has to ask a process. */
  async function until(what: string, probe: () => Promise<boolean>, timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!(await probe())) {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
      await new Promise((r) => setTimeout(r, 200));
    }
  }

  it('CLI-9: redrive after restarting the stand-in dot says its dead letters are dropped, not sent, and the resend it prints delivers one', async () => {
    const s = await server({ DMDOT_RETRY_DELAYS: '0.2', DMDOT_DELIVERY_WAIT_MS: '200' });
    const env = envOf(s);
    const first = await startDot(['--status', '500'], env);
    const sent = await cli(['send', 'refused twice', '--json'], env);
    const { eventId } = JSON.parse(sent.out);
    await until('dead-lettered', async () => JSON.parse((await cli(['status', '--json'], env)).out).jobs.deadLetters === 1, 20_000);
    assert.equal(await first.stop(), 0);
    const second = await startDot([], env);

    const redrive = await cli(['redrive'], env);
    assert.equal(redrive.code, 0, redrive.err);
    assert.doesNotMatch(redrive.out, /delivering/);
    assert.match(redrive.out, /^1 of them was queued for an earlier subscription, which has ended .*: it is dropped, not sent\.$/m);
    const resend = new RegExp(`^  dm-dot events resend (${eventId})$`, 'm').exec(redrive.out)?.[1];
    assert.equal(resend, eventId);
    await until('dropped', async () => JSON.parse((await cli(['events', 'show', eventId, '--json'], env)).out).event.status === 'dropped', 20_000);
    assert.ok(!second.out().includes(eventId), 'the redriven event was not sent to the new subscription');

    const resent = await cli(['events', 'resend', eventId], env);
    assert.equal(resent.code, 0, resent.err);
    await waitFor('the resent event at the new dot', () => second.out().includes(`${eventId}  `), 20_000);
    assert.match(second.out(), new RegExp(`^${eventId}  \\d+ ms  refused twice$`, 'm'));
    assertNothingSecretPrinted(s);
  });

  it('CLI-2: a running dot notices a subscription clear within its check interval, says so and stops (exit 1)', async () => {
    const s = await server();
    const env = envOf(s);
    const dot = await startDot(['--check', '1000'], env);
    // The dot prints this line after the one its start waits for: wait for it rather than race it.
    await waitFor('the check interval line', () => /it checks the subscription every 1 s/.test(dot.err()), 10_000);
    const cleared = await cli(['subscription', 'clear', '--yes'], env);
    assert.equal(cleared.code, 0, cleared.err);
    const code = await Promise.race([dot.exited, new Promise((r) => setTimeout(() => r('still running'), 10_000))]);
    assert.equal(code, 1);
    assert.match(dot.err(), /the subscription had ended \(cleared with dm-dot subscription clear, or ended by a 410\): this dot's check found none/);
    assert.deepEqual(JSON.parse((await cli(['subscription', '--json'], env)).out), { subscription: null }, 'what its check created is removed');
    assertNothingSecretPrinted(s);
  });
});
