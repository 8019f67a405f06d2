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
}

export type EventPatch = Partial<Pick<EventRecord, 'status' | 'attempts' | 'lastError' | 'lastHttpStatus' | 'deliveredAt'>>;

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
  updateEvent(eventId: string, patch: EventPatch): Promise<void>;

  isVerified(key: string, now: number): Promise<boolean>;
  markVerified(key: string, now: number): Promise<void>;

  /** Claims an inbound webhook-id for the replay window; false when it was already claimed. */
  claimReplayId(id: string, now: number): Promise<boolean>;
}

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

export interface Queue {
  enqueue(job: DeliveryJob): Promise<void>;
}

export interface WebhookRequest {
  url: string;
  headers: Record<string, string>;
  body: Uint8Array;
  /** A deadline shorter than the guard's 5 s for this request (never longer). */
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
