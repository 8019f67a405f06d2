/**
 * The send use case behind `send_to_dot` and `POST /v1/messages` (SPEC 6.2 steps 1-3): validate,
 * read the live subscription, record the event as queued, enqueue its exact bytes, then wait a
 * bounded time for the delivery worker's outcome.
 *
 * Deliberately not here: sending the webhook (only the delivery worker does that: one delivery
 * path), and wording of results for a particular surface (see mcp/ and http/).
 */
import type { Clock, Queue, Store } from '../ports';
import { DependencyUnavailable, guardDependency, type Dependency } from './errors';
import { newEventId } from './identity';
import { EVENT_NAME, EventStatus, Limits, type FailureReason } from './protocol';
import { checkMessage } from './validation';

export interface MessageDeps {
  store: Store;
  queue: Queue;
  clock: Clock;
  /** How long to wait for the outcome; capped at Limits.deliveryWaitMaxMs. */
  deliveryWaitMs: number;
}

export type SendOutcome =
  | { kind: 'invalid'; error: string }
  | { kind: 'no_subscription' }
  | { kind: 'unavailable'; dependency: Dependency; eventId?: string; cause: unknown }
  | { kind: 'delivered'; eventId: string }
  | { kind: 'queued'; eventId: string }
  | { kind: 'failed'; eventId: string; reason: FailureReason | null };

/** The event envelope of SPEC 6.1, serialized once; these bytes are what every attempt sends. */
export function buildEvent(eventId: string, message: string, at: number): string {
  const json = JSON.stringify({ eventId, name: EVENT_NAME, timestamp: new Date(at).toISOString(), data: { message }, cursor: null });
  // U+FFFE and U+FFFF are valid in JSON strings but refused in SQS message bodies; as \u escapes
  // the event means exactly the same and its bytes can travel through any queue.
  return json.replace(/[\uFFFE\uFFFF]/g, (c) => `\\u${c.charCodeAt(0).toString(16)}`);
}

export async function sendMessage(deps: MessageDeps, args: unknown): Promise<SendOutcome> {
  const checked = checkMessage(args);
  if (!checked.ok) return { kind: 'invalid', error: checked.error };
  try {
    return await record(deps, checked.message);
  } catch (error) {
    if (error instanceof DependencyUnavailable) return { kind: 'unavailable', dependency: error.dependency, cause: error.cause };
    throw error;
  }
}

async function record(deps: MessageDeps, message: string): Promise<SendOutcome> {
  const now = deps.clock.now();
  const subscription = await guardDependency('storage', () => deps.store.getSubscription(now));
  if (!subscription) return { kind: 'no_subscription' };

  const eventId = newEventId();
  const body = buildEvent(eventId, message, now);
  await guardDependency('storage', () =>
    deps.store.putEvent({
      eventId,
      status: EventStatus.queued,
      subscriptionId: subscription.id,
      attempts: 0,
      createdAt: now,
      expiresAt: now + Limits.eventRecordMs,
    }),
  );
  try {
    await deps.queue.enqueue({ eventId, subscriptionId: subscription.id, body });
  } catch (cause) {
    // The record must not claim a delivery that can never happen.
    await deps.store.updateEvent(eventId, { status: EventStatus.failed }).catch(() => undefined);
    return { kind: 'unavailable', dependency: 'queue', eventId, cause };
  }
  return waitForOutcome(deps, eventId);
}

async function waitForOutcome(deps: MessageDeps, eventId: string): Promise<SendOutcome> {
  const deadline = deps.clock.now() + Math.min(Math.max(0, deps.deliveryWaitMs), Limits.deliveryWaitMaxMs);
  // A healthy callback answers within tens of milliseconds, so the first polls come sooner; after
  // them the steady ~100 ms of SPEC 6.2 bounds the reads one call costs.
  const firstPolls = [20, 40];
  for (;;) {
    // A failing read here does not undo the accepted event: it stays queued and is reported so.
    const event = await deps.store.getEvent(eventId, deps.clock.now()).catch(() => undefined);
    if (event?.status === EventStatus.delivered) return { kind: 'delivered', eventId };
    if (event?.status === EventStatus.failed) return { kind: 'failed', eventId, reason: event.lastError ?? null };
    if (event?.status === EventStatus.dropped) return { kind: 'failed', eventId, reason: null };
    const left = deadline - deps.clock.now();
    if (left <= 0) return { kind: 'queued', eventId };
    await deps.clock.sleep(Math.min(firstPolls.shift() ?? Limits.deliveryPollMs, left));
  }
}
