/**
 * The CLI's one HTTP client, over node:http and node:https (no fetch: loading undici costs more
 * start-up time than the request itself, and the admin routes need a `Host` of our choosing). A
 * connection that never opened is `Unreachable`, so callers can tell "nobody listens" (nothing was
 * done) from a failure mid-request.
 *
 * Deliberately not here: retries (send-message.ts) and what any answer means.
 */
import type { IncomingHttpHeaders } from 'node:http';
import { Budgets } from '../core/budgets';
import { Limits } from '../core/protocol';
import { readCapped } from '../core/capped-body';

export type HttpAnswer = { status: number; headers: IncomingHttpHeaders; text: string };

export interface HttpRequest {
  method: string;
  headers?: Record<string, string>;
  body?: string;
  timeoutMs?: number;
  signal?: AbortSignal;
}

/** No connection could be made; nothing reached the server. */
export class Unreachable extends Error {
  override name = 'Unreachable';
  constructor(
    readonly origin: string,
    readonly code: string,
  ) {
    super(`could not connect to ${origin} (${code})`);
  }
}

/** The server took longer than the timeout to answer. */
export class TimedOut extends Error {
  override name = 'TimedOut';
  constructor(readonly origin: string) {
    super(`${origin} did not answer in time`);
  }
}

const NOT_CONNECTED = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'EADDRNOTAVAIL']);

export async function httpRequest(url: string, request: HttpRequest): Promise<HttpAnswer> {
  const target = new URL(url);
  // require, not import(): on Node 22 and 24, import() of node:http also loads tls and http2, about
  // 100 ms of every command's start-up (docs/performance.md).
  const client: typeof import('node:http') = target.protocol === 'https:' ? require('node:https') : require('node:http');
  const body = request.body === undefined ? undefined : Buffer.from(request.body, 'utf8');
  return new Promise<HttpAnswer>((done, fail) => {
    let connected = false;
    const req = client.request(
      target,
      {
        method: request.method,
        headers: { ...(request.headers ?? {}), ...(body ? { 'content-length': String(body.length) } : {}) },
        ...(request.signal ? { signal: request.signal } : {}),
      },
      (res) => {
        readCapped(res, Limits.outboundResponseMaxBytes).then(
          (body) => {
            clearTimeout(timer);
            if (body === undefined) fail(new Error(`the answer of ${target.origin} is over 1 MiB`));
            else done({ status: res.statusCode ?? 0, headers: res.headers, text: body.toString('utf8') });
          },
          (error: unknown) => {
            clearTimeout(timer);
            fail(error);
          },
        );
      },
    );
    const timer = setTimeout(() => req.destroy(new TimedOut(target.origin)), request.timeoutMs ?? Budgets.cliCallMs);
    req.on('socket', (socket) => {
      if (!socket.connecting) connected = true;
      else socket.once('connect', () => (connected = true));
    });
    req.on('error', (error: NodeJS.ErrnoException) => {
      clearTimeout(timer);
      if (!connected && error.code && NOT_CONNECTED.has(error.code)) fail(new Unreachable(target.origin, error.code));
      else fail(error);
    });
    req.end(body);
  });
}

/** The JSON object `text` holds, or undefined when it holds none. */
export function jsonOf<T = Record<string, unknown>>(text: string): T | undefined {
  try {
    const parsed = JSON.parse(text) as unknown;
    return parsed !== null && typeof parsed === 'object' ? (parsed as T) : undefined;
  } catch {
    return undefined;
  }
}
