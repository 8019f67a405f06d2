/**
 * What a callback's answer means for its event, and when a transient failure is tried again: the
 * rules of docs/contract/delivery.md that every delivery attempt (core/delivery.ts) applies to the
 * status line, the transport failure and Retry-After. Pure functions of the answer and the time.
 *
 * Deliberately not here: the POST itself, the writes an outcome makes (core/delivery.ts) and the
 * queue's receive limit (core/delivery.ts `receiveLimit`, which the stack also reads).
 */
import type { WebhookResponse } from '../ports';
import type { FailureReason } from './protocol';

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
