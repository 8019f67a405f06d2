/**
 * The ports the core talks through: storage, the outbox that records an event with its delivery
 * job, the queue, the outbound webhook client, the clock and the logger. Adapters live in
 * lambda/adapters (the embedded database of the local runtime; DynamoDB and SQS on AWS); the core
 * only ever sees these interfaces. The shared records (./ports/records.ts) and the one Store's
 * surface (./ports/store.ts) are re-exported here, so every layer imports them from this file.
 *
 * Deliberately not here: retries, timeouts or logging of the adapters themselves, and any reading
 * of settings (every adapter gets typed settings from its entry point).
 */
import type { DeadLetterReason, EventRecord, EventPatch } from './ports/records';

export { FailureReasons, EventStatus } from './ports/records';
export type {
  FailureReason,
  DeadLetterReason,
  SubscriptionRecord,
  AttemptEntry,
  EventNote,
  LogEntry,
  EventRecord,
  QueuedEntry,
  EventPatch,
  EventExpectation,
} from './ports/records';
export type {
  SubscriptionExpectation,
  PutSubscriptionResult,
  Store,
  DeploymentRecord,
  DeploymentKeys,
  SenderRecord,
  AccessStore,
  IdempotencyRecord,
  IdempotencyClaim,
  IdempotencyStore,
  PendingPosition,
  InboxStore,
  InboundAnswer,
  InboundAnswerResult,
  ReplayClaim,
} from './ports/store';

/** What the delivery worker needs to send one event; `body` is the exact bytes of every attempt. */
export interface DeliveryJob {
  eventId: string;
  subscriptionId: string;
  /** The subscription generation it was queued under (absent on jobs from before generations). */
  generation?: string;
  body: string;
  /**
   * Set when an operator moved the job back from the dead-letter queue: a `failed` event then
   * gets a new round of the retry schedule instead of being treated as final.
   */
  redriven?: boolean;
}

export interface EnqueueOptions {
  /** The job becomes visible to the worker after this long (SQS DelaySeconds, rounded up). */
  delayMs?: number;
}

export interface Queue {
  enqueue(job: DeliveryJob, options?: EnqueueOptions): Promise<void>;
}

/**
 * What the delivery runner (core/runner.ts) can do with one received job: the queue effects of a
 * decision. SQS implements it in the Delivery Lambda (delete by leaving the record out of
 * `batchItemFailures`, ChangeMessageVisibility, a send to the dead-letter queue), the embedded job
 * table in the local worker.
 */
export interface JobEffects {
  /** The job is finished: it goes. */
  complete(): Promise<void>;
  /**
   * The job stays and is seen again after `delayMs`; without a delay, when the queue's own
   * redelivery brings it back (SQS's visibility timeout, the job table's lease).
   */
  keepFor(delayMs?: number): Promise<void>;
  /** The job goes to the dead letters, with why. */
  deadLetter(reason: DeadLetterReason): Promise<void>;
}

/** Who made a delivery decision: the MCP side's inline first attempt, or the delivery worker. */
export const DELIVERY_VIAS = ['inline', 'worker'] as const;
export type DeliveryVia = (typeof DELIVERY_VIAS)[number];

/**
 * Every outcome a delivery decision can have: the core's decisions and statuses, plus what the
 * runner decides itself (`receive_limit`, `malformed`, `worker_error`). `already_final` is how a
 * message whose first attempt was made inline shows up when its safety-net copy reaches the
 * worker; `dead_letter_copy` is that copy of an event that failed already; `duplicate` a second
 * copy of a job that lost the race to commit; `outcome_unknown` a retry after a POST that got no
 * answer within its deadline (the dot may have it: the next attempt is a second POST).
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

/**
 * Where a new event goes: its record and its delivery job, together. The embedded database writes
 * both in one transaction (a job exists exactly when its record says `queued`); on AWS they are a
 * DynamoDB write followed by an SQS send (core/outbox.ts composes them and says what happens when
 * the second fails).
 */
export interface Outbox {
  /**
   * Records a new event (fails if one with this id exists) and queues its job. Throws
   * DependencyUnavailable: `storage` when nothing was recorded, `queue` (with the event id) when
   * the record exists but its job could not be queued (the record then says `failed`).
   */
  add(record: EventRecord, job: DeliveryJob, options?: EnqueueOptions): Promise<void>;
  /**
   * Gives a settled event another round (an operator's resend): applies `patch` if the record is
   * still as `read` (same status and attempt count), and queues `job`. False when it changed in
   * between; throws DependencyUnavailable like `add` (after a failed send the record is back as
   * it was read).
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
   * The time of day, for a time that leaves the process to be compared with another machine's clock
   * (a signature's timestamp, an inbound timestamp's window). Absent: `now()` is the time of day.
   * A clock whose `now()` ignores steps of the wall clock (lambda/local/clock.ts) keeps this apart.
   */
  wall?(): number;
}

/** The time of day by `clock` (Clock.wall, else its now). */
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
