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
import { echoing, newSecret, rpc, startReceiver, startServer, until, type RunningServer } from '../support/e2e';

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
    assert.equal(limitedTool.status, 429);
    assert.equal(limitedTool.body.error.code, -32029);

    const forbidden = await mcp(s, key, 'events/subscribe', { name: 'message.created', delivery: { mode: 'webhook', url: receiver.url('/thief'), secret: newSecret() } });
    assert.equal(forbidden.body.error.code, -32012);
    assert.equal(receiver.challenges().length, 1, 'the thief callback was never challenged');

    const events = await cli(['events', '--json'], s.stateDir);
    assert.equal(events.code, 0, events.err);
    const log = JSON.parse(events.out).events as { eventId: string; sender: string }[];
    assert.deepEqual(log.map((e) => e.sender), ['billing', 'billing'], 'the refused sends left nothing in the log');
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

describe('dm-dot key rotate --overlap', () => {
  it('CLI-10, EV-ID-4, HTTP-KEY-10: both keys work during the overlap, the dot keeps its subscription id and keeps receiving, then the old key gets 401', async () => {
    const s = await serverWithKeyFile();
    const old = s.key;
    const { receiver, params, id } = await subscribed(s, old);

    const rotated = await cli(['key', 'rotate', '--overlap', '4s', '--yes', '--json'], s.stateDir);
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

    await new Promise((r) => setTimeout(r, Math.max(0, Date.parse(doc.overlapUntil!) - Date.now()) + 200));
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
