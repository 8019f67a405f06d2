/**
 * A tiny local API Gateway (HTTP API, payload format 2.0) for tests: turns a web Request into the
 * event API Gateway would hand the MCP Lambda, and the Lambda's result back into a Response.
 *
 * What it reproduces of the real thing: header names lower-cased with repeated headers joined by
 * ", ", the Cookie header split into `cookies`, `rawPath` and `rawQueryString` byte-exact (no
 * leading "?"), `queryStringParameters` with repeated keys joined by ",", text bodies as text and
 * other bodies base64 with `isBase64Encoded`, `requestContext.http.method`, a fresh `requestId`
 * per request, stage `$default`. Results: a bare string (or object) result means 200 with that
 * JSON body, as API Gateway does; `cookies` become `set-cookie` headers.
 *
 * Deliberately not here: the 10 MB payload limit, the 30 s integration timeout, authorizers,
 * routes (one `$default` route to one handler) and CORS.
 */
import { isUtf8 } from 'node:buffer';
import { randomUUID } from 'node:crypto';
import type { APIGatewayProxyEventV2, APIGatewayProxyResultV2, APIGatewayProxyStructuredResultV2 } from 'aws-lambda';

export type ApiGatewayHandler = (event: APIGatewayProxyEventV2) => Promise<APIGatewayProxyResultV2>;

export interface EventOptions {
  /** 'auto' (default): text for JSON/text content types, base64 otherwise. */
  encoding?: 'auto' | 'text' | 'base64';
  requestId?: string;
  sourceIp?: string;
}

const TEXTUAL = /^(text\/|application\/(json|xml|javascript|x-www-form-urlencoded)\b|application\/[^;]*\+(json|xml)\b)/i;

export async function eventFromRequest(request: Request, options: EventOptions = {}): Promise<APIGatewayProxyEventV2> {
  const url = new URL(request.url);
  const headers: Record<string, string> = {};
  let cookies: string[] | undefined;
  for (const [name, value] of request.headers) {
    // Headers iteration already yields lower-case names with repeated values joined by ", ".
    if (name === 'cookie') {
      cookies = value
        .split(';')
        .map((c) => c.trim())
        .filter(Boolean);
      continue;
    }
    headers[name] = value;
  }
  headers.host ??= url.host;

  const bytes = request.body ? Buffer.from(await request.arrayBuffer()) : undefined;
  const encoding = options.encoding ?? 'auto';
  // A textual body that is not UTF-8 cannot travel as a JSON string without being changed: such a
  // body goes base64, so the bytes the function sees are the bytes that were sent.
  const asText =
    encoding === 'text' || (encoding === 'auto' && TEXTUAL.test(request.headers.get('content-type') ?? '') && (bytes === undefined || isUtf8(bytes)));
  if (bytes) headers['content-length'] = String(bytes.byteLength);

  const rawQueryString = url.search.startsWith('?') ? url.search.slice(1) : url.search;
  const query: Record<string, string> = {};
  for (const [key, value] of url.searchParams) query[key] = key in query ? `${query[key]},${value}` : value;

  const requestId = options.requestId ?? randomUUID();
  const now = new Date();
  const event: APIGatewayProxyEventV2 = {
    version: '2.0',
    routeKey: '$default',
    rawPath: url.pathname,
    rawQueryString,
    headers,
    requestContext: {
      accountId: '000000000000',
      apiId: 'local',
      domainName: url.host,
      domainPrefix: url.hostname.split('.')[0] ?? 'local',
      http: {
        method: request.method,
        path: url.pathname,
        protocol: 'HTTP/1.1',
        sourceIp: options.sourceIp ?? '127.0.0.1',
        userAgent: request.headers.get('user-agent') ?? '',
      },
      requestId,
      routeKey: '$default',
      stage: '$default',
      time: now.toUTCString(),
      timeEpoch: now.getTime(),
    },
    isBase64Encoded: bytes !== undefined && !asText,
  };
  if (cookies?.length) event.cookies = cookies;
  if (rawQueryString) event.queryStringParameters = query;
  if (bytes) event.body = asText ? bytes.toString('utf8') : bytes.toString('base64');
  return event;
}

export function responseFromResult(result: APIGatewayProxyResultV2): Response {
  if (typeof result === 'string' || !('statusCode' in (result as object))) {
    const body = typeof result === 'string' ? result : JSON.stringify(result);
    return new Response(body, { status: 200, headers: { 'content-type': 'application/json' } });
  }
  const structured = result as APIGatewayProxyStructuredResultV2;
  const headers = new Headers();
  for (const [name, value] of Object.entries(structured.headers ?? {})) headers.set(name, String(value));
  for (const cookie of structured.cookies ?? []) headers.append('set-cookie', cookie);
  const status = structured.statusCode ?? 200;
  const nullBody = status === 204 || status === 304 || status === 205;
  const body = nullBody || !structured.body ? null : structured.isBase64Encoded ? Buffer.from(structured.body, 'base64') : structured.body;
  return new Response(body as BodyInit | null, { status, headers });
}

/** A fetch-like client that goes through the event shapes above to `handler`. */
export function localApiGateway(handler: ApiGatewayHandler, options: EventOptions = {}) {
  return {
    async fetch(input: string | URL | Request, init?: RequestInit): Promise<Response> {
      const request = input instanceof Request && init === undefined ? input : new Request(input, init);
      const event = await eventFromRequest(request, options);
      return responseFromResult(await handler(event));
    },
    /** The event this gateway would send for `request`. */
    eventFromRequest: (request: Request) => eventFromRequest(request, options),
  };
}
