/**
 * One delivery attempt (SPEC 6.2 step 4): skip what is already delivered, drop what lost its
 * subscription, sign at send time with the current secret (and the previous one during its
 * rotation overlap), send through the guarded client, classify, and decide what the queue does
 * next. The returned decision is applied by the queue adapter (SQS visibility or the local timer).
 *
 * Deliberately not here: the queue mechanics (visibility, dead-letter sends), and any reading of
 * a response body: a delivery only cares about the status line.
 */
import type { Clock, DeliveryJob, Store, WebhookClient, WebhookResponse } from '../ports';
import { EventStatus, Limits, WebhookHeaders, type FailureReason } from './protocol';
import { decodeSecret, signatureHeader } from './signing';

export interface DeliveryDeps {
  store: Store;
  webhook: WebhookClient;
  clock: Clock;
  /** Seconds to wait before attempts 2, 3, ...; its length + 1 is the number of attempts. */
  retryDelaysS: readonly number[];
}

export type DeliveryDecision =
  | { action: 'done'; status: 'delivered' | 'already_final' | 'dropped' }
  | { action: 'retry'; delayMs: number; reason: FailureReason; attempt: number }
  | { action: 'dead_letter'; reason: FailureReason; attempt: number };

export type Classification =
  | { kind: 'delivered' }
  | { kind: 'transient'; reason: FailureReason; retryAfterMs?: number }
  | { kind: 'permanent'; reason: FailureReason };

const TRANSIENT_4XX = new Set([408, 425, 429]);

/**
 * 2xx delivered; 408, 425, 429, 5xx, 3xx (never followed), timeouts, connection and TLS errors are
 * transient; 410, 413 and every other 4xx are permanent. Unreadable responses (compressed, over
 * the cap) and 3xx count as `http_5xx`: the endpoint misbehaved and may recover, so they retry.
 */
export function classify(response: WebhookResponse, now: number): Classification {
  if (response.kind === 'failure') {
    return { kind: 'transient', reason: response.reason === 'bad_response' ? 'http_5xx' : response.reason };
  }
  const { status } = response;
  if (status >= 200 && status < 300) return { kind: 'delivered' };
  if (status >= 400 && status < 500 && !TRANSIENT_4XX.has(status)) return { kind: 'permanent', reason: 'http_4xx' };
  const retryAfterMs = parseRetryAfter(response.retryAfter, now);
  const reason: FailureReason = status >= 400 && status < 500 ? 'http_4xx' : 'http_5xx';
  return retryAfterMs === undefined ? { kind: 'transient', reason } : { kind: 'transient', reason, retryAfterMs };
}

/** Retry-After as delta seconds or an HTTP date; undefined when absent or unparseable. */
export function parseRetryAfter(value: string | undefined, now: number): number | undefined {
  if (!value) return undefined;
  const trimmed = value.trim();
  if (/^\d+$/.test(trimmed)) return Number(trimmed) * 1000;
  const at = Date.parse(trimmed);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}

/**
 * Delay before attempt `attempt + 1`, or undefined when the schedule is exhausted. Retry-After
 * can lengthen a delay, up to what is left of the whole schedule, never shorten it.
 */
export function nextDelayMs(retryDelaysS: readonly number[], attempt: number, retryAfterMs?: number): number | undefined {
  if (attempt < 1 || attempt > retryDelaysS.length) return undefined;
  const scheduled = (retryDelaysS[attempt - 1] ?? 0) * 1000;
  if (retryAfterMs === undefined) return scheduled;
  const remaining = retryDelaysS.slice(attempt - 1).reduce((sum, s) => sum + s * 1000, 0);
  return Math.max(scheduled, Math.min(retryAfterMs, remaining));
}

/**
 * The receive on which the worker itself dead-letters a job, with a reason, whatever else happens:
 * the attempts of the schedule, plus receives that are not attempts (a deferral behind the inline
 * attempt's lease, a worker error, a timeout). SQS's own redrive (maxReceiveCount) sits a further
 * RECEIVE_LIMIT_AWS_MARGIN above it, so it only ever catches what the handler never saw.
 */
export function receiveLimit(retryDelaysS: readonly number[]): number {
  return retryDelaysS.length + 1 + 4;
}

/** AWS recommends a maxReceiveCount that leaves room for throttled and failed receives (at least 5). */
export const RECEIVE_LIMIT_AWS_MARGIN = 5;

export async function attemptDelivery(deps: DeliveryDeps, job: DeliveryJob): Promise<DeliveryDecision> {
  const now = deps.clock.now();
  let event = await deps.store.getEvent(job.eventId, now);
  if (event?.status === EventStatus.failed && job.redriven) {
    // Redriving is the operator's explicit choice to try again: a fresh round of the schedule.
    await deps.store.updateEvent(job.eventId, { status: EventStatus.queued, attempts: 0, lastError: null });
    event = { ...event, status: EventStatus.queued, attempts: 0, lastError: null };
  }
  if (event && event.status !== EventStatus.queued) return { action: 'done', status: 'already_final' };

  const subscription = await deps.store.getSubscription(now);
  if (!subscription || subscription.id !== job.subscriptionId) {
    await deps.store.updateEvent(job.eventId, { status: EventStatus.dropped });
    return { action: 'done', status: 'dropped' };
  }

  // Signed at send time: the storage reads above may have taken a while.
  const sendAt = deps.clock.now();
  const keys = [subscription.secret];
  if (subscription.previousSecret && (subscription.previousSecretUntil ?? 0) > sendAt) keys.push(subscription.previousSecret);
  const decoded = keys.map(decodeSecret).filter((key): key is Uint8Array => key !== undefined);
  const body = new TextEncoder().encode(job.body);
  if (decoded.length === 0 || body.byteLength > Limits.outboundBodyMaxBytes) {
    // Cannot happen for records this service wrote; refuse loudly rather than send unsigned.
    throw new Error('delivery: unusable subscription secret or oversized event body');
  }

  const timestamp = Math.floor(sendAt / 1000);
  const response = await deps.webhook.post({
    url: subscription.url,
    body,
    headers: {
      'content-type': 'application/json',
      [WebhookHeaders.id]: job.eventId,
      [WebhookHeaders.timestamp]: String(timestamp),
      [WebhookHeaders.signature]: signatureHeader(decoded, job.eventId, timestamp, body),
      [WebhookHeaders.subscriptionId]: subscription.id,
    },
  });

  const attempt = (event?.attempts ?? 0) + 1;
  const doneAt = deps.clock.now();
  const httpStatus = response.kind === 'response' ? response.status : null;
  const verdict = classify(response, doneAt);
  if (verdict.kind === 'delivered') {
    await deps.store.updateEvent(job.eventId, { status: EventStatus.delivered, attempts: attempt, deliveredAt: doneAt, lastHttpStatus: httpStatus, lastError: null });
    await deps.store.recordDeliveryOutcome(subscription.id, { deliveredAt: doneAt, error: null });
    return { action: 'done', status: 'delivered' };
  }
  const delayMs = verdict.kind === 'transient' ? nextDelayMs(deps.retryDelaysS, attempt, verdict.retryAfterMs) : undefined;
  await deps.store.recordDeliveryOutcome(subscription.id, { error: verdict.reason });
  if (delayMs === undefined) {
    await deps.store.updateEvent(job.eventId, { status: EventStatus.failed, attempts: attempt, lastHttpStatus: httpStatus, lastError: verdict.reason });
    return { action: 'dead_letter', reason: verdict.reason, attempt };
  }
  await deps.store.updateEvent(job.eventId, { attempts: attempt, lastHttpStatus: httpStatus, lastError: verdict.reason });
  return { action: 'retry', delayMs, reason: verdict.reason, attempt };
}
