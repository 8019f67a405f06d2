/**
 * One POST per event, end to end against the local runtime (docs/contract/delivery.md DEL-PIPE-21):
 * a dot that answers after the wait window still gets each event once. The wait window decides
 * what the caller is told ("queued"), never whether the attempt's outcome counts: the attempt runs
 * on after the answer and settles the event, and the safety-net job finds it settled.
 *
 * Each test waits on facts: the receiver's requests, then a clean stop (which waits for attempts
 * still running) and the records, which show each event delivered by its first attempt, so no
 * later POST can follow. Only loopback addresses are used.
 */
import { afterEach, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { inspectState, newSecret, rpc, startReceiver, startServer, verifies, waitFor, type Responder } from '../support/e2e';

const cleanups: (() => Promise<unknown> | unknown)[] = [];
afterEach(async () => {
  while (cleanups.length) await cleanups.pop()!();
});

/** Echoes challenges at once; answers every event 200 after `delayMs`. */
function slowDot(delayMs: number): Responder {
  return (r) => (r.json?.type === 'verification' ? { status: 200, body: JSON.stringify({ challenge: r.json.challenge }) } : { status: 200, delayMs });
}

async function run(options: { env: Record<string, string>; delayMs: number; sends: number; batch: number }) {
  const stateDir = mkdtempSync(join(tmpdir(), 'dmdot-one-post-'));
  cleanups.push(() => rmSync(stateDir, { recursive: true, force: true }));
  const server = await startServer(options.env, { stateDir });
  cleanups.push(() => server.stop());
  const receiver = await startReceiver(slowDot(options.delayMs));
  cleanups.push(() => receiver.close());
  const secret = newSecret();
  const subscribed = await rpc(server, 'events/subscribe', {
    name: 'message.created',
    arguments: {},
    delivery: { mode: 'webhook', url: receiver.url('/slow'), secret },
  });
  assert.ok(subscribed.body.result?.id, JSON.stringify(subscribed.body));

  const answers: { eventId: string; status: string }[] = [];
  for (let start = 0; start < options.sends; start += options.batch) {
    const batch = Array.from({ length: Math.min(options.batch, options.sends - start) }, (_, i) =>
      rpc(server, 'tools/call', { name: 'send_to_dot', arguments: { message: `slow dot ${start + i}` } }, { 'mcp-name': 'send_to_dot' }),
    );
    for (const answer of await Promise.all(batch)) {
      assert.equal(answer.body.result?.isError, false, JSON.stringify(answer.body));
      answers.push(answer.body.result.structuredContent);
    }
  }
  const ids = new Set(answers.map((a) => a.eventId));
  assert.equal(ids.size, options.sends);
  await waitFor(
    `${options.sends} events at the dot`,
    () => new Set(receiver.events().map((e) => String(e.headers['webhook-id']))).size >= options.sends,
    60_000,
  );
  // A clean stop waits for the attempts still running and their records.
  assert.equal(await server.stop(), 0);

  const events = receiver.events();
  assert.ok(
    events.every((e) => verifies(secret, e)),
    'every POST is signed',
  );
  const { events: records } = await inspectState(stateDir);
  const mine = records.filter((r) => ids.has(r.eventId));
  return { answers, posts: events.length, records: mine };
}

it('DEL-PIPE-21: a dot answering in 3.5 s with the default settings gets each message once', { timeout: 120_000 }, async () => {
  const { answers, posts, records } = await run({ env: {}, delayMs: 3_500, sends: 10, batch: 10 });
  console.log(`slow dot 3.5 s: answers=${answers.map((a) => a.status).join(',')} posts=${posts}`);
  // Past the 3 s window the caller is told "queued"; the attempt goes on and settles the event.
  assert.ok(
    answers.every((a) => a.status === 'queued'),
    JSON.stringify(answers),
  );
  assert.equal(posts, 10, 'one POST per event');
  assert.deepEqual(
    records.map((r) => [r.status, r.attempts, r.log?.length]),
    records.map(() => ['delivered', 1, 1]),
    'each event delivered by its first and only attempt',
  );
});

it('DEL-PIPE-21: 100 sends with a 200 ms wait window to a dot answering in 400 ms make 100 POSTs', { timeout: 120_000 }, async () => {
  const { posts, records } = await run({ env: { DMDOT_DELIVERY_WAIT_MS: '200' }, delayMs: 400, sends: 100, batch: 25 });
  assert.equal(posts, 100, 'one POST per event');
  assert.equal(records.filter((r) => r.status === 'delivered' && r.attempts === 1).length, 100);
});
