/**
 * A small loopback proxy for the conformance suites, which cannot send credentials (and some of
 * whose scenarios drop the URL's query string, so `?key=` cannot be used): it adds
 * `Authorization: Bearer <key>` to every request and forwards everything else unchanged, the
 * `Host` and `Origin` headers included. The runtime behind it therefore judges the client's own
 * Host and Origin, so the `dns-rebinding-protection` scenario exercises the runtime's refusal and
 * not the proxy's; start the runtime with DMDOT_ALLOWED_HOSTS / DMDOT_ALLOWED_ORIGINS naming the
 * proxy's own address so that requests addressed to the proxy are accepted.
 *
 * It keeps a log of what it forwarded (method, path without query, Host, Origin and the status
 * the runtime answered), so a test can tell that a refusal came from the runtime.
 *
 * Deliberately not here: any rewriting of bodies or of other headers, TLS, and any address other
 * than 127.0.0.1.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface ForwardedRequest {
  method: string;
  path: string;
  host: string | undefined;
  origin: string | undefined;
  /** The runtime's status, or 502 when it could not be reached. */
  status: number;
}

export interface AuthProxy {
  port: number;
  /** `http://127.0.0.1:<port>`: what a client sends as Host is `127.0.0.1:<port>`. */
  origin: string;
  forwarded: ForwardedRequest[];
  /** The runtime to forward to (`http://127.0.0.1:<port>`); until set, requests answer 503. */
  setTarget(target: string): void;
  close(): Promise<void>;
}

/**
 * Sends one request on to the runtime and its answer back: the body streamed (`req` itself) or
 * given whole; `onStatus` gets the runtime's status, or 502 when it could not be reached. A client
 * that goes away (an SSE stream it stops reading) takes the upstream request with it.
 */
export function forward(options: {
  target: URL;
  agent: http.Agent;
  req: http.IncomingMessage;
  res: http.ServerResponse;
  headers: http.OutgoingHttpHeaders;
  body: http.IncomingMessage | Buffer;
  onStatus: (status: number) => void;
}): void {
  const { target, agent, req, res, headers, body, onStatus } = options;
  const upstream = http.request({ host: target.hostname, port: target.port, method: req.method, path: req.url, headers, agent }, (answer) => {
    onStatus(answer.statusCode ?? 0);
    res.writeHead(answer.statusCode ?? 502, answer.statusMessage, answer.headers);
    answer.pipe(res);
  });
  upstream.on('error', () => {
    if (res.headersSent) {
      res.destroy();
      return;
    }
    onStatus(502);
    res.writeHead(502, { 'content-type': 'application/json' }).end('{"error":"runtime unreachable"}');
  });
  res.on('close', () => {
    if (!res.writableFinished) upstream.destroy();
  });
  if (Buffer.isBuffer(body)) upstream.end(body);
  else body.pipe(upstream);
}

export async function startAuthProxy(key: string): Promise<AuthProxy> {
  let target: URL | undefined;
  const forwarded: ForwardedRequest[] = [];
  const agent = new http.Agent({ keepAlive: true });

  const server = http.createServer((req, res) => {
    const record = (status: number) =>
      forwarded.push({
        method: req.method ?? '',
        path: (req.url ?? '').split('?')[0]!,
        host: req.headers.host,
        origin: req.headers.origin,
        status,
      });
    if (!target) {
      record(503);
      res.writeHead(503, { 'content-type': 'application/json' }).end('{"error":"proxy has no target yet"}');
      return;
    }
    // Host and Origin travel unchanged (an explicit `host` header overrides Node's default).
    forward({ target, agent, req, res, headers: { ...req.headers, authorization: `Bearer ${key}` }, body: req, onStatus: record });
  });

  await new Promise<void>((done, fail) => {
    server.once('error', fail);
    server.listen(0, '127.0.0.1', () => done());
  });
  const port = (server.address() as AddressInfo).port;
  return {
    port,
    origin: `http://127.0.0.1:${port}`,
    forwarded,
    setTarget(next: string) {
      target = new URL(next);
    },
    close: () =>
      new Promise<void>((done) => {
        server.close(() => done());
        server.closeAllConnections();
        agent.destroy();
      }),
  };
}
