/**
 * The subscription of `dm-dot dot` and its life: the first `events/subscribe` with a fresh `whsec_`
 * secret, the refresh that rotates the secret at 80% of the granted lifetime, and the check every
 * `--check` milliseconds (docs/decisions.md, "`dot` checks its subscription every 60 s").
 *
 * It tells the truth about its subscription and never re-subscribes quietly: it ends the dot,
 * saying why, when a refresh or a check was refused with -32000 (another callback holds it now)
 * or with 401 (the key was rotated), when every refresh failed until the expiry, or when one came
 * back without `deliveryStatus`, which means the subscription had ended before it (cleared, or
 * ended by a 410) and the call created a new one (the command then removes that one at once).
 *
 * Deliberately not here: receiving deliveries (receiver.ts) and what the command prints at the end.
 */
import { randomBytes } from 'node:crypto';
import { Budgets } from '../../core/budgets';
import { ErrorCodes, EVENT_NAME, Limits, Methods, SECRET_PREFIX } from '../../core/protocol';
import type { Context } from '../context';
import { OperationError } from '../errors';
import type { Target } from '../local-server/target';
import { RpcError, rpc } from '../mcp/rpc';
import { shortTime } from '../output';
import type { Receiver } from './receiver';

export type EndReason = 'interrupted' | 'gone' | 'ended_before_refresh' | 'conflict' | 'key_refused' | 'expired';

export type Granted = { id: string; refreshBefore: string; deliveryStatus?: unknown };

export function newSecret(): string {
  return `${SECRET_PREFIX}${randomBytes(32).toString('base64')}`;
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

export class DotSubscription {
  id = '';
  expiresAt = 0;
  refreshAt = 0;
  private secret = newSecret();
  private refreshTimer: NodeJS.Timeout | undefined;
  private checkTimer: NodeJS.Timeout | undefined;
  /** A refresh or a check is under way: the other waits for its next turn. */
  private busy = false;
  private stopping = false;

  constructor(
    private readonly ctx: Context,
    private readonly target: Target,
    private readonly receiver: Receiver,
    private readonly options: { ttlMs: number | undefined; checkMs: number },
    /** The subscription ended (or cannot go on): the dot stops with this reason. */
    private readonly ended: (reason: EndReason, message: string) => void,
  ) {
    ctx.keepSecret(this.secret);
    receiver.use(this.secret);
  }

  private end(reason: EndReason, message: string): void {
    this.stopping = true;
    this.ended(reason, message);
  }

  /** The first subscribe; then the refresh and the check run on their timers until `stop`. */
  async start(): Promise<Granted> {
    const granted = await this.subscribe();
    this.granted(granted);
    this.checkTimer = setInterval(() => void this.check(), this.options.checkMs);
    return granted;
  }

  stop(): void {
    this.stopping = true;
    clearTimeout(this.refreshTimer);
    clearInterval(this.checkTimer);
  }

  /** Ends the subscription on the server (Ctrl-C, or the one a refresh created). */
  async unsubscribe(): Promise<void> {
    await rpc(this.target, Methods.eventsUnsubscribe, { name: EVENT_NAME, arguments: {}, delivery: { mode: 'webhook', url: this.receiver.callbackUrl } });
  }

  private granted(granted: Granted): void {
    this.id = granted.id;
    this.expiresAt = Date.parse(granted.refreshBefore);
    // At 80% of the granted lifetime.
    const delay = Math.max(1000, Math.floor((this.expiresAt - Date.now()) * 0.8));
    this.refreshAt = Date.now() + delay;
    this.scheduleRefresh(delay);
  }

  private async subscribe(secret = this.secret): Promise<Granted> {
    const result = await rpc(this.target, Methods.eventsSubscribe, {
      name: EVENT_NAME,
      arguments: {},
      delivery: { mode: 'webhook', url: this.receiver.callbackUrl, secret },
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

  /** A refusal that ends the subscription: true when it did. */
  private refused(error: unknown): boolean {
    if (error instanceof RpcError && error.code === ErrorCodes.subscriptionConflict) this.end('conflict', CONFLICT);
    else if (error instanceof OperationError && error.code === 'key_refused') this.end('key_refused', KEY_ROTATED);
    else return false;
    return true;
  }

  /** Same URL, same secret (the header says what the answer tells). A failure to reach the server is left to the refresh schedule. */
  private async check(): Promise<void> {
    if (this.stopping || this.busy) return;
    this.busy = true;
    let granted: Granted;
    try {
      granted = await this.subscribe();
    } catch (error) {
      if (!this.stopping) this.refused(error);
      return;
    } finally {
      this.busy = false;
    }
    if (this.stopping) return;
    if (granted.deliveryStatus === undefined) {
      this.id = granted.id;
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
      const old = this.secret;
      const fresh = newSecret();
      this.ctx.keepSecret(fresh);
      const overlapEnds = () => Date.now() + Limits.rotationOverlapMs + Budgets.dotSecretGraceMs;
      // The server signs with the new secret from its answer on, and may hold it even when the answer
      // is lost: both are accepted until the overlap ends.
      this.receiver.acceptAlso(fresh, overlapEnds());
      let granted: Granted;
      try {
        granted = await this.subscribe(fresh);
      } catch (error) {
        if (this.stopping || this.refused(error)) return;
        const left = this.expiresAt - Date.now();
        const why = this.ctx.scrub((error as Error).message);
        if (left <= 0) {
          return this.end('expired', `the subscription expired at ${shortTime(this.expiresAt)}: every refresh failed (last: ${why}). Run dm-dot dot again`);
        }
        const retryIn = Math.min(Budgets.dotRefreshRetryMaxMs, Math.max(1000, left / 2));
        this.ctx.note(`refresh failed (${why}); trying again in ${Math.round(retryIn / 1000)} s, before the expiry at ${shortTime(this.expiresAt)}`);
        return this.scheduleRefresh(retryIn);
      }
      this.secret = fresh;
      this.receiver.use(fresh);
      this.receiver.acceptAlso(old, overlapEnds());
      if (this.stopping) return;
      if (granted.deliveryStatus === undefined) {
        this.id = granted.id;
        this.expiresAt = Date.parse(granted.refreshBefore);
        return this.end(
          'ended_before_refresh',
          'the subscription had ended before this refresh (cleared with dm-dot subscription clear, ended by a 410, or expired), so the refresh ' +
            `created a new one; ${ENDED_TAIL}`,
        );
      }
      this.granted(granted);
      this.ctx.note(`refreshed ${granted.id}: it now expires at ${shortTime(granted.refreshBefore)}; next refresh at ${shortTime(this.refreshAt)}`);
    } finally {
      this.busy = false;
    }
  }
}

/** What a refused first subscribe means for someone running `dm-dot dot`, and what to do about it. */
export function subscribeRefusal(error: unknown, target: Target): unknown {
  if (!(error instanceof RpcError)) return error;
  if (error.code === ErrorCodes.invalidParams && /https/.test(error.rpcMessage)) {
    if (!target.local) {
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
