/**
 * The local runtime at scale: sustained sends per second through `POST /v1/messages` (the REST
 * send) from 64 concurrent senders, each sending its next message as soon as the last is
 * answered, to a subscribed loopback dot that answers at once. The server is `npm start`'s (the
 * built server) in a child process of its own (server-process.ts), so it and the senders do not
 * share an event loop.
 * A send counts when it is answered `200 "delivered"` (durable: the event and its job are
 * committed and fsynced before the attempt); every event id answered is then looked up at the
 * receiver, and a delivered one that never arrived fails the section.
 *
 * The floor, measured in the same run and driven the same way: floor-server.ts, a bare
 * `node:http` server in its own child process that makes one LMDB write and the same signed
 * webhook POST per request. Rounds alternate the two (the side that goes first alternates too),
 * each a short warm-up and then a few seconds of load; the figure is the median over rounds, the
 * answer times (p50, p99) pooled over them. Target: at least 0.5× the floor's sends per second.
 *
 * Deliberately not here: the MCP `send_to_dot` path (the loopback section times single sends),
 * a slow or failing dot (queued sends are counted and noted, not measured), a database with
 * history (the scale section), and any network beyond 127.0.0.1.
 */
import http from 'node:http';
import { performance } from 'node:perf_hooks';
import { startReceiver, subscribe, type Receiver, type RpcCall } from '../sends';
import { cpuTicksOf, startServerProcess, untilIdle, type ServerProcess } from '../server-process';
import { ms, newApiKey, newSecret, perSecond, progress, quantile, ratio, ratioOf, rpcBody, rpcHeaders, stats, throughputStats, type Section } from '../support';

const SENDERS = 64;
const ROUNDS = 3;
const LOAD_MS = 3_000;
const WARMUP_MS = 1_000;
/** How long a send answered "queued" may take to reach the receiver (the worker retries it). */
const QUEUED_ARRIVAL_MS = 15_000;
const TARGET = 0.5;

interface Load {
  /** Sends answered 200 "delivered" per second, over the whole load (the last answer included). */
  perSecond: number;
  /** Answer times (ms) of the delivered sends. */
  times: number[];
  delivered: string[];
  queued: string[];
  /** Answers that were neither: status and the start of the body, at most a few. */
  other: string[];
  otherCount: number;
  /** CPU time the server process used over the load, per delivered send (ms; NaN without /proc). */
  cpuMsPerSend: number;
}

/** `SENDERS` loops of POST /v1/messages on keep-alive connections until `durationMs` has gone by. */
async function drive(origin: string, pid: number, key: string, durationMs: number, tag: string): Promise<Load> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: SENDERS });
  const load: Load = { perSecond: 0, times: [], delivered: [], queued: [], other: [], otherCount: 0, cpuMsPerSend: Number.NaN };
  let counter = 0;
  const sendOnce = () =>
    new Promise<void>((done, fail) => {
      const body = JSON.stringify({ message: `throughput ${tag} ${counter++}` });
      const t0 = performance.now();
      const req = http.request(
        `${origin}/v1/messages`,
        {
          method: 'POST',
          agent,
          headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) },
          signal: AbortSignal.timeout(20_000),
        },
        (res) => {
          let text = '';
          res.setEncoding('utf8').on('data', (c: string) => (text += c));
          res.once('error', fail);
          res.once('end', () => {
            const elapsed = performance.now() - t0;
            let answer: { eventId?: string; status?: string } = {};
            try {
              answer = JSON.parse(text);
            } catch {
              // Counted below as another answer.
            }
            if (res.statusCode === 200 && answer.status === 'delivered' && answer.eventId) {
              load.delivered.push(answer.eventId);
              load.times.push(elapsed);
            } else if (res.statusCode === 202 && answer.status === 'queued' && answer.eventId) load.queued.push(answer.eventId);
            else {
              load.otherCount++;
              if (load.other.length < 3) load.other.push(`${res.statusCode} ${text.slice(0, 120)}`);
            }
            done();
          });
        },
      );
      req.once('error', fail);
      req.end(body);
    });
  const ticksBefore = cpuTicksOf(pid);
  const started = performance.now();
  const deadline = started + durationMs;
  try {
    await Promise.all(
      Array.from({ length: SENDERS }, async () => {
        while (performance.now() < deadline) await sendOnce();
      }),
    );
  } finally {
    agent.destroy();
  }
  load.perSecond = load.delivered.length / ((performance.now() - started) / 1000);
  // Clock ticks are 10 ms; a round's few thousand sends make that a fine grain.
  load.cpuMsPerSend = ((cpuTicksOf(pid) - ticksBefore) * 10) / load.delivered.length;
  return load;
}

/** Waits until every id has arrived at the receiver (queued ones may take a retry); returns those that did not. */
async function missing(receiver: Receiver, delivered: readonly string[], queued: readonly string[]): Promise<{ delivered: string[]; queued: string[] }> {
  const notYet = (ids: readonly string[]) => ids.filter((id) => !receiver.arrivals.has(id));
  const deadline = performance.now() + QUEUED_ARRIVAL_MS;
  while (notYet(queued).length > 0 && performance.now() < deadline) await new Promise((done) => setTimeout(done, 100));
  const out = { delivered: notYet(delivered), queued: notYet(queued) };
  for (const id of [...delivered, ...queued]) receiver.arrivals.delete(id);
  return out;
}

export const throughputSection: Section = {
  key: 'throughput',
  title: `REST sends per second, ${SENDERS} senders: local runtime vs a bare node:http + LMDB floor`,
  budgetMs: 150_000,
  async run(bench) {
    const receiver = await startReceiver();
    bench.cleanup(() => receiver.close());
    const key = newApiKey();
    const servers: Record<'subject' | 'floor', ServerProcess> = {
      subject: await startServerProcess({ MCP_API_KEY: key, DMDOT_STATE_DIR: bench.tempDir('throughput-subject'), DMDOT_ALLOW_LOOPBACK_CALLBACKS: '1' }),
      floor: await startServerProcess(
        { FLOOR_STATE_DIR: bench.tempDir('throughput-floor'), FLOOR_RECEIVER_URL: receiver.url('/floor'), FLOOR_SECRET: newSecret() },
        undefined,
        ['--import', 'tsx', 'test/bench/floor-server.ts'],
      ),
    };
    bench.cleanup(
      () => servers.subject.stop(),
      () => servers.floor.stop(),
    );
    const call: RpcCall = async (method, params, name) => {
      const response = await fetch(`${servers.subject.origin}/mcp`, {
        method: 'POST',
        headers: rpcHeaders(method, key, name),
        body: rpcBody(method, params),
        signal: AbortSignal.timeout(10_000),
      });
      return { status: response.status, body: (await response.json()) as any };
    };
    await subscribe(call, receiver, '/hook');

    const sides = ['subject', 'floor'] as const;
    const rounds = { subject: [] as Load[], floor: [] as Load[] };
    const lost = { subject: 0, floor: 0 };
    const queuedLate = { subject: 0, floor: 0 };
    const runSide = async (side: (typeof sides)[number], durationMs: number, record: boolean) => {
      await untilIdle([servers.subject.pid, servers.floor.pid]);
      const load = await drive(servers[side].origin, servers[side].pid, key, durationMs, side);
      if (load.otherCount > 0 && load.delivered.length === 0)
        throw new Error(
          `${side}: no send was delivered; answers such as ${load.other.join(' | ')}; server stderr: ${servers[side].stderr().trim().slice(-300)}`,
        );
      const gone = await missing(receiver, load.delivered, load.queued);
      if (gone.delivered.length > 0) throw new Error(`${side}: ${gone.delivered.length} send(s) answered "delivered" never reached the receiver`);
      if (!record) return;
      lost[side] += gone.queued.length;
      queuedLate[side] += load.queued.length;
      rounds[side].push(load);
      progress(`throughput: ${side} ${perSecond(load.perSecond)}, ${load.delivered.length} delivered, ${load.queued.length} queued, ${load.otherCount} other`);
    };
    for (const side of sides) await runSide(side, WARMUP_MS, false);
    for (let round = 0; round < ROUNDS; round++) {
      for (const side of round % 2 === 0 ? sides : ([...sides].reverse() as (typeof sides)[number][])) await runSide(side, LOAD_MS, true);
    }

    const of = (side: (typeof sides)[number]) => {
      const rate = throughputStats(rounds[side].map((l) => l.perSecond));
      const times = rounds[side].flatMap((l) => l.times).sort((a, b) => a - b);
      return {
        rate,
        p50: quantile(times, 0.5),
        p99: quantile(times, 0.99),
        delivered: rounds[side].reduce((n, l) => n + l.delivered.length, 0),
        other: rounds[side].reduce((n, l) => n + l.otherCount, 0),
        sample: rounds[side].flatMap((l) => l.other).slice(0, 2),
        cpuMsPerSend: stats(rounds[side].map((l) => l.cpuMsPerSend)),
      };
    };
    const subject = of('subject');
    const floor = of('floor');
    bench.row({
      name: `POST /v1/messages, ${SENDERS} concurrent senders, dot answers at once: local runtime sends/s (rounds=${subject.rate.n}; target ≥ ${TARGET}×)`,
      median: perSecond(subject.rate.median).replace('ops/s', 'sends/s'),
      p90: perSecond(subject.rate.p90).replace('ops/s', 'sends/s'),
      tail: 'slowest round',
      baseline: 'floor: bare node:http, one LMDB write + the same webhook POST',
      baselineMedian: perSecond(floor.rate.median).replace('ops/s', 'sends/s'),
      ratio: ratio(subject.rate.median, floor.rate.median),
    });
    bench.row({
      name: `POST /v1/messages under that load: answer time, local runtime (n=${subject.delivered})`,
      median: ms(subject.p50),
      p90: ms(subject.p99),
      tail: 'p99',
      baseline: `floor (n=${floor.delivered}), p99 ${ms(floor.p99)}`,
      baselineMedian: ms(floor.p50),
      ratio: ratio(subject.p50, floor.p50),
    });
    // What a send costs the server in CPU: a busy machine stretches every round's wall time, the
    // floor's more than the server's, and moves the CPU each send uses less (it still rises, as
    // fewer sends share each commit).
    bench.row({
      name: `POST /v1/messages under that load: server CPU per delivered send, local runtime (median round; informational)`,
      median: ms(subject.cpuMsPerSend.median),
      p90: ms(subject.cpuMsPerSend.p90),
      tail: 'round p90',
      baseline: 'floor, CPU per send',
      baselineMedian: ms(floor.cpuMsPerSend.median),
      ratio: ratio(subject.cpuMsPerSend.median, floor.cpuMsPerSend.median),
    });
    bench.record({
      throughput: {
        senders: SENDERS,
        rounds: ROUNDS,
        loadMs: LOAD_MS,
        target: TARGET,
        sendsPerSecond: subject.rate.median,
        floorSendsPerSecond: floor.rate.median,
        ratio: ratioOf(subject.rate.median, floor.rate.median),
        perRound: { subject: rounds.subject.map((l) => l.perSecond), floor: rounds.floor.map((l) => l.perSecond) },
        answerMs: { p50: subject.p50, p99: subject.p99 },
        cpuMsPerSend: { subject: subject.cpuMsPerSend.median, floor: floor.cpuMsPerSend.median },
        floorAnswerMs: { p50: floor.p50, p99: floor.p99 },
        delivered: { subject: subject.delivered, floor: floor.delivered },
        queued: queuedLate,
        queuedNeverArrived: lost,
        otherAnswers: { subject: subject.other, floor: floor.other },
      },
    });
    bench.note(
      `throughput: ${ROUNDS} rounds of ${LOAD_MS / 1000} s per side after a ${WARMUP_MS / 1000} s warm-up; every delivered send was found at the receiver. ` +
        `Queued answers (not counted as sends/s): ${queuedLate.subject} local runtime, ${queuedLate.floor} floor; of those, ${lost.subject} did not arrive within ${QUEUED_ARRIVAL_MS / 1000} s.` +
        (subject.other + floor.other > 0 ? ` Other answers: ${subject.other} + ${floor.other}, e.g. ${[...subject.sample, ...floor.sample].join(' | ')}.` : ''),
    );
  },
};
