/**
 * The local runtime's node:http server, hardened for a port that may sit behind a tunnel on the
 * internet: node:http requests become the app's view of a request (lambda/http/app.ts), and
 * nothing a slow or hostile client does can hold the server open (docs/decisions.md, "Slow clients
 * on the local runtime"). Each request has a deadline from its first byte to its answer (then
 * `408`, or a closed connection once its answer has begun), and the app's own deadline inside it.
 * Past `maxConnections` descriptors (refused ones still lingering included) a new connection gets a
 * `503` with `Retry-After` and is closed, whatever it sends never given to the app; past twice the
 * cap it is destroyed unanswered.
 *
 * Deliberately not here: routes, auth and limits of the HTTP surface (the app), admin routes
 * (admin-routes.ts), and TLS (a tunnel or proxy terminates it).
 */
import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { runWithDeadline } from '../adapters/deadline';
import { Budgets, mcpDeadline } from '../core/budgets';
import { ClientAborted } from '../core/errors';
import type { App } from '../http/app';
import { type HttpRequest, textOf } from '../http/json';
import { isPupPath } from '../http/pup';

export interface LocalServerOptions {
  host: string;
  port: number;
  maxConnections: number;
  /** Requests that are not the app's (the admin routes): served as they are, under the same deadlines. */
  intercept?: (req: http.IncomingMessage, res: http.ServerResponse) => Promise<void> | undefined;
  /** Called with every request the deadline ended (path only, never the query: it may hold the key). */
  onTimeout?: (path: string) => void;
  /** How long a request may take, by path; default `requestBudgetMs` (tests shorten it). */
  budgetOf?: (path: string) => number;
}

export function pathOf(url: string | undefined): string {
  return (url ?? '/').split(/[?#]/, 1)[0]!;
}

/** How long a request may take, from its first byte to its answer. */
export function requestBudgetMs(path: string): number {
  return isPupPath(path) ? Budgets.localPupRequestMs : Budgets.localRequestMs;
}

const BUSY_BODY = '{"error":{"code":"busy","message":"Too many open connections; try again in a second."}}';
/** The answer past the cap; its Content-Length is its body's byte length, computed, never typed. */
export const BUSY =
  'HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\nConnection: close\r\n' +
  `Content-Length: ${Buffer.byteLength(BUSY_BODY)}\r\n\r\n${BUSY_BODY}`;
/** A refused connection's life after its 503: long enough for the client to read it (destroying at once can reset it first), short enough not to pile up. */
export const REFUSED_LINGER_MS = 1_000;

export type LocalServer = Awaited<ReturnType<typeof startLocalServer>>;

export async function startLocalServer(appOf: () => App, options: LocalServerOptions) {
  // Connections answered 503: node:http has already attached its parser when `connection` fires,
  // so a request they carry is still parsed; it must never reach the app.
  const refused = new WeakSet<Socket>();
  // Requests being served, so that a stop can wait for their answers (a clean stop drains).
  let inFlight = 0;
  let drained: (() => void) | undefined;
  const server = http.createServer((req, res) => {
    if (refused.has(req.socket)) {
      req.resume();
      return;
    }
    inFlight++;
    res.once('close', () => {
      if (--inFlight === 0) drained?.();
    });
    void handle(appOf, options, req, res);
  });
  server.headersTimeout = Budgets.localHeadersMs;
  server.requestTimeout = Budgets.localRequestMs;
  server.keepAliveTimeout = Budgets.localKeepAliveMs;
  (server as http.Server & { connectionsCheckingInterval?: number }).connectionsCheckingInterval = Budgets.localTimeoutCheckMs;

  // Every descriptor the server holds: served connections and refused ones still lingering.
  const open = new Set<Socket>();
  server.on('connection', (socket: Socket) => {
    const full = open.size >= options.maxConnections;
    if (full) refused.add(socket);
    if (open.size >= 2 * options.maxConnections) return socket.destroy();
    open.add(socket);
    socket.once('close', () => open.delete(socket));
    if (!full) return;
    socket.on('error', () => undefined);
    socket.end(BUSY);
    setTimeout(() => socket.destroy(), REFUSED_LINGER_MS).unref();
  });
  // A client that sends garbage gets node's 400 and a closed socket, never an exception.
  server.on('clientError', (_error, socket) => {
    if (socket.writable) socket.end('HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
    else socket.destroy();
  });

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host, () => resolve());
  });
  const port = (server.address() as AddressInfo).port;
  let closing: Promise<void> | undefined;
  return {
    server,
    port,
    // Stops accepting at once, lets every request in flight finish within its own deadline (the
    // longest route budget bounds the wait), then closes whatever connections remain.
    close: () =>
      (closing ??= new Promise<void>((done) => {
        server.close(() => done());
        server.closeIdleConnections();
        const finish = () => {
          clearTimeout(limit);
          drained = undefined;
          server.closeAllConnections();
        };
        const limit = setTimeout(finish, Budgets.localRequestMs).unref();
        if (inFlight === 0) finish();
        else drained = finish;
      })),
  };
}

async function handle(appOf: () => App, options: LocalServerOptions, req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
  const started = Date.now();
  const path = pathOf(req.url);
  const endsAt = started + (options.budgetOf ?? requestBudgetMs)(path);
  const timer = setTimeout(() => {
    options.onTimeout?.(path);
    if (!res.headersSent) {
      res.writeHead(408, { 'content-type': 'application/json', connection: 'close' });
      res.end(JSON.stringify({ error: { code: 'request_timeout', message: 'The request took too long to arrive or to answer; the connection is closed.' } }));
    }
    // Whatever was still trickling in ends here, and whoever is reading the body is told so.
    setImmediate(() => req.destroy(new Error('request deadline passed')));
  }, endsAt - started).unref();
  res.once('close', () => clearTimeout(timer));
  try {
    // The app's requests run under their own deadline: the MCP budget from now, and never past the connection's end.
    const deadline = Math.min(mcpDeadline(Date.now()), endsAt - Budgets.mcpAnswerReserveMs);
    await (options.intercept?.(req, res) ?? runWithDeadline(deadline, () => serve(appOf(), req, res)));
  } catch {
    if (!res.headersSent) {
      res.writeHead(400, { 'content-type': 'application/json', connection: 'close' });
      res.end(JSON.stringify({ error: { code: 'bad_request', message: 'The request could not be read.' } }));
    } else res.destroy();
  }
}

/** Methods a web Request refuses: refused here too (400, "could not be read"), as when the app was given one. */
const FORBIDDEN_METHODS: ReadonlySet<string> = new Set(['CONNECT', 'TRACE', 'TRACK']);

/**
 * The request body as the app reads it: node's own async iteration, which always settles (at the
 * body's end, or with an error when the request is destroyed or its connection closes first), so
 * a reader cannot wait for ever once the deadline's 408 has ended the exchange, and a reader that
 * never returned would hold whatever it counted, such as one of the pup door's reading slots.
 */
async function* nodeBody(req: http.IncomingMessage): AsyncIterable<Uint8Array> {
  try {
    yield* req;
  } catch (error) {
    throw new ClientAborted(`the request ended before its body (${(error as Error).message})`);
  }
}

/** The app's view of a node:http request: no web Request or stream is built (json.ts `HttpRequest` says why). */
function requestView(req: http.IncomingMessage): HttpRequest {
  const method = req.method ?? 'GET';
  if (FORBIDDEN_METHODS.has(method)) throw new TypeError(`'${method}' HTTP method is unsupported.`);
  const headerOf = (value: string | string[] | undefined) => (Array.isArray(value) ? value.join(', ') : value);
  return {
    method,
    // Parsed as a Request would: a target no URL parser takes is refused the same way.
    url: new URL(`http://localhost${req.url ?? '/'}`).href,
    headers: {
      get: (name) => headerOf(req.headers[name.toLowerCase()]) ?? null,
      *[Symbol.iterator]() {
        for (const [name, value] of Object.entries(req.headers)) if (value !== undefined) yield [name, headerOf(value)!];
      },
    },
    body: method === 'GET' || method === 'HEAD' ? null : nodeBody(req),
  };
}

async function serve(app: App, req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
  const request = requestView(req);
  const response = await app.handle(request, { host: req.headers.host ?? '' });
  if (res.writableEnded || res.destroyed) {
    // An answer no one will read is given up, so that whatever waits for its end (a retired app) does not wait for ever.
    await response.body?.cancel().catch(() => undefined);
    return;
  }
  const out = Object.fromEntries(response.headers);
  // Hop-by-hop headers are this server's to set, not the app's: the SDK's SSE answers carry
  // `Connection: keep-alive`, which would override a client's `Connection: close`.
  delete out.connection;
  delete out['keep-alive'];
  if (/\bclose\b/i.test(req.headers.connection ?? '')) out.connection = 'close';
  // A body left unread (the request was refused before it): the connection cannot be reused.
  if (request.body && !req.readableEnded) out.connection = 'close';
  res.writeHead(response.status, out);
  const text = textOf(response);
  if (text !== undefined) {
    res.end(text);
    return;
  }
  if (response.body) {
    for await (const chunk of response.body) {
      if (res.destroyed) return;
      res.write(chunk);
    }
  }
  // node:http closes the connection after an answer that says `Connection: close`.
  res.end();
}
