/**
 * The local runtime as `npm start` runs it (SPEC 9): the listening line, the generated key kept in
 * the state directory with mode 0600 and never printed, clean exit on SIGINT and SIGTERM, and
 * durability: events queued when the process is SIGKILLed are delivered after a restart.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { echoing, newSecret, ROOT, rpc, startReceiver, startServer, waitFor } from '../support/e2e';

describe('local runtime', () => {
  it('generates the key on first start, prints only its file, reuses it, exits 0 on SIGINT', async () => {
    const stateDir = mkdtempSync(join(tmpdir(), 'dmdot-rt-'));
    try {
      const first = await startServer({ MCP_API_KEY: '' }, { stateDir });
      const keyFile = join(stateDir, 'api-key');
      const key = readFileSync(keyFile, 'utf8').trim();
      assert.equal(statSync(keyFile).mode & 0o777, 0o600);
      assert.match(first.stdout[0]!, /^dm-dot listening on http:\/\/127\.0\.0\.1:\d+\/mcp$/);
      // The second startup line may arrive in a later chunk than the listening line.
      await waitFor('the line naming the key file', () => first.stdout.some((l) => l.includes(keyFile)));
      const withKey = { ...first, key };
      assert.equal((await rpc(withKey, 'tools/list')).status, 200);
      assert.equal(await first.stop('SIGINT'), 0);
      assert.ok(![...first.stdout, ...first.stderr].some((l) => l.includes(key)), 'the key is never printed');

      const second = await startServer({ MCP_API_KEY: '' }, { stateDir });
      assert.equal(readFileSync(keyFile, 'utf8').trim(), key, 'the stored key is reused');
      assert.ok(!second.stdout.some((l) => l.includes('generated')), 'no key generated on the second start');
      assert.equal((await rpc({ ...second, key }, 'tools/list')).status, 200);
      assert.equal(await second.stop('SIGTERM'), 0);
    } finally {
      rmSync(stateDir, { recursive: true, force: true });
    }
  });

  it('a key given in MCP_API_KEY is never printed', async () => {
    const s = await startServer({ MCP_API_KEY: 'env-key-abcdefghijklmnopqrstuvwxyz' });
    assert.ok(!s.stdout.some((l) => l.includes('env-key-abcdefghijklmnopqrstuvwxyz')));
    await rpc({ ...s, key: 'env-key-abcdefghijklmnopqrstuvwxyz' }, 'tools/list');
    await s.stop();
    assert.ok(!s.stderr.some((l) => l.includes('env-key-abcdefghijklmnopqrstuvwxyz')), 'nor logged');
  });

  it('bad settings exit with code 2 and a message naming the setting', async () => {
    await assert.rejects(startServer({ DMDOT_RETRY_DELAYS: 'soon' }), /DMDOT_RETRY_DELAYS/);
  });

  it('SIGKILL with events queued: after restart the subscription is intact and they are delivered', async () => {
    const stateDir = mkdtempSync(join(tmpdir(), 'dmdot-kill-'));
    const receiver = await startReceiver(echoing([503, 503, 503, 503, 503]));
    try {
      const env = { DMDOT_RETRY_DELAYS: '3', DMDOT_DELIVERY_WAIT_MS: '0' };
      const first = await startServer(env, { stateDir, key: 'durable-key-0123456789abcdef' });
      await rpc(first, 'events/subscribe', { name: 'message.created', arguments: {}, delivery: { mode: 'webhook', url: receiver.url(), secret: newSecret() } });
      const ids: string[] = [];
      for (let i = 0; i < 5; i++) {
        const { body } = await rpc(first, 'tools/call', { name: 'send_to_dot', arguments: { message: `m${i}` } }, { 'mcp-name': 'send_to_dot' });
        ids.push(body.result.structuredContent.eventId);
      }
      await waitFor('five first attempts', () => receiver.events().length === 5);
      await first.stop('SIGKILL');

      receiver.setResponder(echoing());
      const second = await startServer(env, { stateDir, key: 'durable-key-0123456789abcdef' });
      await waitFor('all five delivered after restart', () => new Set(receiver.events().slice(5).map((e) => e.headers['webhook-id'])).size === 5, 40_000);
      assert.deepEqual(new Set(receiver.events().slice(5).map((e) => e.headers['webhook-id'])), new Set(ids));
      const { body } = await rpc(second, 'tools/call', { name: 'send_to_dot', arguments: { message: 'after restart' } }, { 'mcp-name': 'send_to_dot' });
      assert.equal(body.result.isError, false, 'the subscription survived the kill');
      await waitFor('the new event', () => receiver.events().some((e) => e.headers['webhook-id'] === body.result.structuredContent.eventId));
      await second.stop();
    } finally {
      await receiver.close();
      rmSync(stateDir, { recursive: true, force: true });
    }
  });

  it('SIGKILL in the middle of the inline first attempt: the delayed safety-net job delivers the event after restart', async () => {
    // SPEC 6.2 step 2-3: the job is enqueued (delayed) before the inline POST starts, and the
    // event's lease runs out if the process that holds it dies. Nothing is lost.
    const stateDir = mkdtempSync(join(tmpdir(), 'dmdot-inline-kill-'));
    let firstEvent = true;
    const receiver = await startReceiver((r) => {
      if (r.json?.type === 'verification') return { status: 200, body: JSON.stringify({ challenge: r.json.challenge }) };
      if (firstEvent) {
        firstEvent = false;
        return 'hang';
      }
      return { status: 200 };
    });
    try {
      const env = { DMDOT_RETRY_DELAYS: '1', DMDOT_DELIVERY_WAIT_MS: '3000' };
      const key = 'inline-kill-key-0123456789abcdef';
      const first = await startServer(env, { stateDir, key });
      await rpc(first, 'events/subscribe', { name: 'message.created', arguments: {}, delivery: { mode: 'webhook', url: receiver.url(), secret: newSecret() } });
      const call = fetch(`${first.url}/v1/messages`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
        body: JSON.stringify({ message: 'in flight when the process dies' }),
      }).catch(() => undefined);
      await waitFor('the inline POST reaching the dot', () => receiver.events().length === 1);
      await first.stop('SIGKILL');
      await call;
      const eventId = String(receiver.events()[0]!.headers['webhook-id']);

      const second = await startServer(env, { stateDir, key });
      await waitFor('the same event delivered by the worker after restart', () => receiver.events().length === 2, 20_000);
      assert.equal(receiver.events()[1]!.headers['webhook-id'], eventId, 'same event id: a receiver deduplicates it');
      assert.ok(receiver.events()[1]!.raw.equals(receiver.events()[0]!.raw), 'same bytes');
      await waitFor('queue drained', () => readdirSync(join(stateDir, 'queue')).length === 0);
      assert.equal(await second.stop(), 0);
    } finally {
      await receiver.close();
      rmSync(stateDir, { recursive: true, force: true });
    }
  });

  it('npm run redrive (dm-dot redrive, server stopped) moves dead letters back; the next start delivers them with a new round', async () => {
    const stateDir = mkdtempSync(join(tmpdir(), 'dmdot-redrive-'));
    // 404: permanent, and unlike 410 it leaves the subscription in place for the redriven round.
    const receiver = await startReceiver(echoing([404]));
    try {
      const key = 'redrive-key-0123456789abcdef';
      const first = await startServer({}, { stateDir, key });
      await rpc(first, 'events/subscribe', { name: 'message.created', arguments: {}, delivery: { mode: 'webhook', url: receiver.url(), secret: newSecret() } });
      const { body } = await rpc(first, 'tools/call', { name: 'send_to_dot', arguments: { message: 'refused once' } }, { 'mcp-name': 'send_to_dot' });
      assert.equal(body.result.structuredContent.status, 'failed');
      const eventId = body.result.structuredContent.eventId;
      // The inline attempt failed it; the job's safety-net copy then moves it to the dead letters.
      await waitFor('the dead letter', () => readdirSync(join(stateDir, 'dead-letter')).length === 1);
      assert.deepEqual(readdirSync(join(stateDir, 'dead-letter')), [`${eventId}.json`]);
      await waitFor('queue drained', () => readdirSync(join(stateDir, 'queue')).length === 0);
      assert.equal(await first.stop(), 0);

      const out = execFileSync(process.execPath, [join(ROOT, 'lambda/cli/dm-dot.mjs'), 'redrive'], { cwd: ROOT, env: { ...process.env, DMDOT_STATE_DIR: stateDir } }).toString();
      assert.match(out, /moved 1 dead letter/i);
      assert.deepEqual(readdirSync(join(stateDir, 'dead-letter')), []);

      const second = await startServer({}, { stateDir, key });
      await waitFor('the redriven event', () => receiver.events().length === 2);
      assert.equal(receiver.events()[1]!.headers['webhook-id'], eventId, 'same event, same id');
      assert.ok(receiver.events()[1]!.raw.equals(receiver.events()[0]!.raw), 'same bytes');
      await waitFor('queue drained', () => readdirSync(join(stateDir, 'queue')).length === 0);
      assert.equal(await second.stop(), 0);
    } finally {
      await receiver.close();
      rmSync(stateDir, { recursive: true, force: true });
    }
  });
});
