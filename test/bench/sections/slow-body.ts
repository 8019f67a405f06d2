/**
 * Slow bodies with forged signatures against the pup door of the local runtime, run as its own
 * process (server-process.ts: `node lambda/local/start.mjs`, PORT=0, a pup signing
 * secret in PUP_SIGNING_SECRETS), so its memory is its own: RSS is VmRSS of /proc/<pid>/status,
 * sampled every 50 ms.
 *
 * 1. The attack: 300 connections at once, each a `POST /pup/mcp` declaring 1 MiB (the largest body
 *    the door reads) with well-formed signature headers, a current timestamp and a wrong
 *    signature; each sends all but the last 64 bytes at once and then one byte every 2 s. Reported:
 *    the server's peak RSS increase over its RSS just before, the time from each connection's
 *    start to its close (the maximum is the figure), and how each ended (503 busy, 408, another
 *    status, closed without an answer). Targets: under 150 MB, every connection closed within 10 s.
 *    Then, once they are all closed, one forged POST with a small body: the door should be back to
 *    refusing it with 401 (a 503 busy means the slots of the timed-out bodies were never freed).
 * 2. On a second, fresh server (so it inherits neither the first one's heap nor its state):
 *    authenticated `tools/list` (POST /mcp with the API key) while 8 clients post 1 MiB bodies with
 *    bogus signatures as fast as they are answered, against `tools/list` without them, in
 *    alternating rounds: the p50 of each and their ratio.
 *
 * Deliberately not here: attacks on other routes (their bodies are read only after the API key
 * check), TLS, and many source addresses (every connection comes from 127.0.0.1).
 */
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import net from 'node:net';
import { performance } from 'node:perf_hooks';
import { MAX_CONNECTIONS, MAX_PUP_BODIES } from '../../../lambda/local/runtime';
import { Limits, PupRoutes } from '../../../lambda/core/protocol';
import { startServerProcess, type ServerProcess } from '../server-process';
import { ms, newApiKey, newSecret, quantile, ratio, ratioOf, rpcBody, rpcHeaders, sleep, stats, type Section } from '../support';

const CONNECTIONS = 300;
const DECLARED_BYTES = Limits.requestBodyMaxBytes;
const HELD_BACK_BYTES = 64;
const TRICKLE_MS = 2_000;
/** A connection still open this long after its start is destroyed by the client and counted as such. */
const GIVE_UP_MS = 30_000;
const RSS_SAMPLE_MS = 50;
const LOAD_CLIENTS = 8;

type Ending = 'busy503' | 'timeout408' | 'other' | 'closedWithoutAnswer' | 'stillOpenAtGiveUp';

interface Connection {
  ending: Ending;
  status?: number;
  /** From the connection's start to its close. */
  closedAfterMs: number;
}

/** Signature headers that pass every check that can be made before the body: only the HMAC is wrong. */
function forgedHeaders(port: number, contentLength: number): string {
  const id = `msg_${randomBytes(12).toString('hex')}`;
  return [
    `POST ${PupRoutes.mcp} HTTP/1.1`,
    `Host: 127.0.0.1:${port}`,
    'Content-Type: application/json',
    `Content-Length: ${contentLength}`,
    `webhook-id: ${id}`,
    `webhook-timestamp: ${Math.floor(Date.now() / 1000)}`,
    `webhook-signature: v1,${randomBytes(32).toString('base64')}`,
    '',
    '',
  ].join('\r\n');
}

/** A 1 MiB JSON-RPC request text (a tools/list with padding), as bytes. */
function paddedBody(bytes: number): Buffer {
  const head = '{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"pad":"';
  const tail = '"}}';
  return Buffer.from(head + 'x'.repeat(bytes - head.length - tail.length) + tail, 'utf8');
}

function slowConnection(port: number, body: Buffer): Promise<Connection> {
  return new Promise((done) => {
    const started = performance.now();
    const socket = net.connect({ host: '127.0.0.1', port });
    let answer = '';
    let trickle: NodeJS.Timeout | undefined;
    let sent = body.byteLength - HELD_BACK_BYTES;
    let settled = false;
    const giveUp = setTimeout(() => finish(true), GIVE_UP_MS);
    function finish(gaveUp = false) {
      if (settled) return;
      settled = true;
      clearTimeout(giveUp);
      clearInterval(trickle);
      const closedAfterMs = performance.now() - started;
      socket.destroy();
      const status = /^HTTP\/1\.[01] (\d{3})/.exec(answer)?.[1];
      const code = status === undefined ? undefined : Number(status);
      const ending: Ending = gaveUp
        ? 'stillOpenAtGiveUp'
        : code === 503
          ? 'busy503'
          : code === 408
            ? 'timeout408'
            : code === undefined
              ? 'closedWithoutAnswer'
              : 'other';
      done({ ending, closedAfterMs, ...(code !== undefined ? { status: code } : {}) });
    }
    socket.setEncoding('latin1');
    socket.on('data', (chunk: string) => {
      if (answer.length < 2_000) answer += chunk;
    });
    socket.on('error', () => undefined);
    socket.on('close', () => finish());
    socket.on('connect', () => {
      socket.write(forgedHeaders(port, body.byteLength));
      socket.write(body.subarray(0, sent));
      trickle = setInterval(() => {
        if (sent < body.byteLength && !socket.destroyed) socket.write(body.subarray(sent, ++sent));
      }, TRICKLE_MS);
    });
  });
}

/** Samples the server's RSS until stopped; returns the samples. */
function sampleRss(server: ServerProcess): { stop(): number[] } {
  const samples: number[] = [];
  const take = () => {
    const rss = server.rssBytes();
    if (Number.isFinite(rss)) samples.push(rss);
  };
  take();
  const timer = setInterval(take, RSS_SAMPLE_MS);
  return {
    stop() {
      clearInterval(timer);
      take();
      return samples;
    },
  };
}

/** An authenticated tools/list on the server's /mcp; throws unless it is answered with the tool list. */
async function toolsListOn(origin: string, key: string): Promise<void> {
  const response = await fetch(`${origin}/mcp`, {
    method: 'POST',
    headers: rpcHeaders('tools/list', key),
    body: rpcBody('tools/list'),
    signal: AbortSignal.timeout(10_000),
  });
  const body = (await response.json()) as any;
  if (response.status !== 200 || !Array.isArray(body?.result?.tools))
    throw new Error(`tools/list answered ${response.status} ${JSON.stringify(body).slice(0, 160)}`);
}

/** One POST /pup/mcp of the whole `body` with a forged signature; its status and error code (0: no answer). */
function bogusPost(port: number, body: Buffer, agent?: http.Agent): Promise<{ status: number; code?: string }> {
  return new Promise((done) => {
    const request = http.request(
      {
        host: '127.0.0.1',
        port,
        method: 'POST',
        path: PupRoutes.mcp,
        ...(agent ? { agent } : {}),
        headers: {
          'content-type': 'application/json',
          'content-length': String(body.byteLength),
          'webhook-id': `msg_${randomBytes(12).toString('hex')}`,
          'webhook-timestamp': String(Math.floor(Date.now() / 1000)),
          'webhook-signature': `v1,${randomBytes(32).toString('base64')}`,
        },
        timeout: 10_000,
      },
      (response) => {
        const chunks: Buffer[] = [];
        response.on('data', (c: Buffer) => chunks.push(c));
        response.once('end', () => {
          let code: string | undefined;
          try {
            code = (JSON.parse(Buffer.concat(chunks).toString('utf8')) as { error?: { code?: string } }).error?.code;
          } catch {
            code = undefined;
          }
          done({ status: response.statusCode ?? 0, ...(code ? { code } : {}) });
        });
        response.once('error', () => done({ status: 0 }));
      },
    );
    request.once('timeout', () => request.destroy());
    request.once('error', () => done({ status: 0 }));
    request.end(body);
  });
}

const mb = (bytes: number) => (Number.isFinite(bytes) ? `${(bytes / 1e6).toFixed(1)} MB` : 'n/a');

export const slowBodySection: Section = {
  key: 'slowbody',
  title: 'pup door under slow forged bodies (server process)',
  budgetMs: 120_000,
  async run(bench) {
    if (process.platform !== 'linux') throw new Error('reads the server RSS from /proc/<pid>/status: Linux only');
    const key = newApiKey();
    const toolsList = (server: ServerProcess) => toolsListOn(server.origin, key);
    // Each part gets a fresh server: the second must not inherit the first's heap (or its state).
    const startServer = async (name: string) => {
      const server = await startServerProcess({ DMDOT_STATE_DIR: bench.tempDir(`slowbody-${name}`), MCP_API_KEY: key, PUP_SIGNING_SECRETS: newSecret() });
      bench.cleanup(() => server.stop());
      // Warm: module code, the app, the first body read; then let the heap settle.
      for (let i = 0; i < 30; i++) await toolsList(server);
      await sleep(1_000);
      return server;
    };
    const body = paddedBody(DECLARED_BYTES);

    // 1. The attack.
    const server = await startServer('attack');
    const before = stats([0, 1, 2, 3, 4].map(() => server.rssBytes())).median;
    const rss = sampleRss(server);
    const attackStarted = performance.now();
    const connections = await Promise.all(Array.from({ length: CONNECTIONS }, () => slowConnection(server.port, body)));
    const attackMs = performance.now() - attackStarted;
    await sleep(500);
    const rssSamples = rss.stop();
    const peak = Math.max(...rssSamples);
    const increase = peak - before;
    const closes = stats(connections.map((c) => c.closedAfterMs));
    const maxClose = Math.max(...connections.map((c) => c.closedAfterMs));
    const endings: Record<Ending, number> = { busy503: 0, timeout408: 0, other: 0, closedWithoutAnswer: 0, stillOpenAtGiveUp: 0 };
    for (const c of connections) endings[c.ending]++;
    const otherStatuses = [...new Set(connections.filter((c) => c.ending === 'other').map((c) => c.status))];
    // Afterwards: the API key routes must still answer, and the pup door should be back to refusing
    // a forged signature with 401 (a 503 busy here means slots of timed-out bodies were never freed).
    await sleep(2_000);
    await toolsList(server);
    const afterAttack = await bogusPost(server.port, Buffer.from('{"jsonrpc":"2.0","id":1,"method":"tools/list"}'));
    const rssAfter = server.rssBytes();

    bench.row({
      name: `slow forged bodies: server RSS peak increase, ${CONNECTIONS} connections × ${DECLARED_BYTES / 2 ** 20} MiB declared, 1 byte / ${TRICKLE_MS / 1000} s (target < 150 MB)`,
      median: mb(increase),
      p90: '-',
      baseline: `server RSS just before (peak ${mb(peak)}; ${rssSamples.length} samples)`,
      baselineMedian: mb(before),
      ratio: ratio(peak, before),
      ...(increase >= 150 * 1e6 ? { missed: `an increase of ${mb(increase)} against < 150 MB` } : {}),
    });
    bench.row({
      name: `slow forged bodies: connection start → closed (n=${closes.n}; max ${ms(maxClose)}; target: all within 10 s)`,
      median: ms(closes.median),
      p90: ms(closes.p90),
      baseline: 'target',
      baselineMedian: ms(10_000),
      ratio: ratio(maxClose, 10_000),
      ...(maxClose > 10_000 ? { missed: `the slowest closed after ${ms(maxClose)}, against all within 10 s` } : {}),
    });
    bench.row({
      name: 'pup door 2.5 s after the last attack connection closed: a forged signature on a small body is answered (401 expected)',
      median: String(afterAttack.status),
      p90: '-',
      baseline: `${afterAttack.code ?? 'no error code'}; server RSS then`,
      baselineMedian: mb(rssAfter),
      ratio: '-',
    });
    bench.row({
      name: `slow forged bodies: how the ${CONNECTIONS} connections ended (server caps: ${MAX_CONNECTIONS} connections, ${MAX_PUP_BODIES} pup bodies)`,
      median: `503 busy ${endings.busy503}, 408 ${endings.timeout408}`,
      p90: '-',
      baseline: `other status ${endings.other}${otherStatuses.length ? ` (${otherStatuses.join(', ')})` : ''}, closed without answer ${endings.closedWithoutAnswer}`,
      baselineMedian: `open at ${GIVE_UP_MS / 1000} s: ${endings.stillOpenAtGiveUp}`,
      ratio: '-',
    });

    await server.stop();

    // 2. tools/list while 8 clients post 1 MiB bodies with bogus signatures, vs without them.
    const loadServer = await startServer('load');
    const agent = new http.Agent({ keepAlive: true, maxSockets: LOAD_CLIENTS });
    bench.cleanup(() => agent.destroy());
    const loadStatuses: Record<string, number> = {};
    let loading = false;
    let clients: Promise<void>[] = [];
    const startLoad = async () => {
      loading = true;
      clients = Array.from({ length: LOAD_CLIENTS }, async () => {
        while (loading) {
          const answer = await bogusPost(loadServer.port, body, agent);
          loadStatuses[answer.status] = (loadStatuses[answer.status] ?? 0) + 1;
        }
      });
      await sleep(200); // every client has a body on its way
    };
    const stopLoad = async () => {
      loading = false;
      await Promise.all(clients);
    };
    bench.cleanup(stopLoad);

    const timed = async (into: number[], n: number) => {
      for (let i = 0; i < n; i++) {
        const t0 = performance.now();
        await toolsList(loadServer);
        into.push(performance.now() - t0);
      }
    };
    const quiet: number[] = [];
    const loaded: number[] = [];
    const rounds = 6;
    const perRound = 40;
    const deadline = performance.now() + 40_000;
    for (let round = 0; round < rounds && performance.now() < deadline; round++) {
      const order = round % 2 === 0 ? (['quiet', 'loaded'] as const) : (['loaded', 'quiet'] as const);
      for (const side of order) {
        if (side === 'quiet') await timed(quiet, perRound);
        else {
          await startLoad();
          await timed(loaded, perRound);
          await stopLoad();
        }
      }
    }
    const quietStats = stats(quiet);
    const loadedStats = stats(loaded);
    bench.timeRow(
      `tools/list while ${LOAD_CLIENTS} clients post ${DECLARED_BYTES / 2 ** 20} MiB bodies with bogus signatures to ${PupRoutes.mcp}`,
      loadedStats,
      'tools/list, no such clients',
      quietStats,
    );

    bench.record({
      slowBodyAttack: {
        connections: CONNECTIONS,
        declaredBytes: DECLARED_BYTES,
        sentAtOnceBytes: DECLARED_BYTES - HELD_BACK_BYTES,
        trickleEveryMs: TRICKLE_MS,
        rss: `server child process (node lambda/local/start.mjs, the built server), VmRSS of /proc/<pid>/status sampled every ${RSS_SAMPLE_MS} ms`,
        rssBeforeBytes: before,
        rssPeakBytes: peak,
        peakIncreaseBytes: increase,
        peakIncreaseMB: increase / 1e6,
        allClosedWithinMs: maxClose,
        rssAfterBytes: rssAfter,
        answerAfterAttack: afterAttack,
        closeMedianMs: closes.median,
        closeP90Ms: closes.p90,
        attackMs,
        endings,
        ...(otherStatuses.length ? { otherStatuses } : {}),
        targets: { peakIncreaseMB: 150, allClosedWithinMs: 10_000 },
        toolsList: {
          loadClients: LOAD_CLIENTS,
          p50Ms: loadedStats.median,
          p90Ms: loadedStats.p90,
          baselineP50Ms: quietStats.median,
          baselineP90Ms: quietStats.p90,
          ratio: ratioOf(loadedStats.median, quietStats.median),
          samples: loadedStats.n,
          bogusPostAnswers: loadStatuses,
        },
      },
    });
    bench.note(
      `slowbody: the server runs as its own process (RSS from /proc/<pid>/status); every connection comes from 127.0.0.1; during the tools/list rounds the ${LOAD_CLIENTS} posting clients were answered ${Object.entries(
        loadStatuses,
      )
        .map(([status, n]) => `${status} ×${n}`)
        .join(', ')}. Close times p50 ${ms(
        quantile(
          [...connections.map((c) => c.closedAfterMs)].sort((a, b) => a - b),
          0.5,
        ),
      )}, all ${CONNECTIONS} settled ${ms(attackMs)} after the first connect.`,
    );
  },
};
