/**
 * Fault injection end to end: 1,000 events through the local runtime (`POST /v1/messages`, no
 * wait: every call answers at once) to a receiver that fails about 30% of attempts transiently
 * (503, 500, a reset connection, or no answer at all so the guard's 5 s deadline gives `timeout`)
 * and answers 404 to about 5% of events at their first attempt.
 *
 * The receiver's decisions are a seeded hash of (event id, attempt number), so a run is
 * reproducible from its seed and event ids; no event fails transiently more than 4 times, which
 * keeps every non-404 event inside the 6-attempt schedule. "0 lost" then means: every accepted
 * non-404 event was answered 2xx exactly once (dedup on webhook-id) and its record ends
 * `delivered`; every 404 event had exactly one attempt, its record ends `failed` and it sits in
 * the dead letters of the embedded database. Every signature of every attempt is checked with the
 * standardwebhooks library over the raw bytes.
 *
 * Bounded: 1,000 sends, the receiver's own cap of 4 failures per event, a hang rate of a few % of
 * attempts with DMDOT_DELIVERY_CONCURRENCY raised so hung attempts do not starve the queue, and a
 * deadline on every wait.
 */
import { afterEach, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { inspectState, newSecret, queueOf, rpc, startServer, timeoutsLogged, until, verifies, waitFor, type ReceivedRequest } from '../support/e2e';

const EVENTS = 1000;
const SEND_PARALLELISM = 16;
const SEED = process.env.DMDOT_FAULT_SEED ?? 'dm-dot-faults-v1';
const GONE_RATE = 0.05;
const TRANSIENT_RATE = 0.3;
const MAX_TRANSIENT_PER_EVENT = 4;
/** Split of transient failures: mostly status codes, some resets, a few hangs (each costs 5 s of one worker). */
const KINDS = [
  { kind: 'http_503', upTo: 0.45 },
  { kind: 'http_500', upTo: 0.75 },
  { kind: 'reset', upTo: 0.92 },
  { kind: 'hang', upTo: 1 },
] as const;
type FaultKind = (typeof KINDS)[number]['kind'];
type Verdict = 'accepted' | 'duplicate' | 'gone' | FaultKind;

/** A number in [0, 1) from the seed and the parts: the same inputs always decide the same way. */
function roll(...parts: (string | number)[]): number {
  const digest = createHash('sha256')
    .update([SEED, ...parts].join('|'))
    .digest();
  return digest.readUIntBE(0, 6) / 2 ** 48;
}

interface Attempt {
  id: string;
  n: number;
  verdict: Verdict;
  at: number;
  raw: Buffer;
  signatureValid: boolean;
  /** A hung attempt: when the sender closed its connection (its deadline ran out). */
  closedAt?: number;
}

/** A webhook receiver that injects faults; echoes challenges; keeps every attempt. */
async function startFaultyReceiver(secret: string) {
  const attempts: Attempt[] = [];
  const byId = new Map<string, Attempt[]>();
  const gone = new Set<string>();
  const accepted = new Set<string>();
  const hung = new Set<http.ServerResponse>();
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const raw = Buffer.concat(chunks);
      let json: any;
      try {
        json = JSON.parse(raw.toString('utf8'));
      } catch {
        json = undefined;
      }
      if (json?.type === 'verification') {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ challenge: json.challenge }));
        return;
      }
      const id = String(req.headers['webhook-id']);
      const previous = byId.get(id) ?? [];
      const n = previous.length + 1;
      const failures = previous.filter((a) => a.verdict !== 'accepted' && a.verdict !== 'duplicate' && a.verdict !== 'gone').length;
      const request: ReceivedRequest = { url: req.url ?? '', headers: req.headers, raw, json, at: Date.now() };
      let verdict: Verdict;
      if (accepted.has(id)) verdict = 'duplicate';
      else if (gone.has(id) || (n === 1 && roll('gone', id) < GONE_RATE)) verdict = 'gone';
      else if (failures < MAX_TRANSIENT_PER_EVENT && roll('fail', id, n) < TRANSIENT_RATE) {
        const k = roll('kind', id, n);
        verdict = KINDS.find((entry) => k < entry.upTo)!.kind;
      } else verdict = 'accepted';
      const attempt: Attempt = { id, n, verdict, at: request.at, raw, signatureValid: verifies(secret, request) };
      attempts.push(attempt);
      byId.set(id, [...previous, attempt]);
      switch (verdict) {
        case 'accepted':
        case 'duplicate':
          accepted.add(id);
          res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
          return;
        case 'gone':
          gone.add(id);
          res.writeHead(404, { 'content-type': 'application/json' }).end('{}');
          return;
        case 'http_503':
          res.writeHead(503, { 'content-type': 'application/json' }).end('{}');
          return;
        case 'http_500':
          res.writeHead(500, { 'content-type': 'application/json' }).end('{}');
          return;
        case 'reset':
          req.socket.destroy();
          return;
        case 'hang':
          // Never answered; the sender's 5 s deadline closes the connection.
          hung.add(res);
          res.on('close', () => {
            attempt.closedAt = Date.now();
            hung.delete(res);
          });
          return;
      }
    });
  });
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}/faulty-hook?route=a&x=1`,
    attempts,
    byId,
    gone,
    accepted,
    hungOpen: () => hung.size,
    /** Connections still open: every request that arrived on a closed one has been recorded. */
    openConnections: () => new Promise<number>((done, fail) => server.getConnections((error, count) => (error ? fail(error) : done(count)))),
    close: () =>
      new Promise<void>((done) => {
        server.close(() => done());
        server.closeAllConnections();
      }),
  };
}

const cleanups: (() => Promise<unknown> | unknown)[] = [];
afterEach(async () => {
  while (cleanups.length) await cleanups.pop()!();
});

it(`DEL-OUT-1, DEL-PIPE-4: ${EVENTS} events with ~30% transient faults and ~5% 404: none lost, none doubled, all signed`, { timeout: 240_000 }, async () => {
  const stateDir = mkdtempSync(join(tmpdir(), 'dmdot-faults-'));
  cleanups.push(() => rmSync(stateDir, { recursive: true, force: true }));
  const secret = newSecret();
  const receiver = await startFaultyReceiver(secret);
  cleanups.push(() => receiver.close());
  const server = await startServer({ DMDOT_RETRY_DELAYS: '0.05,0.1,0.2,0.4,0.8', DMDOT_DELIVERY_WAIT_MS: '0', DMDOT_DELIVERY_CONCURRENCY: '32' }, { stateDir });
  cleanups.push(() => server.stop());

  const subscribed = await rpc(server, 'events/subscribe', {
    name: 'message.created',
    arguments: {},
    delivery: { mode: 'webhook', url: receiver.url, secret },
  });
  assert.match(subscribed.body.result?.id ?? '', /^sub_[0-9a-f]{32}$/, JSON.stringify(subscribed.body));

  const started = Date.now();
  const sent = new Map<string, number>(); // eventId -> message index
  const statuses = new Map<number, number>();
  let next = 0;
  await Promise.all(
    Array.from({ length: SEND_PARALLELISM }, async () => {
      while (next < EVENTS) {
        const index = next++;
        const response = await fetch(`${server.url}/v1/messages`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', authorization: `Bearer ${server.key}` },
          body: JSON.stringify({ message: `fault run message ${index}` }),
        });
        const body = (await response.json()) as { eventId?: string; status?: string };
        statuses.set(response.status, (statuses.get(response.status) ?? 0) + 1);
        assert.ok(response.status === 202 || response.status === 200, `send ${index}: ${response.status} ${JSON.stringify(body)}`);
        assert.match(body.eventId ?? '', /^evt_[0-9a-f]{32}$/);
        assert.ok(!sent.has(body.eventId!), 'event ids are unique');
        sent.set(body.eventId!, index);
      }
    }),
  );
  const sendMs = Date.now() - started;
  assert.equal(sent.size, EVENTS, 'every send was accepted');

  // Final at the receiver (accepted or gone) for every event, then nothing left in the local queue.
  await waitFor('every event answered 2xx or 404', () => [...sent.keys()].every((id) => receiver.accepted.has(id) || receiver.gone.has(id)), 150_000);
  await until('an empty local queue', async () => (await queueOf(server)).queued === 0, 20_000);
  const attemptsBeforeStop = receiver.attempts.length;
  assert.equal(await server.stop(), 0, 'clean exit on SIGTERM');
  const durationMs = Date.now() - started;
  // The server has exited: once each of its connections is closed here, whatever it sent has been recorded.
  await until("the stopped server's connections closed", async () => (await receiver.openConnections()) === 0 || undefined, 20_000);
  assert.equal(receiver.attempts.length, attemptsBeforeStop, 'no attempt after the queue drained');
  assert.equal(receiver.hungOpen(), 0, 'every hung request was closed by the sender');

  // The server's own record.
  const state = await inspectState(stateDir);
  const records = new Map(state.events.map((e) => [e.eventId, e]));
  const deadLetters = state.deadLetters;
  const deadLetterReasons = new Map(deadLetters.map((d) => [d.eventId, d.reason]));

  const problems: string[] = [];
  let delivered = 0;
  let failed = 0;
  let unknownTotal = 0;
  for (const [id, index] of sent) {
    const tries = receiver.byId.get(id) ?? [];
    const record = records.get(id);
    if (tries.length === 0) {
      problems.push(`${id}: never attempted`);
      continue;
    }
    if (!tries.every((t) => t.raw.equals(tries[0]!.raw))) problems.push(`${id}: attempts sent different bytes`);
    const event = JSON.parse(tries[0]!.raw.toString('utf8'));
    if (event.eventId !== id || event.data?.message !== `fault run message ${index}`) problems.push(`${id}: body does not carry its id and message`);
    // A second POST after the dot answered is allowed only where the sender never saw that answer in
    // time: an attempt its record logs as a timeout (an unknown outcome, DEL-PIPE-21). On a loaded
    // machine this receiver, in the test's own busy process, can answer after the sender gave up.
    const unknownOutcomes = timeoutsLogged(record);
    unknownTotal += unknownOutcomes;
    if (receiver.gone.has(id)) {
      if (tries.length - 1 > unknownOutcomes) problems.push(`${id}: 404 event had ${tries.length} attempts`);
      if (record?.status !== 'failed' || record.attempts !== tries.length || record.lastHttpStatus !== 404 || record.lastError !== 'http_4xx') {
        problems.push(`${id}: 404 event record ${JSON.stringify(record)}`);
      }
      if (deadLetterReasons.get(id) !== 'http_4xx') problems.push(`${id}: 404 event not dead-lettered with http_4xx`);
      if (record?.status === 'failed') failed++;
    } else {
      const accepts = tries.filter((t) => t.verdict === 'accepted' || t.verdict === 'duplicate').length;
      if (accepts < 1 || accepts - 1 > unknownOutcomes) problems.push(`${id}: accepted ${accepts} times`);
      const last = tries.at(-1)!.verdict;
      if (last !== 'accepted' && !(last === 'duplicate' && unknownOutcomes > 0)) problems.push(`${id}: last attempt was ${last}`);
      if (record?.status !== 'delivered' || record.attempts !== tries.length) {
        problems.push(`${id}: record ${JSON.stringify(record)} after ${tries.length} attempts`);
      }
      if (deadLetterReasons.has(id)) problems.push(`${id}: delivered event is among the dead letters`);
      if (record?.status === 'delivered') delivered++;
    }
    // After a hang the next attempt starts only once the sender gave the hung one up (its deadline
    // ran out and it closed the connection): never two attempts of one event at once. Compared
    // with the receiver's own close event, not with a duration, so a loaded machine that delivers
    // the hung request late cannot make it look early.
    for (let i = 0; i + 1 < tries.length; i++) {
      const hungTry = tries[i]!;
      if (hungTry.verdict !== 'hang') continue;
      if (hungTry.closedAt === undefined || tries[i + 1]!.at < hungTry.closedAt) problems.push(`${id}: retried while the hung attempt was still open`);
    }
  }
  const foreign = [...receiver.byId.keys()].filter((id) => !sent.has(id));
  if (foreign.length) problems.push(`${foreign.length} webhook-ids that were never sent`);
  const badSignatures = receiver.attempts.filter((a) => !a.signatureValid).length;
  const workerErrors = server.stderr.filter((line) => line.includes('delivery_worker_error')).length;

  const byKind = Object.fromEntries(KINDS.map(({ kind }) => [kind, receiver.attempts.filter((a) => a.verdict === kind).length]));
  const transient = Object.values(byKind).reduce((a, b) => a + b, 0);
  console.log(
    `faults summary: seed=${SEED} events=${EVENTS} accepted=${sent.size} (${[...statuses].map(([s, c]) => `${s}:${c}`).join(',')}) ` +
      `attempts=${receiver.attempts.length} transient=${transient} (503=${byKind.http_503} 500=${byKind.http_500} reset=${byKind.reset} hang=${byKind.hang}) ` +
      `gone404=${receiver.gone.size} delivered=${delivered} failed=${failed} deadLetters=${deadLetters.length} ` +
      `duplicates=${receiver.attempts.filter((a) => a.verdict === 'duplicate').length} unknownOutcomes=${unknownTotal} badSignatures=${badSignatures} workerErrors=${workerErrors} ` +
      `lost=${EVENTS - delivered - failed} sendMs=${sendMs} durationMs=${durationMs}`,
  );

  assert.deepEqual(problems.slice(0, 20), [], `${problems.length} problems`);
  assert.equal(badSignatures, 0, 'every attempt carries a valid signature over its raw bytes');
  assert.equal(delivered + failed, EVENTS, '0 lost');
  assert.equal(failed, receiver.gone.size);
  assert.equal(deadLetters.length, receiver.gone.size, 'exactly the 404 events are dead-lettered');
  assert.ok(receiver.gone.size > 0 && transient > 0 && byKind.hang! > 0 && byKind.reset! > 0, 'every fault kind was exercised');
  assert.equal(workerErrors, 0, 'no delivery worker errors');
});
