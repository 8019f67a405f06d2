/**
 * Sender keys and the connector key's rotation end to end (docs/contract/http.md, keys), through
 * the built `dm-dot` executable against the local runtime started as `npm start` does, with the
 * key in the state directory's key file:
 * - `senders add` prints a key once; it sends through both surfaces, is Forbidden when it
 *   subscribes, is named in `events` and `events show`, gets 429 with Retry-After past its rate,
 *   and 401 once `senders revoke` ran; `senders list` never shows a key;
 * - `key rotate --overlap` keeps the old key working for the overlap, the dot keeps its
 *   subscription id and keeps receiving, and after the overlap the old key gets 401;
 * - `status` shows the events profile.
 */
import { after, afterEach, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { buildCli, runCli, type CliRun } from '../support/cli-run';
import { admin, echoing, newSecret, rpc, startReceiver, startServer, until, waitFor, type RunningServer } from '../support/e2e';

before(buildCli);

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  while (cleanups.length) await cleanups.pop()!();
});
after(() => undefined);

function cli(args: string[], stateDir: string, extra: Record<string, string> = {}): Promise<CliRun> {
  return runCli(args, { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', DMDOT_STATE_DIR: stateDir, ...extra });
}

/** An MCP request with `key` as the bearer token (a sender's, or the connector's old or new one). */
function mcp(server: RunningServer, key: string, method: string, params: Record<string, unknown> = {}) {
  return rpc(server, method, params, method === 'tools/call' ? { 'mcp-name': String(params.name) } : {}, { key });
}

async function post(server: RunningServer, key: string, message: string) {
  const response = await fetch(`${server.url}/v1/messages`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
    body: JSON.stringify({ message }),
  });
  return { status: response.status, headers: response.headers, body: (await response.json()) as any };
}

/** The server with its key in the key file (MCP_API_KEY unset), as `npm start` runs it by default. */
async function serverWithKeyFile(env: Record<string, string> = {}, options: { movableClock?: boolean } = {}) {
  const s = await startServer({ MCP_API_KEY: '', ...env }, options);
  cleanups.push(() => s.stop());
  const key = readFileSync(join(s.stateDir, 'api-key'), 'utf8').trim();
  return { ...s, key };
}

async function subscribed(s: RunningServer, key: string) {
  const receiver = await startReceiver(echoing());
  cleanups.push(() => receiver.close());
  const params = { name: 'message.created', arguments: {}, delivery: { mode: 'webhook', url: receiver.url(), secret: newSecret() } };
  const answer = await mcp(s, key, 'events/subscribe', params);
  assert.equal(answer.body.error, undefined, JSON.stringify(answer.body.error));
  return { receiver, params, id: answer.body.result.id as string };
}

/** Moves the server's clock to the start of its next minute, so that the next few requests fall in one rate window. */
async function startOfAMinute(s: RunningServer): Promise<void> {
  const ahead = 60_000 - (Date.now() % 60_000) + 100;
  await s.setClockAhead!(ahead);
}

describe('dm-dot senders: send-only keys', () => {
  it('CLI-SND-1, CLI-SND-2, CLI-SND-3, HTTP-KEY-2, HTTP-KEY-3, HTTP-KEY-4, HTTP-KEY-5, HTTP-KEY-8: a sender sends through both surfaces, is Forbidden on subscribe, named in the log, limited by its rate, and 401 once revoked', async () => {
    const s = await serverWithKeyFile({}, { movableClock: true });
    const { receiver } = await subscribed(s, s.key);

    const added = await cli(['senders', 'add', 'billing', '--rate', '2', '--json'], s.stateDir);
    assert.equal(added.code, 0, added.err);
    const doc = JSON.parse(added.out) as { name: string; key: string; rate: number };
    assert.equal(doc.name, 'billing');
    assert.equal(doc.rate, 2);
    assert.match(doc.key, /^dmsk_billing_[A-Za-z0-9_-]{43}$/);
    assert.match(added.err, /a secret/);
    const key = doc.key;

    assert.equal((await cli(['senders', 'add', 'billing'], s.stateDir)).code, 1, 'a name is added once');

    await startOfAMinute(s);
    const viaRest = await post(s, key, 'from billing over REST');
    assert.ok([200, 202].includes(viaRest.status), JSON.stringify(viaRest.body));
    const viaTool = await mcp(s, key, 'tools/call', { name: 'send_to_dot', arguments: { message: 'from billing over MCP' } });
    assert.equal(viaTool.body.result?.isError, false, JSON.stringify(viaTool.body));
    await until('both events delivered', async () => receiver.events().length >= 2 || undefined);

    const limited = await post(s, key, 'one too many');
    assert.equal(limited.status, 429);
    assert.match(limited.headers.get('retry-after') ?? '', /^\d+$/);
    const limitedTool = await mcp(s, key, 'tools/call', { name: 'send_to_dot', arguments: { message: 'one too many' } });
    assert.equal(limitedTool.status, 200);
    assert.equal(limitedTool.body.error, undefined, 'a rate refusal is a tool result, never a JSON-RPC error');
    assert.equal(limitedTool.body.result.isError, true);
    assert.ok(limitedTool.body.result.structuredContent.retryAfterMs > 0);

    const forbidden = await mcp(s, key, 'events/subscribe', {
      name: 'message.created',
      delivery: { mode: 'webhook', url: receiver.url('/thief'), secret: newSecret() },
    });
    assert.equal(forbidden.body.error.code, -32012);
    assert.equal(receiver.challenges().length, 1, 'the thief callback was never challenged');

    const events = await cli(['events', '--json'], s.stateDir);
    assert.equal(events.code, 0, events.err);
    const log = JSON.parse(events.out).events as { eventId: string; sender: string }[];
    assert.deepEqual(
      log.map((e) => e.sender),
      ['billing', 'billing'],
      'the refused sends left nothing in the log',
    );
    const shown = await cli(['events', 'show', log[0]!.eventId, '--json'], s.stateDir);
    assert.equal(JSON.parse(shown.out).event.sender, 'billing');
    assert.match((await cli(['events', 'show', log[0]!.eventId], s.stateDir)).out, /sender +billing/);

    const list = await cli(['senders', 'list', '--json'], s.stateDir);
    assert.equal(list.code, 0, list.err);
    const senders = JSON.parse(list.out).senders as { name: string; rate: number; lastUsedAt: string | null; revoked: boolean }[];
    assert.equal(senders.length, 1);
    assert.equal(senders[0]!.name, 'billing');
    assert.equal(senders[0]!.rate, 2);
    assert.ok(senders[0]!.lastUsedAt, 'last use is recorded');
    assert.equal(senders[0]!.revoked, false);
    assert.ok(!list.out.includes(key.slice(-43)), 'senders list never shows a key');

    const revoked = await cli(['senders', 'revoke', 'billing', '--yes'], s.stateDir);
    assert.equal(revoked.code, 0, revoked.err);
    assert.equal((await post(s, key, 'after revoke')).status, 401);
    assert.equal((await mcp(s, key, 'tools/list')).status, 401);
    assert.equal((await cli(['senders', 'revoke', 'billing', '--yes'], s.stateDir)).code, 1);
    assert.equal(JSON.parse((await cli(['senders', 'list', '--json'], s.stateDir)).out).senders[0].revoked, true);

    // The connector's own sends say so.
    assert.ok([200, 202].includes((await post(s, s.key, 'from the connector')).status));
    const after = JSON.parse((await cli(['events', '--json'], s.stateDir)).out).events as { sender: string }[];
    assert.equal(after[0]!.sender, 'connector');
  });
});

describe('every send counts', () => {
  it('HTTP-KEY-RATE-1: one JSON-RPC batch of 100 sends from a sender at --rate 1 delivers 1; the other 99 are tool errors with retryAfterMs', async () => {
    const s = await serverWithKeyFile({}, { movableClock: true });
    const { receiver } = await subscribed(s, s.key);
    const added = await cli(['senders', 'add', 'burst', '--rate', '1', '--json'], s.stateDir);
    assert.equal(added.code, 0, added.err);
    const key = JSON.parse(added.out).key as string;

    await startOfAMinute(s);
    const call = (i: number) => ({ jsonrpc: '2.0', id: i + 1, method: 'tools/call', params: { name: 'send_to_dot', arguments: { message: `batched ${i}` } } });
    const batch = Array.from({ length: 100 }, (_, i) => call(i));
    const response = await fetch(s.mcpUrl, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'mcp-protocol-version': '2025-03-26',
        authorization: `Bearer ${key}`,
      },
      body: JSON.stringify(batch),
    });
    assert.equal(response.status, 200);
    // The 2025-03-26 transport may answer as an event stream: one JSON-RPC answer (or array) per data line.
    const text = await response.text();
    const answers = (response.headers.get('content-type') ?? '').startsWith('text/event-stream')
      ? text
          .split('\n')
          .filter((line) => line.startsWith('data:'))
          .flatMap((line) => [JSON.parse(line.slice(5))].flat())
      : [JSON.parse(text)].flat();
    assert.equal(answers.length, 100);
    assert.deepEqual(
      answers.filter((a) => a.error !== undefined),
      [],
      'no JSON-RPC error in the batch',
    );
    assert.equal(answers.filter((a) => a.result.isError === false).length, 1);
    assert.equal(answers.filter((a) => a.result.isError === true && a.result.structuredContent?.retryAfterMs > 0).length, 99);

    await until('the one event delivered', async () => receiver.events().length >= 1 || undefined);
    const events = JSON.parse((await cli(['events', '--json'], s.stateDir)).out).events as { sender: string }[];
    assert.deepEqual(
      events.map((e) => e.sender),
      ['burst'],
      'one event recorded, nothing for the refused sends',
    );
    // Nothing else arrives later either: every event the log holds was delivered.
    assert.equal(receiver.events().length, 1);
  });
});

describe('reserved sender names', () => {
  it('HTTP-KEY-NAME-1: senders add connector, pup or dm-dot is a usage error (exit 2) and the admin route refuses it with 400', async () => {
    const s = await serverWithKeyFile();
    for (const name of ['connector', 'pup', 'dm-dot']) {
      const refused = await cli(['senders', 'add', name], s.stateDir);
      assert.equal(refused.code, 2, `${name}: ${refused.err}`);
      assert.match(refused.err, /reserved/);
      const direct = await admin(s, 'POST', `/admin/senders?name=${name}`);
      assert.equal(direct.status, 400, JSON.stringify(direct.body));
      assert.match(direct.body.error.message, /reserved/);
    }
    assert.deepEqual(JSON.parse((await cli(['senders', 'list', '--json'], s.stateDir)).out).senders, []);
  });
});

describe('dm-dot key rotate --overlap', () => {
  it('CLI-10, EV-ID-4, HTTP-KEY-10: both keys work during the overlap, the dot keeps its subscription id and keeps receiving, then the old key gets 401', async () => {
    // The overlap's end is a step of the server's clock, not a wait that a slow request could outrun.
    const s = await serverWithKeyFile({}, { movableClock: true });
    const old = s.key;
    const { receiver, params, id } = await subscribed(s, old);

    const rotated = await cli(['key', 'rotate', '--overlap', '10m', '--yes', '--json'], s.stateDir);
    assert.equal(rotated.code, 0, rotated.err);
    const doc = JSON.parse(rotated.out) as { overlapUntil: string | null; next: string[] };
    assert.ok(doc.overlapUntil, 'the end of the overlap is reported');
    assert.ok(!rotated.out.includes(old), 'the old key is not printed');
    const fresh = readFileSync(join(s.stateDir, 'api-key'), 'utf8').trim();
    assert.notEqual(fresh, old);
    assert.ok(!rotated.out.includes(fresh), 'the new key is not printed without --show-key');

    // The dot, still on the old key, refreshes its subscription: same id.
    const refreshed = await mcp(s, old, 'events/subscribe', params);
    assert.equal(refreshed.body.result?.id, id, JSON.stringify(refreshed.body));
    // The dot, moved to the new key, refreshes too: still the same id.
    const moved = await mcp(s, fresh, 'events/subscribe', params);
    assert.equal(moved.body.result?.id, id);
    // And it keeps receiving, whichever key sends.
    for (const key of [old, fresh]) assert.ok([200, 202].includes((await post(s, key, 'during the overlap')).status));
    await until('both events delivered', async () => receiver.events().length >= 2 || undefined);

    await s.setClockAhead!(Date.parse(doc.overlapUntil!) - Date.now() + 1_000);
    assert.equal((await post(s, old, 'after the overlap')).status, 401);
    assert.equal((await mcp(s, old, 'tools/list')).status, 401);
    assert.ok([200, 202].includes((await post(s, fresh, 'after the overlap')).status));
    const status = JSON.parse((await cli(['status', '--json'], s.stateDir)).out);
    assert.equal(status.subscription.id, id);
    assert.equal(status.switches.eventsProfile, 'chatgpt');
  });

  it('CLI-10, EV-ID-4, HTTP-KEY-11: without --overlap the old key stops at once, and the subscription id still stays', async () => {
    const s = await serverWithKeyFile({ DMDOT_EVENTS_PROFILE: 'sep-3415' });
    const old = s.key;
    const { params, id } = await subscribed(s, old);
    const rotated = await cli(['key', 'rotate', '--yes'], s.stateDir);
    assert.equal(rotated.code, 0, rotated.err);
    assert.equal((await post(s, old, 'old')).status, 401);
    const fresh = readFileSync(join(s.stateDir, 'api-key'), 'utf8').trim();
    const again = await mcp(s, fresh, 'events/subscribe', params);
    assert.equal(again.body.result?.id, id);
    const status = await cli(['status'], s.stateDir);
    assert.match(status.out, /events profile +sep-3415/);
  });
});

describe('a local key rotation cuts no one', () => {
  it('HTTP-KEY-ROT-1: MCP requests in flight while the key rotates all get their normal answer (none cut with an empty 499)', async () => {
    const s = await serverWithKeyFile();
    // A dot that takes a second: each send is in flight, inside its inline attempt, when the key rotates.
    const receiver = await startReceiver((r) => (r.json?.type === 'verification' ? echoing()(r) : { status: 200, delayMs: 1_500 }));
    cleanups.push(() => receiver.close());
    const delivery = { mode: 'webhook', url: receiver.url(), secret: newSecret() };
    const subscribedNow = await mcp(s, s.key, 'events/subscribe', { name: 'message.created', arguments: {}, delivery });
    assert.equal(subscribedNow.body.error, undefined, JSON.stringify(subscribedNow.body));

    const sendOne = (i: number) =>
      mcp(s, s.key, 'tools/call', { name: 'send_to_dot', arguments: { message: `in flight ${i}` } }).catch(
        (error: Error) => ({ status: 0, body: String(error) }) as const,
      );
    const sends = Array.from({ length: 24 }, (_, i) => sendOne(i));
    await until('every send reached the dot', async () => receiver.events().length >= 24 || undefined);
    // Through the admin route the CLI calls: at once, while every send still waits for the dot.
    const rotated = await admin(s, 'POST', '/admin/key');
    assert.equal(rotated.status, 200, JSON.stringify(rotated.body));
    const answers = await Promise.all(sends);
    const cut = answers.filter((a) => a.status !== 200 || a.body?.result?.structuredContent?.status !== 'delivered');
    assert.deepEqual(cut, [], 'every request in flight got its normal answer');
  });

  it('HTTP-KEY-ROT-2: the key read from the api-key file always works, across rotations', async () => {
    const s = await serverWithKeyFile();
    const keyFile = join(s.stateDir, 'api-key');
    let stop = false;
    const refusals: string[] = [];
    let answered = 0;
    const reader = async () => {
      while (!stop) {
        const key = readFileSync(keyFile, 'utf8').trim();
        const answer = await mcp(s, key, 'tools/list');
        answered++;
        if (answer.status !== 200) refusals.push(`HTTP ${answer.status} for the key the file held`);
      }
    };
    const readers = Array.from({ length: 4 }, reader);
    // With an overlap, so that a key read just before a rotation still works: the only refusal left
    // to find is of a key the file shows before the server serves it.
    for (let i = 0; i < 10; i++) {
      const rotated = await cli(['key', 'rotate', '--overlap', '1m', '--yes'], s.stateDir);
      assert.equal(rotated.code, 0, rotated.err);
    }
    stop = true;
    await Promise.all(readers);
    assert.ok(answered > 40, `the readers kept asking (${answered})`);
    assert.deepEqual(refusals, []);
  });

  it('HTTP-KEY-ROT-4: key rotate --overlap past 7 days is a usage error; the admin route answers 400, and the key stays', async () => {
    const s = await serverWithKeyFile();
    const refused = await cli(['key', 'rotate', '--overlap', '8d', '--yes'], s.stateDir);
    assert.equal(refused.code, 2, refused.err);
    assert.match(refused.err, /at most 7d/);
    const direct = await admin(s, 'POST', `/admin/key?overlapMs=${8 * 86_400_000}`);
    assert.equal(direct.status, 400, JSON.stringify(direct.body));
    assert.equal(direct.body.error.code, 'invalid_overlap');
    assert.equal(readFileSync(join(s.stateDir, 'api-key'), 'utf8').trim(), s.key);
    assert.equal((await mcp(s, s.key, 'tools/list')).status, 200);
  });

  it('HTTP-KEY-LOG-1: a key typed into the path (/mcp&key=…) never reaches the log verbatim', async () => {
    const s = await serverWithKeyFile();
    const typed = 'typed-into-the-path-0123456789';
    const added = await cli(['senders', 'add', 'pathy', '--json'], s.stateDir);
    const senderKey = JSON.parse(added.out).key as string;
    for (const path of [`/mcp&key=${typed}`, `/mcp&key=${s.key}`, `/mcp&key=${encodeURIComponent(senderKey)}`, `/${senderKey}`]) {
      const response = await fetch(`${s.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
      assert.equal(response.status, 404);
    }
    await waitFor('the four request lines', () => s.stderr.filter((line) => line.includes('"status":404')).length >= 4 || undefined);
    const log = s.stderr.join('\n');
    for (const secret of [typed, s.key, senderKey.slice(-43)]) assert.ok(!log.includes(secret), 'a key is in the log');
    assert.ok(log.includes('/mcp&key=[redacted]'));
  });
});
