/**
 * The ports the core talks through: storage, the outbox that records an event with its delivery
 * job, the queue, the outbound webhook client, the clock and the logger. Adapters live in
 * lambda/adapters (the embedded database of the local runtime; DynamoDB and SQS on AWS); the core
 * only ever sees these interfaces.
 *
 * Deliberately not here: retries, timeouts or logging of the adapters themselves, and any reading
 * of settings (every adapter gets typed settings from its entry point).
 */

/**
 * Why a callback (challenge or delivery) failed. Only these categories are ever stored or
 * returned: never a status line, header or body of the endpoint. (Re-exported by core/protocol.ts.)
 */
export const FailureReasons = ['challenge_failed', 'http_4xx', 'http_5xx', 'timeout', 'tls_error', 'connection_refused'] as const;
export type FailureReason = (typeof FailureReasons)[number];

/** An event's delivery status, as stored and as `events/list` returns it. (Re-exported by core/protocol.ts.) */
export const EventStatus = {
  queued: 'queued',
  delivered: 'delivered',
  failed: 'failed',
  dropped: 'dropped',
  /**
   * Accepted while no dot was subscribed, with the inbox on (docs/contract: the inbox): no webhook
   * is ever attempted for it and it has no job; the dot reads it with get_pending_messages.
   */
  kept: 'kept',
} as const;
export type EventStatus = (typeof EventStatus)[keyof typeof EventStatus];

/** The `reason` a dead-lettered job carries (core/protocol.ts re-exports it and says what each means). */
export type DeadLetterReason = FailureReason | 'receive_limit' | 'malformed' | 'stranded';

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
   * Always true now: every POST's outcome counts. False only in logs written before that, for an
   * inline first attempt the wait window cut short.
   */
  counted: boolean;
}

/**
 * Something that happened to an event that is not a POST: an operator's resend or redrive, a cancel,
 * or a failure no attempt made (the reconciler found it `stranded`, its job hit its `receive_limit`).
 */
export interface EventNote {
  at: number;
  note: 'resent' | 'redriven' | 'cancelled' | 'stranded' | 'receive_limit';
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
  /**
   * Set when the reconciler re-enqueued the record because nothing would deliver it (once per
   * time it is queued; removed when it leaves `queued`). A record stranded again is failed.
   */
  repairedAt?: number;
  /** Who sent it: `connector` (the connector key) or a sender's name; absent on records from before senders. */
  sender?: string;
  /**
   * True when the event was sent with the inbox on: until it is acknowledged it is in the pending
   * index (oldest first, never a scan) and keeps its `body` whatever its status, so the dot can
   * read it again with get_pending_messages.
   */
  inbox?: boolean;
  /** When the dot first acknowledged it (acknowledge_messages); the first acknowledgement stands. */
  acknowledgedAt?: number;
}

/** A `queued` record as the reconciler finds it: its id and since when it has been queued. */
export interface QueuedEntry {
  eventId: string;
  queuedSince: number;
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
  /**
   * The lease it read: `null` when the record had none, a time when it had that one; left out, the
   * lease is not compared. The worker's lease before a POST is a compare-and-set on all three, so
   * two copies of one job that read the same record cannot both take it.
   */
  notBefore?: number | null;
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
   * Creates an event record; fails if a live one with this id exists. A store whose writes can
   * lose their answer (DynamoDB: the SDK retries, and the retry meets the first try's record)
   * counts this very record (same id, body and creation time) as written. Only the outbox calls
   * it (core/outbox.ts on AWS): a record always comes with its job, except a `kept` one, which has
   * none (core/messages.ts).
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
   * Claims an inbound webhook-id (pup's `/pup/mcp` and `/pup/challenge`) with one conditional write
   * that carries `token`, a value new to this request, and `request`, what identifies the request
   * itself (its route and a digest of its body: a retry sends the same). The claim holds a lease of
   * `Limits.replayLeaseMs` while the request is answered; `settleReplayId` then either keeps the
   * answer for replays of the id, up to and including `now + Limits.replayMemoryMs` (the last
   * instant the inbound timestamp window could still accept the same request), or releases the
   * claim so a retry is processed. A claim whose lease ran out unsettled (its request died) may be
   * taken again. When the write fails, the stored claim it returns (ALL_OLD) decides: carrying
   * `token`, it is this request's own (a write applied whose answer was lost, retried); otherwise it
   * tells whether it holds the same request and, once settled, its answer.
   */
  claimReplayId(id: string, now: number, token: string, request: string): Promise<ReplayClaim>;
  /**
   * Settles this request's claim (only if it still carries `token`): with an answer, keeps it for
   * replays of the id until the claim's end; without, deletes the claim, so a retry of a request
   * that failed is processed like its first try.
   */
  settleReplayId(id: string, token: string, answer: InboundAnswer | undefined): Promise<void>;

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

  /**
   * The reconciler's reads and its one write of its own (core/reconcile.ts), over the sparse index
   * of queued records (lambda/core/store/items.ts). Only AWS runs a reconciler (its record and job
   * are written apart); the embedded database writes both in one transaction, and only its
   * start-up repair reads the same index. Optional so that a test double may leave them out.
   *
   * `listQueuedBefore`: records `queued` since before `before`, oldest first, at most `limit`
   * (from an eventually consistent index: the caller reads each record before deciding).
   * `markRequeued`: marks a record re-enqueued (sets `repairedAt`, and restarts its queued time)
   * if it is still `queued` with `attempts` and the lease `notBefore` read (null: none, as in
   * EventExpectation) and was not re-enqueued before. True when written.
   */
  listQueuedBefore?(before: number, limit: number): Promise<QueuedEntry[]>;
  markRequeued?(eventId: string, attempts: number, now: number, notBefore: number | null): Promise<boolean>;
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

// ---- Idempotency keys and the inbox ---------------------------------------------------------------

/**
 * One `IDEMPOTENCY#<caller>#<key>` item (kept Limits.idempotencyMemoryMs): which event a key made
 * and a hash of the message it carried. `in_progress` while the first request is being answered
 * (until `leaseUntil`), `done` once it was answered.
 */
export interface IdempotencyRecord {
  eventId: string;
  /** Hex SHA-256 of the trimmed message: a reuse of the key with another message is told apart. */
  messageHash: string;
  state: 'in_progress' | 'done';
  createdAt: number;
  expiresAt: number;
  /** While `in_progress`: a first request that died is given up after this (epoch ms). */
  leaseUntil?: number;
}

export type IdempotencyClaim =
  /** This request holds the key: it makes the event named in its record. */
  | { claimed: true }
  /** Another request made (or is making) an event with this key: its record, live and not expired. */
  | { claimed: false; existing: IdempotencyRecord };

/**
 * Idempotency keys, scoped by caller (`connector`, `pup` or a sender's name). A claim is one
 * conditional put that succeeds only when no live item exists; a loser learns the stored item
 * from that same write (ALL_OLD). What a stale `in_progress` item means (its first request died:
 * did it make its event?) is the caller's to decide, by reading the event it names, before it
 * retakes the key.
 */
export interface IdempotencyStore {
  claimIdempotencyKey(caller: string, key: string, record: IdempotencyRecord, now: number): Promise<IdempotencyClaim>;
  /**
   * Only if the stored item still names `eventId`: `done` marks it answered (kept until its
   * expiry); `release` deletes it, so a retry of a request that made nothing is processed anew.
   */
  settleIdempotencyKey(caller: string, key: string, eventId: string, outcome: 'done' | 'release'): Promise<void>;
  /**
   * Replaces an `in_progress` item whose lease ran out (its first request died before making an
   * event) with `record`, only if it still names `staleEventId`. True when this call took it.
   */
  retakeIdempotencyKey(caller: string, key: string, staleEventId: string, record: IdempotencyRecord, now: number): Promise<boolean>;
}

/** Where a page of pending messages starts: after this event (opaque to callers once encoded). */
export interface PendingPosition {
  createdAt: number;
  eventId: string;
}

/**
 * The inbox's storage: the events sent with the inbox on that the dot has not acknowledged, in an
 * index ordered by creation (a sparse index on DynamoDB, an index in the embedded database).
 */
export interface InboxStore {
  /** Live pending events, oldest first (createdAt, then eventId), strictly after `after`, at most `limit`. */
  listPending(now: number, limit: number, after?: PendingPosition): Promise<EventRecord[]>;
  /**
   * Records `acknowledgedAt = at` once and takes the event out of the pending index (and lets its
   * kept body go unless it is still queued). `unknown`: no live record with this id.
   */
  acknowledgeEvent(eventId: string, at: number, now: number): Promise<'acknowledged' | 'already' | 'unknown'>;
}

/** An HTTP answer kept for retries of one inbound delivery: status and the exact body text. */
export interface InboundAnswer {
  status: number;
  body: string;
}

export type InboundAnswerResult = { stored: true } | { stored: false; answer: InboundAnswer };

/** What claiming an inbound webhook-id found (Store.claimReplayId). */
export type ReplayClaim =
  /** This request holds the id (perhaps through its own earlier write whose answer was lost). */
  | { claimed: true }
  /**
   * Another request holds it. `sameRequest`: the same route and body (a retry, or a true replay);
   * then `answer` is what its claim was settled with (the pup door settles a processed request
   * with the refusal its replays get, never its answer), absent while it is still being answered.
   */
  | { claimed: false; sameRequest: boolean; answer?: InboundAnswer };

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
