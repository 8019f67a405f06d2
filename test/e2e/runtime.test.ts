/**
 * The local runtime as `npm start` runs it (docs/contract/local-runtime.md): the listening line, the generated key kept in
 * the state directory with mode 0600 and never printed, clean exit on SIGINT and SIGTERM, and
 * durability on the embedded database: events queued when the process is SIGKILLed are delivered
 * after a restart, a second server on the same state directory refuses to start, and a request
 * never outlives its 5 s.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { admin, echoing, inspectState, newSecret, queueOf, rpc, startReceiver, startServer, until, waitFor } from '../support/e2e';
import { measureCpuWait } from '../support/cpu-wait';

describe('ARCH-2, LOCAL-1, LOCAL-5: local runtime', () => {
  it('LOCAL-9, LOCAL-16, LOCAL-18: generates the key on first start, prints only its file, reuses it, exits 0 on SIGINT', async () => {
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

  it('LOCAL-17: a key given in MCP_API_KEY is never printed', async () => {
    const s = await startServer({ MCP_API_KEY: 'env-key-abcdefghijklmnopqrstuvwxyz' });
    assert.ok(!s.stdout.some((l) => l.includes('env-key-abcdefghijklmnopqrstuvwxyz')));
    await rpc({ ...s, key: 'env-key-abcdefghijklmnopqrstuvwxyz' }, 'tools/list');
    await s.stop();
    assert.ok(!s.stderr.some((l) => l.includes('env-key-abcdefghijklmnopqrstuvwxyz')), 'nor logged');
  });

  it('bad settings exit with code 2 and a message naming the setting', async () => {
    await assert.rejects(startServer({ DMDOT_RETRY_DELAYS: 'soon' }), /DMDOT_RETRY_DELAYS/);
  });

  it('DEL-OUT-1: SIGKILL with events queued: after restart the subscription is intact and they are delivered', async () => {
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
      await waitFor(
        'all five delivered after restart',
        () =>
          new Set(
            receiver
              .events()
              .slice(5)
              .map((e) => e.headers['webhook-id']),
          ).size === 5,
        40_000,
      );
      assert.deepEqual(
        new Set(
          receiver
            .events()
            .slice(5)
            .map((e) => e.headers['webhook-id']),
        ),
        new Set(ids),
      );
      const { body } = await rpc(second, 'tools/call', { name: 'send_to_dot', arguments: { message: 'after restart' } }, { 'mcp-name': 'send_to_dot' });
      assert.equal(body.result.isError, false, 'the subscription survived the kill');
      await waitFor('the new event', () => receiver.events().some((e) => e.headers['webhook-id'] === body.result.structuredContent.eventId));
      await second.stop();
    } finally {
      await receiver.close();
      rmSync(stateDir, { recursive: true, force: true });
    }
  });

  it('DEL-PIPE-3: SIGKILL in the middle of the inline first attempt: the delayed safety-net job delivers the event after restart', async () => {
    // docs/contract/delivery.md-3: the job is enqueued (delayed) before the inline POST starts, and the
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
      await until('queue drained', async () => (await queueOf(second)).queued === 0);
      assert.equal(await second.stop(), 0);
    } finally {
      await receiver.close();
      rmSync(stateDir, { recursive: true, force: true });
    }
  });

  it('CLI-9: dead letters moved back while no server runs (the operator redrive, through the database) are delivered by the next start', async () => {
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
      await until('the dead letter', async () => (await queueOf(first)).deadLetters === 1);
      await until('queue drained', async () => (await queueOf(first)).queued === 0);
      assert.equal(await first.stop(), 0);
      assert.deepEqual(
        (await inspectState(stateDir)).deadLetters.map((d) => d.eventId),
        [eventId],
      );

      const { openEmbeddedDatabase } = await import('../../lambda/adapters/embedded');
      const db = await openEmbeddedDatabase(stateDir, { role: 'operator' });
      assert.equal(await db.jobs.redrive(Date.now()), 1);
      await db.close();

      const second = await startServer({}, { stateDir, key });
      await waitFor('the redriven event', () => receiver.events().length === 2);
      assert.equal(receiver.events()[1]!.headers['webhook-id'], eventId, 'same event, same id');
      assert.ok(receiver.events()[1]!.raw.equals(receiver.events()[0]!.raw), 'same bytes');
      await until('queue drained', async () => (await queueOf(second)).queued === 0);
      assert.equal(await second.stop(), 0);
    } finally {
      await receiver.close();
      rmSync(stateDir, { recursive: true, force: true });
    }
  });

  it('LOCAL-6: a second server on the same state directory refuses to start (exit 2, naming the directory and the first), and the first keeps serving', async () => {
    const stateDir = mkdtempSync(join(tmpdir(), 'dmdot-two-'));
    try {
      const first = await startServer({}, { stateDir, key: 'first-server-key-0123456789abcdef' });
      const token = readFileSync(join(stateDir, 'admin-token'), 'utf8');
      await assert.rejects(startServer({}, { stateDir, key: 'second-server-key-0123456789abcdef' }), (error: Error) => {
        assert.match(error.message, /exited with 2/);
        assert.ok(error.message.includes(stateDir), 'names the state directory');
        assert.ok(error.message.includes(first.url), 'names the running server');
        return true;
      });
      // Nothing of the first was touched: its admin token still works, and so does it.
      assert.equal(readFileSync(join(stateDir, 'admin-token'), 'utf8'), token);
      assert.equal((await admin(first, 'GET', '/admin/status')).status, 200);
      assert.equal((await rpc(first, 'tools/list')).status, 200);
      assert.equal(await first.stop(), 0);
    } finally {
      rmSync(stateDir, { recursive: true, force: true });
    }
  });

  it('a database file that cannot be read stops the start with exit 2, naming the file and what to do', async () => {
    const stateDir = mkdtempSync(join(tmpdir(), 'dmdot-corrupt-'));
    try {
      writeFileSync(join(stateDir, 'dm-dot.lmdb'), 'this is not a database');
      await assert.rejects(startServer({}, { stateDir }), (error: Error) => {
        assert.match(error.message, /exited with 2/);
        assert.ok(error.message.includes(join(stateDir, 'dm-dot.lmdb')), 'names the file');
        return true;
      });
    } finally {
      rmSync(stateDir, { recursive: true, force: true });
    }
  });

  it('LOCAL-9: an empty api-key file is treated as absent: a new key is generated into it', async () => {
    const stateDir = mkdtempSync(join(tmpdir(), 'dmdot-emptykey-'));
    try {
      writeFileSync(join(stateDir, 'api-key'), '', { mode: 0o600 });
      const s = await startServer({ MCP_API_KEY: '' }, { stateDir });
      const key = readFileSync(join(stateDir, 'api-key'), 'utf8').trim();
      assert.ok(key.length >= 32);
      assert.equal((await rpc({ ...s, key }, 'tools/list')).status, 200);
      await s.stop();
    } finally {
      rmSync(stateDir, { recursive: true, force: true });
    }
  });

  it('DEL-PIPE-9: a subscribe to a callback that never answers is answered within 5 s (the challenge gets what is left of the request)', async () => {
    const receiver = await startReceiver(() => 'hang');
    try {
      const s = await startServer();
      // What the two processes waited for a CPU is the loaded machine's time, not the server's.
      const cpuWait = measureCpuWait([process.pid, s.child.pid]);
      const started = Date.now();
      const { body } = await rpc(s, 'events/subscribe', {
        name: 'message.created',
        arguments: {},
        delivery: { mode: 'webhook', url: receiver.url(), secret: newSecret() },
      });
      const tookMs = Date.now() - started;
      const cpuWaitMs = cpuWait.stop();
      assert.equal(body.error.code, -32015);
      assert.equal(body.error.data.reason, 'timeout');
      assert.ok(tookMs < 5_000 + cpuWaitMs, `answered in ${tookMs} ms (waited ${cpuWaitMs} ms for a CPU)`);
      await s.stop();
    } finally {
      await receiver.close();
    }
  });

  it('DEL-OUT-1: kill -9 during 200 concurrent sends: every event a caller got an id for is delivered after the restart, and no record is left queued without a job', async () => {
    const stateDir = mkdtempSync(join(tmpdir(), 'dmdot-kill200-'));
    const receiver = await startReceiver(echoing());
    try {
      const env = { DMDOT_DELIVERY_WAIT_MS: '0', DMDOT_RETRY_DELAYS: '1' };
      const key = 'kill-200-key-0123456789abcdef0123';
      const first = await startServer(env, { stateDir, key });
      await rpc(first, 'events/subscribe', { name: 'message.created', arguments: {}, delivery: { mode: 'webhook', url: receiver.url(), secret: newSecret() } });
      const accepted = new Set<string>();
      const sends = Array.from({ length: 200 }, async (_, i) => {
        try {
          const response = await fetch(`${first.url}/v1/messages`, {
            method: 'POST',
            headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
            body: JSON.stringify({ message: `m${i}` }),
          });
          const body = (await response.json()) as { eventId?: string };
          if (body.eventId) accepted.add(body.eventId);
        } catch {
          // The process died under this request: no id was given, nothing is owed.
        }
      });
      await waitFor('some sends answered', () => accepted.size >= 20, 20_000);
      await first.stop('SIGKILL');
      await Promise.all(sends);

      // Straight after the kill: every queued record has its job (one transaction writes both).
      const state = await inspectState(stateDir);
      const jobs = new Set(state.jobs.map((j) => j.eventId));
      const orphans = state.events.filter((e) => e.status === 'queued' && !jobs.has(e.eventId));
      assert.deepEqual(
        orphans.map((e) => e.eventId),
        [],
        'no record queued without a job',
      );

      const second = await startServer(env, { stateDir, key });
      await waitFor('every accepted event delivered', () => [...accepted].every((id) => receiver.events().some((e) => e.headers['webhook-id'] === id)), 60_000);
      await until('queue drained', async () => (await queueOf(second)).queued === 0, 30_000);
      await second.stop();
    } finally {
      await receiver.close();
      rmSync(stateDir, { recursive: true, force: true });
    }
  });
});
