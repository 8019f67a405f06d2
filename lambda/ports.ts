/**
 * The ports the core talks through (storage, the outbox, the queue, the webhook client, the clock,
 * the logger); adapters in lambda/adapters implement them. The shared records and the Store's surface
 * (./ports/) are re-exported here, so every layer imports them from this file.
 *
 * Deliberately not here: retries, timeouts or logging of the adapters themselves, and any reading
 * of settings (every adapter gets typed settings from its entry point).
 */
import type { DeadLetterReason, EventRecord, EventPatch } from './ports/records';

export * from './ports/records';
export type * from './ports/store';

/** What the delivery worker needs to send one event; `body` is the exact bytes of every attempt. */
export interface DeliveryJob {
  eventId: string;
  subscriptionId: string;
  /** The subscription generation it was queued under (absent on jobs from before generations). */
  generation?: string;
  body: string;
  /** Moved back from the dead-letter queue by an operator: a `failed` event gets a new round of the schedule. */
  redriven?: boolean;
}

export function jobOf(event: Pick<EventRecord, 'eventId' | 'subscriptionId' | 'generation'>, body: string): DeliveryJob {
  const { eventId, subscriptionId, generation } = event;
  return { eventId, subscriptionId, ...(generation !== undefined ? { generation } : {}), body };
}

export interface EnqueueOptions {
  /** The job becomes visible to the worker after this long (SQS DelaySeconds, rounded up). */
  delayMs?: number;
}

export interface Queue {
  enqueue(job: DeliveryJob, options?: EnqueueOptions): Promise<void>;
}

/** The queue effects of a delivery decision on one received job (SQS in the Delivery Lambda, the job table locally). */
export interface JobEffects {
  /** The job is finished: it goes. */
  complete(): Promise<void>;
  /** The job stays and is seen again after `delayMs`, or without one when the queue's own redelivery brings it back. */
  keepFor(delayMs?: number): Promise<void>;
  /** The job goes to the dead letters, with why. */
  deadLetter(reason: DeadLetterReason): Promise<void>;
}

/** Who made a delivery decision: the MCP side's inline first attempt, or the delivery worker. */
export const DELIVERY_VIAS = ['inline', 'worker'] as const;
export type DeliveryVia = (typeof DELIVERY_VIAS)[number];

/**
 * Every outcome a delivery decision can have, the runner's own included. `already_final`: the
 * safety-net copy of an inline attempt; `outcome_unknown`: a retry after a POST that got no answer
 * (the next attempt is a second POST).
 */
export const DELIVERY_OUTCOMES = [
  'delivered',
  'retry',
  'defer',
  'dead_letter',
  'dead_letter_copy',
  'receive_limit',
  'dropped',
  'already_final',
  'duplicate',
  'outcome_unknown',
  'malformed',
  'worker_error',
] as const;
export type DeliveryOutcome = (typeof DELIVERY_OUTCOMES)[number];

/** One delivery decision, as a metric (lambda/metrics.ts writes it; the core only reports it). */
export interface DeliveryMetric {
  outcome: DeliveryOutcome;
  via: DeliveryVia;
  /** The attempt the decision was made at, when the decision knows it. */
  attempt?: number;
  durationMs: number;
  /** Enqueue to delivery; only for `delivered`. */
  latencyMs?: number;
}

export interface DeliveryMetrics {
  delivery(metric: DeliveryMetric): void;
}

/** Where a new event goes: its record and its delivery job, together (one transaction locally; core/outbox.ts on AWS). */
export interface Outbox {
  /**
   * Records a new event (fails if one with this id exists) and queues its job. Throws
   * DependencyUnavailable: `storage` when nothing was recorded, `queue` (with the event id) when
   * the job could not be queued (the record then says `failed`).
   */
  add(record: EventRecord, job: DeliveryJob, options?: EnqueueOptions): Promise<void>;
  /**
   * An operator's resend: applies `patch` if the record is still as `read` and queues `job`. False
   * when it changed in between; throws like `add` (the record then back as it was read).
   */
  reopen(read: EventRecord, patch: EventPatch, job: DeliveryJob): Promise<boolean>;
}

export interface WebhookRequest {
  url: string;
  headers: Record<string, string>;
  body: Uint8Array;
  /** A deadline shorter than the guard's 5 s (the inline attempt's wait window); never longer. */
  timeoutMs?: number;
}

/** Why an outbound request produced no usable response. Never carries endpoint text. */
export type TransportFailure =
  | 'timeout'
  | 'tls_error'
  | 'connection_refused'
  /** Compressed, over the response cap, or otherwise unreadable. */
  | 'bad_response';

export type WebhookResponse = { kind: 'response'; status: number; retryAfter?: string; body: Uint8Array } | { kind: 'failure'; reason: TransportFailure };

export interface WebhookClient {
  post(request: WebhookRequest): Promise<WebhookResponse>;
}

export interface Clock {
  /** Epoch ms that every due time, lease, window and expiry is measured in. */
  now(): number;
  sleep(ms: number): Promise<void>;
  /**
   * The time of day, for a time compared with another machine's clock (signature timestamps).
   * Absent: `now()` is the time of day; a clock whose `now()` ignores wall-clock steps keeps it apart.
   */
  wall?(): number;
}

export function timeOfDay(clock: Clock): number {
  return clock.wall?.() ?? clock.now();
}

export const systemClock: Clock = {
  now: () => Date.now(),
  sleep: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
};

/**
 * Structured log lines. Callers pass only safe fields: ids, categories, codes, durations. The
 * implementation (lambda/log.ts) also scrubs `whsec_` secrets and registered values.
 */
export interface Logger {
  info(event: string, fields?: Record<string, unknown>): void;
  warn(event: string, fields?: Record<string, unknown>): void;
  error(event: string, fields?: Record<string, unknown>): void;
}
