/**
 * End-to-end support: starts the real local runtime (`lambda/local/main.ts`, as `npm start` does)
 * in a child process on an ephemeral loopback port, and a real webhook receiver on node:http that
 * keeps every request's raw bytes and verifies Standard Webhooks signatures over them.
 *
 * Deliberately not here: any fake of the server under test. Only loopback addresses are used.
 */
import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { after } from 'node:test';
import { Webhook } from 'standardwebhooks';
import { measureCpuWait } from './cpu-wait';
import { killGroup, spawnGroup, waitUntilReady } from './processes';
import { modernBody, modernHeaders } from './rpc';
import type { EventRecord } from '../../lambda/ports';

export const ROOT = resolve(__dirname, '..', '..');

// Whatever a failing test leaves running is ended when its file's tests are done: a live child
// process or open socket would otherwise keep the test file, and CI, waiting forever. Each server
// runs in a process group of its own (test/support/processes.ts), killed whole.
const running = new Set<ChildProcess>();
const listening = new Set<http.Server>();
after(async () => {
  for (const child of running) killGroup(child);
  for (const server of listening) {
    server.closeAllConnections();
    server.close();
  }
});

export interface RunningServer {
  url: string;
  mcpUrl: string;
  key: string;
  stateDir: string;
  stdout: string[];
  stderr: string[];
  child: ChildProcess;
  stop(signal?: NodeJS.Signals): Promise<number | null>;
  /**
   * Only with `movableClock`: puts the server's clock `ms` ahead of the wall clock (never back),
   * resolved once the server's clock reads so.
   */
  setClockAhead?(ms: number): Promise<void>;
}

export { newSecret } from './webhook-secret';

/**
 * Starts `lambda/local/main.ts` with the loopback switch on and waits for its listening line;
 * `built: true` starts it exactly as `npm start` does (lambda/local/start.mjs, the built bundle);
 * `movableClock`, test/support/clocked-server.ts instead (the same runtime on a clock the test can
 * move ahead: `setClockAhead`).
 */
export async function startServer(
  env: Record<string, string> = {},
  options: { stateDir?: string; key?: string; built?: boolean; movableClock?: boolean } = {},
): Promise<RunningServer> {
  const stateDir = options.stateDir ?? mkdtempSync(join(tmpdir(), 'dmdot-e2e-'));
  const key = options.key ?? randomBytes(24).toString('base64url');
  const entry = options.built
    ? [join(ROOT, 'lambda/local/start.mjs')]
    : ['--import', 'tsx', join(ROOT, options.movableClock ? 'test/support/clocked-server.ts' : 'lambda/local/main.ts')];
  const child = spawnGroup(process.execPath, entry, {
    cwd: ROOT,
    env: {
      PATH: process.env.PATH ?? '',
      HOME: process.env.HOME ?? '',
      HOST: '127.0.0.1',
      PORT: '0',
      DMDOT_STATE_DIR: stateDir,
      DMDOT_ALLOW_LOOPBACK_CALLBACKS: '1',
      MCP_API_KEY: key,
      ...env,
    },
    stdio: options.movableClock ? ['ignore', 'pipe', 'pipe', 'ipc'] : ['ignore', 'pipe', 'pipe'],
  });
  running.add(child);
  const stdout: string[] = [];
  const stderr: string[] = [];
  // Once its pipes are drained too, so the lines a stop prints are read (cli-run.ts says why).
  const exited = new Promise<number | null>((done) =>
    child.once('close', (code) => {
      running.delete(child);
      done(code);
    }),
  );
  child.stderr!.setEncoding('utf8').on(
    'data',
    linesOf((line) => stderr.push(line)),
  );
  let url: string | undefined;
  child.stdout!.setEncoding('utf8').on(
    'data',
    linesOf((line) => {
      stdout.push(line);
      const match = /^dm-dot listening on (http:\/\/\S+)\/mcp$/.exec(line);
      if (match) url ??= match[1]!;
    }),
  );
  // As long as the server is alive and working (a loaded machine makes its start slow, not red).
  try {
    await waitUntilReady({
      what: 'the server to print its listening line',
      child,
      pollMs: 20,
      output: () => stderr.join('\n'),
      onExit: async () => new Error(`server exited with ${await exited}: ${stderr.join('\n')}`),
      probe: () => url,
    });
  } catch (error) {
    killGroup(child);
    throw error;
  }
  return {
    url: url!,
    mcpUrl: `${url}/mcp`,
    key,
    stateDir,
    stdout,
    stderr,
    child,
    async stop(signal: NodeJS.Signals = 'SIGTERM') {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      const code = await exited;
      if (!options.stateDir) rmSync(stateDir, { recursive: true, force: true });
      return code;
    },
    ...(options.movableClock
      ? {
          setClockAhead: (ms: number) =>
            new Promise<void>((done, fail) => {
              const onMessage = (message: { clockAheadMs?: number }) => {
                if (message?.clockAheadMs !== ms) return;
                child.off('message', onMessage);
                done();
              };
              child.on('message', onMessage);
              child.send({ clockAheadMs: ms }, (error) => error && fail(error));
            }),
        }
      : {}),
  };
}

/** Whole lines out of a stream's chunks (a chunk may end in the middle of a line), empty ones skipped. */
function linesOf(onLine: (line: string) => void): (chunk: string) => void {
  let partial = '';
  return (chunk) => {
    const lines = (partial + chunk).split('\n');
    partial = lines.pop()!;
    for (const line of lines) if (line) onLine(line);
  };
}

export interface ReceivedRequest {
  url: string;
  headers: http.IncomingHttpHeaders;
  raw: Buffer;
  json: any;
  at: number;
}

/** `delayMs` answers that much later (a slow dot); 'hang' never answers. */
export type Responder = (request: ReceivedRequest) => { status: number; body?: string; headers?: Record<string, string>; delayMs?: number } | 'hang';

/**
 * A webhook receiver: echoes verification challenges (unless told otherwise) and answers events
 * with the responder's status. Keeps everything it received, raw bytes included.
 */
export async function startReceiver(responder: Responder = () => ({ status: 200 })) {
  const received: ReceivedRequest[] = [];
  let respond = responder;
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const raw = Buffer.concat(chunks);
      let json: unknown;
      try {
        json = JSON.parse(raw.toString('utf8'));
      } catch {
        json = undefined;
      }
      const entry: ReceivedRequest = { url: req.url ?? '', headers: req.headers, raw, json, at: Date.now() };
      received.push(entry);
      const answer = respond(entry);
      if (answer === 'hang') return;
      const reply = () => {
        if (res.destroyed) return;
        res.writeHead(answer.status, { 'content-type': 'application/json', ...(answer.headers ?? {}) });
        res.end(answer.body ?? '{}');
      };
      if (answer.delayMs) setTimeout(reply, answer.delayMs);
      else reply();
    });
  });
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  listening.add(server);
  const port = (server.address() as AddressInfo).port;
  return {
    port,
    url: (path = '/hook') => `http://127.0.0.1:${port}${path}`,
    received,
    events: () => received.filter((r) => r.json && r.json.type === undefined),
    challenges: () => received.filter((r) => r.json?.type === 'verification'),
    setResponder(next: Responder) {
      respond = next;
    },
    close: () =>
      new Promise<void>((done) => {
        listening.delete(server);
        server.close(() => done());
        server.closeAllConnections();
      }),
  };
}

/** A responder that echoes challenges and answers events from a list of statuses, then 200. */
export function echoing(eventStatuses: number[] = [], challenge: 'echo' | 'wrong' = 'echo'): Responder {
  const statuses = [...eventStatuses];
  return (r) => {
    if (r.json?.type === 'verification') {
      return { status: 200, body: JSON.stringify({ challenge: challenge === 'echo' ? r.json.challenge : 'not-the-nonce' }) };
    }
    return { status: statuses.shift() ?? 200 };
  };
}

/** Verifies a received request with the standardwebhooks library over its raw bytes. */
export function verifies(secret: string, r: ReceivedRequest): boolean {
  try {
    new Webhook(secret).verify(r.raw.toString('utf8'), {
      'webhook-id': String(r.headers['webhook-id']),
      'webhook-timestamp': String(r.headers['webhook-timestamp']),
      'webhook-signature': String(r.headers['webhook-signature']),
    });
    return true;
  } catch {
    return false;
  }
}

/**
 * When a wait of `timeoutMs` started now is over: its limit grows by the time this process and
 * the running servers waited for a CPU meanwhile (test/support/cpu-wait.ts), so a loaded machine
 * makes a wait longer, not red.
 */
function waitLimit(timeoutMs: number): () => boolean {
  const started = Date.now();
  const cpuWait = measureCpuWait([process.pid, ...[...running].map((child) => child.pid)]);
  return () => Date.now() - started > timeoutMs + cpuWait.sofar();
}

export async function waitFor<T>(what: string, probe: () => T | undefined | false, timeoutMs = 10_000): Promise<T> {
  const over = waitLimit(timeoutMs);
  for (;;) {
    const value = probe();
    if (value) return value;
    if (over()) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** Raw JSON-RPC over HTTP on the 2026-07-28 era (stateless), for calls no client helper covers. */
export async function rpc(
  server: RunningServer,
  method: string,
  params: Record<string, unknown> = {},
  extraHeaders: Record<string, string> = {},
  options: { key?: string } = {},
) {
  // The server's own key in the URL, as ChatGPT's connector sends it; another key as a bearer token.
  const url = options.key === undefined ? `${server.mcpUrl}?key=${encodeURIComponent(server.key)}` : server.mcpUrl;
  const bearer: Record<string, string> = options.key === undefined ? {} : { authorization: `Bearer ${options.key}` };
  const response = await fetch(url, { method: 'POST', headers: modernHeaders(method, { ...bearer, ...extraHeaders }), body: modernBody(method, params) });
  return { status: response.status, headers: response.headers, body: (await response.json()) as any };
}

/** One `delivery` line of the server's log (lambda/log.ts: JSON on stderr): what became of one attempt at an event. */
export interface DeliveryLine {
  event: 'delivery';
  eventId: string;
  /** Who decided: the send's own attempt, or the worker's run of the event's job. */
  via: 'inline' | 'worker';
  /** delivered, retry, defer, failed, dead_letter_copy, dropped, done, ... (core/delivery.ts decisionLogFields). */
  action: string;
  [field: string]: unknown;
}

/** The server's `delivery` lines about one event, in the order it wrote them. */
export function deliveryLines(server: Pick<RunningServer, 'stderr'>, eventId: string): DeliveryLine[] {
  return server.stderr
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as { event?: string; eventId?: string })
    .filter((line): line is DeliveryLine => line.event === 'delivery' && line.eventId === eventId);
}

/**
 * Waits for the worker's line that ends the event's job (any action but `retry` and `defer`, which
 * keep it): after it no attempt at the event is left to run. A check that something was not sent
 * waits for this, not for a time in which it would have been sent on a machine fast enough.
 */
export async function workerEnded(server: Pick<RunningServer, 'stderr'>, eventId: string, timeoutMs = 20_000): Promise<DeliveryLine> {
  const ending = () => deliveryLines(server, eventId).find((line) => line.via === 'worker' && !['retry', 'defer'].includes(line.action));
  try {
    return await waitFor(`the worker's last line for ${eventId}`, ending, timeoutMs);
  } catch (error) {
    throw new Error(`${(error as Error).message}; its lines so far: ${JSON.stringify(deliveryLines(server, eventId))}`);
  }
}

/** Waits for an async probe to hold. */
export async function until<T>(what: string, probe: () => Promise<T | undefined | false>, timeoutMs = 10_000): Promise<T> {
  const over = waitLimit(timeoutMs);
  for (;;) {
    const value = await probe();
    if (value) return value;
    if (over()) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** One call to the running server's admin routes, with the admin token it wrote (never the API key). */
export async function admin(server: RunningServer, method: string, path: string): Promise<{ status: number; body: any }> {
  const token = readFileSync(join(server.stateDir, 'admin-token'), 'utf8').trim();
  const response = await fetch(`${server.url}${path}`, { method, headers: { authorization: `Bearer ${token}` } });
  return { status: response.status, body: (await response.json()) as any };
}

/** The running server's queue counts: jobs waiting or retrying, and dead letters. */
export async function queueOf(server: RunningServer): Promise<{ queued: number; deadLetters: number }> {
  return (await admin(server, 'GET', '/admin/status')).body.queue;
}

/**
 * How many attempts an event's record logs as a timeout: each is an unknown outcome (the dot may
 * have answered after the sender gave up), the one case that allows one POST more (DEL-PIPE-21).
 */
export function timeoutsLogged(record: Pick<EventRecord, 'log'> | undefined): number {
  return (record?.log ?? []).filter((entry) => 'outcome' in entry && entry.outcome === 'timeout').length;
}

/**
 * The state directory's database opened as the operator does, for a look after the server
 * stopped: every event record and every job. Closed before it returns.
 */
export async function inspectState(stateDir: string) {
  const { openEmbeddedDatabase } = await import('../../lambda/adapters/embedded');
  const db = await openEmbeddedDatabase(stateDir, { role: 'operator' });
  try {
    const events = await db.store.listEvents(Date.now());
    const jobs = await db.jobs.all();
    const deadLetters = await db.jobs.deadLetters();
    return { events, jobs, deadLetters };
  } finally {
    await db.close();
  }
}
