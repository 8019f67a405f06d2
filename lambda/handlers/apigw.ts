/**
 * API Gateway HTTP API (payload format 2.0) <-> web-standard Request/Response, the only thing the
 * MCP Lambda adds around the HTTP app. Pure. The query string is kept byte-exact (the app reads
 * `key` from it); a body over the 1 MiB cap is not decoded, and its declared length lets the app
 * answer 413 in the route's format after its other checks.
 *
 * Deliberately not here: the stage prefix of a named stage (the stack uses `$default`, where
 * `rawPath` is the route path), multi-value query parameters (`rawQueryString` already carries
 * them), streaming responses (API Gateway buffers the whole payload anyway), and any auth.
 */
import type { APIGatewayProxyEventV2, APIGatewayProxyStructuredResultV2 } from 'aws-lambda';
import { Limits } from '../core/protocol';

/** A host name we are willing to put in a URL; anything else becomes `localhost` (the app never routes on it). */
const SAFE_HOST = /^[A-Za-z0-9.-]{1,253}(:\d{1,5})?$/;

/** Headers that describe the hop, not the message; never forwarded either way. */
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'transfer-encoding', 'upgrade', 'proxy-connection', 'te', 'trailer']);

function requestUrl(event: APIGatewayProxyEventV2): string {
  const domain = event.requestContext?.domainName;
  const host = domain && SAFE_HOST.test(domain) ? domain : 'localhost';
  const rawPath = event.rawPath || '/';
  const path = rawPath.startsWith('/') ? rawPath : `/${rawPath}`;
  return `https://${host}${path}${event.rawQueryString ? `?${event.rawQueryString}` : ''}`;
}

function requestHeaders(event: APIGatewayProxyEventV2): Headers {
  const folded = new Map<string, string>();
  for (const [name, value] of Object.entries(event.headers ?? {})) {
    if (value === undefined) continue;
    const lower = name.toLowerCase();
    if (HOP_BY_HOP.has(lower) || lower === 'content-length') continue;
    const previous = folded.get(lower);
    folded.set(lower, previous === undefined ? value : `${previous}, ${value}`);
  }
  if (event.cookies?.length) {
    const previous = folded.get('cookie');
    folded.set('cookie', [previous, ...event.cookies].filter((c) => c !== undefined && c !== '').join('; '));
  }
  const headers = new Headers();
  for (const [name, value] of folded) {
    try {
      headers.append(name, value);
    } catch {
      // A header no web Request can carry is dropped, except Origin, whose absence would pass the
      // Origin check: it is kept as the bytes node:http would read, or `null` (never allowed: 403).
      if (name !== 'origin') continue;
      const bytes = Buffer.from(value, 'utf8').toString('latin1');
      headers.set('origin', /^[^\0\r\n]*$/.test(bytes) && bytes.trim() !== '' ? bytes : 'null');
    }
  }
  return headers;
}

/** API Gateway's request ids are short tokens, the app's x-request-id; anything else is not used (the app makes its own). */
const SAFE_REQUEST_ID = /^[\x21-\x7e]{1,128}$/;

export function requestFromEvent(event: APIGatewayProxyEventV2) {
  const method = (event.requestContext?.http?.method ?? 'GET').toUpperCase();
  const headers = requestHeaders(event);
  let body: Uint8Array | undefined;
  if (method !== 'GET' && method !== 'HEAD' && event.body !== undefined && event.body !== null) {
    const encoding = event.isBase64Encoded ? 'base64' : 'utf8';
    const size = Buffer.byteLength(event.body, encoding);
    // Over the cap: not decoded. The declared length lets the app answer 413 itself.
    if (size > Limits.requestBodyMaxBytes) headers.set('content-length', String(size));
    else body = Buffer.from(event.body, encoding);
  }
  const request = new Request(requestUrl(event), { method, headers, ...(body !== undefined ? { body: body as BodyInit } : {}) });
  const requestId = event.requestContext?.requestId;
  return { request, requestId: typeof requestId === 'string' && SAFE_REQUEST_ID.test(requestId) ? requestId : undefined };
}

/** Content types whose bodies go back as UTF-8 text; everything else is base64. */
export function isTextualContentType(contentType: string | null): boolean {
  const type = (contentType ?? '').split(';')[0]!.trim().toLowerCase();
  return /^(text\/.*|application\/(json|xml|javascript|x-www-form-urlencoded)|.*\+(json|xml))$/.test(type);
}

export async function resultFromResponse(response: Response): Promise<APIGatewayProxyStructuredResultV2> {
  const headers: Record<string, string> = {};
  for (const [name, value] of response.headers) {
    if (name === 'set-cookie' || HOP_BY_HOP.has(name)) continue;
    headers[name] = value;
  }
  const cookies = response.headers.getSetCookie();
  const bytes = Buffer.from(await response.arrayBuffer());
  const result: APIGatewayProxyStructuredResultV2 = { statusCode: response.status, headers, isBase64Encoded: false, body: '' };
  if (cookies.length > 0) result.cookies = cookies;
  if (bytes.byteLength === 0) return result;
  if (isTextualContentType(response.headers.get('content-type'))) {
    try {
      result.body = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
      return result;
    } catch {
      // Declared textual but not UTF-8: send the bytes unchanged rather than mangle them.
    }
  }
  result.body = bytes.toString('base64');
  result.isBase64Encoded = true;
  return result;
}
