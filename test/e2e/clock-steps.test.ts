/**
 * Steps of the wall clock against `npm start` (docs/contract/local-runtime.md, LOCAL-CLOCK-*): the
 * server runs with its Date.now() shifted by a file the test writes (test/support/wall-clock-offset.mjs),
 * as an NTP step or a resumed VM shifts it, while monotonic time runs on. Retries, leases and rate
 * windows are measured on the process's steady clock (lambda/local/clock.ts), so a step neither
 * delays a due retry by the step nor opens a rate window a second time.
 */
import { after, afterEach, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { buildCli, runCli } from '../support/cli-run';
import { echoing, newSecret, rpc, startReceiver, startServer, until, type RunningServer } from '../support/e2e';

before(buildCli);

const cleanups: (() => Promise<unknown> | void)[] = [];
afterEach(async () => {
  while (cleanups.length) await cleanups.pop()!();
});
after(() => undefined);

/** A server whose wall clock the test steps with `step(ms)` (cumulative offset from the real time). */
async function steppableServer(env: Record<string, string> = {}) {
  const dir = mkdtempSync(join(tmpdir(), 'dmdot-clock-'));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  const offsetFile = join(dir, 'offset');
  writeFileSync(offsetFile, '0');
  const preload = pathToFileURL(join(__dirname, '..', 'support', 'wall-clock-offset.mjs')).href;
  const s = await startServer({ NODE_OPTIONS: `--import=${preload}`, DMDOT_TEST_WALL_OFFSET_FILE: offsetFile, ...env });
  cleanups.push(() => s.stop());
  let offset = 0;
  return {
    s,
    async step(ms: number) {
      offset += ms;
      writeFileSync(offsetFile, String(offset));
      // The preload re-reads the file at most every 10 ms.
      await new Promise((r) => setTimeout(r, 30));
    },
  };
}

async function subscribe(s: RunningServer, responder = echoing()) {
  const receiver = await startReceiver(responder);
  cleanups.push(() => receiver.close());
  const delivery = { mode: 'webhook', url: receiver.url(), secret: newSecret() };
  const answer = await rpc(s, 'events/subscribe', { name: 'message.created', arguments: {}, delivery });
  assert.equal(answer.body.error, undefined, JSON.stringify(answer.body.error));
  return receiver;
}

async function post(s: RunningServer, key: string, message: string) {
  const response = await fetch(`${s.url}/v1/messages`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
    body: JSON.stringify({ message }),
  });
  return { status: response.status, body: (await response.json()) as any };
}

describe('a step of the wall clock', () => {
  it('LOCAL-CLOCK-2: a retry due in 1 s is made within seconds although the wall clock stepped back an hour', async () => {
    const { s, step } = await steppableServer({ DMDOT_RETRY_DELAYS: '1,1,1' });
    // The first POST of the event fails: a retry is due 1 s later.
    const receiver = await subscribe(s, echoing([503]));
    const sent = await post(s, s.key, 'retried across a step');
    assert.equal(sent.status, 202, JSON.stringify(sent.body));
    await step(-3_600_000);
    await until('the retry reached the dot', async () => receiver.events().length >= 2 || undefined, 10_000);
    assert.equal(receiver.events()[1]!.json.eventId, sent.body.eventId);
  });

  it('LOCAL-CLOCK-3: a rate of 3 a minute admits 3 across steps back of the wall clock, not 3 per step', async () => {
    const { s, step } = await steppableServer();
    await subscribe(s);
    const env = { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', DMDOT_STATE_DIR: s.stateDir };
    const added = await runCli(['senders', 'add', 'stepper', '--rate', '3', '--json'], env);
    assert.equal(added.code, 0, added.err);
    const key = JSON.parse(added.out).key as string;
    // Clear of a minute's end, so the 12 sends below fall in one real minute.
    const intoMinute = Date.now() % 60_000;
    if (intoMinute > 40_000) await new Promise((r) => setTimeout(r, 60_000 - intoMinute + 100));
    const statuses: number[] = [];
    for (let round = 0; round < 4; round++) {
      for (let i = 0; i < 3; i++) statuses.push((await post(s, key, `round ${round} send ${i}`)).status);
      await step(-61_000);
    }
    assert.equal(statuses.filter((status) => status === 429).length, 9, `statuses: ${statuses.join(' ')}`);
    assert.equal(statuses.filter((status) => status !== 429).length, 3);
  });

  it('LOCAL-CLOCK-4, LOCAL-CLOCK-5: a step forward of 10 min mid-attempt makes no second POST; signatures carry the stepped time of day', async () => {
    const { s, step } = await steppableServer();
    // The dot answers each event after 1.5 s, inside the 3 s wait window.
    const receiver = await subscribe(s, (r) => (r.json?.type === 'verification' ? echoing()(r) : { status: 200, delayMs: 1_500 }));
    const first = post(s, s.key, 'in flight across the step');
    await until('the first POST reached the dot', async () => receiver.events().length >= 1 || undefined);
    await step(600_000);
    // A second send changes the job table, which wakes the worker while the first attempt still waits.
    const second = await post(s, s.key, 'wakes the worker');
    const answered = await first;
    assert.equal(answered.status, 200, JSON.stringify(answered.body));
    assert.equal(second.status, 200, JSON.stringify(second.body));
    const firstId = answered.body.eventId as string;
    // Both events are delivered and settled: every POST the worker could make for the first was made by now.
    assert.equal(receiver.events().filter((r) => r.json.eventId === firstId).length, 1, 'one POST for the first event');
    assert.equal(receiver.events().length, 2);
    // The time of day leaves the process as the wall clock has it (another machine compares it with its own).
    const signedAt = Number(receiver.events().find((r) => r.json.eventId === second.body.eventId)!.headers['webhook-timestamp']);
    assert.ok(Math.abs(signedAt - (Date.now() + 600_000) / 1000) < 60, `webhook-timestamp ${signedAt} follows the stepped wall clock`);
  });
});
