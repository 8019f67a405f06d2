/**
 * Delivery behaviour end to end against the local runtime with a real receiver: the
 * single-subscriber rule, challenge failures, retries with the same webhook-id, permanent
 * failures, unsubscribe dropping queued deliveries (also when the same URL subscribes again: the
 * generation rule), and dual signatures during secret rotation.
 * A short retry schedule (DMDOT_RETRY_DELAYS) keeps it fast; no assertion is about elapsed time.
 */
import { afterEach, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Webhook } from 'standardwebhooks';
import { deliveryLines, echoing, newSecret, rpc, startReceiver, startServer, verifies, waitFor, workerEnded, type RunningServer } from '../support/e2e';
import { startLocal } from '../../lambda/local/runtime';
import { testLocalSettings } from '../support/paths';
import { createLogger } from '../../lambda/log';

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  while (cleanups.length) await cleanups.pop()!();
});

async function server(env: Record<string, string> = {}) {
  const s = await startServer({ DMDOT_RETRY_DELAYS: '1,1,1,1,1', ...env });
  cleanups.push(() => s.stop());
  return s;
}
async function receiver(...args: Parameters<typeof startReceiver>) {
  const r = await startReceiver(...args);
  cleanups.push(() => r.close());
  return r;
}

function subscribeParams(url: string, secret: string) {
  return { name: 'message.created', arguments: {}, delivery: { mode: 'webhook', url, secret } };
}

async function send(s: RunningServer, message: string) {
  const { body } = await rpc(s, 'tools/call', { name: 'send_to_dot', arguments: { message } }, { 'mcp-name': 'send_to_dot' });
  return body.result as { isError: boolean; content: { text: string }[]; structuredContent?: { eventId: string; status: string } };
}

describe('subscription rules', () => {
  it('EV-SUB-15: a second callback gets -32000 and the first keeps its subscription', async () => {
    const s = await server();
    const first = await receiver(echoing());
    const second = await receiver(echoing());
    assert.ok((await rpc(s, 'events/subscribe', subscribeParams(first.url(), newSecret()))).body.result.id);
    const refused = await rpc(s, 'events/subscribe', subscribeParams(second.url(), newSecret()));
    assert.equal(refused.body.error.code, -32000);
    assert.ok(!JSON.stringify(refused.body).includes(first.url()), 'the other callback URL is never revealed');
    assert.equal(second.received.length, 0, 'the refused callback is not even challenged');
    const sent = await send(s, 'still yours');
    assert.equal(sent.structuredContent?.status, 'delivered');
    assert.equal(first.events().length, 1);
  });

  it('EV-CHAL-9, EV-SUB-16: a wrong challenge echo gets -32015 with reason challenge_failed', async () => {
    const s = await server();
    const r = await receiver(echoing([], 'wrong'));
    const { body } = await rpc(s, 'events/subscribe', subscribeParams(r.url(), newSecret()));
    assert.equal(body.error.code, -32015);
    assert.equal(body.error.message, 'CallbackEndpointError');
    assert.deepEqual(body.error.data, { reason: 'challenge_failed' });
  });

  it('EV-CHAL-9, EV-SUB-16: a callback answering 404 to the challenge gets reason http_4xx', async () => {
    const s = await server();
    const r = await receiver(() => ({ status: 404 }));
    const { body } = await rpc(s, 'events/subscribe', subscribeParams(r.url(), newSecret()));
    assert.deepEqual(body.error.data, { reason: 'http_4xx' });
  });

  it('EV-SUB-2: a bad secret is -32602 naming delivery.secret and never echoing it', async () => {
    const s = await server();
    const r = await receiver(echoing());
    const secret = 'whsec_dG9vLXNob3J0';
    const { body } = await rpc(s, 'events/subscribe', subscribeParams(r.url(), secret));
    assert.equal(body.error.code, -32602);
    assert.match(body.error.message, /delivery\.secret/);
    assert.ok(!JSON.stringify(body).includes('dG9vLXNob3J0'));
  });
});

describe('retries and failures', () => {
  it('DEL-EVT-1, DEL-PIPE-13: 503, 503, then 200: the same webhook-id three times with fresh timestamps, all signed', async () => {
    const s = await server();
    const secret = newSecret();
    const r = await receiver(echoing([503, 503, 200]));
    await rpc(s, 'events/subscribe', subscribeParams(r.url(), secret));
    const sent = await send(s, 'retry me');
    assert.ok(['queued', 'delivered'].includes(sent.structuredContent!.status));
    const attempts = await waitFor('three attempts', () => r.events().length === 3 && r.events(), 15_000);
    const ids = new Set(attempts.map((a) => a.headers['webhook-id']));
    assert.deepEqual([...ids], [sent.structuredContent!.eventId]);
    const stamps = attempts.map((a) => Number(a.headers['webhook-timestamp']));
    assert.ok(stamps[0]! < stamps[1]! && stamps[1]! < stamps[2]!, `timestamps are fresh per attempt: ${stamps}`);
    assert.ok(attempts.every((a) => verifies(secret, a)));
    assert.ok(
      attempts.every((a) => a.raw.equals(attempts[0]!.raw)),
      'every attempt sends the same bytes',
    );
  });

  it('TOOL-9: 410 gets exactly one attempt and the event ends failed', async () => {
    const s = await server();
    const r = await receiver(echoing([410]));
    await rpc(s, 'events/subscribe', subscribeParams(r.url(), newSecret()));
    const sent = await send(s, 'gone');
    assert.equal(sent.isError, true);
    assert.equal(sent.structuredContent?.status, 'failed');
    assert.match(sent.content[0]!.text, new RegExp(sent.structuredContent!.eventId));
    // The worker's run of the event's job ends it without a POST: no retry is left to arrive.
    const ended = await workerEnded(s, sent.structuredContent!.eventId);
    assert.notEqual(ended.action, 'delivered');
    assert.equal(r.events().length, 1);
  });

  it('DEL-RUN-4: a 400 to the inline attempt is one failure for its one POST; the worker logs its safety-net job as the dead-letter copy', async () => {
    const s = await server();
    const r = await receiver(echoing([400]));
    await rpc(s, 'events/subscribe', subscribeParams(r.url(), newSecret()));
    const sent = await send(s, 'refused');
    assert.equal(sent.structuredContent?.status, 'failed');
    const eventId = sent.structuredContent!.eventId;
    const decisions = () => deliveryLines(s, eventId);
    await waitFor("the worker's line", () => decisions().some((d) => d.via === 'worker'), 10_000);
    assert.deepEqual(
      decisions().map((d) => `${d.action} ${d.via}`),
      ['failed inline', 'dead_letter_copy worker'],
    );
    assert.equal(r.events().length, 1);
  });

  it('DEL-PIPE-12, EV-UNSUB-4: after unsubscribe a queued delivery is dropped and nothing more is sent', async () => {
    const s = await server({ DMDOT_DELIVERY_WAIT_MS: '0' });
    const r = await receiver(echoing([503]));
    const url = r.url();
    await rpc(s, 'events/subscribe', subscribeParams(url, newSecret()));
    const sent = await send(s, 'will be dropped');
    assert.equal(sent.structuredContent?.status, 'queued');
    await waitFor('first attempt', () => r.events().length === 1);
    await rpc(s, 'events/unsubscribe', { name: 'message.created', arguments: {}, delivery: { url } });
    // The worker's run of the retry drops the job instead of sending it.
    assert.equal((await workerEnded(s, sent.structuredContent!.eventId)).action, 'dropped');
    assert.equal(r.events().length, 1);
    const again = await send(s, 'nobody');
    assert.equal(again.isError, true);
    assert.equal(r.events().length, 1);
  });

  it('DEL-PIPE-12, EV-GEN-1, EV-UNSUB-4: an event queued for an ended subscription is dropped, not delivered to the next subscription on the same URL', async () => {
    const s = await server({ DMDOT_DELIVERY_WAIT_MS: '0', DMDOT_RETRY_DELAYS: '3,3,3' });
    const r = await receiver(echoing([503]));
    const url = r.url();
    const oldSecret = newSecret();
    await rpc(s, 'events/subscribe', subscribeParams(url, oldSecret));
    const queued = await send(s, 'for the old subscription');
    assert.equal(queued.structuredContent?.status, 'queued');
    const oldEvent = queued.structuredContent!.eventId;
    await waitFor('first attempt', () => r.events().length === 1);

    // Same principal, same URL: the same subscription id, a new generation and a new secret.
    await rpc(s, 'events/unsubscribe', { name: 'message.created', arguments: {}, delivery: { url } });
    const newSecretValue = newSecret();
    const { body } = await rpc(s, 'events/subscribe', subscribeParams(url, newSecretValue));
    assert.ok(body.result?.id, JSON.stringify(body));

    // The worker's run of the old event's retry drops it instead of sending it with the new secret.
    assert.equal((await workerEnded(s, oldEvent)).action, 'dropped');
    assert.deepEqual(
      r.events().map((e) => e.json.eventId),
      [oldEvent],
      'the old event reached the dot only once, before the unsubscribe',
    );

    // The wait window is 0, so the new event is answered queued and delivered by the worker.
    const fresh = await send(s, 'for the new subscription');
    await waitFor('the new event', () => r.events().length === 2);
    const last = r.events().at(-1)!;
    assert.equal(last.json.eventId, fresh.structuredContent!.eventId);
    assert.ok(verifies(newSecretValue, last), 'signed with the new secret');
    assert.ok(!verifies(oldSecret, last), 'not with the old one');
  });

  it('ARCH-1, DEL-REST-2, HTTP-3: POST /v1/messages answers 200 delivered with the event id', async () => {
    const s = await server();
    const r = await receiver(echoing());
    await rpc(s, 'events/subscribe', subscribeParams(r.url(), newSecret()));
    const res = await fetch(`${s.url}/v1/messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${s.key}` },
      body: JSON.stringify({ message: 'over REST' }),
    });
    assert.equal(res.status, 200);
    const body = (await res.json()) as { eventId: string; status: string };
    assert.equal(body.status, 'delivered');
    assert.equal(r.events()[0]!.headers['webhook-id'], body.eventId);
  });
});

describe('secret rotation', () => {
  it('EV-REF-1, EV-REF-2, EV-SUB-14, LIM-7: after a refresh with a new secret deliveries carry two signatures until the overlap ends', async () => {
    // In-process so the runtime's clock can be moved past the 10-minute overlap.
    const stateDir = mkdtempSync(join(tmpdir(), 'dmdot-rotation-'));
    let offsetMs = 0;
    const runtime = await startLocal({
      settings: testLocalSettings({ port: 0, stateDir, allowLoopbackCallbacks: true, apiKey: 'rotation-test-key-0123456789' }),
      clock: { now: () => Date.now() + offsetMs, sleep: (ms) => new Promise((done) => setTimeout(done, ms)) },
      log: createLogger(() => undefined),
      announce: () => undefined,
    });
    cleanups.push(async () => {
      await runtime.stop();
      rmSync(stateDir, { recursive: true, force: true });
    });
    const s = { mcpUrl: runtime.url, url: runtime.url.replace(/\/mcp$/, ''), key: 'rotation-test-key-0123456789' } as RunningServer;
    const r = await receiver(echoing());
    const oldSecret = newSecret();
    const newer = newSecret(48);
    await rpc(s, 'events/subscribe', subscribeParams(r.url(), oldSecret));
    const refreshed = await rpc(s, 'events/subscribe', subscribeParams(r.url(), newer));
    assert.equal(refreshed.body.result.deliveryStatus.active, true);

    await send(s, 'during overlap');
    const during = r.events()[0]!;
    const parts = String(during.headers['webhook-signature']).split(' ');
    assert.equal(parts.length, 2);
    const signedWith = (secret: string, sig: string) => {
      try {
        new Webhook(secret).verify(during.raw.toString(), {
          'webhook-id': String(during.headers['webhook-id']),
          'webhook-timestamp': String(during.headers['webhook-timestamp']),
          'webhook-signature': sig,
        });
        return true;
      } catch {
        return false;
      }
    };
    assert.ok(signedWith(newer, parts[0]!) && !signedWith(oldSecret, parts[0]!), 'the new secret signs first');
    assert.ok(signedWith(oldSecret, parts[1]!) && !signedWith(newer, parts[1]!), 'the previous secret signs second');

    offsetMs = 10 * 60 * 1000 + 1000;
    await send(s, 'after overlap');
    const afterOverlap = r.events()[1]!;
    assert.equal(String(afterOverlap.headers['webhook-signature']).split(' ').length, 1);
    // The receiver's verifier uses real time; the runtime's clock is ahead, so check the MAC directly.
    const { createHmac } = await import('node:crypto');
    const key = Buffer.from(newer.slice(6), 'base64');
    const mac = createHmac('sha256', key)
      .update(`${afterOverlap.headers['webhook-id']}.${afterOverlap.headers['webhook-timestamp']}.${afterOverlap.raw.toString()}`)
      .digest('base64');
    assert.equal(afterOverlap.headers['webhook-signature'], `v1,${mac}`);
  });
});

describe('the safety-net job of an inline delivery', () => {
  it('is removed once the inline attempt has recorded the event delivered, without waiting for the worker', async () => {
    // The first retry delay is long, so the worker would not look at the job during this test:
    // only the send path can have removed it.
    const stateDir = mkdtempSync(join(tmpdir(), 'dmdot-safety-net-'));
    const runtime = await startLocal({
      settings: testLocalSettings({ port: 0, stateDir, allowLoopbackCallbacks: true, apiKey: 'safety-net-test-key-0123456789', retryDelaysS: [60] }),
      log: createLogger(() => undefined),
      announce: () => undefined,
    });
    cleanups.push(async () => {
      await runtime.stop();
      rmSync(stateDir, { recursive: true, force: true });
    });
    const s = { mcpUrl: runtime.url, url: runtime.url.replace(/\/mcp$/, ''), key: 'safety-net-test-key-0123456789' } as RunningServer;
    const r = await receiver(echoing());
    await rpc(s, 'events/subscribe', subscribeParams(r.url(), newSecret()));
    const sent = await send(s, 'no job left behind');
    assert.equal(sent.structuredContent?.status, 'delivered');
    const eventId = sent.structuredContent!.eventId;
    // "delivered" is answered before the write that records it: wait for that write.
    const deadline = Date.now() + 5_000;
    while ((await runtime.db.store.getEvent(eventId, Date.now()))?.status !== 'delivered' || (await runtime.db.jobs.get(eventId)) !== undefined) {
      assert.ok(Date.now() < deadline, 'the delivered event still has its job');
      await new Promise((done) => setTimeout(done, 25));
    }
    assert.equal(r.events().length, 1);
  });
});
