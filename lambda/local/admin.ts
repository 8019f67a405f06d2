/**
 * Operator actions for `dm-dot events`, `subscription` and `redrive` (SPEC 9.1), in three parts:
 *
 * 1. The operations themselves, over the `Store` port, so the CLI runs the same code against the
 *    running local server, a stopped one's state directory, or the AWS table (`--aws`).
 * 2. The admin routes of the local runtime (`/admin/...`), served by lambda/local/runtime.ts on its
 *    node:http server only: the file store keeps its state in memory and assumes one process per
 *    state directory, so while the server runs a second process must ask it instead of writing
 *    `store.json` behind its back.
 * 3. The files that let the CLI find a running server: `<state dir>/admin-token` (a random token
 *    written fresh at every start, mode 0600) and `<state dir>/runtime.json` (pid and URL).
 *
 * Admin routes are authenticated by the admin token only, never by the shared API key: whoever
 * holds the API key (ChatGPT, pup, any sender) must not be able to end the subscription or move
 * dead letters. Only someone who can read the state directory can.
 *
 * Deliberately not here: the admin routes on AWS (lambda/http/app.ts never has them; on AWS the
 * operator's own IAM credentials are the admin credential), anything that shows a signing secret
 * or a full callback URL (a view carries the callback's host only), and writing events.
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { readFile, rm, writeFile } from 'node:fs/promises';
import type http from 'node:http';
import { join } from 'node:path';
import { EventStatus, type FailureReason } from '../core/protocol';
import type { EventRecord, Store, SubscriptionRecord } from '../ports';

// ---------------------------------------------------------------------------------------------
// 1. Operations

/** What an operator sees of the subscription: never the secret, the callback's host only. */
export interface SubscriptionView {
  id: string;
  callbackHost: string;
  createdAt: string;
  refreshedAt: string;
  expiresAt: string;
  lastDeliveryAt: string | null;
  lastError: FailureReason | null;
}

/** One line of the delivery log. */
export interface EventView {
  eventId: string;
  status: EventStatus;
  attempts: number;
  lastError: FailureReason | null;
  lastHttpStatus: number | null;
  createdAt: string;
  deliveredAt: string | null;
}

const iso = (ms: number | undefined): string | null => (ms === undefined || ms === null ? null : new Date(ms).toISOString());

export function subscriptionView(record: SubscriptionRecord): SubscriptionView {
  let callbackHost: string;
  try {
    callbackHost = new URL(record.url).host;
  } catch {
    callbackHost = '(unparseable)';
  }
  return {
    id: record.id,
    callbackHost,
    createdAt: iso(record.createdAt)!,
    refreshedAt: iso(record.refreshedAt)!,
    expiresAt: iso(record.expiresAt)!,
    lastDeliveryAt: iso(record.lastDeliveryAt),
    lastError: record.lastError ?? null,
  };
}

export function eventView(record: EventRecord): EventView {
  return {
    eventId: record.eventId,
    status: record.status,
    attempts: record.attempts,
    lastError: record.lastError ?? null,
    lastHttpStatus: record.lastHttpStatus ?? null,
    createdAt: iso(record.createdAt)!,
    deliveredAt: iso(record.deliveredAt),
  };
}

export const EVENT_STATUSES: readonly EventStatus[] = Object.values(EventStatus);

export function isEventStatus(value: string): value is EventStatus {
  return (EVENT_STATUSES as readonly string[]).includes(value);
}

export async function showSubscription(store: Store, now: number): Promise<SubscriptionView | null> {
  const record = await store.getSubscription(now);
  return record ? subscriptionView(record) : null;
}

/**
 * Ends the live subscription so that another callback can subscribe at once. With `expectedId`
 * (the one the operator was shown and confirmed) nothing else is ever deleted; and the delete is
 * conditional on the URL just read, so a subscription that replaced it in between is left alone.
 * Its queued deliveries are dropped by the delivery worker (their subscription is gone).
 */
export async function clearSubscription(store: Store, now: number, expectedId?: string): Promise<{ cleared: boolean; id: string | null }> {
  const record = await store.getSubscription(now);
  if (!record) return { cleared: false, id: null };
  if (expectedId !== undefined && record.id !== expectedId) return { cleared: false, id: record.id };
  const cleared = await store.deleteSubscription(record.url);
  return { cleared, id: record.id };
}

export async function listEventViews(store: Store, now: number, status?: EventStatus): Promise<EventView[]> {
  return (await store.listEvents(now, status === undefined ? {} : { status })).map(eventView);
}

// ---------------------------------------------------------------------------------------------
// 2. Admin routes of the local runtime

export const ADMIN_PREFIX = '/admin/';

export interface AdminDeps {
  store: Store;
  /** Moves the dead letters back into the running queue; resolves with how many moved. */
  redrive(): Promise<number>;
  now(): number;
  token: string;
}

function sha256(value: string): Buffer {
  return createHash('sha256').update(value, 'utf8').digest();
}

/** Constant time whatever the lengths: both sides are hashed first. */
function tokenMatches(offered: string | undefined, token: string): boolean {
  return offered !== undefined && timingSafeEqual(sha256(offered), sha256(token));
}

function answer(res: http.ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  res.writeHead(status, { 'content-type': 'application/json', 'cache-control': 'no-store', ...headers });
  res.end(JSON.stringify(body));
}

function refuse(res: http.ServerResponse, status: number, code: string, message: string, headers: Record<string, string> = {}): void {
  answer(res, status, { error: { code, message } }, headers);
}

export function isAdminPath(url: string | undefined): boolean {
  return url !== undefined && (url === '/admin' || url.startsWith(ADMIN_PREFIX));
}

/** Serves `/admin/...`. The request body, if any, is never read: no admin route takes one. */
export async function handleAdmin(deps: AdminDeps, req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
  // A browser page never gets here: no admin route answers a request that carries an Origin.
  if (req.headers.origin !== undefined) return refuse(res, 403, 'forbidden_origin', 'Admin routes refuse cross-origin requests.');
  const bearer = /^Bearer\s+(.+)$/i.exec(req.headers.authorization ?? '')?.[1]?.trim();
  if (!tokenMatches(bearer, deps.token)) {
    return refuse(res, 401, 'unauthorized', 'Admin routes need the admin token from <state dir>/admin-token (the API key is not accepted).', {
      'www-authenticate': 'Bearer',
    });
  }
  const url = new URL(req.url ?? '/', 'http://localhost');
  const method = req.method ?? 'GET';
  try {
    switch (url.pathname) {
      case '/admin/events': {
        if (method !== 'GET') return refuse(res, 405, 'method_not_allowed', 'Use GET.', { allow: 'GET' });
        const status = url.searchParams.get('status') ?? undefined;
        if (status !== undefined && !isEventStatus(status)) {
          return refuse(res, 400, 'invalid_status', `status must be one of ${EVENT_STATUSES.join(', ')}`);
        }
        return answer(res, 200, { events: await listEventViews(deps.store, deps.now(), status) });
      }
      case '/admin/subscription': {
        if (method === 'GET') return answer(res, 200, { subscription: await showSubscription(deps.store, deps.now()) });
        if (method === 'DELETE') return answer(res, 200, await clearSubscription(deps.store, deps.now(), url.searchParams.get('id') ?? undefined));
        return refuse(res, 405, 'method_not_allowed', 'Use GET or DELETE.', { allow: 'GET, DELETE' });
      }
      case '/admin/redrive': {
        if (method !== 'POST') return refuse(res, 405, 'method_not_allowed', 'Use POST.', { allow: 'POST' });
        return answer(res, 200, { moved: await deps.redrive() });
      }
      default:
        return refuse(res, 404, 'not_found', 'No such admin route.');
    }
  } catch {
    // Storage or disk trouble; the detail stays out of the answer, as on the public routes.
    if (!res.headersSent) refuse(res, 503, 'unavailable', 'The operation failed: storage or queue unavailable.');
    else res.end();
  }
}

// ---------------------------------------------------------------------------------------------
// 3. Files that let the CLI find the running server

export const ADMIN_TOKEN_FILE = 'admin-token';
export const RUNTIME_FILE = 'runtime.json';

export interface RuntimeInfo {
  pid: number;
  /** Base URL of the running server, e.g. http://127.0.0.1:8787 (no path). */
  url: string;
}

/** Writes a fresh admin token (0600) and the runtime file; a token from an earlier run stops working. */
export async function publishAdmin(stateDir: string, info: RuntimeInfo): Promise<string> {
  const token = randomBytes(32).toString('base64url');
  // Removed first: writeFile's mode applies only when it creates the file.
  await rm(join(stateDir, ADMIN_TOKEN_FILE), { force: true });
  await writeFile(join(stateDir, ADMIN_TOKEN_FILE), `${token}\n`, { mode: 0o600 });
  await rm(join(stateDir, RUNTIME_FILE), { force: true });
  await writeFile(join(stateDir, RUNTIME_FILE), `${JSON.stringify(info)}\n`, { mode: 0o600 });
  return token;
}

/** Removes both files at stop, unless another server has taken the state directory over since. */
export async function withdrawAdmin(stateDir: string, pid: number): Promise<void> {
  const info = await readRuntimeInfo(stateDir);
  if (info && info.pid !== pid) return;
  await rm(join(stateDir, RUNTIME_FILE), { force: true });
  await rm(join(stateDir, ADMIN_TOKEN_FILE), { force: true });
}

export async function readRuntimeInfo(stateDir: string): Promise<RuntimeInfo | undefined> {
  try {
    const parsed = JSON.parse(await readFile(join(stateDir, RUNTIME_FILE), 'utf8')) as Partial<RuntimeInfo>;
    if (typeof parsed.pid === 'number' && typeof parsed.url === 'string') return { pid: parsed.pid, url: parsed.url };
  } catch {
    // Absent or half-written: no running server recorded.
  }
  return undefined;
}

export async function readAdminToken(stateDir: string): Promise<string | undefined> {
  try {
    return (await readFile(join(stateDir, ADMIN_TOKEN_FILE), 'utf8')).trim() || undefined;
  } catch {
    return undefined;
  }
}
