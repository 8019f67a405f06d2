/**
 * The ports the core talks through: storage, the outbox that records an event with its delivery
 * job, the queue, the outbound webhook client, the clock and the logger. Adapters live in
 * lambda/adapters (the embedded database of the local runtime; DynamoDB and SQS on AWS); the core
 * only ever sees these interfaces.
 *
 * Deliberately not here: retries, timeouts or logging of the adapters themselves, and any reading
 * of settings (every adapter gets typed settings from its entry point).
 */
import type { EventStatus, FailureReason } from './core/protocol';

/** All times are epoch milliseconds. */
export interface SubscriptionRecord {
  id: string;
  /**
   * Fixed when a subscribe finds no stored SUBSCRIPTION item; kept by a refresh and by a subscribe
   * of the same URL after mere expiry. Jobs queued under another generation are dropped, so the
   * events of an ended subscription never reach the next one on the same callback. Absent only on
   * items written before generations existed.
   */
  generation?: string;
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

/** One POST to the callback, as the delivery log keeps it: never a body or a header. */
export interface AttemptEntry {
  at: number;
  /** `delivered`, or the failure category of this POST. */
  outcome: 'delivered' | FailureReason;
  /** `2xx` … `5xx`, or null when no HTTP answer came (timeout, TLS, refused). */
  statusClass: '1xx' | '2xx' | '3xx' | '4xx' | '5xx' | null;
  durationMs: number;
  /**
   * False for an inline first attempt cut short by the wait window: the dot may have received it,
   * but it is not counted against the schedule (the worker sends it again with the same id).
   */
  counted: boolean;
}

/** Something that happened to an event that is not a POST: an operator's resend or redrive, a cancel. */
export interface EventNote {
  at: number;
  note: 'resent' | 'redriven' | 'cancelled';
}

export type LogEntry = AttemptEntry | EventNote;

export interface EventRecord {
  eventId: string;
  status: EventStatus;
  subscriptionId: string;
  /** The subscription generation the event was queued under (absent on records from before generations). */
  generation?: string;
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
  /**
   * The event's exact bytes, kept until it is delivered so that a failed or dropped event can be
   * sent again with the same id and bytes (`dm-dot events resend`). Removed when it is delivered.
   */
  body?: string;
  /** The delivery log: every POST and every operator action, oldest first. */
  log?: LogEntry[];
  /** Set when its task was cancelled (tasks/cancel): the event is `dropped` and its task reads `cancelled`. */
  cancelledAt?: number;
  /** Who sent it: `connector` (the connector key) or a sender's name; absent on records from before senders. */
  sender?: string;
}

export interface EventPatch {
  status?: EventStatus;
  attempts?: number;
  lastError?: FailureReason | null;
  lastHttpStatus?: number | null;
  deliveredAt?: number;
  notBefore?: number;
  subscriptionId?: string;
  generation?: string;
  cancelledAt?: number;
  /** A string sets the kept bytes; null removes them (the event was delivered). */
  body?: string | null;
  /** Appended to the log in the same conditional write. */
  appendLog?: LogEntry;
}

/**
 * What an event update expects to find: the status it moves from (or one of several) and, where
 * a second receipt of the same job could race it, the attempt count it read. Two workers can then
 * never both commit an outcome for one attempt, and `failed` can never overwrite `delivered`.
 */
export interface EventExpectation {
  status: EventStatus | readonly EventStatus[];
  attempts?: number;
}

/**
 * What a subscribe read of the stored SUBSCRIPTION item, so that its conditional put applies only
 * if nothing changed in between (an unsubscribe, a clear, another callback's subscribe):
 * - `absent`: no item is stored;
 * - `same`: the stored item has this URL and this generation (undefined: an item written before
 *   generations existed);
 * - `expired`: the stored item belongs to another URL and had expired at the put's `now`.
 */
export type SubscriptionExpectation =
  | { kind: 'absent' }
  | { kind: 'same'; url: string; generation: string | undefined }
  | { kind: 'expired'; generation: string | undefined };

export type PutSubscriptionResult =
  | { ok: true }
  /** The stored item that made the conditional put fail (ALL_OLD), or undefined when none is stored. */
  | { ok: false; holder: SubscriptionRecord | undefined };

/**
 * Storage with the semantics of docs/contract/storage.md. Every read treats an item past its expiry as absent, and so
 * do the conditions of the conditional writes.
 */
export interface Store {
  /** Strongly consistent read of the live subscription, if any. */
  getSubscription(now: number): Promise<SubscriptionRecord | undefined>;
  /**
   * Strongly consistent read of the stored SUBSCRIPTION item whether or not it has expired: only
   * subscribe needs it, to keep a generation across mere expiry.
   */
  getStoredSubscription(): Promise<SubscriptionRecord | undefined>;
  /** One conditional put: written only if the stored item is still what `expected` says. */
  putSubscription(record: SubscriptionRecord, now: number, expected: SubscriptionExpectation): Promise<PutSubscriptionResult>;
  /** Delete only if the stored subscription has this url. True when something was deleted. */
  deleteSubscription(url: string): Promise<boolean>;
  /**
   * Records the last delivery outcome on the subscription (lastDeliveryAt when `deliveredAt` is
   * given, lastError always), only if the live subscription is still `subscriptionId`.
   */
  recordDeliveryOutcome(subscriptionId: string, outcome: { deliveredAt?: number; error: FailureReason | null }): Promise<void>;

  /**
   * Creates an event record; fails if a live one with this id exists. Only the outbox calls it
   * (core/outbox.ts on AWS): a record always comes with its job.
   */
  putEvent(record: EventRecord): Promise<void>;
  getEvent(eventId: string, now: number): Promise<EventRecord | undefined>;
  /**
   * Applies the patch to a stored record, only if it matches `expected` when given. True when the
   * patch was written; false when the record is absent or the expectation failed.
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

  /**
   * Claims an inbound webhook-id for the replay window; false when it was already claimed. The
   * claim holds up to and including `now + Limits.replayMemoryMs`, the last instant at which the
   * inbound timestamp window could still accept the same request.
   */
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

// ---- Access: the deployment's identity, sender keys and their rate counters ----------------------

/**
 * The one DEPLOYMENT item: the principal behind every subscription id (created once, never
 * changed), the hash of the connector key in force and, during a rotation's overlap, the previous
 * key's hash with the end of its overlap.
 */
export interface DeploymentRecord {
  principal: string;
  keyHash: string;
  previousKeyHash?: string;
  previousKeyUntil?: number;
  createdAt: number;
  rotatedAt?: number;
}

/** The connector keys a rotation leaves in force. Absent previous fields: no overlap. */
export interface DeploymentKeys {
  keyHash: string;
  previousKeyHash?: string;
  previousKeyUntil?: number;
  rotatedAt: number;
}

/** One `SENDER#<name>` item: never the key, only its hash. */
export interface SenderRecord {
  name: string;
  keyHash: string;
  /** Messages per minute; null: no limit. */
  rate: number | null;
  createdAt: number;
  lastUsedAt?: number;
  revokedAt?: number;
}

/**
 * Storage of who may call: the deployment's identity, the sender keys and the per-minute send
 * counters. Every access is by key (the listing is operator-only), so the request path never scans.
 */
export interface AccessStore {
  getDeployment(): Promise<DeploymentRecord | undefined>;
  /**
   * Creates the DEPLOYMENT item unless one exists (one conditional put) and returns the one stored:
   * two first requests racing agree on the winner's principal.
   */
  createDeployment(record: DeploymentRecord): Promise<DeploymentRecord>;
  /** Replaces the key hashes of the existing DEPLOYMENT item (its principal stays). False when absent. */
  setDeploymentKeys(keys: DeploymentKeys): Promise<boolean>;
  /** Creates a sender; false when the name is taken (revoked names stay taken). */
  addSender(record: SenderRecord): Promise<boolean>;
  getSender(name: string): Promise<SenderRecord | undefined>;
  /** Operator-only: every sender, by name. */
  listSenders(): Promise<SenderRecord[]>;
  /** Sets revokedAt on a sender not yet revoked; false when absent or already revoked. */
  revokeSender(name: string, at: number): Promise<boolean>;
  /** Sets lastUsedAt = at only if it is unset or older than `at - minIntervalMs` (at most one write a window). */
  touchSender(name: string, at: number, minIntervalMs: number): Promise<void>;
  /**
   * Counts one send in the counter `window` (RATE#<name>#<window>), only if it holds fewer than
   * `limit`; the counter expires at `expiresAt`. False: the limit was reached, nothing counted.
   */
  countSend(name: string, window: number, limit: number, expiresAt: number): Promise<boolean>;
}

// ---- end of Access ------------------------------------------------------------------------------

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

/**
 * Structured log lines. Callers pass only safe fields: ids, categories, codes, durations. The
 * implementation (lambda/log.ts) also scrubs `whsec_` secrets and registered values.
 */
export interface Logger {
  info(event: string, fields?: Record<string, unknown>): void;
  warn(event: string, fields?: Record<string, unknown>): void;
  error(event: string, fields?: Record<string, unknown>): void;
}
