/**
 * The admin routes of the local runtime (`/admin/...`), through which the operator CLI acts on a
 * running server instead of opening its database beside it: the delivery log and one event,
 * resend, the subscription and its clear, redrive, status, key rotation. Each route runs the
 * shared operator actions (lambda/operator) over the server's own ports.
 *
 * They are for this machine only (docs/decisions.md, "Admin routes, not the API key"): the `Host`
 * must be one of the server's own loopback addresses with its port (not a tunnel's host from
 * DMDOT_ALLOWED_HOSTS), a request with forwarding headers (a tunnel or proxy adds them) or an
 * `Origin` (a browser page) is refused, and only the admin token from `<state dir>/admin-token` is
 * accepted.
 *
 * Deliberately not here: the admin routes on AWS (lambda/http/app.ts never has them; there the
 * operator's IAM credentials are the admin credential), and request bodies (no route takes one).
 */
import type http from 'node:http';
import { constantTimeEqual } from '../core/signing';
import { AccessLimits, AdminRoutes, Routes } from '../core/protocol';
import { clearSubscription, eventCounts, listEventViews, resendEvent, showEvent, showSubscription } from '../operator/actions';
import { EVENT_STATUSES, isEventStatus } from '../operator/views';
import type { AccessStore, Outbox, Store } from '../ports';
import { addSender, listSenders, revokeSender } from '../operator/access';
import { senderNameOf } from '../core/access';
import { pathOf } from './http-server';

export interface AdminDeps {
  store: Store;
  outbox: Outbox;
  now(): number;
  token: string;
  /** The Host values that reach the admin routes: the server's own loopback addresses with the port. */
  hosts: ReadonlySet<string>;
  /** Moves the dead letters back into the job table; resolves with how many moved. */
  redrive(): Promise<number>;
  queueCounts(): Promise<{ queued: number; deadLetters: number }>;
  /** The switches in force and where things are (never a secret). */
  describe(): Record<string, unknown>;
  /** Rotates the API key, the old one accepted `overlapMs` more; undefined when the key comes from MCP_API_KEY. */
  rotateKey?(overlapMs?: number): Promise<{ keyFile: string; overlapUntil?: string | null }>;
  /** Sender keys (operator/access.ts over the server's store). */
  access?: AccessStore;
  /** The damaged page this server has met in its state file, as the sentence naming it; undefined while none. */
  damage?(): string | undefined;
}

const FORWARDING_HEADERS = ['forwarded', 'x-forwarded-for', 'x-forwarded-host', 'x-forwarded-proto', 'x-real-ip', 'via'] as const;

function answer(res: http.ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  res.writeHead(status, { 'content-type': 'application/json', 'cache-control': 'no-store', ...headers });
  res.end(JSON.stringify(body));
}

function refuse(res: http.ServerResponse, status: number, code: string, message: string, headers: Record<string, string> = {}): void {
  answer(res, status, { error: { code, message } }, headers);
}

export function isAdminPath(url: string | undefined): boolean {
  const path = pathOf(url);
  return path === Routes.admin || path.startsWith(`${Routes.admin}/`);
}

const EVENT_ROUTE = /^\/admin\/events\/(evt_[0-9a-f]{32})(\/resend)?$/;

/** Serves `/admin/...`. The request body, if any, is never read: no admin route takes one. */
export async function handleAdmin(deps: AdminDeps, req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
  if (!deps.hosts.has((req.headers.host ?? '').toLowerCase())) {
    return refuse(res, 403, 'forbidden_host', 'Admin routes answer on the server’s own loopback address only.');
  }
  if (FORWARDING_HEADERS.some((name) => req.headers[name] !== undefined)) {
    return refuse(res, 403, 'forwarded', 'Admin routes refuse requests that came through a proxy or tunnel.');
  }
  if (req.headers.origin !== undefined) return refuse(res, 403, 'forbidden_origin', 'Admin routes refuse cross-origin requests.');
  const bearer = /^Bearer\s+(.+)$/i.exec(req.headers.authorization ?? '')?.[1]?.trim();
  // A sender key is a real credential that may never run an operator action: Forbidden, as on /mcp.
  if (bearer !== undefined && senderNameOf(bearer) !== undefined) {
    return refuse(res, 403, 'forbidden_sender', 'A sender key may only send; operator actions need the admin token.');
  }
  // Constant time whatever the lengths (core/signing.ts hashes both sides first).
  if (bearer === undefined || !constantTimeEqual(bearer, deps.token)) {
    return refuse(res, 401, 'unauthorized', 'Admin routes need the admin token from <state dir>/admin-token (the API key is not accepted).', {
      'www-authenticate': 'Bearer',
    });
  }
  const url = new URL(req.url ?? '/', 'http://localhost');
  const method = req.method ?? 'GET';
  const only = (allowed: string) => refuse(res, 405, 'method_not_allowed', `Use ${allowed}.`, { allow: allowed });
  try {
    const event = EVENT_ROUTE.exec(url.pathname);
    if (event) {
      const eventId = event[1]!;
      if (event[2]) {
        if (method !== 'POST') return only('POST');
        return answer(res, 200, await resendEvent(deps, deps.now(), eventId));
      }
      if (method !== 'GET') return only('GET');
      const detail = await showEvent(deps.store, deps.now(), eventId);
      return detail ? answer(res, 200, { event: detail }) : refuse(res, 404, 'not_found', `No event ${eventId} in the delivery log.`);
    }
    switch (url.pathname) {
      case AdminRoutes.events: {
        if (method !== 'GET') return only('GET');
        const status = url.searchParams.get('status') ?? undefined;
        if (status !== undefined && !isEventStatus(status)) {
          return refuse(res, 400, 'invalid_status', `status must be one of ${EVENT_STATUSES.join(', ')}`);
        }
        return answer(res, 200, { events: await listEventViews(deps.store, deps.now(), status) });
      }
      case AdminRoutes.subscription: {
        if (method === 'GET') return answer(res, 200, { subscription: await showSubscription(deps.store, deps.now()) });
        if (method === 'DELETE') return answer(res, 200, await clearSubscription(deps.store, deps.now(), url.searchParams.get('id') ?? undefined));
        return only('GET, DELETE');
      }
      case AdminRoutes.redrive:
        return method === 'POST' ? answer(res, 200, { moved: await deps.redrive() }) : only('POST');
      case AdminRoutes.status: {
        if (method !== 'GET') return only('GET');
        const reads = await Promise.allSettled([showSubscription(deps.store, deps.now()), eventCounts(deps.store, deps.now()), deps.queueCounts()]);
        // A damaged page is what status is for: said, with whatever could still be read beside it.
        const damage = deps.damage?.();
        const failed = reads.find((read) => read.status === 'rejected');
        if (failed && damage === undefined) throw failed.reason;
        const [subscription, events, queue] = reads.map((read) => (read.status === 'fulfilled' ? read.value : null));
        return answer(res, 200, { ...deps.describe(), subscription, events, queue, damage: damage ?? null });
      }
      case AdminRoutes.key: {
        if (method !== 'POST') return only('POST');
        if (!deps.rotateKey) return refuse(res, 409, 'key_from_environment', 'The key comes from MCP_API_KEY: change it there and restart the server.');
        const overlap = Number(url.searchParams.get('overlapMs') ?? '0');
        if (!Number.isSafeInteger(overlap) || overlap < 0 || overlap > AccessLimits.maxOverlapMs) {
          return refuse(res, 400, 'invalid_overlap', `overlapMs must be a whole number of milliseconds from 0 to ${AccessLimits.maxOverlapMs} (7 days).`);
        }
        return answer(res, 200, { rotated: true, overlapMs: overlap, ...(await deps.rotateKey(overlap)) });
      }
      case AdminRoutes.senders: {
        if (!deps.access) return refuse(res, 404, 'not_found', 'No such admin route.');
        const name = url.searchParams.get('name') ?? '';
        if (method === 'GET') return answer(res, 200, { senders: await listSenders(deps.access) });
        if (method === 'POST') {
          const rateText = url.searchParams.get('rate');
          const added = await addSender(deps.access, name, rateText === null ? null : Number(rateText), deps.now());
          // A name or rate that can never be added (a reserved name included) is a bad request; a taken name is an answer.
          if (!added.added && added.why !== 'exists') return refuse(res, 400, added.why, added.message);
          return answer(res, 200, added);
        }
        if (method === 'DELETE') return answer(res, 200, await revokeSender(deps.access, name, deps.now()));
        return only('GET, POST, DELETE');
      }
      default:
        return refuse(res, 404, 'not_found', 'No such admin route.');
    }
  } catch {
    // Storage or disk trouble; the detail stays out of the answer, as on the public routes, except
    // a damaged page's sentence: it names the file and what to do, never its content, and this
    // answer goes to the operator only.
    const damage = deps.damage?.();
    if (res.headersSent) res.end();
    else if (damage !== undefined) refuse(res, 503, 'state_damaged', damage);
    else refuse(res, 503, 'unavailable', 'The operation failed: storage unavailable.');
  }
}
