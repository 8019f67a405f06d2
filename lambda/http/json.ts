/**
 * The wire of the HTTP surface, one for both of its front doors: reading a POST body (the raw
 * bytes, read once and capped; the pup door verifies its signature over exactly these bytes),
 * parsing JSON text without throwing, and the JSON answers and refusals both doors word alike.
 *
 * Deliberately not here: when a body is parsed and what a malformed one gets (each route decides:
 * pup verifies before parsing), which status or code a situation gets (the routes decide, from
 * core/answers and core/protocol), and CORS or other headers a route adds.
 */
import { answerUnavailable, restError as restErrorAnswer } from '../core/answers';
import { readCapped } from '../core/capped-body';
import type { DependencyUnavailable } from '../core/errors';
import type { Logger } from '../ports';

const JSON_HEADERS = { 'content-type': 'application/json' };

/**
 * What the routes read of a request. A web Request is one (the MCP Lambda's); the local server
 * passes a view of its node:http request instead (docs/performance.md, "No web Request per send").
 */
export interface HttpRequest {
  readonly method: string;
  /** Absolute and normalized, as a Request's. */
  readonly url: string;
  readonly headers: Pick<Headers, 'get'> & Iterable<[string, string]>;
  readonly body: AsyncIterable<Uint8Array> | null;
}

/** The text of every answer built here, which a server on node:http writes as it is (the same section). */
const TEXTS = new WeakMap<Response, string>();

/** The body of an answer built by this module, as built; undefined for any other Response. */
export function textOf(response: Response): string | undefined {
  return TEXTS.get(response);
}

/** True when the request declares a body longer than `max` (answered 413 before reading anything). */
export function declaredTooLarge(request: HttpRequest, max: number): boolean {
  const declared = Number(request.headers.get('content-length'));
  return Number.isFinite(declared) && declared > max;
}

/** Reads at most `max` bytes of the body, handing each chunk to `onChunk` as it arrives; undefined when it is larger. */
export async function readStream(request: HttpRequest, max: number, onChunk?: (chunk: Uint8Array) => void): Promise<Uint8Array | undefined> {
  if (declaredTooLarge(request, max)) return undefined;
  return request.body ? readCapped(request.body, max, onChunk) : new Uint8Array();
}

export function isJsonContentType(value: string | null): boolean {
  return (value ?? '').split(';')[0]!.trim().toLowerCase() === 'application/json';
}

/** The request with `body` for the MCP endpoint, without the API key in its query or headers (nor a length the body may not have). */
export function forwarded(request: HttpRequest, url: URL, body: Uint8Array, dropped: readonly string[]): Request {
  url.searchParams.delete('key');
  const headers = new Headers([...request.headers]);
  for (const name of dropped) headers.delete(name);
  return new Request(url, { method: 'POST', headers, body: body as BodyInit });
}

/** The value of a JSON text; undefined when it is not one (no JSON text parses to undefined). */
export function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/** A body that is JSON text already (a stored answer replayed byte for byte, the manifest). */
export function jsonText(status: number, body: string, headers: Record<string, string> = {}): Response {
  const response = new Response(body, { status, headers: { ...JSON_HEADERS, ...headers } });
  TEXTS.set(response, body);
  return response;
}

export function json(status: number, body: unknown, headers: Record<string, string> = {}): Response {
  return jsonText(status, JSON.stringify(body), headers);
}

export function restError(status: number, code: string, message: string, headers: Record<string, string> = {}): Response {
  return json(status, restErrorAnswer(status, code, message).body, headers);
}

export function rpcError(status: number, code: number, message: string, headers: Record<string, string> = {}): Response {
  return json(status, { jsonrpc: '2.0', id: null, error: { code, message } }, headers);
}

/** The REST answer to a failed dependency, logged as core/answers does. */
export function restUnavailable(log: Logger, error: DependencyUnavailable, requestId: string, where: string): Response {
  const answer = answerUnavailable(log, 'rest', error, { requestId, where });
  return json(answer.status, answer.body);
}

/** The 405 of a route that only reads (GET, or HEAD); undefined when the method is one of them. */
export function getOnly(request: HttpRequest): Response | undefined {
  return request.method === 'GET' || request.method === 'HEAD' ? undefined : restError(405, 'method_not_allowed', 'Use GET.', { allow: 'GET' });
}
