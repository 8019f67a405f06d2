/**
 * The one Store's surface (lambda/ports.ts re-exports it): what each method means, written once.
 * `TableStore` (core/store) implements it; each request and delivery path declares beside itself
 * the `Pick` of it that it uses, so a Lambda or a test double gives only that part.
 *
 * Deliberately not here: how any of it is stored (core/store), and the other ports (lambda/ports.ts).
 */
import type { EventExpectation, EventPatch, EventRecord, EventStatus, FailureReason, QueuedEntry, SubscriptionRecord } from './records';

/**
 * What a subscribe read of the stored SUBSCRIPTION item, so its conditional put applies only if
 * nothing changed in between: no item, the same URL and generation (undefined: an item from before
 * generations), or another URL's item that had expired at the put's `now`.
 */
export type SubscriptionExpectation =
  | { kind: 'absent' }
  | { kind: 'same'; url: string; generation: string | undefined }
  | { kind: 'expired'; generation: string | undefined };

export type PutSubscriptionResult =
  | { ok: true }
  /** The stored item that made the conditional put fail (ALL_OLD), or undefined when none is stored. */
  | { ok: false; holder: SubscriptionRecord | undefined };

/** Storage with the semantics of docs/contract/storage.md: every read and write condition treats an expired item as absent. */
export interface Store {
  /** Strongly consistent read of the live subscription, if any. */
  getSubscription(now: number): Promise<SubscriptionRecord | undefined>;
  /** The stored SUBSCRIPTION item even if expired: subscribe keeps a generation across mere expiry. */
  getStoredSubscription(): Promise<SubscriptionRecord | undefined>;
  /** One conditional put: written only if the stored item is still what `expected` says. */
  putSubscription(record: SubscriptionRecord, now: number, expected: SubscriptionExpectation): Promise<PutSubscriptionResult>;
  /** Delete only if the stored subscription has this url. True when something was deleted. */
  deleteSubscription(url: string): Promise<boolean>;
  /** Sets lastError (and lastDeliveryAt when given), only if the live subscription is still `subscriptionId`. */
  recordDeliveryOutcome(subscriptionId: string, outcome: { deliveredAt?: number; error: FailureReason | null }): Promise<void>;

  /**
   * Creates an event record; fails if a live one with this id exists, except this very record
   * (STORE-IDX-2). Only the outbox calls it, and for a `kept` record core/messages.ts.
   */
  putEvent(record: EventRecord): Promise<void>;
  getEvent(eventId: string, now: number): Promise<EventRecord | undefined>;
  /** Applies the patch only if the record matches `expected` when given. False: absent, or the expectation failed. */
  updateEvent(eventId: string, patch: EventPatch, expected?: EventExpectation): Promise<boolean>;
  /** Writes the record unless a live one with this id exists: the worker's restore of an expired record. True when written. */
  restoreEvent(record: EventRecord): Promise<boolean>;

  isVerified(key: string, now: number): Promise<boolean>;
  markVerified(key: string, now: number): Promise<void>;

  /**
   * Claims an inbound webhook-id (pup's `/pup/mcp` and `/pup/challenge`) with one conditional write
   * carrying `token` (new to this request) and `request` (its route and body digest: a retry sends the
   * same). The claim's lease of `Limits.replayLeaseMs` covers answering; an unsettled claim whose lease
   * ran out may be taken again. When the write fails, the stored claim (ALL_OLD) decides: with
   * `token` it is this request's own (a lost answer, retried), else it tells whether it holds the same
   * request and, once settled, its answer.
   */
  claimReplayId(id: string, now: number, token: string, request: string): Promise<ReplayClaim>;
  /**
   * Settles this request's claim (only if it still carries `token`): an answer is kept for replays
   * through `now + Limits.replayMemoryMs`; none deletes the claim, so a retry is processed anew.
   */
  settleReplayId(id: string, token: string, answer: InboundAnswer | undefined): Promise<void>;

  /**
   * Stores the answer to an inbound event delivery under pup's `webhook-id` for
   * `Limits.pupEventAnswerMs`: `stored: true` when this call stored it (the caller then commits its
   * effects, once), otherwise the answer stored first (ALL_OLD), for a retry to repeat byte for byte.
   */
  putInboundAnswer(deliveryId: string, answer: InboundAnswer, now: number): Promise<InboundAnswerResult>;
  /** Operator-only (`dm-dot events`): every live event record, newest first; the table's only Scan. */
  listEvents(now: number, filter?: { status?: EventStatus }): Promise<EventRecord[]>;

  /**
   * The reconciler's reads and write (core/reconcile.ts) over the sparse index of queued records;
   * optional so that a test double may leave them out. `listQueuedBefore`: records `queued` since
   * before `before`, oldest first (eventually consistent: the caller reads each record).
   * `markRequeued`: sets `repairedAt` and restarts its queued time if it is still `queued` with the
   * `attempts` and lease read and was not re-enqueued before. True when written.
   */
  listQueuedBefore?(before: number, limit: number): Promise<QueuedEntry[]>;
  markRequeued?(eventId: string, attempts: number, now: number, notBefore: number | null): Promise<boolean>;
}

// ---- Access: the deployment's identity, sender keys and their rate counters ----------------------

/** The one DEPLOYMENT item: the principal (never changed), the connector key's hash and, during an overlap, the previous one's. */
export interface DeploymentRecord {
  principal: string;
  keyHash: string;
  previousKeyHash?: string;
  previousKeyUntil?: number;
  createdAt: number;
  rotatedAt?: number;
}

/** The connector keys a rotation leaves in force. Absent previous fields: no overlap. */
export type DeploymentKeys = Pick<DeploymentRecord, 'keyHash' | 'previousKeyHash' | 'previousKeyUntil'> & { rotatedAt: number };

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

/** Storage of who may call; every access is by key (the listing is operator-only), so the request path never scans. */
export interface AccessStore {
  getDeployment(): Promise<DeploymentRecord | undefined>;
  /** Creates the DEPLOYMENT item unless one exists and returns the one stored: racing first requests agree on a principal. */
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
  /** Counts one send in RATE#<name>#<window> if it holds fewer than `limit`. False: the limit was reached. */
  countSend(name: string, window: number, limit: number, expiresAt: number): Promise<boolean>;
}

// ---- Idempotency keys and the inbox ---------------------------------------------------------------

/** One `IDEMPOTENCY#<caller>#<key>` item (kept Limits.idempotencyMemoryMs): the event a key made and its message's hash. */
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
 * Idempotency keys, scoped by caller. A claim is one conditional put; a loser learns the stored item
 * from that write (ALL_OLD). What a stale `in_progress` item means is the caller's to decide.
 */
export interface IdempotencyStore {
  claimIdempotencyKey(caller: string, key: string, record: IdempotencyRecord, now: number): Promise<IdempotencyClaim>;
  /** Only if the item still names `eventId`: `done` keeps it until expiry; `release` deletes it, so a retry is processed anew. */
  settleIdempotencyKey(caller: string, key: string, eventId: string, outcome: 'done' | 'release'): Promise<void>;
  /** Replaces an `in_progress` item whose lease ran out, only if it still names `staleEventId`. True when taken. */
  retakeIdempotencyKey(caller: string, key: string, staleEventId: string, record: IdempotencyRecord, now: number): Promise<boolean>;
}

/** Where a page of pending messages starts: after this event (opaque to callers once encoded). */
export type PendingPosition = Pick<EventRecord, 'createdAt' | 'eventId'>;

/** The inbox: events sent with the inbox on that the dot has not acknowledged, indexed by creation. */
export interface InboxStore {
  /** Live pending events, oldest first (createdAt, then eventId), strictly after `after`, at most `limit`. */
  listPending(now: number, limit: number, after?: PendingPosition): Promise<EventRecord[]>;
  /** Sets `acknowledgedAt` once, leaving the pending index (and the body, unless still queued). `unknown`: no live record. */
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
  /** Another request holds it; when the same route and body, `answer` is what its claim was settled with (absent while answering). */
  | { claimed: false; sameRequest: boolean; answer?: InboundAnswer };
