/**
 * The records every layer shares (lambda/ports.ts re-exports them): the subscription, the event and
 * its delivery log, and what an event write expects to find. All times are epoch milliseconds.
 *
 * Deliberately not here: how a record is stored (core/store) or what a tool returns of it (core/protocol.ts).
 */

/** Why a callback failed: only these categories are stored or returned, never the endpoint's text. */
export const FailureReasons = ['challenge_failed', 'http_4xx', 'http_5xx', 'timeout', 'tls_error', 'connection_refused'] as const;
export type FailureReason = (typeof FailureReasons)[number];

/** An event's delivery status, as stored and as `events/list` returns it. (Re-exported by core/protocol.ts.) */
export const EventStatus = {
  queued: 'queued',
  delivered: 'delivered',
  failed: 'failed',
  dropped: 'dropped',
  /** Accepted with the inbox on while no dot was subscribed: no job, no webhook; read with get_pending_messages. */
  kept: 'kept',
} as const;
export type EventStatus = (typeof EventStatus)[keyof typeof EventStatus];

/** The `reason` a dead-lettered job carries (docs/http-and-errors.md; `stranded`: the reconciler's, DEL-OUT-4). */
export type DeadLetterReason = FailureReason | 'receive_limit' | 'malformed' | 'stranded';

export interface SubscriptionRecord {
  id: string;
  /**
   * Fixed when a subscribe finds no stored item; kept by a refresh or a same-URL subscribe after
   * expiry. Jobs of another generation are dropped, so an ended subscription's events never reach
   * the next one on the same callback. Absent on items from before generations.
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
  /** Always true now; false only in older logs, for an inline attempt the wait window cut short. */
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
  /** A lease: no worker attempt before this (the inline attempt's, then each retry's due time). */
  notBefore?: number;
  /** The event's exact bytes, kept until delivered so `dm-dot events resend` can send them again. */
  body?: string;
  /** The delivery log: every POST and every operator action, oldest first. */
  log?: LogEntry[];
  /** Set when its task was cancelled (tasks/cancel): the event is `dropped` and its task reads `cancelled`. */
  cancelledAt?: number;
  /** Set when the reconciler re-enqueued it (once per time queued); a record stranded again is failed. */
  repairedAt?: number;
  /** Who sent it: `connector` (the connector key) or a sender's name; absent on records from before senders. */
  sender?: string;
  /** Sent with the inbox on: until acknowledged it is in the pending index and keeps its `body`. */
  inbox?: boolean;
  /** When the dot first acknowledged it (acknowledge_messages); the first acknowledgement stands. */
  acknowledgedAt?: number;
}

/** A `queued` record as the reconciler finds it: its id and since when it has been queued. */
export interface QueuedEntry {
  eventId: string;
  queuedSince: number;
}

/** The fields a patch sets as given (`body` and `appendLog` have their own rules). */
type PatchedField = 'status' | 'attempts' | 'lastError' | 'lastHttpStatus' | 'deliveredAt' | 'notBefore' | 'subscriptionId' | 'generation' | 'cancelledAt';

export type EventPatch = Partial<Pick<EventRecord, PatchedField>> & {
  /** A string sets the kept bytes; null removes them (the event was delivered). */
  body?: string | null;
  /** Appended to the log in the same conditional write. */
  appendLog?: LogEntry;
};

/** What an event update expects to find, so two copies of a job never both commit one attempt's outcome. */
export interface EventExpectation {
  status: EventStatus | readonly EventStatus[];
  attempts?: number;
  /** The lease it read (`null`: none); left out, the lease is not compared. */
  notBefore?: number | null;
}
