/**
 * The ports the core talks through: storage, queue, outbound webhook client and clock. Adapters
 * live in lambda/adapters (embedded file store and in-process queue for the local runtime;
 * DynamoDB and SQS for AWS); the core only ever sees these interfaces.
 *
 * Deliberately not here: retries, timeouts or logging of the adapters themselves.
 */
import type { EventStatus, FailureReason } from './core/protocol';

/** All times are epoch milliseconds. */
export interface SubscriptionRecord {
  id: string;
  url: string;
  name: string;
  secret: string;
  previousSecret?: string;
  previousSecretUntil?: number;
  principal: string;
  createdAt: number;
  refreshedAt: number;
  expiresAt: number;
  lastDeliveryAt?: number;
  lastError?: FailureReason | null;
}

export interface EventRecord {
  eventId: string;
  status: EventStatus;
  subscriptionId: string;
  attempts: number;
  lastError?: FailureReason | null;
  lastHttpStatus?: number | null;
  createdAt: number;
  deliveredAt?: number;
  expiresAt: number;
  /**
   * A lease: the delivery worker makes no attempt before this time (epoch ms). Set while the MCP
   * side makes the inline first attempt, and after each transient failure to the time the next
   * attempt is due, so the schedule holds whichever copy of the job comes first.
   */
  notBefore?: number;
}

export type EventPatch = Partial<Pick<EventRecord, 'status' | 'attempts' | 'lastError' | 'lastHttpStatus' | 'deliveredAt' | 'notBefore'>>;

/**
 * What an event update expects to find: the status it moves from and, where a second receipt of
 * the same job could race it, the attempt count it read. Two workers can then never both commit
 * an outcome for one attempt, and `failed` can never overwrite `delivered`.
 */
export interface EventExpectation {
  status: EventStatus;
  attempts?: number;
}

export type PutSubscriptionResult =
  | { ok: true }
  /** The live subscription that made the conditional put fail (ALL_OLD). */
  | { ok: false; holder: SubscriptionRecord };

/**
 * Storage with the semantics of SPEC 5. Every read treats an item past its expiry as absent, and so
 * do the conditions of the conditional writes.
 */
export interface Store {
  /** Strongly consistent read of the live subscription, if any. */
  getSubscription(now: number): Promise<SubscriptionRecord | undefined>;
  /** Put if there is no live subscription, or the live one has the same url. */
  putSubscription(record: SubscriptionRecord, now: number): Promise<PutSubscriptionResult>;
  /** Delete only if the stored subscription has this url. True when something was deleted. */
  deleteSubscription(url: string): Promise<boolean>;
  /**
   * Records the last delivery outcome on the subscription (lastDeliveryAt when `deliveredAt` is
   * given, lastError always), only if the live subscription is still `subscriptionId`.
   */
  recordDeliveryOutcome(subscriptionId: string, outcome: { deliveredAt?: number; error: FailureReason | null }): Promise<void>;

  /** Creates an event record; fails if one with this id exists. */
  putEvent(record: EventRecord): Promise<void>;
  getEvent(eventId: string, now: number): Promise<EventRecord | undefined>;
  /**
   * Applies the patch to a live record, only if it matches `expected` when given. True when the
   * patch was written; false when the record is absent or expired or the expectation failed.
   */
  updateEvent(eventId: string, patch: EventPatch, expected?: EventExpectation): Promise<boolean>;
  /**
   * Writes the record unless a live one with this id exists (an expired one is replaced). Used by
   * the worker for a job whose record expired (a dead letter redriven late): the job is still in
   * play, so its record is restored instead of the job looping without one. True when written.
   */
  restoreEvent(record: EventRecord): Promise<boolean>;

  isVerified(key: string, now: number): Promise<boolean>;
  markVerified(key: string, now: number): Promise<void>;

  /** Claims an inbound webhook-id for the replay window; false when it was already claimed. */
  claimReplayId(id: string, now: number): Promise<boolean>;

  /**
   * Stores the answer to an inbound event delivery under its delivery id (pup's `webhook-id`), kept
   * `Limits.pupEventAnswerMs`, with one conditional write: `stored: true` when this call stored it
   * (the caller then commits the delivery's effects, once), otherwise the answer stored first,
   * returned by that same failed write (ALL_OLD), for a retry to repeat byte for byte.
   */
  putInboundAnswer(deliveryId: string, answer: InboundAnswer, now: number): Promise<InboundAnswerResult>;
  /**
   * Operator-only (`dm-dot events`), read-only: every live event record, newest first, of one
   * status when given. On DynamoDB it is the table's only Scan (paged, filtered to EVENT# items);
   * no request or delivery path ever calls it.
   */
  listEvents(now: number, filter?: { status?: EventStatus }): Promise<EventRecord[]>;
}

/** An HTTP answer kept for retries of one inbound delivery: status and the exact body text. */
export interface InboundAnswer {
  status: number;
  body: string;
}

export type InboundAnswerResult = { stored: true } | { stored: false; answer: InboundAnswer };

/** What the delivery worker needs to send one event; `body` is the exact bytes of every attempt. */
export interface DeliveryJob {
  eventId: string;
  subscriptionId: string;
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

export type WebhookResponse =
  | { kind: 'response'; status: number; retryAfter?: string; body: Uint8Array }
  | { kind: 'failure'; reason: TransportFailure };

export interface WebhookClient {
  post(request: WebhookRequest): Promise<WebhookResponse>;
}

export interface Clock {
  now(): number;
  sleep(ms: number): Promise<void>;
}

export const systemClock: Clock = {
  now: () => Date.now(),
  sleep: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
};
