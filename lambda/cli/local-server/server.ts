/**
 * The running local server of a state directory (its live owner as the embedded database records
 * it) and its admin routes (lambda/local/admin-routes.ts), reached on its own loopback address with
 * the admin token from `<state dir>/admin-token`. The shared API key is never sent to an admin route.
 *
 * Deliberately not here: what each answer means for a command (local-operator.ts), and printing
 * the token (a secret of the context the moment it is read).
 */
import { LOOPBACK_HOSTNAMES } from '../../core/loopback';
import { AdminRoutes } from '../../core/protocol';
import type { Context } from '../context';
import { OperationError, ServerGone } from '../errors';
import { httpRequest, jsonOf, TimedOut, Unreachable } from '../http';

const UNSPECIFIED = new Set(['0.0.0.0', '[::]']);

/**
 * How to reach a server that recorded `url` (`http://HOST:PORT`) from this machine: the recorded
 * URL, or loopback for 0.0.0.0 / ::; and a Host its admin routes accept: one of the server's own
 * loopback addresses with its port.
 */
export function reachable(url: string): { connectUrl: string; hostHeader: string } {
  const parsed = new URL(url);
  const port = parsed.port || '80';
  const host = parsed.hostname.toLowerCase();
  if (LOOPBACK_HOSTNAMES.has(host)) return { connectUrl: parsed.origin, hostHeader: `${host}:${port}` };
  if (UNSPECIFIED.has(host)) return { connectUrl: `http://127.0.0.1:${port}`, hostHeader: `127.0.0.1:${port}` };
  return { connectUrl: parsed.origin, hostHeader: `127.0.0.1:${port}` };
}

const STARTING_WAIT_MS = 3000;

/**
 * The live server owning `stateDir`, or undefined when none runs. A server that is still starting
 * (it owns the directory but has not recorded its URL yet) is waited for a few seconds.
 */
export async function findServer(stateDir: string) {
  const { readOwner, StateUnreadable } = await import('../../adapters/embedded');
  const deadline = Date.now() + STARTING_WAIT_MS;
  for (;;) {
    let owner;
    try {
      owner = await readOwner(stateDir);
    } catch (error) {
      if (error instanceof StateUnreadable) throw new OperationError(error.message, 'state_unreadable');
      throw error;
    }
    if (!owner) return undefined;
    if (owner.url) return { pid: owner.pid, url: owner.url, ...reachable(owner.url) };
    if (Date.now() > deadline)
      throw new OperationError(`the server (pid ${owner.pid}) on ${stateDir} is still starting; try again in a moment`, 'server_starting');
    await new Promise((r) => setTimeout(r, 100));
  }
}

export type RunningServer = NonNullable<Awaited<ReturnType<typeof findServer>>>;

export type AdminAnswer<T> = { status: number; body: T & { error?: { code?: string; message?: string } } };

/**
 * What calls the admin routes of a running server with the admin token. 401 is tried once more
 * with the token read again (the server may have just restarted and written a new one); other
 * refusals and 5xx become OperationError; a server that accepts no connection is ServerGone
 * (nothing was done: the caller may use the database). 2xx and 404 are returned for the caller to
 * read.
 */
export function adminCaller(ctx: Context, server: RunningServer, stateDir: string) {
  const readToken = async (): Promise<string> => {
    const { readAdminToken } = await import('../../adapters/state-files');
    const token = await readAdminToken(stateDir);
    if (!token) {
      throw new OperationError(
        `a server runs on ${stateDir} (pid ${server.pid}) but its admin token (${stateDir}/admin-token) is not readable: run dm-dot ` +
          'as the user that runs the server',
        'no_admin_token',
      );
    }
    ctx.keepSecret(token);
    return token;
  };
  return async <T>(method: string, path: string): Promise<AdminAnswer<T>> => {
    for (let round = 0; ; round++) {
      const token = await readToken();
      let answer;
      try {
        answer = await ctx.progress(
          `waiting for the server at ${server.url}`,
          httpRequest(`${server.connectUrl}${path}`, {
            method,
            headers: { host: server.hostHeader, authorization: `Bearer ${token}`, accept: 'application/json' },
            ...(ctx.io.signal ? { signal: ctx.io.signal } : {}),
          }),
        );
      } catch (error) {
        if (error instanceof Unreachable) throw new ServerGone(server.url);
        if (error instanceof TimedOut) throw new OperationError(`the server at ${server.url} did not answer in time`, 'timeout');
        throw new OperationError(
          `the server at ${server.url} broke off the answer (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`,
          'unreachable',
        );
      }
      const body = (jsonOf(answer.text) ?? {}) as AdminAnswer<T>['body'];
      if (answer.status === 401 && round === 0) {
        await new Promise((r) => setTimeout(r, 200));
        continue;
      }
      if (answer.status === 401)
        throw new OperationError(
          `the server at ${server.url} refused the admin token (${stateDir}/admin-token); was it restarted as another user?`,
          'unauthorized',
        );
      if (answer.status >= 200 && answer.status < 300) return { status: answer.status, body };
      if (answer.status === 404 && body.error?.code === 'not_found' && path.startsWith(`${AdminRoutes.events}/`)) return { status: 404, body };
      if (answer.status === 409) return { status: 409, body };
      const why = body.error?.message ?? `HTTP ${answer.status}`;
      throw new OperationError(`the server at ${server.url} refused: ${why}`, body.error?.code ?? 'refused');
    }
  };
}
