/**
 * `dm-dot dot`: a stand-in ChatGPT dot, to see messages arrive without ChatGPT. A webhook
 * receiver on 127.0.0.1 subscribes through MCP `events/subscribe` with a fresh `whsec_` secret,
 * answers the signed challenge, verifies every delivery over its raw bytes (Standard Webhooks),
 * drops duplicates by `webhook-id`, prints each message with its event id and latency, refreshes
 * the subscription before it expires, and unsubscribes on Ctrl-C (the server then drops that
 * subscription's queued events). Each line typed on its standard input is sent as a message
 * (POST /v1/messages), so one terminal runs the server and a second one the whole walkthrough.
 *
 * It tells the truth about its subscription and never re-subscribes quietly. It stops, exit 1,
 * saying why, when the subscription ended: it answered a 410 (the server ends the subscription
 * on a 410), a refresh was refused with -32000 (another callback holds it now) or with 401 (the
 * key was rotated), the refresh kept failing until the expiry, or a refresh came back without
 * `deliveryStatus`, which means the subscription had ended before it (cleared, or ended by a 410)
 * and the refresh created a new one: that new one is removed at once. Besides the refresh that
 * rotates its secret (at 80% of the lifetime), it checks its subscription every minute
 * (`--check`) by subscribing again with the same secret (a refresh that is not challenged again),
 * so that a `subscription clear`, a `key rotate` or another dot taking over is noticed within that
 * time, not days later. With `--delay` past the
 * server's deadline, a delivery whose request the server closed before the answer is reported as
 * such (the server counts it as a timeout and retries), never as received.
 *
 * Deliberately not here: a public callback (the server must run with
 * DMDOT_ALLOW_LOOPBACK_CALLBACKS=1; the AWS stack never does), and printing the key or a secret.
 */
import { randomBytes } from 'node:crypto';
import type http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Budgets } from '../../core/budgets';
import { ErrorCodes, EVENT_NAME, Limits, Methods, SECRET_PREFIX, WebhookHeaders } from '../../core/protocol';
import { integerValue, TARGET_OPTIONS } from '../args';
import { defineCommand } from '../command';
import type { Context } from '../context';
import { OperationError } from '../errors';
import { target as findTarget, type Target } from '../local/target';
import { KeyRefused, rpc, RpcError } from '../mcp/rpc';
import { outcomeLine, sendMessage, type SendOutcome } from '../messages';
import { relative, shortTime } from '../output';

export const DEFAULT_PORT = 8788;
export const DEFAULT_CHECK_MS = Budgets.dotCheckMs;
const PATH = '/dot';

export const command = defineCommand({
  spec: {
    name: 'dot',
    summary: 'a stand-in ChatGPT dot: receive, verify and print messages; type lines to send them',
    description:
      'Listens on http://127.0.0.1:PORT/dot, subscribes to message.created with a fresh signing secret, verifies every delivery, prints each ' +
      'message with its event id and latency, and sends each line typed on its standard input as a message. ' +
      'The server must allow loopback callbacks: DMDOT_ALLOW_LOOPBACK_CALLBACKS=1 npm start. ' +
      'It refreshes the subscription before it expires and unsubscribes on Ctrl-C (exit 0); the server then drops the queued events of that subscription. ' +
      'It stops with exit 1 and says why when its subscription ended: it answered 410, another callback took it, the key was rotated, or the ' +
      'subscription had been cleared; ' +
      `it checks its subscription every ${DEFAULT_CHECK_MS / 1000} s (--check), so none of these goes unnoticed for longer. ` +
      'Messages go to stdout, everything else to stderr.',
    options: {
      port: { type: 'string', value: 'N', description: `receiver port on 127.0.0.1 (default ${DEFAULT_PORT}; 0 picks a free one)` },
      status: {
        type: 'string',
        value: 'N',
        description: 'answer deliveries with HTTP status N (default 200): 500 to watch retries, 400 for a permanent failure, 410 to end the subscription',
      },
      delay: {
        type: 'string',
        value: 'MS',
        description: "wait MS milliseconds before answering (0..60000); past the server's 5 s deadline the server hangs up first and retries",
      },
      ttl: {
        type: 'string',
        value: 'MS',
        description: `ask for this subscription lifetime (${Limits.ttlMinMs}..${Limits.ttlMaxMs}; default: the server's, 7 days)`,
      },
      check: {
        type: 'string',
        value: 'MS',
        description: `check that the subscription still stands every MS milliseconds (1000..3600000; default ${DEFAULT_CHECK_MS})`,
      },
      ...TARGET_OPTIONS,
    },
    json:
      'one document when it stops: {"subscription": {"id", "callbackUrl", "expiresAt", "refreshAt"}, "ended": {"reason": "interrupted" | "gone" | ' +
      '"ended_before_refresh" | "conflict" | "key_refused" | "expired", "message"}, ' +
      '"unsubscribed": bool, "received": [{"eventId", "message", "latencyMs", "attempt", "answered": N | null, "hungUp": bool}], "sent": [send\'s ' +
      'document, ...]}; the live lines go to stderr.',
  },
  async run(ctx, { values }) {
    const options: DotOptions = {
      port: integerValue(values.port, 'port', 0, 65_535) ?? DEFAULT_PORT,
      status: integerValue(values.status, 'status', 200, 599) ?? 200,
      delayMs: integerValue(values.delay, 'delay', 0, 60_000) ?? 0,
      ttlMs: integerValue(values.ttl, 'ttl', Limits.ttlMinMs, Limits.ttlMaxMs),
      checkMs: integerValue(values.check, 'check', 1000, 3_600_000) ?? DEFAULT_CHECK_MS,
    };
    const to = await findTarget(ctx, values);
    return new Dot(ctx, to, options).run();
  },
});

interface DotOptions {
  port: number;
  status: number;
  delayMs: number;
  ttlMs: number | undefined;
  checkMs: number;
}

export type EndReason = 'interrupted' | 'gone' | 'ended_before_refresh' | 'conflict' | 'key_refused' | 'expired';

interface Received {
  eventId: string;
  message: string;
  latencyMs: number | null;
  attempt: number;
  answered: number | null;
  hungUp: boolean;
}

interface Granted {
  id: string;
  refreshBefore: string;
  deliveryStatus?: unknown;
}

export function newSecret(): string {
  return `${SECRET_PREFIX}${randomBytes(32).toString('base64')}`;
}

/** Refreshes at 80% of the granted lifetime. */
export function refreshDelayMs(expiresAt: number, now: number): number {
  return Math.max(1000, Math.floor((expiresAt - now) * 0.8));
}

type Verifier = new (secret: string) => { verify(payload: Buffer, headers: Record<string, string>, options?: { jsonParse?: boolean }): unknown };

class Dot {
  private secret = newSecret();
  /** Secrets accepted besides the current one: the previous one during the server's overlap, or one a failed refresh may have left the server holding. */
  private others: { secret: string; until: number }[] = [];
  /** webhook-ids answered 2xx: a repeat is acknowledged again and not printed twice. */
  private readonly acknowledged = new Set<string>();
  private readonly attempts = new Map<string, number>();
  private readonly received: Received[] = [];
  private readonly sent: SendOutcome[] = [];
  /** The send of a typed line under way: the dot says how it ended before it stops (a 410 to that very line ends the dot first). */
  private sending: Promise<unknown> | undefined;
  private callbackUrl = '';
  private subscriptionId = '';
  private expiresAt = 0;
  private refreshAt = 0;
  private refreshTimer: NodeJS.Timeout | undefined;
  private checkTimer: NodeJS.Timeout | undefined;
  /** A refresh or a check is under way: the other waits for its next turn. */
  private busy = false;
  private stopping = false;
  private Webhook!: Verifier;
  private finish!: (end: { reason: EndReason; message: string }) => void;
  private readonly ended = new Promise<{ reason: EndReason; message: string }>((done) => (this.finish = done));

  constructor(
    private readonly ctx: Context,
    private readonly target: Target,
    private readonly options: DotOptions,
  ) {
    ctx.keepSecret(this.secret);
  }

  private say(line: string): void {
    this.ctx.note(line);
  }

  private end(reason: EndReason, message: string): void {
    this.stopping = true;
    this.finish({ reason, message });
  }

  async run(): Promise<number> {
    this.Webhook = (await import('standardwebhooks')).Webhook as unknown as Verifier;
    const { createServer } = await import('node:http');
    const server = createServer((req, res) => void this.receive(req, res).catch(() => res.destroy()));
    await new Promise<void>((done, fail) => {
      server.once('error', (error: NodeJS.ErrnoException) =>
        fail(
          error.code === 'EADDRINUSE'
            ? new OperationError(`port ${this.options.port} on 127.0.0.1 is in use: pass --port N (0 picks a free one)`, 'port_in_use')
            : error,
        ),
      );
      server.listen(this.options.port, '127.0.0.1', () => done());
    });
    const close = () =>
      new Promise<void>((done) => {
        server.close(() => done());
        server.closeAllConnections();
      });
    this.callbackUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}${PATH}`;
    try {
      const granted = await this.ctx.progress('subscribing (the server challenges this receiver first)', this.subscribe());
      this.granted(granted);
      this.say(
        `subscribed ${granted.id} for ` +
          `${this.callbackUrl}${granted.deliveryStatus ? ' (it took over the live subscription an earlier dm-dot dot left on this URL)' : ''}`,
      );
      this.say(
        `the subscription expires at ${shortTime(granted.refreshBefore)} (${relative(granted.refreshBefore)}) unless refreshed; this dot refreshes ` +
          `it at ${shortTime(new Date(this.refreshAt).toISOString())}`,
      );
      this.say(
        `it checks the subscription every ${formatMs(this.options.checkMs)}: a subscription clear, a key rotation or another dot taking over is ` +
          'noticed within that',
      );
      this.say('waiting for messages; type a line to send it as a message; Ctrl-C unsubscribes and stops');
      this.checkTimer = setInterval(() => void this.check(), this.options.checkMs);
    } catch (error) {
      await close();
      throw subscribeRefusal(error, this.target);
    }
    const signal = this.ctx.signal;
    const onAbort = () => this.end('interrupted', 'stopped (Ctrl-C)');
    if (signal?.aborted) onAbort();
    signal?.addEventListener('abort', onAbort, { once: true });
    void this.pumpStdin();

    const end = await this.ended;
    // Its "sent:" line comes before the dot's last words, not after it stopped listening.
    if (this.sending) await this.sending.catch(() => undefined);
    signal?.removeEventListener('abort', onAbort);
    clearTimeout(this.refreshTimer);
    clearInterval(this.checkTimer);
    let unsubscribed = false;
    let code = 1;
    if (end.reason === 'interrupted' || end.reason === 'ended_before_refresh') {
      try {
        await this.rpcCall(Methods.eventsUnsubscribe, { name: EVENT_NAME, arguments: {}, delivery: { mode: 'webhook', url: this.callbackUrl } });
        unsubscribed = true;
      } catch (error) {
        this.say(
          `could not unsubscribe (${this.ctx.scrub((error as Error).message)}); the subscription expires by itself at ` +
            `${shortTime(new Date(this.expiresAt).toISOString())}, or end it with dm-dot subscription clear`,
        );
      }
    }
    if (end.reason === 'interrupted') {
      if (unsubscribed) {
        // Not at once: a queued event ends `dropped` when its next attempt comes due (at most the longest retry delay).
        this.say(`unsubscribed ${this.subscriptionId}; events still queued for it end dropped at their next attempt, not delivered`);
      }
      code = unsubscribed ? 0 : 1;
    } else {
      this.say(end.message);
      if (end.reason === 'ended_before_refresh' && unsubscribed) this.say(`removed the subscription that refresh created (${this.subscriptionId})`);
    }
    await close();
    if (this.ctx.json) {
      this.ctx.printJson({
        subscription: {
          id: this.subscriptionId,
          callbackUrl: this.callbackUrl,
          expiresAt: new Date(this.expiresAt).toISOString(),
          refreshAt: new Date(this.refreshAt).toISOString(),
        },
        ended: { reason: end.reason, message: end.message },
        unsubscribed,
        received: this.received,
        sent: this.sent,
      });
    }
    return code;
  }

  private granted(granted: Granted): void {
    this.subscriptionId = granted.id;
    this.expiresAt = Date.parse(granted.refreshBefore);
    this.refreshAt = Date.now() + refreshDelayMs(this.expiresAt, Date.now());
    this.scheduleRefresh(this.refreshAt - Date.now());
  }

  private rpcCall(method: string, params: Record<string, unknown>) {
    return rpc(this.target, method, params);
  }

  private async subscribe(): Promise<Granted> {
    const result = await this.rpcCall(Methods.eventsSubscribe, {
      name: EVENT_NAME,
      arguments: {},
      delivery: { mode: 'webhook', url: this.callbackUrl, secret: this.secret },
      ...(this.options.ttlMs !== undefined ? { ttlMs: this.options.ttlMs } : {}),
    });
    if (typeof result.id !== 'string' || typeof result.refreshBefore !== 'string' || Number.isNaN(Date.parse(result.refreshBefore))) {
      throw new OperationError('the server answered events/subscribe without an id and a refreshBefore', 'bad_answer');
    }
    return { id: result.id, refreshBefore: result.refreshBefore, ...(result.deliveryStatus !== undefined ? { deliveryStatus: result.deliveryStatus } : {}) };
  }

  private scheduleRefresh(inMs: number): void {
    clearTimeout(this.refreshTimer);
    this.refreshTimer = setTimeout(() => void this.refresh(), Math.min(Math.max(0, inMs), 2 ** 31 - 1));
  }

  /**
   * Same URL, same secret: the server refreshes a live subscription without a new challenge, and
   * answers how its delivery goes. Without that answer, the subscription had ended (cleared, or
   * ended by a 410) and this call created a new one; refused, the key was rotated or another dot
   * holds it. A failure to reach the server is left to the refresh schedule.
   */
  private async check(): Promise<void> {
    if (this.stopping || this.busy) return;
    this.busy = true;
    let granted: Granted;
    try {
      granted = await this.subscribe();
    } catch (error) {
      if (this.stopping) return;
      if (error instanceof RpcError && error.code === ErrorCodes.subscriptionConflict) return this.end('conflict', CONFLICT);
      if (error instanceof KeyRefused) return this.end('key_refused', KEY_ROTATED);
      return;
    } finally {
      this.busy = false;
    }
    if (this.stopping) return;
    if (granted.deliveryStatus === undefined) {
      this.subscriptionId = granted.id;
      return this.end(
        'ended_before_refresh',
        "the subscription had ended (cleared with dm-dot subscription clear, or ended by a 410): this dot's check found none, and its check " +
          `created a new one; ${ENDED_TAIL}`,
      );
    }
    this.expiresAt = Date.parse(granted.refreshBefore);
  }

  /** Same URL, new secret. The old secret stays accepted during the server's overlap. */
  private async refresh(): Promise<void> {
    if (this.stopping) return;
    if (this.busy) return this.scheduleRefresh(1000);
    this.busy = true;
    try {
      await this.rotate();
    } finally {
      this.busy = false;
    }
  }

  private async rotate(): Promise<void> {
    const old = this.secret;
    this.secret = newSecret();
    this.ctx.keepSecret(this.secret);
    let granted: Granted;
    try {
      granted = await this.subscribe();
    } catch (error) {
      if (this.stopping) return;
      if (error instanceof RpcError && error.code === ErrorCodes.subscriptionConflict) {
        return this.end('conflict', CONFLICT);
      }
      if (error instanceof KeyRefused) return this.end('key_refused', KEY_ROTATED);
      // The server may or may not hold the new secret now: accept both until the overlap ends.
      const fresh = this.secret;
      this.secret = old;
      this.others.push({ secret: fresh, until: Date.now() + Limits.rotationOverlapMs + Budgets.dotSecretGraceMs });
      const left = this.expiresAt - Date.now();
      if (left <= 0) {
        return this.end(
          'expired',
          `the subscription expired at ${shortTime(new Date(this.expiresAt).toISOString())}: every refresh failed (last: ` +
            `${this.ctx.scrub((error as Error).message)}). Run dm-dot dot again`,
        );
      }
      const retryIn = Math.min(Budgets.dotRefreshRetryMaxMs, Math.max(1000, left / 2));
      this.say(
        `refresh failed (${this.ctx.scrub((error as Error).message)}); trying again in ${Math.round(retryIn / 1000)} s, before the expiry at ` +
          `${shortTime(new Date(this.expiresAt).toISOString())}`,
      );
      return this.scheduleRefresh(retryIn);
    }
    this.others.push({ secret: old, until: Date.now() + Limits.rotationOverlapMs + Budgets.dotSecretGraceMs });
    if (this.stopping) return;
    if (granted.deliveryStatus === undefined) {
      // A refresh of a live subscription always reports its delivery status; without it, this call
      // found none and created a new one.
      this.subscriptionId = granted.id;
      this.expiresAt = Date.parse(granted.refreshBefore);
      return this.end(
        'ended_before_refresh',
        'the subscription had ended before this refresh (cleared with dm-dot subscription clear, ended by a 410, or expired), so the refresh ' +
          `created a new one; ${ENDED_TAIL}`,
      );
    }
    this.granted(granted);
    this.say(
      `refreshed ${granted.id}: it now expires at ${shortTime(granted.refreshBefore)}; next refresh at ${shortTime(new Date(this.refreshAt).toISOString())}`,
    );
  }

  private async pumpStdin(): Promise<void> {
    const lines = this.ctx.io.stdinLines?.();
    if (!lines) return;
    try {
      for await (const line of lines) {
        if (this.stopping) break;
        const text = line.trim();
        if (!text) continue;
        const sending = sendMessage(this.ctx, this.target, text);
        this.sending = sending;
        const outcome = await sending;
        this.sent.push(outcome);
        this.say(`sent: ${outcomeLine(outcome)}`);
      }
    } catch (error) {
      if (!this.stopping) this.say(`stopped reading standard input (${this.ctx.scrub((error as Error).message)})`);
    }
    // End of standard input: the dot keeps receiving until Ctrl-C.
  }

  private async receive(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const reply = (status: number, body: unknown = {}) => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(body));
    };
    if (req.method !== 'POST' || new URL(req.url ?? '/', 'http://x').pathname !== PATH) return reply(404, { error: 'not found' });
    const arrived = Date.now();
    // The server closing the request before the answer (its deadline passed) is seen here.
    let hungUp = false;
    res.once('close', () => {
      if (!res.writableFinished) hungUp = true;
    });
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of req as AsyncIterable<Buffer>) {
      size += chunk.length;
      if (size > Limits.requestBodyMaxBytes) return reply(413);
      chunks.push(chunk);
    }
    const raw = Buffer.concat(chunks);
    const headers = {
      'webhook-id': String(req.headers[WebhookHeaders.id] ?? ''),
      'webhook-timestamp': String(req.headers[WebhookHeaders.timestamp] ?? ''),
      'webhook-signature': String(req.headers[WebhookHeaders.signature] ?? ''),
    };
    if (!this.verifies(raw, headers)) {
      this.say(`refused a request with a missing or wrong signature (webhook-id ${headers['webhook-id'].slice(0, 64) || 'none'})`);
      return reply(401, { error: 'bad signature' });
    }
    let body: { type?: unknown; challenge?: unknown; timestamp?: unknown; data?: { message?: unknown } };
    try {
      body = JSON.parse(raw.toString('utf8'));
    } catch {
      return reply(400, { error: 'not JSON' });
    }
    if (body.type === 'verification') return reply(200, { challenge: body.challenge });

    const id = headers['webhook-id'];
    if (this.acknowledged.has(id)) {
      this.say(`dropped a duplicate of ${id} (already acknowledged)`);
      return reply(200);
    }
    const attempt = (this.attempts.get(id) ?? 0) + 1;
    this.attempts.set(id, attempt);
    if (this.options.delayMs > 0) await new Promise((done) => setTimeout(done, this.options.delayMs));
    const message = typeof body.data?.message === 'string' ? body.data.message : '';
    const latencyMs = typeof body.timestamp === 'string' ? arrived - Date.parse(body.timestamp) : null;
    if (hungUp || res.destroyed || req.socket.destroyed) {
      this.received.push({ eventId: id, message, latencyMs, attempt, answered: null, hungUp: true });
      this.say(
        `${id} (attempt ${attempt}) arrived, but the server had already hung up before this dot answered (--delay ${this.options.delayMs} ms is ` +
          'longer than it waits): ' +
          'the server takes it as a timeout and tries again later; the message was not received',
      );
      return;
    }
    const status = this.options.status;
    const accepted = status >= 200 && status < 300;
    if (accepted) this.acknowledged.add(id);
    this.received.push({ eventId: id, message, latencyMs, attempt, answered: status, hungUp: false });
    const line = accepted
      ? `${id}  ${latencyMs ?? '?'} ms  ${attempt > 1 ? `(attempt ${attempt})  ` : ''}${message}`
      : `${id}  answered ${status} (attempt ${attempt})`;
    if (this.ctx.json) this.say(`received ${line}`);
    else this.ctx.print(`${line}\n`);
    reply(status);
    if (status === 410 && !this.stopping) {
      this.end(
        'gone',
        `the subscription ended: this dot answered 410 Gone to ${id}, and the server ends the subscription on a 410. This dot stops; run dm-dot ` +
          'dot again to subscribe anew',
      );
    }
  }

  /** Standard Webhooks over the raw bytes: the current secret, or another one still in its overlap. */
  private verifies(raw: Buffer, headers: Record<string, string>): boolean {
    const now = Date.now();
    this.others = this.others.filter((o) => o.until > now);
    return [this.secret, ...this.others.map((o) => o.secret)].some((secret) => {
      try {
        new this.Webhook(secret).verify(raw, headers, { jsonParse: false });
        return true;
      } catch {
        return false;
      }
    });
  }
}

const CONFLICT =
  'the subscription ended: another callback holds the subscription now (one dot per deployment), so this dot stops; it does not take it back. Run ' +
  'dm-dot subscription show to see it';
const KEY_ROTATED =
  'the subscription can no longer be refreshed: the server refused the API key (rotated with dm-dot key rotate?). Run dm-dot dot again: it reads ' +
  'the new key, and its subscription (whose id does not change with the key) goes on';
const ENDED_TAIL =
  'this dot removes it instead of re-subscribing quietly, and stops. Its queued events were dropped with the old subscription. Run dm-dot dot ' +
  'again to subscribe anew';

/** 60000 as "60 s", 1500 as "1500 ms". */
function formatMs(ms: number): string {
  return ms % 1000 === 0 ? `${ms / 1000} s` : `${ms} ms`;
}

/** What a refused first subscribe means for someone running `dm-dot dot`, and what to do about it. */
export function subscribeRefusal(error: unknown, target?: Pick<Target, 'base' | 'local'>): unknown {
  if (error instanceof KeyRefused) return new OperationError(error.message, 'key_refused');
  if (!(error instanceof RpcError)) return error;
  if (error.code === ErrorCodes.invalidParams && /https/.test(error.rpcMessage)) {
    if (target && !target.local) {
      return new OperationError(
        `${target.base} refuses callbacks to this machine, as a deployed server must: dm-dot dot only works against a local server started with ` +
          'DMDOT_ALLOW_LOOPBACK_CALLBACKS=1 npm start. Against AWS, connect a real ChatGPT dot (dm-dot connect --aws)',
        'loopback_refused',
      );
    }
    return new OperationError(
      'the server refuses loopback callbacks: its switch DMDOT_ALLOW_LOOPBACK_CALLBACKS is off. Restart the local server with ' +
        'DMDOT_ALLOW_LOOPBACK_CALLBACKS=1 npm start (the AWS stack never allows it)',
      'loopback_refused',
    );
  }
  if (error.code === ErrorCodes.subscriptionConflict) {
    return new OperationError(
      'another callback holds the subscription (one dot per deployment), so this dot cannot subscribe. If it is stale, end it with dm-dot ' +
        'subscription clear, then run dm-dot dot again',
      'conflict',
    );
  }
  if (error.code === ErrorCodes.callbackEndpointError) {
    return new OperationError(`the server could not verify this receiver (${error.data?.reason ?? 'unknown reason'})`, 'callback_refused');
  }
  return new OperationError(`events/subscribe failed: ${error.code ?? '?'} ${error.rpcMessage}`, 'subscribe_failed');
}
