/**
 * The one JSON-RPC call `dm-dot dot` makes: a plain POST to `/mcp` on the 2026-07-28 (stateless)
 * era with the required per-request `_meta` and no session: the exact request a ChatGPT-like
 * client sends for `events/subscribe` and `events/unsubscribe`.
 *
 * Deliberately not here: what a refusal means for the dot (stand-in-dot/subscription.ts).
 */
import { CLIENT_CAPABILITIES_META_KEY, CLIENT_INFO_META_KEY, MCP_PROTOCOL_VERSION, McpHeaders, PROTOCOL_VERSION_META_KEY, Routes } from '../../core/protocol';
import { Budgets } from '../../core/budgets';
import { version } from '../../version';
import { OperationError } from '../errors';
import { httpRequest, jsonOf, TimedOut, Unreachable } from '../http';
import type { Target } from '../local-server/target';

export class RpcError extends Error {
  override name = 'RpcError';
  constructor(
    readonly method: string,
    readonly code: number | undefined,
    readonly rpcMessage: string,
    readonly data: { reason?: string } | undefined,
  ) {
    super(`${method} failed: ${code ?? '?'} ${rpcMessage}`);
  }
}

export const KEY_REFUSED = 'the server refused the API key (pass --key, or check MCP_API_KEY and <state dir>/api-key; after dm-dot key rotate use the new key)';

type RpcMessage = { result?: unknown; error?: { code?: number; message?: string; data?: { reason?: string } } };

/** A JSON answer, or the first `data:` line of an SSE answer (legacy-era servers reply that way). */
export function parseRpcAnswer(text: string): RpcMessage | undefined {
  const dataLines = text.split('\n').flatMap((l) => (l.startsWith('data:') ? [l.slice(5)] : []));
  for (const candidate of [text, ...dataLines]) {
    const parsed = jsonOf<RpcMessage>(candidate);
    if (parsed && ('result' in parsed || 'error' in parsed)) return parsed;
  }
  return undefined;
}

export async function rpc(target: Target, method: string, params: Record<string, unknown>): Promise<Record<string, unknown>> {
  let answer;
  try {
    answer = await httpRequest(`${target.base}${Routes.mcp}`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${target.key}`,
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        [McpHeaders.protocolVersion]: MCP_PROTOCOL_VERSION,
        [McpHeaders.method]: method,
      },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method,
        params: {
          ...params,
          _meta: {
            [PROTOCOL_VERSION_META_KEY]: MCP_PROTOCOL_VERSION,
            [CLIENT_CAPABILITIES_META_KEY]: {},
            [CLIENT_INFO_META_KEY]: { name: 'dm-dot-cli', version },
          },
        },
      }),
      timeoutMs: Budgets.cliAnsweredCallMs,
    });
  } catch (error) {
    const origin = new URL(target.base).origin;
    if (error instanceof Unreachable)
      throw new OperationError(
        `no server at ${origin} (${method}; ${error.code})${target.local ? ': start it with npm start, or pass --url' : ''}`,
        'unreachable',
      );
    if (error instanceof TimedOut) throw new OperationError(`${origin} did not answer ${method} in time`, 'timeout');
    throw new OperationError(
      `the connection to ${origin} broke off during ${method} (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`,
      'unreachable',
    );
  }
  if (answer.status === 401) throw new OperationError(KEY_REFUSED, 'key_refused');
  const message = parseRpcAnswer(answer.text);
  if (!message) throw new OperationError(`the server answered ${method} with HTTP ${answer.status} and no JSON-RPC message`, 'bad_answer');
  if (message.error) throw new RpcError(method, message.error.code, message.error.message ?? '', message.error.data);
  return (message.result ?? {}) as Record<string, unknown>;
}
