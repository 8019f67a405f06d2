/**
 * The JSON answers of the HTTP surface, one shape for both of its front doors: a JSON body, a REST
 * error (core/answers' shape), and a JSON-RPC error with a null id.
 *
 * Deliberately not here: which status or code a situation gets (the routes decide, from
 * core/answers and core/protocol), and CORS or other headers a route adds.
 */
import { restError as restErrorAnswer } from '../core/answers';

const JSON_HEADERS = { 'content-type': 'application/json' };

/** A body that is JSON text already (a stored answer replayed byte for byte, the manifest). */
export function jsonText(status: number, body: string, headers: Record<string, string> = {}): Response {
  return new Response(body, { status, headers: { ...JSON_HEADERS, ...headers } });
}

export function json(status: number, body: unknown, headers: Record<string, string> = {}): Response {
  return jsonText(status, JSON.stringify(body), headers);
}

export function restError(status: number, code: string, message: string, headers: Record<string, string> = {}): Response {
  const answer = restErrorAnswer(status, code, message);
  return json(answer.status, answer.body, headers);
}

export function rpcError(status: number, code: number, message: string, headers: Record<string, string> = {}): Response {
  return json(status, { jsonrpc: '2.0', id: null, error: { code, message } }, headers);
}
