/**
 * API Gateway HTTP API (payload format 2.0) <-> web-standard Request/Response, the only thing
 * the MCP Lambda adds around the HTTP app. Pure: no AWS SDK, no I/O beyond reading a Response
 * body.
 *
 * Request: URL from `rawPath` + `rawQueryString` (kept byte-exact: the app reads `key` from it and
 * never logs it), header names folded to lower case (duplicates joined with ", " as HTTP allows),
 * the `cookies` array joined back into one `cookie` header with "; " (RFC 6265's separator),
 * method from `requestContext.http.method`, base64 bodies decoded. A body whose decoded size
 * would exceed the 1 MiB request cap is not decoded at all: the Request carries no body and
 * declares the real length in `content-length`, so the app's own checks answer 413 in the
 * route's format (and only after Origin and API key checks, as for any other request).
 *
 * Response: status, headers (`set-cookie` values go to `cookies`), and the body as UTF-8 text
 * when the content type is textual, otherwise base64 with `isBase64Encoded`.
 *
 * Deliberately not here: the stage prefix of a named stage (the stack uses `$default`, where
 * `rawPath` is the route path), multi-value query parameters (`rawQueryString` already carries
 * them), streaming responses (API Gateway buffers the whole payload anyway), and any auth.
 */
import type { APIGatewayProxyEventV2, APIGatewayProxyStructuredResultV2 } from 'aws-lambda';
import { Limits } from '../core/protocol';

export interface TranslatedRequest {
  request: Request;
  /** requestContext.requestId: the id the app logs and returns as x-request-id (undefined unless 1 to 128 visible ASCII characters: the app makes its own). */
  requestId: string | undefined;
}

export interface TranslateOptions {
  /** Default 1 MiB (docs/contract/http.md). */
  maxBodyBytes?: number;
}

/** A host name we are willing to put in a URL; anything else becomes `localhost` (the app never routes on it). */
const SAFE_HOST = /^[A-Za-z0-9.-]{1,253}(:\d{1,5})?$/;

/** Headers that describe the hop, not the message; never forwarded either way. */
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'transfer-encoding', 'upgrade', 'proxy-connection', 'te', 'trailer']);

/** Decoded size of a base64 string without decoding it. */
function base64DecodedLength(value: string): number {
  return Buffer.byteLength(value, 'base64');
}

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
      // A name or value no web Request can carry (not a token, not a byte string): drop that one
      // header rather than the request. Nothing dm-dot routes on can be malformed this way and
      // still be valid (an unusable Authorization simply reads as a missing key: 401), except
      // Origin, whose absence would let the request past the Origin check: it is kept as the
      // bytes a node:http server would have read (UTF-8 as Latin-1, what the local runtime
      // judges), or as the opaque origin `null`; neither is ever an allowed origin (403).
      if (name === 'origin') headers.set('origin', originAsBytes(value));
    }
  }
  return headers;
}

function originAsBytes(value: string): string {
  const bytes = Buffer.from(value, 'utf8').toString('latin1');
  return /^[^\0\r\n]*$/.test(bytes) && bytes.trim() !== '' ? bytes : 'null';
}

/**
 * API Gateway's request ids are short tokens; anything else (an event not from API Gateway) is not
 * used, since the app echoes the id in `x-request-id` and a header cannot carry every string.
 */
const SAFE_REQUEST_ID = /^[\x21-\x7e]{1,128}$/;

export function requestFromEvent(event: APIGatewayProxyEventV2, options: TranslateOptions = {}): TranslatedRequest {
  const maxBodyBytes = options.maxBodyBytes ?? Limits.requestBodyMaxBytes;
  const method = (event.requestContext?.http?.method ?? 'GET').toUpperCase();
  const headers = requestHeaders(event);
  const canHaveBody = method !== 'GET' && method !== 'HEAD';
  let body: Uint8Array | undefined;
  if (canHaveBody && event.body !== undefined && event.body !== null) {
    const size = event.isBase64Encoded ? base64DecodedLength(event.body) : Buffer.byteLength(event.body, 'utf8');
    if (size > maxBodyBytes) {
      // Over the cap: not decoded. The declared length lets the app answer 413 itself.
      headers.set('content-length', String(size));
    } else {
      body = event.isBase64Encoded ? Buffer.from(event.body, 'base64') : Buffer.from(event.body, 'utf8');
    }
  }
  const request = new Request(requestUrl(event), { method, headers, ...(body !== undefined ? { body: body as BodyInit } : {}) });
  const requestId = event.requestContext?.requestId;
  return { request, requestId: typeof requestId === 'string' && SAFE_REQUEST_ID.test(requestId) ? requestId : undefined };
}

/** Content types whose bodies go back as UTF-8 text; everything else is base64. */
export function isTextualContentType(contentType: string | null): boolean {
  const type = (contentType ?? '').split(';')[0]!.trim().toLowerCase();
  if (type === '') return false;
  return (
    type.startsWith('text/') ||
    type === 'application/json' ||
    type.endsWith('+json') ||
    type === 'application/xml' ||
    type.endsWith('+xml') ||
    type === 'application/javascript' ||
    type === 'application/x-www-form-urlencoded'
  );
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
