/**
 * The operator's actions over the ports (docs/contract/local-runtime.md): show and clear the
 * subscription, list the delivery log, show and resend one event. The CLI and the running local
 * server's admin routes run the very same functions, so the two never disagree.
 *
 * Deliberately not here: how the CLI reaches them, the admin routes' HTTP, and redrive (the queue's own mechanics).
 */
import { EventStatus } from '../core/protocol';
import { type EventPatch, jobOf, type Outbox, type Store } from '../ports';
import { eventDetail, eventView, isResendable, subscriptionView, type EventDetail, type EventView, type SubscriptionView } from './views';

export async function showSubscription(store: Store, now: number): Promise<SubscriptionView | null> {
  const record = await store.getSubscription(now);
  return record ? subscriptionView(record) : null;
}

/**
 * Ends the live subscription so that another callback can subscribe at once; with `expectedId` (the
 * one shown and confirmed) nothing else is ever deleted. Its queued deliveries are then dropped.
 */
export async function clearSubscription(store: Store, now: number, expectedId?: string): Promise<{ cleared: boolean; id: string | null }> {
  const record = await store.getSubscription(now);
  if (!record) return { cleared: false, id: null };
  if (expectedId !== undefined && record.id !== expectedId) return { cleared: false, id: record.id };
  const cleared = await store.deleteSubscription(record.url);
  return { cleared, id: record.id };
}

export async function listEventViews(store: Store, now: number, status?: EventStatus): Promise<EventView[]> {
  return (await store.listEvents(now, status === undefined ? {} : { status })).map(eventView);
}

export async function showEvent(store: Store, now: number, eventId: string): Promise<EventDetail | null> {
  const record = await store.getEvent(eventId, now);
  return record ? eventDetail(record) : null;
}

export type ResendResult =
  | { resent: true; eventId: string; subscriptionId: string }
  | { resent: false; eventId: string; why: 'not_found' | 'not_settled' | 'delivered' | 'no_bytes' | 'no_subscription' | 'changed' };

/** Gives one failed or dropped event another round of the schedule, same id and bytes, to the subscription live now. */
export async function resendEvent(deps: { store: Store; outbox: Outbox }, now: number, eventId: string): Promise<ResendResult> {
  const record = await deps.store.getEvent(eventId, now);
  if (!record) return { resent: false, eventId, why: 'not_found' };
  if (record.status === EventStatus.delivered) return { resent: false, eventId, why: 'delivered' };
  if (record.status === EventStatus.queued) return { resent: false, eventId, why: 'not_settled' };
  if (!isResendable(record) || record.body === undefined) return { resent: false, eventId, why: 'no_bytes' };
  const subscription = await deps.store.getSubscription(now);
  if (!subscription) return { resent: false, eventId, why: 'no_subscription' };
  const generation = subscription.generation;
  const patch: EventPatch = {
    status: EventStatus.queued,
    attempts: 0,
    lastError: null,
    lastHttpStatus: null,
    notBefore: now,
    subscriptionId: subscription.id,
    ...(generation !== undefined ? { generation } : {}),
    appendLog: { at: now, note: 'resent' },
  };
  const reopened = await deps.outbox.reopen(record, patch, jobOf({ eventId, subscriptionId: subscription.id, generation }, record.body));
  return reopened ? { resent: true, eventId, subscriptionId: subscription.id } : { resent: false, eventId, why: 'changed' };
}

/** How many events of each status the log holds (for `dm-dot status`). */
export async function eventCounts(store: Store, now: number): Promise<Record<EventStatus, number>> {
  const counts = Object.fromEntries(Object.values(EventStatus).map((status) => [status, 0])) as Record<EventStatus, number>;
  for (const event of await store.listEvents(now)) counts[event.status]++;
  return counts;
}
