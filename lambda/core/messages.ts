/**
 * The send use case behind `send_to_dot` and `POST /v1/messages` (SPEC 6.2 steps 1-3): validate,
 * read the live subscription, record the event as queued under a lease, enqueue its exact bytes
 * as a delayed safety net, then make the first attempt inline through the same core delivery
 * function the worker uses, within what is left of the wait window, and answer with its outcome.
 *
 * Timeline of one send (t = 0 when the event is recorded; W = the wait window):
 *
 *   0 ── record EVENT (queued, notBefore = W + margin) ── enqueue job (delay = first retry delay)
 *   └─ inline attempt (POST ends by W) ──> delivered / failed: final, the worker's copy skips it
 *                                     ──> transient: notBefore = when attempt 2 is due
 *                                     ──> cut short by W: not counted, notBefore = now
 *   the worker's copy surfaces, defers until notBefore, then attempts; if this process died
 *   mid-attempt the lease simply runs out and the worker makes the attempt. Nothing is lost.
 *
 * Deliberately not here: the attempt itself (core/delivery.ts, one delivery path for the inline
 * attempt and the worker), and wording of results for a particular surface (see mcp/ and http/).
 */
import type { DeliveryJob, EventRecord, Queue, WebhookClient, WebhookResponse } from '../ports';
import { attemptDelivery, classify, type AttemptOptions, type DeliveryDecision, type DeliveryDeps } from './delivery';
import { DependencyUnavailable, guardDependency, type Dependency } from './errors';
import { newEventId } from './identity';
import { EVENT_NAME, EventStatus, FailureReasons, Limits, type FailureReason } from './protocol';
import { checkMessage } from './validation';

export interface MessageDeps extends DeliveryDeps {
  queue: Queue;
  /** How long the inline first attempt may take; capped at Limits.deliveryWaitMaxMs. */
  deliveryWaitMs: number;
  /**
   * Where the runtime keeps work that may finish after the answer (its process outlives the
   * request). With it, a 2xx from the dot is answered "delivered" at once and the writes that
   * record it finish here; without it (Lambda, whose environment freezes when the handler
   * returns) the answer waits for them.
   */
  waitUntil?: (work: Promise<unknown>) => void;
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

  const windowMs = Math.min(Math.max(0, deps.deliveryWaitMs), Limits.deliveryWaitMaxMs);
  const eventId = newEventId();
  const job: DeliveryJob = { eventId, subscriptionId: subscription.id, body: buildEvent(eventId, message, now) };
  await guardDependency('storage', () =>
    deps.store.putEvent({
      eventId,
      status: EventStatus.queued,
      subscriptionId: subscription.id,
      attempts: 0,
      createdAt: now,
      expiresAt: now + Limits.eventRecordMs,
      notBefore: windowMs > 0 ? now + windowMs + Limits.inlineLeaseMarginMs : now,
    }),
  );
  try {
    await deps.queue.enqueue(job, { delayMs: safetyNetDelayMs(deps, windowMs) });
  } catch (cause) {
    // The record must not claim a delivery that can never happen.
    await deps.store.updateEvent(eventId, { status: EventStatus.failed }).catch(() => undefined);
    return { kind: 'unavailable', dependency: 'queue', eventId, cause };
  }
  const left = now + windowMs - deps.clock.now();
  if (windowMs === 0 || left <= 0) return { kind: 'queued', eventId };
  const inline = { inline: { timeoutMs: left } };
  let decision: DeliveryDecision | typeof ACCEPTED;
  try {
    decision = deps.waitUntil ? await attemptAnsweringEarly(deps, job, inline, deps.waitUntil) : await attemptDelivery(deps, job, inline);
  } catch {
    // The event is recorded and its job queued: the worker attempts it once the lease runs out.
    return { kind: 'queued', eventId };
  }
  return decision === ACCEPTED ? { kind: 'delivered', eventId } : outcomeOf(deps, eventId, decision);
}

/** The dot answered 2xx; recording it goes on in the runtime's `waitUntil`. */
const ACCEPTED = Symbol('accepted');

/**
 * The inline attempt for a runtime that outlives its answers: a 2xx from the dot is the answer,
 * and the writes that record it finish in `waitUntil`. Were the process to die first, the event
 * stays queued under its lease and the safety-net job sends it again with the same webhook-id,
 * which the dot deduplicates. Anything else waits for the attempt's own decision.
 */
async function attemptAnsweringEarly(
  deps: MessageDeps,
  job: DeliveryJob,
  options: AttemptOptions,
  waitUntil: (work: Promise<unknown>) => void,
): Promise<DeliveryDecision | typeof ACCEPTED> {
  let dotAnswered: (response: WebhookResponse) => void = () => undefined;
  const answer = new Promise<WebhookResponse>((resolve) => (dotAnswered = resolve));
  const webhook: WebhookClient = {
    post: async (request) => {
      const response = await deps.webhook.post(request);
      dotAnswered(response);
      return response;
    },
  };
  const attempt = attemptDelivery({ ...deps, webhook }, job, options);
  const first = await Promise.race([attempt, answer]);
  if ('kind' in first && classify(first, deps.clock.now()).kind === 'delivered') {
    waitUntil(attempt);
    return ACCEPTED;
  }
  return attempt;
}

/**
 * When the worker's copy surfaces: when attempt 2 would be due after a quick transient failure
 * (so the schedule stays exact), and never before the wait window when there is no schedule.
 * With no inline attempt (window 0) the worker takes the job at once.
 */
function safetyNetDelayMs(deps: MessageDeps, windowMs: number): number {
  if (windowMs === 0) return 0;
  const first = deps.retryDelaysS[0];
  return first === undefined ? windowMs + Limits.inlineLeaseMarginMs : first * 1000;
}

async function outcomeOf(deps: MessageDeps, eventId: string, decision: DeliveryDecision): Promise<SendOutcome> {
  switch (decision.action) {
    case 'dead_letter':
      return { kind: 'failed', eventId, reason: isFailureReason(decision.reason) ? decision.reason : null };
    case 'done':
      if (decision.status === 'delivered') return { kind: 'delivered', eventId };
      if (decision.status === 'dropped') return { kind: 'failed', eventId, reason: null };
      break;
    default:
      return { kind: 'queued', eventId };
  }
  // Another copy of the job settled it first: report what it recorded.
  const event = await deps.store.getEvent(eventId, deps.clock.now()).catch(() => undefined);
  return event ? outcomeOfRecord(event) : { kind: 'queued', eventId };
}

/** What an event record says about its send: the one mapping the answers, tasks and logs share. */
export function outcomeOfRecord(record: EventRecord): Extract<SendOutcome, { eventId: string }> {
  switch (record.status) {
    case EventStatus.delivered:
      return { kind: 'delivered', eventId: record.eventId };
    case EventStatus.failed:
      return { kind: 'failed', eventId: record.eventId, reason: record.lastError ?? null };
    case EventStatus.dropped:
      return { kind: 'failed', eventId: record.eventId, reason: null };
    default:
      return { kind: 'queued', eventId: record.eventId };
  }
}

function isFailureReason(reason: string): reason is FailureReason {
  return (FailureReasons as readonly string[]).includes(reason);
}
