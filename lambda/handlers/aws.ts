/**
 * What both Lambdas share about AWS: required environment variables, the SDK client options, and
 * the time budgets of a request (issue 9 item 2): the MCP Lambda answers within SPEC's 5 s, the
 * Delivery Lambda within its own timeout, and every AWS call and POST on the way carries a deadline
 * derived from what is left (adapters/deadline.ts).
 *
 * Deliberately not here: the SDK client options (aws-clients.ts: importing the SDK here would put
 * its code on the MCP Lambda's cold path), creating the clients, and anything of the MCP SDK or the
 * HTTP app: the Delivery Lambda imports this module and must stay small.
 */
import { SettingsError } from '../config';
import { DeadlineExceeded, deadlineLeftMs } from '../adapters/deadline';
import { Limits } from '../core/protocol';
import type { WebhookClient } from '../ports';

/** SPEC 6.2: an MCP request never exceeds 5 s. */
export const MCP_REQUEST_BUDGET_MS = 5_000;
/**
 * Kept back from the MCP budget for building the answer, the trip through API Gateway and a busy
 * event loop (the fault suite's slowest answers land at the deadline plus a few milliseconds).
 */
export const MCP_ANSWER_RESERVE_MS = 800;
/** Kept back from the Delivery Lambda's remaining time, so the batch answer is always returned. */
export const DELIVERY_END_RESERVE_MS = 1_000;
/** A POST may only use time that leaves this much for recording its outcome (two or three writes). */
export const DELIVERY_RECORD_RESERVE_MS = 3_000;
/** On the MCP side, left after a callback POST (challenge or inline attempt) for one write. */
export const MCP_RECORD_RESERVE_MS = 700;
/** No POST is started with less than this to run: it could not tell a slow endpoint from a dead one. */
export const MIN_POST_MS = 1_000;

/** The deadline (epoch ms) of an MCP request that started at `startedAt`. */
export function mcpDeadline(startedAt: number): number {
  return startedAt + MCP_REQUEST_BUDGET_MS - MCP_ANSWER_RESERVE_MS;
}

/** The deadline of a Delivery Lambda invocation, from the Lambda context's remaining time. */
export function deliveryDeadline(startedAt: number, remainingMs: number | undefined): number {
  // Outside Lambda (tests, a context without the method): the SPEC's outbound deadline plus room.
  const remaining = remainingMs === undefined || !Number.isFinite(remainingMs) ? Limits.outboundDeadlineMs + DELIVERY_RECORD_RESERVE_MS + DELIVERY_END_RESERVE_MS : remainingMs;
  return startedAt + remaining - DELIVERY_END_RESERVE_MS;
}

/**
 * The webhook client on a deadline: each POST gets `timeoutMs` = what is left of the deadline less
 * `reserveMs` (never more than the request's own timeoutMs or the guard's 5 s), and no POST starts
 * when the deadline leaves less than MIN_POST_MS: it throws DeadlineExceeded instead, which the delivery worker
 * treats like any worker error (the record stays in SQS, no attempt is counted, nothing was sent).
 * Outside a deadline the client is used as is.
 */
export function webhookWithinDeadline(inner: WebhookClient, reserveMs: number): WebhookClient {
  return {
    post: async (request) => {
      const left = deadlineLeftMs();
      if (left === undefined) return inner.post(request);
      // The floor applies to what the deadline leaves, not to a caller's own shorter timeoutMs
      // (the inline attempt's wait window may deliberately be short).
      if (left - reserveMs < MIN_POST_MS) throw new DeadlineExceeded('callback POST');
      return inner.post({ ...request, timeoutMs: Math.min(left - reserveMs, request.timeoutMs ?? Limits.outboundDeadlineMs) });
    },
  };
}

export function required(env: NodeJS.ProcessEnv, name: string): string {
  const value = env[name]?.trim();
  if (!value) throw new SettingsError(`${name} must be set (the stack sets it)`);
  return value;
}

/**
 * DMDOT_ALLOW_LOOPBACK_CALLBACKS (SPEC 7) on AWS: exactly "1", nothing else. The stack never sets
 * it; tests of the handlers do.
 */
export function loopbackAllowed(env: NodeJS.ProcessEnv): boolean {
  return env.DMDOT_ALLOW_LOOPBACK_CALLBACKS === '1';
}
