/**
 * The send figures that the loopback and Lambda sections share: a dot's receiver on 127.0.0.1
 * (answers the subscription challenge, notes when each event arrives) and `measureSends`, which
 * subscribes it and times send_to_dot against plain POSTs to the same receiver, in alternating
 * rounds.
 *
 * Deliberately not here: signature checks at the receiver (the tests do them) and any network
 * beyond 127.0.0.1.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { performance } from 'node:perf_hooks';
import { EVENT_NAME, TOOL_NAME } from '../../lambda/core/protocol';
import { newSecret, ms, ratio, stats, type Bench } from './support';

export interface Receiver {
  url(path: string): string;
  /** performance.now() at which each event id arrived. */
  arrivals: Map<string, number>;
  /** Events received, challenges excluded. */
  count(): number;
  close(): Promise<void>;
}

export async function startReceiver(): Promise<Receiver> {
  const arrivals = new Map<string, number>();
  let count = 0;
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      let json: any;
      try {
        json = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      } catch {
        json = undefined;
      }
      if (json?.type === 'verification') {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ challenge: json.challenge }));
        return;
      }
      if (typeof json?.eventId === 'string') {
        arrivals.set(json.eventId, performance.now());
        count++;
      }
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{}');
    });
  });
  server.keepAliveTimeout = 10_000;
  await new Promise<void>((done, fail) => {
    server.once('error', fail);
    server.listen(0, '127.0.0.1', () => done());
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: (path: string) => `http://127.0.0.1:${port}${path}`,
    arrivals,
    count: () => count,
    close: () =>
      new Promise<void>((done) => {
        server.close(() => done());
        server.closeAllConnections();
      }),
  };
}

export type RpcCall = (method: string, params: Record<string, unknown>, name?: string) => Promise<{ status: number; body: any }>;

/** Subscribes the receiver (at `path`) through `call`; throws with the answer when it is refused. */
export async function subscribe(call: RpcCall, receiver: Receiver, path = '/hook'): Promise<string> {
  const subscribed = await call('events/subscribe', {
    name: EVENT_NAME,
    arguments: {},
    delivery: { mode: 'webhook', url: receiver.url(path), secret: newSecret() },
  });
  const id = subscribed.body?.result?.id;
  if (typeof id !== 'string') throw new Error(`subscribe failed: ${subscribed.status} ${JSON.stringify(subscribed.body).slice(0, 200)}`);
  return id;
}

/** One send_to_dot; throws unless it was answered "delivered". Returns the event id. */
export async function sendOnce(call: RpcCall, message: string): Promise<string> {
  const { status, body } = await call('tools/call', { name: TOOL_NAME, arguments: { message } }, TOOL_NAME);
  const outcome = body?.result?.structuredContent;
  if (outcome?.status !== 'delivered') throw new Error(`send_to_dot was not delivered: ${status} ${JSON.stringify(body).slice(0, 200)}`);
  return outcome.eventId as string;
}

/**
 * Subscribes the receiver, then alternates batches of plain POSTs to it (the baseline) and
 * send_to_dot calls; records, per send, the time to the "delivered" answer and to the event's
 * arrival at the receiver. `path` names the rows and the results.json fields. `betweenSends`, when
 * given, runs after each send, outside its timing: what the runtime does before it takes the next
 * request (a Lambda environment with the after-response extension takes its next invocation only
 * once the last one's work has settled).
 */
export async function measureSends(
  bench: Bench,
  path: 'local' | 'lambda',
  call: RpcCall,
  receiver: Receiver,
  betweenSends?: () => Promise<unknown>,
): Promise<void> {
  await subscribe(call, receiver);

  const roundTrips: number[] = [];
  const arrivals: number[] = [];
  const baselineTrips: number[] = [];
  let notDelivered = 0;
  let counter = 0;
  const send = async (record: boolean) => {
    const t0 = performance.now();
    const { body } = await call('tools/call', { name: TOOL_NAME, arguments: { message: `bench message ${counter++}` } }, TOOL_NAME);
    const t1 = performance.now();
    await betweenSends?.();
    const outcome = body.result?.structuredContent;
    if (outcome?.status !== 'delivered') {
      notDelivered++;
      if (notDelivered > 3) throw new Error(`send_to_dot was not delivered: ${JSON.stringify(body).slice(0, 200)}`);
      return;
    }
    const arrived = receiver.arrivals.get(outcome.eventId);
    receiver.arrivals.delete(outcome.eventId);
    if (!record) return;
    roundTrips.push(t1 - t0);
    if (arrived !== undefined) arrivals.push(arrived - t0);
  };
  const plainPost = async (record: boolean) => {
    const t0 = performance.now();
    const response = await fetch(receiver.url('/baseline'), {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ message: `bench message ${counter++}` }),
      signal: AbortSignal.timeout(10_000),
    });
    await response.arrayBuffer();
    if (record) baselineTrips.push(performance.now() - t0);
  };

  for (let i = 0; i < 3; i++) await send(false);
  for (let i = 0; i < 30; i++) await plainPost(false);
  const deadline = performance.now() + 12_000;
  for (let round = 0; round < 5 && performance.now() < deadline; round++) {
    for (let i = 0; i < 60; i++) await plainPost(true);
    for (let i = 0; i < 8 && performance.now() < deadline; i++) await send(true);
  }
  const baseline = stats(baselineTrips);
  const answered = stats(roundTrips);
  const atReceiver = stats(arrivals);
  const where = path === 'local' ? 'local runtime' : 'MCP Lambda in-process';
  bench.timeRow(`e2e ${where}: send_to_dot → "delivered" answer`, answered, 'plain POST round trip to receiver', baseline);
  bench.timeRow(`e2e ${where}: send_to_dot → event at receiver`, atReceiver, 'plain POST round trip to receiver', baseline);
  bench.row({
    name: `e2e ${where}: "delivered" answer / event at receiver (target ≤ 1.5×)`,
    median: ms(answered.median),
    p90: '-',
    baseline: 'event at receiver',
    baselineMedian: ms(atReceiver.median),
    ratio: ratio(answered.median, atReceiver.median),
  });
  const figures = {
    deliveredAnswerMs: answered.median,
    atReceiverMs: atReceiver.median,
    deliveredRatio: answered.median / atReceiver.median,
    plainPostMs: baseline.median,
    sends: answered.n,
  };
  if (path === 'local') bench.record(figures);
  else bench.record({ lambda: figures });
  if (notDelivered > 0) bench.note(`e2e ${where}: ${notDelivered} send(s) were not answered "delivered" and are left out.`);
}
