/**
 * What an operator sees of the state, as JSON-ready views the CLI and the admin routes both show.
 *
 * Deliberately not here: the signing secret, the full callback URL (its path and query may carry
 * the dot's own tokens: a view has the host only), and message texts (kept for resending only).
 */
import { DEFAULT_EVENTS_PROFILE, EventStatus } from '../core/protocol';
import type { EventRecord, LogEntry, SubscriptionRecord } from '../ports';

export type SubscriptionView = ReturnType<typeof subscriptionView>;
/** One line of the delivery log. */
export type EventView = ReturnType<typeof eventView>;
export type EventDetail = ReturnType<typeof eventDetail>;

/** One entry of an event's own log: a POST, or an operator's resend or redrive, or a cancel. */
export type LogEntryView =
  | { at: string; kind: 'attempt'; outcome: string; statusClass: string | null; durationMs: number; counted: boolean }
  | { at: string; kind: 'note'; note: string };

export const iso = (ms: number | undefined | null): string | null => (ms === undefined || ms === null ? null : new Date(ms).toISOString());

export function subscriptionView(record: SubscriptionRecord) {
  let callbackHost: string;
  try {
    callbackHost = new URL(record.url).host;
  } catch {
    callbackHost = '(unparseable)';
  }
  return {
    id: record.id,
    callbackHost,
    createdAt: iso(record.createdAt)!,
    refreshedAt: iso(record.refreshedAt)!,
    expiresAt: iso(record.expiresAt)!,
    lastDeliveryAt: iso(record.lastDeliveryAt),
    lastError: record.lastError ?? null,
  };
}

export function eventView(record: EventRecord) {
  return {
    eventId: record.eventId,
    status: record.status,
    attempts: record.attempts,
    lastError: record.lastError ?? null,
    lastHttpStatus: record.lastHttpStatus ?? null,
    createdAt: iso(record.createdAt)!,
    deliveredAt: iso(record.deliveredAt),
    sender: record.sender ?? null,
    acknowledgedAt: iso(record.acknowledgedAt),
  };
}

function entryView(entry: LogEntry): LogEntryView {
  if ('note' in entry) return { at: iso(entry.at)!, kind: 'note', note: entry.note };
  return { at: iso(entry.at)!, kind: 'attempt', outcome: entry.outcome, statusClass: entry.statusClass, durationMs: entry.durationMs, counted: entry.counted };
}

/** True when `dm-dot events resend` can give it another round: failed or dropped, bytes kept. */
export function isResendable(record: EventRecord): boolean {
  return (record.status === EventStatus.failed || record.status === EventStatus.dropped) && typeof record.body === 'string';
}

export function eventDetail(record: EventRecord) {
  return { ...eventView(record), log: (record.log ?? []).map(entryView), resendable: isResendable(record) };
}

export const EVENT_STATUSES: readonly EventStatus[] = Object.values(EventStatus);

export function isEventStatus(value: string): value is EventStatus {
  return (EVENT_STATUSES as readonly string[]).includes(value);
}

/** What `switchesOf` reads of the local settings (config/settings' LocalSettings has this shape). */
export interface SwitchSettings {
  allowLoopbackCallbacks: boolean;
  pupSecrets: { secrets: readonly unknown[] };
  allowedOrigins: string[];
  allowedHosts: string[];
  retryDelaysS: number[];
  deliveryWaitMs: number;
  eventsProfile?: string;
}

/** The switches in force, as the admin status route and `dm-dot status` show them (never a secret). */
export type Switches = ReturnType<typeof switchesOf>;

export function switchesOf(settings: SwitchSettings) {
  return {
    loopbackCallbacks: settings.allowLoopbackCallbacks,
    pup: settings.pupSecrets.secrets.length > 0 ? { secrets: settings.pupSecrets.secrets.length } : (false as const),
    allowedOrigins: settings.allowedOrigins,
    allowedHosts: settings.allowedHosts,
    retryDelaysS: settings.retryDelaysS,
    deliveryWaitMs: settings.deliveryWaitMs,
    eventsProfile: settings.eventsProfile ?? DEFAULT_EVENTS_PROFILE,
  };
}
