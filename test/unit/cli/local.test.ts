/**
 * The local operator commands against a real local server started in-process (`startLocal` with
 * settings from `localSettings`, as `npm start` runs it): through its admin routes while it runs,
 * and through its database, opened as operator, once it has stopped. status, connect, key rotate,
 * events show, events resend, subscription show/clear and redrive, and that nothing prints the API
 * key, the admin token or a `whsec_` secret unless `--show-key` asks for the key.
 */
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { startReceiver, type Receiver } from '../../support/receiver';
import { expectNoSecrets, keyOf, postMessage, rpcCall, run, startLocalServer, subscribe, tempDir, until, type LocalServer } from './support';

let dir: Awaited<ReturnType<typeof tempDir>>;
let server: LocalServer | undefined;
let receiver: Receiver | undefined;
const printed: string[] = [];

beforeEach(async () => {
  dir = await tempDir();
  printed.length = 0;
});
afterEach(async () => {
  await server?.stop();
  server = undefined;
  await receiver?.stop();
  receiver = undefined;
  await dir.remove();
});

async function cli(argv: string[], options: Parameters<typeof run>[1] = {}) {
  const r = await run(argv, { env: { DMDOT_STATE_DIR: dir.dir }, ...options });
  printed.push(r.out, r.err);
  return r;
}

async function serve(env: Record<string, string> = {}) {
  server = await startLocalServer(dir.dir, env);
  return server;
}

function adminToken(): string | undefined {
  const file = join(dir.dir, 'admin-token');
  return existsSync(file) ? readFileSync(file, 'utf8').trim() : undefined;
}

/** A subscribed receiver and one event it refused for good (404): failed, dead-lettered. */
async function failedEvent(s: LocalServer) {
  const key = await keyOf(s);
  receiver = await startReceiver();
  expect((await subscribe(s, key, receiver.url)).body.result.id).toMatch(/^sub_/);
  receiver.setDefaultStatus(404);
  const sent = await postMessage(s, key, 'refused once');
  expect(sent.status).toBe(502);
  const eventId: string = sent.body.error.eventId;
  await until('the dead letter', async () => (await s.runtime.db.jobs.counts()).deadLetters === 1);
  return { key, eventId };
}

describe('through the running server', () => {
  it('CLI-7: status names the running server, its address, the switches, the subscription host and the counts', async () => {
    const s = await serve({ DMDOT_ALLOWED_HOSTS: 'tunnel.example.dev' });
    const { eventId } = await failedEvent(s);
    expect(eventId).toMatch(/^evt_/);
    const r = await cli(['status']);
    expect(r.code).toBe(0);
    expect(r.out).toMatch(new RegExp(`^server +running at ${s.base.replace(/\./g, '\\.')} \\(pid ${process.pid}, dm-dot `, 'm'));
    expect(r.out).toMatch(/^loopback callbacks +on/m);
    expect(r.out).toMatch(/^pup +not configured/m);
    expect(r.out).toMatch(/^allowed hosts +the server's own addresses and tunnel\.example\.dev$/m);
    expect(r.out).toMatch(/^subscription +sub_[0-9a-f]{32} for callback host 127\.0\.0\.1:\d+;.* last error http_4xx$/m);
    expect(r.out).toMatch(/^events +0 queued, 1 failed, 0 delivered, 0 dropped$/m);
    expect(r.out).toMatch(/^delivery jobs +0 waiting, 1 dead-lettered \(dm-dot redrive\)$/m);
    expect(r.out).not.toContain('/hooks/dot');
    expectNoSecrets(printed.join(''), [await keyOf(s), adminToken()]);
  });

  it('CLI-7, CLI-11: status --json is one document: the server, the switches, the subscription and the counts', async () => {
    const s = await serve();
    await failedEvent(s);
    const doc = JSON.parse((await cli(['status', '--json'])).out);
    expect(doc).toMatchObject({
      mode: 'local',
      server: { running: true, url: s.base, pid: process.pid },
      stateDir: dir.dir,
      readFrom: 'server',
      apiKey: { from: 'file', file: join(dir.dir, 'api-key') },
      switches: { loopbackCallbacks: true, pup: false, allowedOrigins: [], allowedHosts: [] },
      subscription: { id: expect.stringMatching(/^sub_/), callbackHost: expect.stringMatching(/^127\.0\.0\.1:\d+$/), lastError: 'http_4xx' },
      events: { queued: 0, failed: 1, delivered: 0, dropped: 0 },
      jobs: { queued: 0, deadLetters: 1 },
    });
  });

  it('CLI-5: events show lists the attempts of an event: time, outcome, status class, duration, counted', async () => {
    const s = await serve();
    const { eventId } = await failedEvent(s);
    const r = await cli(['events', 'show', eventId]);
    expect(r.code).toBe(0);
    expect(r.out).toMatch(new RegExp(`^event +${eventId}$`, 'm'));
    expect(r.out).toMatch(/^status +failed$/m);
    expect(r.out).toMatch(/^last HTTP status +404$/m);
    expect(r.out).toMatch(/^AT +OUTCOME +STATUS +DURATION +COUNTED$/m);
    expect(r.out).toMatch(/^\S+Z +http_4xx +4xx +\d+ ms +yes$/m);
    const json = JSON.parse((await cli(['events', 'show', eventId, '--json'])).out);
    expect(json.event).toMatchObject({
      eventId,
      status: 'failed',
      resendable: true,
      log: [{ kind: 'attempt', outcome: 'http_4xx', statusClass: '4xx', counted: true }],
    });
  });

  it('events show of an event not in the log is exit 1 naming it', async () => {
    await serve();
    const missing = `evt_${'f'.repeat(32)}`;
    const r = await cli(['events', 'show', missing]);
    expect(r.code).toBe(1);
    expect(r.err).toMatch(new RegExp(`^dm-dot events show: no event ${missing} in the delivery log`));
  });

  it('CLI-5: events resend gives a failed event another round with the same id and bytes, and its log says resent', async () => {
    const s = await serve();
    const { eventId } = await failedEvent(s);
    receiver!.setDefaultStatus(200);
    const r = await cli(['events', 'resend', eventId]);
    expect(r.code).toBe(0);
    expect(r.out).toMatch(new RegExp(`^Resent ${eventId} to subscription sub_[0-9a-f]{32}`));
    await until('the second delivery', () => receiver!.events.length === 2);
    const [first, second] = receiver!.events;
    expect(second!.headers['webhook-id']).toBe(eventId);
    expect(second!.raw.equals(first!.raw)).toBe(true);
    const detail = await until('delivered', async () => {
      const d = JSON.parse((await cli(['events', 'show', eventId, '--json'])).out).event;
      return d.status === 'delivered' ? d : undefined;
    });
    expect(detail.log.map((e: { kind: string; note?: string; outcome?: string }) => e.note ?? e.outcome)).toEqual(['http_4xx', 'resent', 'delivered']);
  });

  it('events resend of a delivered event is exit 1 and says why; --json is the result', async () => {
    const s = await serve();
    const key = await keyOf(s);
    receiver = await startReceiver();
    await subscribe(s, key, receiver.url);
    const sent = await postMessage(s, key, 'fine');
    expect(sent.body.status).toBe('delivered');
    // The delivery is recorded just after the answer.
    await until('recorded', async () => (await s.runtime.db.store.getEvent(sent.body.eventId, Date.now()))?.status === 'delivered');
    const r = await cli(['events', 'resend', sent.body.eventId]);
    expect(r.code).toBe(1);
    expect(r.err).toBe(`dm-dot events resend: not resent: ${sent.body.eventId} was delivered already; nothing to resend\n`);
    const json = await cli(['events', 'resend', sent.body.eventId, '--json']);
    expect(JSON.parse(json.out)).toEqual({ resent: false, eventId: sent.body.eventId, why: 'delivered' });
  });

  it('CLI-9: redrive moves the dead letters back through the server, which delivers them at once', async () => {
    const s = await serve();
    const { eventId } = await failedEvent(s);
    receiver!.setDefaultStatus(200);
    const r = await cli(['redrive']);
    expect(r.code).toBe(0);
    expect(r.out).toMatch(/^Moved 1 dead letter\(s\) back; the running server at http:\/\/127\.0\.0\.1:\d+ is delivering them now/);
    await until('the redriven delivery', () => receiver!.events.length === 2);
    expect(receiver!.events[1]!.headers['webhook-id']).toBe(eventId);
    expect(JSON.parse((await cli(['redrive', '--json'])).out)).toEqual({
      moved: 0,
      via: 'server',
      subscriptionId: expect.stringMatching(/^sub_/),
      endedSubscription: [],
    });
    // docs/operating.md: the event's log holds the `redriven` note between the two rounds.
    await until('recorded', async () => (await s.runtime.db.store.getEvent(eventId, Date.now()))?.status === 'delivered');
    const shown = JSON.parse((await cli(['events', 'show', eventId, '--json'])).out).event;
    expect(shown.log.map((e: { kind: string; note?: string; outcome?: string }) => e.note ?? e.outcome)).toEqual(['http_4xx', 'redriven', 'delivered']);
  });

  it('CLI-9: redrive after the dot subscribed anew says the dead letters of the ended subscription are dropped, not sent, and how to resend them', async () => {
    const s = await serve();
    const { key, eventId } = await failedEvent(s);
    receiver!.setDefaultStatus(200);
    // The stand-in dot restarted: it unsubscribed, then subscribed again (a new generation).
    await rpcCall(s, key, 'events/unsubscribe', { name: 'message.created', arguments: {}, delivery: { mode: 'webhook', url: receiver!.url } });
    await new Promise((r) => setTimeout(r, 5));
    expect((await subscribe(s, key, receiver!.url)).body.result.id).toMatch(/^sub_/);
    const r = await cli(['redrive']);
    expect(r.code).toBe(0);
    expect(r.out).toMatch(/^Moved 1 dead letter\(s\) back to the running server at http:\/\/127\.0\.0\.1:\d+\.$/m);
    expect(r.out).toMatch(
      /^1 of them was queued for an earlier subscription, which has ended \(the dot was restarted, cleared or replaced; the live one began at .*\): it is dropped, not sent\.$/m,
    );
    expect(r.out).toContain(`  dm-dot events resend ${eventId}\n`);
    expect(r.out).not.toContain('delivering');
    await until('dropped', async () => (await s.runtime.db.store.getEvent(eventId, Date.now()))?.status === 'dropped');
    // What it says to do works: the resend goes to the live subscription.
    expect((await cli(['events', 'resend', eventId])).code).toBe(0);
    await until('delivered', async () => (await s.runtime.db.store.getEvent(eventId, Date.now()))?.status === 'delivered');
    expect(receiver!.events.at(-1)!.headers['webhook-id']).toBe(eventId);
  });

  it('subscription clear with nothing subscribed exits 1', async () => {
    await serve();
    const r = await cli(['subscription', 'clear', '--yes']);
    expect(r.code).toBe(1);
    expect(r.err).toMatch(/^dm-dot subscription clear: nothing to clear: no live subscription \(the running server at /);
  });

  it('CLI-6: subscription clear without a terminal refuses in one clean line unless --yes, and clears nothing', async () => {
    const s = await serve();
    const key = await keyOf(s);
    receiver = await startReceiver();
    const id = (await subscribe(s, key, receiver.url)).body.result.id;
    const refused = await cli(['subscription', 'clear']);
    expect(refused).toEqual({
      code: 1,
      out: '',
      err: 'dm-dot subscription clear: not cleared: there is no terminal to confirm on; pass --yes to do it without asking\n',
      asked: [],
    });
    expect(JSON.parse((await cli(['subscription', '--json'])).out).subscription.id).toBe(id);
    const cleared = await cli(['subscription', 'clear', '--yes']);
    expect(cleared.code).toBe(0);
    expect(cleared.out).toMatch(new RegExp(`^Cleared subscription ${id}\\.`));
    expect(JSON.parse((await cli(['subscription', '--json'])).out)).toEqual({ subscription: null });
  });

  it('CLI-6: subscription clear asks on a terminal: no keeps it (exit 1), yes clears it', async () => {
    const s = await serve();
    const key = await keyOf(s);
    receiver = await startReceiver();
    const id = (await subscribe(s, key, receiver.url)).body.result.id;
    const declined = await cli(['subscription', 'clear'], { answer: 'n' });
    expect(declined.code).toBe(1);
    expect(declined.asked).toEqual([expect.stringMatching(new RegExp(`^End subscription ${id} \\(callback host 127\\.0\\.0\\.1:\\d+\\)\\?.*\\[y/N\\] $`))]);
    expect(declined.err).toMatch(/dm-dot subscription clear: not cleared\n$/);
    expect(JSON.parse((await cli(['subscription', '--json'])).out).subscription.id).toBe(id);
    expect((await cli(['subscription', 'clear'], { answer: 'yes' })).code).toBe(0);
    expect(JSON.parse((await cli(['subscription', '--json'])).out)).toEqual({ subscription: null });
  });

  it('CLI-14: admin actions are not reachable with the API key alone: without the admin token, clear fails and nothing is cleared', async () => {
    const s = await serve();
    const key = await keyOf(s);
    receiver = await startReceiver();
    const id = (await subscribe(s, key, receiver.url)).body.result.id;
    rmSync(join(dir.dir, 'admin-token'));
    const r = await cli(['subscription', 'clear', '--yes'], { env: { DMDOT_STATE_DIR: dir.dir, MCP_API_KEY: key } });
    expect(r.code).toBe(1);
    expect(r.err).toMatch(/admin token .* is not readable/);
    expect((await s.runtime.db.store.getSubscription(Date.now()))?.id).toBe(id);
    expectNoSecrets(r.out + r.err, [key]);
  });

  it('CLI-8: connect prints the connector URL with a placeholder and where the key is, never the key', async () => {
    const s = await serve();
    const key = await keyOf(s);
    const r = await cli(['connect']);
    expect(r.code).toBe(0);
    expect(r.out).toContain(`  ${s.base}/mcp?key=<KEY>\n`);
    expect(r.out).toContain(`<KEY> is the API key in ${join(dir.dir, 'api-key')}`);
    expect(r.out).toContain(`  ${s.base}/pup/manifest.json`);
    expect(r.err).toBe('');
    expect(JSON.parse((await cli(['connect', '--json'])).out)).toEqual({
      mode: 'local',
      mcpUrl: `${s.base}/mcp`,
      connectorUrl: `${s.base}/mcp?key=<KEY>`,
      keyShown: false,
      key: { from: 'file', file: join(dir.dir, 'api-key') },
      pupManifestUrl: `${s.base}/pup/manifest.json`,
      pupConfigured: false,
      serverRunning: true,
      tunnelHost: null,
      serverUrl: s.base,
      dotInstructions: {
        subscribe: expect.stringMatching(/^Subscribe to the message\.created event/),
        withInbox: expect.stringContaining('get_pending_messages'),
      },
    });
    // What to paste into the dot, in the text form too.
    expect(r.out).toMatch(/^Ask the dot to subscribe: paste this into the dot's conversation/m);
    expectNoSecrets(printed.join(''), [key, adminToken()]);
  });

  it('CLI-8: connect with a tunnel host the running server was not started with says to restart it with DMDOT_ALLOWED_HOSTS', async () => {
    await serve();
    const r = await cli(['connect'], { env: { DMDOT_STATE_DIR: dir.dir, DMDOT_ALLOWED_HOSTS: 'abc.example-tunnel.dev' } });
    expect(r.code).toBe(0);
    expect(r.out).toContain(
      'The running server does not allow the host abc.example-tunnel.dev: it reads DMDOT_ALLOWED_HOSTS only when it starts. Stop it and start it again with DMDOT_ALLOWED_HOSTS=abc.example-tunnel.dev npm start.',
    );
  });

  it('CLI-8: connect with a tunnel host in DMDOT_ALLOWED_HOSTS prints https://<host>/mcp?key=<KEY>, and says where the tunnel must forward', async () => {
    const s = await serve({ DMDOT_ALLOWED_HOSTS: '127.0.0.2,abc.example-tunnel.dev,other.example' });
    const r = await cli(['connect']);
    expect(r.code).toBe(0);
    expect(r.out).toContain('  https://abc.example-tunnel.dev/mcp?key=<KEY>\n');
    expect(r.out).toContain('  https://abc.example-tunnel.dev/pup/manifest.json');
    expect(r.out).toContain(`the tunnel must forward https://abc.example-tunnel.dev to ${s.base}, where the server listens`);
    expect(JSON.parse((await cli(['connect', '--json'])).out)).toMatchObject({
      mcpUrl: 'https://abc.example-tunnel.dev/mcp',
      tunnelHost: 'abc.example-tunnel.dev',
      serverUrl: s.base,
    });
  });

  it('CLI-8: connect --show-key prints the key in the URL, after a one-line notice on stderr that it prints a secret', async () => {
    const s = await serve();
    const key = await keyOf(s);
    const r = await cli(['connect', '--show-key']);
    expect(r.code).toBe(0);
    expect(r.err).toBe('dm-dot connect: --show-key prints the API key: a secret; keep this output out of logs, screenshots and shared terminals\n');
    expect(r.out).toContain(`  ${s.base}/mcp?key=${encodeURIComponent(key)}\n`);
    const json = JSON.parse((await cli(['connect', '--show-key', '--json'])).out);
    expect(json).toMatchObject({ keyShown: true, connectorUrl: `${s.base}/mcp?key=${encodeURIComponent(key)}` });
    // The URL it printed works.
    expect((await fetch(`${s.base}/mcp?key=${encodeURIComponent(key)}`, { method: 'GET' })).status).toBe(405);
  });

  it('CLI-10: key rotate through the server swaps the key at once: the old one gets 401, the new one works, and it says what to do', async () => {
    const s = await serve();
    const old = await keyOf(s);
    const r = await cli(['key', 'rotate', '--yes']);
    expect(r.code).toBe(0);
    const fresh = await keyOf(s);
    expect(fresh).not.toBe(old);
    expect(r.out).toContain(`Rotated the API key: the new key is in ${join(dir.dir, 'api-key')}.`);
    expect(r.out).toContain('The old key stopped working at once.');
    expect(r.out).toMatch(/its next MCP call \(its subscription refresh\) gets 401\. Reconnect it with the new URL \(dm-dot connect/);
    expect(r.out).toMatch(/The subscription id does not change \(it is the deployment's, not the key's\)/);
    expect((await postMessage(s, old, 'old key')).status).toBe(401);
    expect((await postMessage(s, fresh, 'new key')).status).toBe(409);
    expectNoSecrets(printed.join(''), [old, fresh, adminToken()]);
  });

  it('CLI-10: key rotate --overlap --json says the old key did not stop at once, and until when it works', async () => {
    const s = await serve();
    const old = await keyOf(s);
    const r = await cli(['key', 'rotate', '--yes', '--overlap', '1h', '--json']);
    expect(r.code).toBe(0);
    const doc = JSON.parse(r.out);
    expect(doc).toMatchObject({ rotated: true, via: 'server', immediate: false, overlapUntil: expect.any(String) });
    expect((await postMessage(s, old, 'old key, within the overlap')).status).toBe(409);
  });

  it('key rotate without a terminal needs --yes; the key stays as it was', async () => {
    const s = await serve();
    const old = await keyOf(s);
    const r = await cli(['key', 'rotate']);
    expect(r).toEqual({
      code: 1,
      out: '',
      err: 'dm-dot key rotate: not rotated: there is no terminal to confirm on; pass --yes to do it without asking\n',
      asked: [],
    });
    expect(await keyOf(s)).toBe(old);
  });

  it('key rotate --show-key prints the new key after the notice, and only then', async () => {
    const s = await serve();
    const r = await cli(['key', 'rotate', '--yes', '--show-key']);
    expect(r.code).toBe(0);
    expect(r.err).toMatch(/^dm-dot key rotate: --show-key prints the API key: a secret/);
    expect(r.out).toContain(`New key: ${await keyOf(s)}\n`);
  });

  it('key rotate is refused when the server takes its key from MCP_API_KEY', async () => {
    const key = 'env-key-0123456789abcdef0123456789abcdef';
    const s = await serve({ MCP_API_KEY: key });
    const r = await cli(['key', 'rotate', '--yes']);
    expect(r.code).toBe(1);
    expect(r.err).toBe(
      'dm-dot key rotate: the API key comes from MCP_API_KEY, so there is no key file to rotate: put a new value in MCP_API_KEY (at least 32 characters) and restart the server\n',
    );
    expect((await postMessage(s, key, 'still works')).status).toBe(409);
  });
});

describe('CLI-13: with no server running: the database, opened as operator', () => {
  it('status says the server is not running and shows what the database holds', async () => {
    const s = await serve();
    await failedEvent(s);
    await s.stop();
    server = undefined;
    const r = await cli(['status']);
    expect(r.code).toBe(0);
    expect(r.out).toMatch(/^server +not running \(what follows is read from its database/m);
    expect(r.out).toMatch(/^events +0 queued, 1 failed/m);
    expect(r.out).toMatch(/^delivery jobs +0 waiting, 1 dead-lettered/m);
    expect(JSON.parse((await cli(['status', '--json'])).out)).toMatchObject({ server: { running: false }, readFrom: 'database' });
  });

  it('CLI-4, CLI-5, CLI-6: events, events show and subscription read the database directly', async () => {
    const s = await serve();
    const { eventId } = await failedEvent(s);
    await s.stop();
    server = undefined;
    const events = await cli(['events']);
    expect(events.out).toMatch(new RegExp(`^${eventId}  failed +1 +http_4xx +\\S+Z +- +connector +-$`, 'm'));
    expect((await cli(['events', 'show', eventId, '--json'])).code).toBe(0);
    expect(JSON.parse((await cli(['subscription', '--json'])).out).subscription.callbackHost).toMatch(/^127\.0\.0\.1:/);
  });

  it('redrive moves the dead letters back in the database; the next start delivers them', async () => {
    const s = await serve();
    const { eventId } = await failedEvent(s);
    await s.stop();
    server = undefined;
    receiver!.setDefaultStatus(200);
    const r = await cli(['redrive']);
    expect(r.code).toBe(0);
    expect(r.out).toMatch(/^Moved 1 dead letter\(s\) back in the database in .* \(no server running\); the next npm start delivers them\.$/m);
    await serve();
    await until('the redriven delivery', () => receiver!.events.length === 2);
    expect(receiver!.events[1]!.headers['webhook-id']).toBe(eventId);
  });

  it('CLI-10: key rotate writes a new key file, which the next start uses', async () => {
    const s = await serve();
    const old = await keyOf(s);
    await s.stop();
    server = undefined;
    const r = await cli(['key', 'rotate', '--yes']);
    expect(r.code).toBe(0);
    expect(r.out).toContain('The old key stops working when the server next starts.');
    const again = await serve();
    const fresh = await keyOf(again);
    expect(fresh).not.toBe(old);
    expect((await postMessage(again, old, 'x')).status).toBe(401);
    expect((await postMessage(again, fresh, 'x')).status).toBe(409);
  });

  it('key rotate is refused when MCP_API_KEY is set in the environment', async () => {
    const s = await serve();
    const old = await keyOf(s);
    await s.stop();
    server = undefined;
    const r = await cli(['key', 'rotate', '--yes'], { env: { DMDOT_STATE_DIR: dir.dir, MCP_API_KEY: 'x'.repeat(40) } });
    expect(r.code).toBe(1);
    expect(r.err).toMatch(/^dm-dot key rotate: MCP_API_KEY is set in this environment: the API key comes from MCP_API_KEY/);
    expect(readFileSync(join(dir.dir, 'api-key'), 'utf8').trim()).toBe(old);
  });

  it('connect without a server takes HOST/PORT and says the server is not running', async () => {
    const s = await serve();
    await s.stop();
    server = undefined;
    const r = await cli(['connect'], { env: { DMDOT_STATE_DIR: dir.dir, PORT: '9999' } });
    expect(r.code).toBe(0);
    expect(r.out).toContain('  http://127.0.0.1:9999/mcp?key=<KEY>\n');
    expect(r.out).toContain('The server is not running: start it with npm start');
  });
});
