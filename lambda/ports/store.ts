/**
 * The one Store's surface (lambda/ports.ts re-exports it): what each method means, written once.
 * `TableStore` (core/store) implements it over the item table. The composition roots and the
 * operator's actions hold it whole; each request and delivery path declares beside itself the view
 * it uses (a `Pick` of these: core/delivery.ts `DeliveryStore`, core/messages.ts `MessageStore`,
 * core/subscriptions.ts `SubscriptionStore`, core/outbox.ts `OutboxStore`, core/reconcile.ts,
 * mcp/server.ts `McpStore`, core/access.ts `AdmissionStore`), so a Lambda or a test double gives
 * only that part.
 *
 * Deliberately not here: how any of it is stored (core/store), and the ports of the delivery
 * pipeline, the webhook client, the clock and the logger (lambda/ports.ts).
 */
import type { EventExpectation, EventPatch, EventRecord, EventStatus, FailureReason, QueuedEntry, SubscriptionRecord } from './records';

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
