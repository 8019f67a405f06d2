/**
 * Concurrency end to end against the local runtime:
 * - 50 concurrent `events/subscribe` calls for 50 different callbacks: exactly one wins, 49 get
 *   -32000 (or, on a machine too starved to finish a challenge in time, -32015 timeout), and the
 *   winner is the callback a send actually reaches (the single-subscriber rule holds under a race,
 *   not only in sequence);
 * - 200 concurrent sends, half `send_to_dot` (2026-07-28 JSON-RPC over HTTP) and half
 *   `POST /v1/messages`: 200 distinct event ids, 200 POSTs (one per event: DEL-PIPE-21), every
 *   signature valid over the raw bytes, and the server's record says `delivered` after one attempt
 *   for each (so nothing will ever POST it again).
 * Every wait is bounded; only loopback addresses are used.
 */
import { afterEach, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { echoing, inspectState, newSecret, rpc, startReceiver, startServer, timeoutsLogged, verifies, waitFor, type RunningServer } from '../support/e2e';

const cleanups: (() => Promise<unknown> | unknown)[] = [];
afterEach(async () => {
  while (cleanups.length) await cleanups.pop()!();
});

function subscribeParams(url: string, secret: string) {
  return { name: 'message.created', arguments: {}, delivery: { mode: 'webhook', url, secret } };
}

async function sendToDot(s: RunningServer, message: string) {
  const { status, body } = await rpc(s, 'tools/call', { name: 'send_to_dot', arguments: { message } }, { 'mcp-name': 'send_to_dot' });
  return { status, body, result: body.result as { isError?: boolean; structuredContent?: { eventId: string; status: string } } | undefined };
}

it('ARCH-9, EV-SUB-15, STORE-10: 50 concurrent subscribes for 50 callbacks: one wins, 49 get -32000, sends go to the winner', { timeout: 60_000 }, async () => {
  const CALLERS = 50;
  const server = await startServer({ DMDOT_RETRY_DELAYS: '0.1,0.2' });
  cleanups.push(() => server.stop());
  const receiver = await startReceiver(echoing());
  cleanups.push(() => receiver.close());
  const callers = Array.from({ length: CALLERS }, (_, i) => ({ url: receiver.url(`/callback/${i}?n=${i}`), secret: newSecret() }));

  const started = Date.now();
  const answers = await Promise.all(callers.map((c) => rpc(server, 'events/subscribe', subscribeParams(c.url, c.secret))));
  const raceMs = Date.now() - started;

  const winners = answers.flatMap((a, i) => (a.body.result ? [i] : []));
  const conflicts = answers.filter((a) => a.body.error?.code === -32000);
  // A challenge the starved machine could not finish within the request's deadline is answered
  // honestly as such (EV-CHAL-9); it is no second winner, which is what this race is about.
  const timedOut = answers.filter((a) => a.body.error?.code === -32015 && a.body.error?.data?.reason === 'timeout');
  const other = answers.filter((a) => !a.body.result && !conflicts.includes(a) && !timedOut.includes(a));
  const challenged = new Set(receiver.challenges().map((r) => r.url)).size;
  console.log(
    `subscribe race: callers=${CALLERS} winners=${winners.length} conflicts(-32000)=${conflicts.length} ` +
      `timeouts(-32015)=${timedOut.length} other=${other.length} challengedCallbacks=${challenged} ms=${raceMs}`,
  );
  assert.deepEqual(
    other.map((a) => a.body),
    [],
    'no answer other than a result, -32000, or -32015 timeout',
  );
  assert.equal(winners.length, 1, 'exactly one subscribe succeeds');
  assert.equal(conflicts.length + timedOut.length, CALLERS - 1);
  assert.ok(answers.every((a) => a.status === 200));
  const winner = callers[winners[0]!]!;
  for (const conflict of conflicts) {
    assert.ok(!JSON.stringify(conflict.body).includes('/callback/'), 'a refusal never reveals the holder');
  }

  // The winner holds the subscription: a send reaches it, and nobody else.
  const sent = await sendToDot(server, 'who won?');
  assert.equal(sent.result?.isError, false, JSON.stringify(sent.body));
  assert.equal(sent.result?.structuredContent?.status, 'delivered');
  const events = receiver.events();
  assert.equal(events.length, 1);
  assert.equal(events[0]!.url, new URL(winner.url).pathname + new URL(winner.url).search);
  assert.equal(events[0]!.headers['webhook-id'], sent.result?.structuredContent?.eventId);
  assert.equal(events[0]!.headers['x-mcp-subscription-id'], answers[winners[0]!]!.body.result.id);
  assert.ok(verifies(winner.secret, events[0]!), 'signed with the winner secret');

  // And the losers stay refused afterwards; the winner can refresh.
  const loser = callers[(winners[0]! + 1) % CALLERS]!;
  assert.equal((await rpc(server, 'events/subscribe', subscribeParams(loser.url, loser.secret))).body.error?.code, -32000);
  assert.ok((await rpc(server, 'events/subscribe', subscribeParams(winner.url, winner.secret))).body.result?.deliveryStatus?.active);
});

async function sendRest(s: RunningServer, message: string) {
  const response = await fetch(`${s.url}/v1/messages`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${s.key}` },
    body: JSON.stringify({ message }),
  });
  const body = (await response.json()) as { eventId: string; status: string };
  // The same shape as a tool result, so both surfaces are checked alike.
  return { status: response.status === 200 || response.status === 202 ? 200 : response.status, body, result: { isError: false, structuredContent: body } };
}

it('ARCH-1, DEL-PIPE-21: 200 concurrent sends (MCP and REST): 200 distinct events, 200 POSTs, each delivered once and signed', {
  timeout: 90_000,
}, async () => {
  const CALLS = 200;
  const stateDir = mkdtempSync(join(tmpdir(), 'dmdot-concurrency-'));
  cleanups.push(() => rmSync(stateDir, { recursive: true, force: true }));
  const server = await startServer({ DMDOT_RETRY_DELAYS: '0.1,0.2,0.4' }, { stateDir });
  cleanups.push(() => server.stop());
  const receiver = await startReceiver(echoing());
  cleanups.push(() => receiver.close());
  const secret = newSecret();
  assert.ok((await rpc(server, 'events/subscribe', subscribeParams(receiver.url('/many'), secret))).body.result?.id);

  const started = Date.now();
  const calls = await Promise.all(
    Array.from({ length: CALLS }, (_, i) => (i % 2 === 0 ? sendToDot(server, `concurrent message ${i}`) : sendRest(server, `concurrent message ${i}`))),
  );
  const callsMs = Date.now() - started;

  const statuses = new Map<string, number>();
  const ids = new Map<string, number>();
  calls.forEach((call, i) => {
    assert.equal(call.status, 200);
    assert.equal(call.result?.isError, false, `call ${i}: ${JSON.stringify(call.body)}`);
    const status = call.result!.structuredContent!.status;
    statuses.set(status, (statuses.get(status) ?? 0) + 1);
    ids.set(call.result!.structuredContent!.eventId, i);
  });
  assert.equal(ids.size, CALLS, 'distinct event ids');
  assert.ok(
    [...statuses.keys()].every((s) => s === 'delivered' || s === 'queued'),
    `statuses: ${[...statuses]}`,
  );

  await waitFor(`${CALLS} distinct webhook-ids`, () => new Set(receiver.events().map((e) => e.headers['webhook-id'])).size >= CALLS, 30_000);
  // A clean stop waits for every attempt still running; the records then prove that none is left
  // to make (each is delivered after one attempt), so no late duplicate can follow.
  assert.equal(await server.stop(), 0);
  const durationMs = Date.now() - started;

  const events = receiver.events();
  const perId = new Map<string, number>();
  for (const e of events) perId.set(String(e.headers['webhook-id']), (perId.get(String(e.headers['webhook-id'])) ?? 0) + 1);
  const badSignatures = events.filter((e) => !verifies(secret, e)).length;
  const { events: records } = await inspectState(stateDir);
  const deliveredRecords = records.filter((e) => ids.has(e.eventId) && e.status === 'delivered').length;
  console.log(
    `send race: calls=${CALLS} distinctEventIds=${ids.size} results=${[...statuses].map(([s, c]) => `${s}:${c}`).join(',')} ` +
      `webhookRequests=${events.length} distinctWebhookIds=${perId.size} badSignatures=${badSignatures} deliveredRecords=${deliveredRecords} callsMs=${callsMs} durationMs=${durationMs}`,
  );

  assert.deepEqual([...perId.keys()].sort(), [...ids.keys()].sort(), 'the receiver got exactly the sent event ids');
  // One POST per event (DEL-PIPE-21). A second one is allowed only where the sender never saw the
  // answer in time, an attempt its record logs as a timeout (an unknown outcome): on a loaded
  // machine this receiver, in the test's own busy process, can answer after the sender gave up.
  // Such an attempt may also never have reached it (seen red once: 26 events, each with a timeout
  // logged and one arrival), so a timeout allows a second arrival and does not demand one.
  const timeoutsOf = new Map(records.map((e) => [e.eventId, timeoutsLogged(e)]));
  const doubled = [...perId].filter(([id, n]) => n < 1 || n > 1 + (timeoutsOf.get(id) ?? 0));
  assert.deepEqual(doubled, [], 'each webhook-id arrived once, and at most once more per attempt its record logs as a timeout');
  assert.equal(badSignatures, 0);
  for (const e of events) {
    const index = ids.get(String(e.headers['webhook-id']))!;
    assert.equal(e.json.data.message, `concurrent message ${index}`, 'each event carries its own message');
    assert.equal(e.json.eventId, e.headers['webhook-id']);
  }
  assert.equal(deliveredRecords, CALLS, 'the server recorded every event delivered');
  const retried = records.filter((e) => ids.has(e.eventId) && e.attempts !== 1 + (timeoutsOf.get(e.eventId) ?? 0));
  assert.deepEqual(
    retried.map((e) => [e.eventId, e.attempts]),
    [],
    'every event delivered by its first attempt (after a timed-out one only where its record logs it)',
  );
  const unknown = [...timeoutsOf.values()].reduce((a, b) => a + b, 0);
  if (unknown > 0) console.log(`send race: ${unknown} attempt(s) timed out on this machine and were made again`);
});
