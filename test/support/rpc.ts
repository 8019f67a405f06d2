/**
 * The requests the tests send, in one place: a modern-era (2026-07-28) JSON-RPC POST /mcp as
 * ChatGPT sends it (its headers and its body with `_meta`), and POST /v1/messages. Used against the
 * in-process app (test/support/app.ts), the Lambdas (aws-world.ts), a running server
 * (e2e.ts `rpc`, the CLI tests) and by the bench.
 *
 * Deliberately not here: sending them (each caller has its own transport), and the legacy era
 * (app.ts `rpcLegacy`).
 */
export const MODERN = '2026-07-28';
export const MODERN_META = {
  'io.modelcontextprotocol/protocolVersion': MODERN,
  'io.modelcontextprotocol/clientCapabilities': {},
} as const;

/** Headers for a modern-era (2026-07-28) call of `method`. */
export function modernHeaders(method: string, extra: Record<string, string> = {}): Record<string, string> {
  return {
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
    'mcp-protocol-version': MODERN,
    'mcp-method': method,
    ...extra,
  };
}

/** A modern-era JSON-RPC request body with `_meta` (MODERN_META, and `meta` after it). */
export function modernBody(method: string, params: Record<string, unknown> = {}, id: number | string = 1, meta: Record<string, unknown> = {}): string {
  return JSON.stringify({ jsonrpc: '2.0', id, method, params: { ...params, _meta: { ...MODERN_META, ...meta } } });
}

/** The init of a modern-era POST /mcp of `method`, as ChatGPT sends it: its headers (Mcp-Name on tools/call) and body. */
export function modernInit(
  method: string,
  params: Record<string, unknown> = {},
  options: { id?: number | string; meta?: Record<string, unknown> } = {},
): RequestInit {
  return {
    method: 'POST',
    headers: modernHeaders(method, method === 'tools/call' ? { 'mcp-name': String(params.name) } : {}),
    body: modernBody(method, params, options.id, options.meta),
  };
}

/** The init of POST /v1/messages sending `message`, the key as a Bearer token. */
export function messageInit(message: string, key: string): RequestInit {
  return { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` }, body: JSON.stringify({ message }) };
}
