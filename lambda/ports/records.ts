/**
 * The records every layer shares (lambda/ports.ts re-exports them): the subscription, the event and
 * its delivery log, and what an event write expects to find. All times are epoch milliseconds.
 *
 * Deliberately not here: how a record is stored (core/store) or what a tool returns of it (core/protocol.ts).
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
