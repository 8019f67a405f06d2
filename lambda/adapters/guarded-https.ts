/**
 * The outbound guard (docs/contract/outbound-guard.md: every rule there is applied here), the only
 * way dm-dot sends anything to a callback.
 *
 * A connection never made moves on to the next checked answer (docs/decisions.md, "Several DNS
 * answers"): nothing was sent on it, so this cannot deliver twice.
 *
 * Deliberately not here: retries (the delivery core decides), and reporting anything of the
 * endpoint beyond a status code and the capped body: errors become categories.
 */
import { lookup } from 'node:dns/promises';
import http from 'node:http';
import https from 'node:https';
import type { LookupFunction } from 'node:net';
import { networkInterfaces } from 'node:os';
import { Limits } from '../core/protocol';
import { LOOPBACK_ADDRESSES } from '../core/loopback';
import { isLoopbackLiteralHost } from '../core/validation';
import type { TransportFailure, WebhookClient, WebhookRequest, WebhookResponse } from '../ports';
import { isForbiddenAddress } from './address-policy';
import { readCapped } from '../core/capped-body';

/** How long an answer whose status line arrived by the deadline may take for its body (see `post`). */
const LATE_ANSWER_GRACE_MS = 250;

export type ResolvedAddress = { address: string; family: 4 | 6 };
export type Resolver = (hostname: string) => Promise<ResolvedAddress[]>;

export interface ConnectRequest {
  url: URL;
  address: ResolvedAddress;
  headers: Record<string, string>;
  body: Uint8Array;
  signal: AbortSignal;
  /** Called once TCP is connected (before TLS): a failure before it reached nothing, and the next address may be tried. */
  onConnected?: () => void;
}
export interface ConnectResponse {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: AsyncIterable<Uint8Array>;
  destroy(): void;
}
export type Connector = (request: ConnectRequest) => Promise<ConnectResponse>;

export type Timers = { setTimeout(fn: () => void, ms: number): unknown; clearTimeout(handle: unknown): void };

export interface GuardOptions {
  /** DMDOT_ALLOW_LOOPBACK_CALLBACKS: also allow the literal hosts 127.0.0.1 and [::1]. */
  allowLoopback: boolean;
  resolver?: Resolver;
  connector?: Connector;
  timers?: Timers;
  deadlineMs?: number;
  maxResponseBytes?: number;
  /** Try IPv4 answers before IPv6 ones; default: true when the machine has no global IPv6 address. */
  preferIpv4?: boolean;
  /** Longest wait for one address to connect while other answers remain; default 2 s. */
  connectAttemptMs?: number;
}

/** Errors of a connection that was never made: the next checked address may be tried. */
const NOT_CONNECTED_CODES = new Set(['ECONNREFUSED', 'EHOSTUNREACH', 'ENETUNREACH', 'EADDRNOTAVAIL', 'EAFNOSUPPORT', 'ETIMEDOUT']);

/** True when some interface has a global (not link-local, not loopback) IPv6 address. */
export function hasGlobalIpv6(interfaces: ReturnType<typeof networkInterfaces> = networkInterfaces()): boolean {
  return Object.values(interfaces).some((list) =>
    (list ?? []).some((i) => i.family === 'IPv6' && !i.internal && !/^fe[89ab]/i.test(i.address) && i.address !== '::1'),
  );
}

export function orderAnswers(answers: readonly ResolvedAddress[], preferIpv4: boolean): ResolvedAddress[] {
  return preferIpv4 ? [...answers.filter((a) => a.family === 4), ...answers.filter((a) => a.family !== 4)] : [...answers];
}

export class RefusedDestination extends Error {}

export const systemResolver: Resolver = async (hostname) => {
  const answers = await lookup(hostname, { all: true, verbatim: true });
  return answers.map((a) => ({ address: a.address, family: a.family === 6 ? 6 : 4 }));
};

/** node:http(s) with the connection pinned to the checked address; SNI and certificate use the host name. */
export const nodeConnector: Connector = ({ url, address, headers, body, signal, onConnected }) =>
  new Promise((resolve, reject) => {
    const pinned: LookupFunction = (_host, options, callback) => {
      if ((options as { all?: boolean }).all) (callback as unknown as (e: null, a: ResolvedAddress[]) => void)(null, [address]);
      else callback(null, address.address, address.family);
    };
    const transport = url.protocol === 'https:' ? https : http;
    const req = transport.request(
      url,
      { method: 'POST', headers: { ...headers, 'content-length': String(body.byteLength) }, lookup: pinned, signal, agent: false },
      (res) => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: res, destroy: () => res.destroy() }),
    );
    // agent: false gives every request a fresh socket; `connect` is TCP's, before any TLS.
    req.once('socket', (socket) => socket.once('connect', () => onConnected?.()));
    req.on('error', reject);
    req.end(body);
  });

function failureOf(error: unknown): TransportFailure {
  const code = String((error as { code?: unknown })?.code ?? '');
  if (/^(ERR_TLS|ERR_SSL|CERT_|DEPTH_ZERO|UNABLE_TO_|SELF_SIGNED|HOSTNAME_MISMATCH|ERR_OSSL)/.test(code) || code === 'EPROTO') return 'tls_error';
  if (code === 'ETIMEDOUT' || code === 'ESOCKETTIMEDOUT') return 'timeout';
  return 'connection_refused';
}

function firstHeader(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

export function createGuardedWebhookClient(options: GuardOptions): WebhookClient {
  const resolver = options.resolver ?? systemResolver;
  const connector = options.connector ?? nodeConnector;
  const timers: Timers = options.timers ?? { setTimeout: (fn, ms) => setTimeout(fn, ms), clearTimeout: (h) => clearTimeout(h as NodeJS.Timeout) };
  const deadlineMs = options.deadlineMs ?? Limits.outboundDeadlineMs;
  const maxResponseBytes = options.maxResponseBytes ?? Limits.outboundResponseMaxBytes;
  const preferIpv4 = options.preferIpv4 ?? !hasGlobalIpv6();
  const connectAttemptMs = options.connectAttemptMs ?? 2_000;

  async function checkedAddresses(url: URL): Promise<ResolvedAddress[]> {
    const loopbackLiteral = options.allowLoopback && isLoopbackLiteralHost(url.hostname);
    if (url.protocol !== 'https:' && !(url.protocol === 'http:' && loopbackLiteral)) throw new RefusedDestination('scheme');
    // An empty fragment (`…/hook#`) leaves url.hash empty but is still a fragment: href keeps the '#'.
    if (url.username || url.password || url.hash || url.href.includes('#')) throw new RefusedDestination('userinfo or fragment');
    const host = url.hostname.replace(/^\[(.*)\]$/, '$1');
    const literal = /^[\d.]+$/.test(host) || host.includes(':');
    const answers: ResolvedAddress[] = literal ? [{ address: host, family: host.includes(':') ? 6 : 4 }] : await resolver(host);
    if (answers.length === 0) throw new RefusedDestination('no address');
    const refused = (address: string) => !(loopbackLiteral && LOOPBACK_ADDRESSES.has(address)) && isForbiddenAddress(address);
    if (answers.some((answer) => refused(answer.address))) throw new RefusedDestination('address');
    return orderAnswers(answers, preferIpv4);
  }

  /** The checked addresses in turn until one connection is made (the header's second paragraph). */
  async function connectAny(url: URL, addresses: ResolvedAddress[], request: WebhookRequest, deadline: AbortSignal, endsAt: number): Promise<ConnectResponse> {
    let lastError: unknown;
    for (let i = 0; i < addresses.length && !deadline.aborted; i++) {
      const othersLeft = addresses.length - i - 1;
      // Only while other answers remain does an attempt end before the deadline; the last (most
      // often the only) one takes the deadline's signal itself: no controller per POST for nothing.
      const attempt = othersLeft > 0 ? new AbortController() : undefined;
      const onDeadline = () => attempt?.abort();
      let connected = false;
      let timer: unknown;
      if (attempt) {
        deadline.addEventListener('abort', onDeadline, { once: true });
        const share = Math.min(connectAttemptMs, Math.floor((endsAt - Date.now()) / (othersLeft + 1)));
        timer = timers.setTimeout(() => connected || attempt.abort(), Math.max(0, share));
      }
      try {
        return await connector({
          url,
          address: addresses[i]!,
          body: request.body,
          signal: attempt?.signal ?? deadline,
          headers: { ...request.headers, 'accept-encoding': 'identity', 'user-agent': 'dm-dot' },
          onConnected: () => void (connected = true),
        });
      } catch (error) {
        // The link to the deadline stays on the connection that is answering (its body is read
        // under the same deadline); only a failed attempt lets go of it.
        if (attempt) deadline.removeEventListener('abort', onDeadline);
        lastError = error;
        const code = String((error as { code?: unknown })?.code ?? '');
        const neverConnected = !connected && (attempt?.signal.aborted || NOT_CONNECTED_CODES.has(code));
        if (!neverConnected || deadline.aborted) throw error;
      } finally {
        if (timer !== undefined) timers.clearTimeout(timer);
      }
    }
    throw lastError ?? new Error('deadline');
  }

  async function post(request: WebhookRequest): Promise<WebhookResponse> {
    if (request.body.byteLength > Limits.outboundBodyMaxBytes) throw new Error('guarded client: outgoing body over 256 KiB');
    if (request.timeoutMs !== undefined && !(Number.isFinite(request.timeoutMs) && request.timeoutMs > 0)) {
      throw new Error('guarded client: timeoutMs must be a positive number of milliseconds');
    }
    // A request may ask for less than the guard's deadline, never for more.
    const requestDeadlineMs = Math.min(deadlineMs, request.timeoutMs ?? deadlineMs);
    const endsAt = Date.now() + requestDeadlineMs;
    const controller = new AbortController();
    let response: ConnectResponse | undefined;
    // A starved event loop runs its due timers before the I/O that already arrived, so a deadline
    // that fires late would throw away an answer that came in time, and the event would be POSTed
    // again. The deadline yields once to pending I/O, and an answer whose status line is in gets a
    // short grace for its body; the POST's own 5 s is unchanged when the loop keeps up.
    let timer = timers.setTimeout(() => {
      timer = timers.setTimeout(() => {
        if (response === undefined) return controller.abort();
        timer = timers.setTimeout(() => controller.abort(), LATE_ANSWER_GRACE_MS);
      }, 0);
    }, requestDeadlineMs);
    try {
      const url = new URL(request.url);
      const addresses = await Promise.race([
        checkedAddresses(url),
        new Promise<never>((_, reject) => controller.signal.addEventListener('abort', () => reject(new Error('deadline')), { once: true })),
      ]);
      response = await connectAny(url, addresses, request, controller.signal, endsAt);
      const encoding = firstHeader(response.headers['content-encoding'])?.trim().toLowerCase();
      // Compression can also arrive as a transfer coding (`Transfer-Encoding: gzip, chunked`), which node does not undo.
      const transfer = (firstHeader(response.headers['transfer-encoding']) ?? '').toLowerCase().split(',');
      if ((encoding && encoding !== 'identity') || transfer.some((coding) => !['', 'chunked', 'identity'].includes(coding.trim())))
        return { kind: 'failure', reason: 'bad_response' };
      const body = await readCapped(response.body, maxResponseBytes);
      if (body === undefined) return { kind: 'failure', reason: 'bad_response' };
      if (controller.signal.aborted) return { kind: 'failure', reason: 'timeout' };
      const retryAfter = firstHeader(response.headers['retry-after']);
      return { kind: 'response', status: response.status, body, ...(retryAfter !== undefined ? { retryAfter } : {}) };
    } catch (error) {
      if (controller.signal.aborted) return { kind: 'failure', reason: 'timeout' };
      // Refused destinations and DNS failures have no TLS or timeout code: they read connection_refused.
      return { kind: 'failure', reason: failureOf(error) };
    } finally {
      timers.clearTimeout(timer);
      response?.destroy();
    }
  }

  return { post };
}
