/**
 * The request deadline (docs/contract/delivery.md: no request takes more than 5 s), set by each
 * entry point (`runWithDeadline`: a Lambda invocation, a request of the local runtime) and carried
 * in an AsyncLocalStorage, so the core stays pure and no port signature changes. Every DynamoDB,
 * SQS and Secrets Manager call inside it, however deep, gets an abort signal for what is left
 * (`withDeadlines`); the webhook client reads it too. The SDK's own timeouts bound one attempt
 * each (docs/reliability.md, "requestTimeout only warns"); the signal bounds the whole call.
 *
 * Deliberately not here: the budgets (core/budgets.ts), retries (the SDK's), and any reading of
 * what an aborted call did: the caller treats it as a failed dependency either way.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { Budgets } from '../core/budgets';
import { Limits } from '../core/protocol';
import type { WebhookClient } from '../ports';

/** `at`: epoch ms by which the work must be done; `attemptMs`: each SDK attempt's own timeout inside. */
type Deadline = { at: number; attemptMs?: number };

/**
 * One store per process, not per copy of this module: the MCP Lambda's storage file (lib/bundling.ts)
 * has its own copy, and its clients must see the deadline the handler set in `index.js`.
 */
const STORE = Symbol.for('dm-dot.deadline-store');
const current = ((globalThis as Record<symbol, unknown>)[STORE] ??= new AsyncLocalStorage<Deadline>()) as AsyncLocalStorage<Deadline>;

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
 * Runs `fn` with a deadline `reserveMs` earlier and each SDK attempt capped at `attemptMs`: what is
 * kept back belongs to the caller's next step (the outbox's compensating write).
 */
export function keepingBack<T>(reserveMs: number, attemptMs: number, fn: () => Promise<T>): Promise<T> {
  const outer = current.getStore();
  return current.run({ at: outer === undefined ? Number.POSITIVE_INFINITY : outer.at - reserveMs, attemptMs }, fn);
}

/** Runs `fn` outside any request deadline: work that may outlive its request's answer is bounded by its own timeouts. */
export function outsideDeadline<T>(fn: () => Promise<T>): Promise<T> {
  return current.exit(fn);
}

/** Milliseconds left before the current deadline, or undefined outside any deadline. Never negative. */
export function deadlineLeftMs(): number | undefined {
  const deadline = current.getStore();
  return deadline === undefined || deadline.at === Number.POSITIVE_INFINITY ? undefined : Math.max(0, deadline.at - Date.now());
}

/** SDK call options for a call made now: an abort signal for what is left of the deadline (or `capMs`, if sooner). */
export function callOptions(capMs?: number): { abortSignal?: AbortSignal; requestTimeout?: number } {
  const left = deadlineLeftMs();
  const limit = left === undefined ? capMs : Math.min(left, capMs ?? left);
  // `requestTimeout` per call: @smithy/node-http-handler's `handle(request, { requestTimeout })`
  // prefers it to the client's own for each attempt.
  const attemptMs = current.getStore()?.attemptMs;
  const attempt = attemptMs === undefined ? {} : { requestTimeout: attemptMs };
  if (limit === undefined) return attempt;
  if (limit <= 0) throw new DeadlineExceeded();
  return { abortSignal: AbortSignal.timeout(limit), ...attempt };
}

const BOUNDED = Symbol.for('dm-dot.deadline-bounded');

/**
 * Makes every `client.send(command)` of an SDK v3 client carry `callOptions()`; options given by a
 * caller win, and the callback form of `send` is left alone. Idempotent; returns the same client.
 */
export function withDeadlines<C extends { send(...args: never[]): unknown }>(client: C): C {
  const target = client as unknown as { send: (...args: unknown[]) => Promise<unknown>; [BOUNDED]?: true };
  // A stand-in without `send` (a settings test) has nothing to bound.
  if (target[BOUNDED] || typeof target.send !== 'function') return client;
  const original = target.send.bind(client);
  target.send = (command: unknown, options?: unknown, callback?: unknown) => {
    if (typeof options === 'function' || callback !== undefined) return original(command, options, callback);
    // A DeadlineExceeded from callOptions() rejects the promise, as the SDK's own failures do.
    return new Promise((resolve) => resolve(original(command, { ...callOptions(), ...(options as object | undefined) })));
  };
  target[BOUNDED] = true;
  return client;
}

/** `promise`, or `fallback` when the current deadline passes first (the promise then settles on its own, unobserved). */
export async function withinDeadline<T, F>(promise: Promise<T>, fallback: F): Promise<T | F> {
  const limit = deadlineLeftMs();
  if (limit === undefined) return promise;
  promise.catch(() => undefined);
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<F>((resolve) => (timer = setTimeout(resolve, limit, fallback)));
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/**
 * The webhook client on a deadline: each POST gets `timeoutMs` = what is left of it less
 * `reserveMs` (never more than the request's own or the guard's 5 s). With less than
 * Budgets.minPostMs left no POST starts: DeadlineExceeded, a failure before any POST for callers.
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
