/**
 * The request deadline (docs/contract/delivery.md: no request takes more than 5 s): an entry point
 * sets the time by which its work must be done (`runWithDeadline`: each Lambda invocation, each
 * request of the local runtime), and every DynamoDB, SQS and Secrets Manager call made inside it,
 * however deep, carries an abort signal for what is left (`withDeadlines`, applied to each client
 * once), so a stalled connection fails that call in time for the handler to answer. The guarded
 * webhook client reads the same deadline. It travels in an AsyncLocalStorage, so the core stays
 * pure and no port signature changes.
 *
 * Why an abort signal and not only the SDK's timeouts: `requestTimeout` of
 * `@smithy/node-http-handler` only logs a warning unless `throwOnRequestTimeout` is set, and even
 * then each retry gets a fresh timeout; the abort signal bounds the whole call, retries and
 * backoff sleeps included (the SDK's retry middleware races its sleeps against it).
 *
 * Deliberately not here: the budgets themselves (core/budgets.ts), retries (the SDK's), and any
 * reading of what a call did: an aborted write may or may not have been applied, and the caller
 * treats it as a failed dependency either way.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { Budgets } from '../core/budgets';
import { Limits } from '../core/protocol';
import type { WebhookClient } from '../ports';

interface Deadline {
  /** Epoch ms (Date.now()) by which the work must be done. */
  at: number;
  /** When set, each SDK attempt inside gives up after this long (the client's requestTimeout for these calls). */
  attemptMs?: number;
}

/**
 * One store per process, not per copy of this module: the MCP Lambda's storage code is a file of
 * its own (lib/bundling.ts) with its own copy of this module, and its clients must see the deadline
 * the handler set in `index.js`.
 */
const STORE = Symbol.for('dm-dot.deadline-store');
const current: AsyncLocalStorage<Deadline> = ((globalThis as Record<symbol, unknown>)[STORE] ??=
  new AsyncLocalStorage<Deadline>()) as AsyncLocalStorage<Deadline>;

/** Thrown when a call is about to start with no time left; named like the SDK's own timeouts. */
export class DeadlineExceeded extends Error {
  override readonly name = 'TimeoutError';
  constructor(what = 'call') {
    super(`request deadline passed before the ${what} could start`);
  }
}

/** Runs `fn` with a deadline at epoch ms `at`; calls inside it (awaited or not) see it. */
export function runWithDeadline<T>(at: number, fn: () => Promise<T>): Promise<T> {
  return current.run({ at }, fn);
}

/**
 * Runs `fn` so that `reserveMs` of the current deadline is left when it ends: its calls see a
 * deadline that much earlier, and each SDK attempt inside gives up after `attemptMs`. What is
 * kept back belongs to the caller's next step (the outbox's compensating write). Outside a
 * deadline only the attempt cap applies.
 */
export function keepingBack<T>(reserveMs: number, attemptMs: number, fn: () => Promise<T>): Promise<T> {
  const outer = current.getStore();
  return current.run({ at: outer === undefined ? Number.POSITIVE_INFINITY : outer.at - reserveMs, attemptMs }, fn);
}

/**
 * Runs `fn` outside any request deadline: work that may outlive its request's answer (the inline
 * attempt the caller stopped waiting for) is bounded by its own timeouts instead.
 */
export function outsideDeadline<T>(fn: () => Promise<T>): Promise<T> {
  return current.exit(fn);
}

/** Milliseconds left before the current deadline, or undefined outside any deadline. Never negative. */
export function deadlineLeftMs(now: number = Date.now()): number | undefined {
  const deadline = current.getStore();
  return deadline === undefined || deadline.at === Number.POSITIVE_INFINITY ? undefined : Math.max(0, deadline.at - now);
}

/** What is left of the deadline, or `capMs` when that is less; undefined when neither bounds it. */
function limitMs(capMs?: number): number | undefined {
  const left = deadlineLeftMs();
  return left === undefined ? capMs : Math.min(left, capMs ?? left);
}

/**
 * The SDK call options for a call made now: an abort signal that fires when the deadline passes,
 * or after `capMs` when that comes first. Throws DeadlineExceeded when nothing is left.
 */
export function callOptions(capMs?: number): { abortSignal?: AbortSignal; requestTimeout?: number } {
  const limit = limitMs(capMs);
  // `requestTimeout` per call: @smithy/node-http-handler's `handle(request, { requestTimeout })`
  // prefers it to the client's own for each attempt.
  const attemptMs = current.getStore()?.attemptMs;
  const attempt = attemptMs === undefined ? {} : { requestTimeout: attemptMs };
  if (limit === undefined) return attempt;
  if (limit <= 0) throw new DeadlineExceeded();
  return { abortSignal: AbortSignal.timeout(limit), ...attempt };
}

const BOUNDED = Symbol.for('dm-dot.deadline-bounded');

/** Any SDK v3 client; only `send` is touched. */
interface Sender {
  send(...args: never[]): unknown;
}

/**
 * Makes every `client.send(command)` of this client carry `callOptions()`: an abort signal for
 * what is left of the current deadline (none outside a deadline, where the SDK's own timeouts
 * apply). Applied once to each client a Lambda builds, so every adapter call on a request path is
 * bounded without the adapters knowing. Options given by a caller win; the callback form of
 * `send` is left alone. Idempotent; returns the same client.
 */
export function withDeadlines<C extends Sender>(client: C): C {
  const target = client as unknown as { send: (...args: unknown[]) => Promise<unknown>; [BOUNDED]?: true };
  // A stand-in without `send` (a settings test) has nothing to bound.
  if (target[BOUNDED] || typeof target.send !== 'function') return client;
  const original = target.send.bind(client);
  target.send = (command: unknown, options?: unknown, callback?: unknown) => {
    if (typeof options === 'function' || callback !== undefined) return original(command, options, callback);
    let bounded: { abortSignal?: AbortSignal };
    try {
      bounded = callOptions();
    } catch (error) {
      return Promise.reject(error);
    }
    return original(command, { ...bounded, ...(options as object | undefined) });
  };
  target[BOUNDED] = true;
  return client;
}

/**
 * Waits for `promise`, but at most until the current deadline (or `capMs`): then answers
 * `fallback` and leaves the promise to settle on its own (its rejection is swallowed).
 */
export async function withinDeadline<T, F>(promise: Promise<T>, fallback: F, capMs?: number): Promise<T | F> {
  const limit = limitMs(capMs);
  if (limit === undefined) return promise;
  promise.catch(() => undefined);
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<F>((resolve) => {
    timer = setTimeout(() => resolve(fallback), limit);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * The webhook client on a deadline: each POST gets `timeoutMs` = what is left of the deadline less
 * `reserveMs` (never more than the request's own timeoutMs or the guard's 5 s), and no POST starts
 * when the deadline leaves less than Budgets.minPostMs: it throws DeadlineExceeded instead, which
 * the callers treat like any failure before a POST (nothing was sent, no attempt is counted).
 * Outside a deadline the client is used as is.
 */
export function webhookWithinDeadline(inner: WebhookClient, reserveMs: number): WebhookClient {
  return {
    post: async (request) => {
      const left = deadlineLeftMs();
      if (left === undefined) return inner.post(request);
      // The floor applies to what the deadline leaves, not to a caller's own shorter timeoutMs
      // (the inline attempt's wait window may deliberately be short).
      if (left - reserveMs < Budgets.minPostMs) throw new DeadlineExceeded('callback POST');
      return inner.post({ ...request, timeoutMs: Math.min(left - reserveMs, request.timeoutMs ?? Limits.outboundDeadlineMs) });
    },
  };
}
