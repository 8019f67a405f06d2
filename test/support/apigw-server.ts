/**
 * A tiny local API Gateway (HTTP API, payload format 2.0, one `$default` route) on node:http, for
 * tests that need a real HTTP endpoint in front of the MCP Lambda (the conformance suites, any
 * HTTP client): each request is buffered whole, turned into the event API Gateway would send
 * (test/support/apigw.ts: lower-case header names, `cookies`, byte-exact `rawPath` and
 * `rawQueryString`, text bodies as text and other bodies base64 with `isBase64Encoded`), handed to
 * the handler, and its result written back (status, headers, `cookies` as Set-Cookie, base64
 * bodies decoded).
 *
 * As API Gateway does: repeated request headers are joined with ", " (node:http would drop some
 * repeats, so the raw header list is read), repeated Cookie headers with "; "; the client's Host
 * goes through in `headers.host` while `requestContext.domainName` is this gateway's own address;
 * a body over `maxBodyBytes` (10 MiB, the HTTP API payload quota) is answered 413 without invoking
 * the handler; a handler that throws or returns no usable result is answered 500
 * `{"message":"Internal Server Error"}` (and recorded, so a test can insist it never happened);
 * every answer carries `apigw-requestid`, the event's `requestContext.requestId`.
 *
 * A method that no web Request accepts (TRACE, TRACK) still reaches the handler: the event is
 * built from the same request under POST and then given the real method, as API Gateway passes
 * any method on `$default`.
 *
 * Deliberately not here: the 30 s integration timeout, host-based routing (every Host reaches the
 * one API, so the Lambda's own checks are what a foreign Host or Origin meets), authorizers,
 * CORS, stages other than `$default`, TLS, and any address other than 127.0.0.1.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { APIGatewayProxyEventV2, APIGatewayProxyResultV2 } from 'aws-lambda';
import { eventFromRequest, responseFromResult, type ApiGatewayHandler } from './apigw';

/** The HTTP API payload quota (10 MB). */
export const API_GATEWAY_MAX_BODY_BYTES = 10 * 1024 * 1024;

export interface GatewayExchange {
  requestId: string;
  method: string;
  /** The path, never the query string (it may carry the API key). */
  path: string;
  host: string | undefined;
  origin: string | undefined;
  /** The status written back (413 / 500 when the gateway answered itself). */
  status: number;
  /** Set when the handler threw or returned something API Gateway could not use. */
  handlerError?: string;
  ms: number;
}

export interface ApiGatewayServer {
  port: number;
  /** `http://127.0.0.1:<port>` */
  url: string;
  /** One entry per request, in completion order. */
  exchanges: GatewayExchange[];
  /** The events handed to the handler, when `keepEvents` is set (bodies included). */
  events: APIGatewayProxyEventV2[];
  close(): Promise<void>;
}

export interface ApiGatewayServerOptions {
  maxBodyBytes?: number;
  /** Keep every event in `events` (memory grows with the bodies). */
  keepEvents?: boolean;
}

function gatewayError(res: http.ServerResponse, status: number, message: string, requestId: string): void {
  const body = JSON.stringify({ message });
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), 'apigw-requestid': requestId });
  res.end(body);
}

/** The request's headers as API Gateway joins them: every repeat kept, in order. */
function headersOf(req: http.IncomingMessage): Headers {
  const headers = new Headers();
  const raw = req.rawHeaders;
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const name = raw[i]!;
    // HTTP/1.1 framing is the gateway's business, not the integration's.
    if (/^(connection|keep-alive|transfer-encoding|upgrade|te|trailer|expect)$/i.test(name)) continue;
    try {
      headers.append(name, raw[i + 1]!); // Headers joins repeats with ", " and Cookie repeats with "; ".
    } catch {
      // A name or value a web Request cannot carry: dropped, as the Lambda's translation would.
    }
  }
  return headers;
}

async function readBody(req: http.IncomingMessage, max: number): Promise<Buffer | 'too-large'> {
  const chunks: Buffer[] = [];
  let length = 0;
  let tooLarge = false;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    if (tooLarge) continue; // drain, so the 413 can be written on a healthy connection
    length += chunk.byteLength;
    if (length > max) {
      tooLarge = true;
      chunks.length = 0;
      continue;
    }
    chunks.push(chunk);
  }
  return tooLarge ? 'too-large' : Buffer.concat(chunks);
}

async function eventOf(req: http.IncomingMessage, origin: string, body: Buffer, requestId: string): Promise<APIGatewayProxyEventV2> {
  const method = req.method ?? 'GET';
  const url = `${origin}${req.url ?? '/'}`;
  const headers = headersOf(req);
  const withBody = method !== 'GET' && method !== 'HEAD' && body.byteLength > 0;
  // A Uint8Array body: a string would make the web Request invent a text/plain Content-Type.
  const init = (m: string): RequestInit => ({ method: m, headers, ...(withBody ? { body: new Uint8Array(body) } : {}) });
  let request: Request;
  let substituted = false;
  try {
    request = new Request(url, init(method));
  } catch {
    request = new Request(url, init('POST'));
    substituted = true;
  }
  const event = await eventFromRequest(request, { requestId, sourceIp: req.socket.remoteAddress ?? '127.0.0.1' });
  // No body sent: API Gateway sends no body and no Content-Length (the web Request has neither).
  if (substituted) event.requestContext.http.method = method;
  return event;
}

export async function startApiGatewayServer(handler: ApiGatewayHandler, options: ApiGatewayServerOptions = {}): Promise<ApiGatewayServer> {
  const maxBodyBytes = options.maxBodyBytes ?? API_GATEWAY_MAX_BODY_BYTES;
  const exchanges: GatewayExchange[] = [];
  const events: APIGatewayProxyEventV2[] = [];
  let counter = 0;
  let origin = '';

  const server = http.createServer((req, res) => {
    const started = Date.now();
    const requestId = `apigw-${(++counter).toString(36)}-${started.toString(36)}`;
    const record = (status: number, handlerError?: string) =>
      exchanges.push({
        requestId,
        method: req.method ?? '',
        path: (req.url ?? '').split('?')[0]!,
        host: req.headers.host,
        origin: req.headers.origin,
        status,
        ...(handlerError !== undefined ? { handlerError } : {}),
        ms: Date.now() - started,
      });

    void (async () => {
      const body = await readBody(req, maxBodyBytes);
      if (body === 'too-large') {
        gatewayError(res, 413, 'Request Entity Too Large', requestId);
        record(413);
        return;
      }
      let event: APIGatewayProxyEventV2;
      try {
        event = await eventOf(req, origin, body, requestId);
      } catch {
        gatewayError(res, 400, 'Bad Request', requestId);
        record(400);
        return;
      }
      if (options.keepEvents) events.push(event);
      let result: APIGatewayProxyResultV2;
      try {
        result = await handler(event);
      } catch (error) {
        gatewayError(res, 500, 'Internal Server Error', requestId);
        record(500, error instanceof Error ? `${error.name}: ${error.message}` : String(error));
        return;
      }
      let response: Response;
      try {
        response = responseFromResult(result);
      } catch (error) {
        // A status Response refuses (e.g. 99 or 600), or headers it cannot carry.
        gatewayError(res, 500, 'Internal Server Error', requestId);
        record(500, `unusable result: ${error instanceof Error ? error.message : String(error)}`);
        return;
      }
      const headers: http.OutgoingHttpHeaders = {};
      for (const [name, value] of response.headers) {
        if (name === 'set-cookie' || name === 'content-length' || name === 'transfer-encoding' || name === 'connection') continue;
        headers[name] = value;
      }
      const cookies = response.headers.getSetCookie();
      if (cookies.length > 0) headers['set-cookie'] = cookies;
      headers['apigw-requestid'] = requestId;
      const bytes = Buffer.from(await response.arrayBuffer());
      const noBody = req.method === 'HEAD' || response.status === 204 || response.status === 304;
      if (!noBody) headers['content-length'] = bytes.byteLength;
      res.writeHead(response.status, headers);
      res.end(noBody ? undefined : bytes);
      record(response.status);
    })().catch((error: unknown) => {
      // Only a broken connection gets here (the client went away mid-request).
      if (!res.headersSent) gatewayError(res, 500, 'Internal Server Error', requestId);
      else res.destroy();
      record(500, `gateway: ${error instanceof Error ? error.message : String(error)}`);
    });
  });

  await new Promise<void>((done, fail) => {
    server.once('error', fail);
    server.listen(0, '127.0.0.1', () => done());
  });
  const port = (server.address() as AddressInfo).port;
  origin = `http://127.0.0.1:${port}`;
  return {
    port,
    url: origin,
    exchanges,
    events,
    close: () =>
      new Promise<void>((done) => {
        server.close(() => done());
        server.closeAllConnections();
      }),
  };
}
