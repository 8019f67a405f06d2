/**
 * The send use case behind `send_to_dot` and `POST /v1/messages` (docs/contract/delivery.md steps 1-3): validate,
 * read the live subscription, hand the event to the outbox (its record, queued under a lease, and
 * its job, delayed as a safety net), then make the first attempt inline with the subscription just
 * read and the record just written (core/delivery.ts `send` and `commit`: the same code the worker
 * runs, without reading anything back), within what is left of the wait window.
 *
 * Timeline of one send (t = 0 when the event is recorded; W = the wait window):
 *
 *   0 ── record EVENT (queued, notBefore = W + margin) + its job (delay = first retry delay)
 *   └─ inline attempt (POST ends by W) ──> delivered / failed: final, the worker's copy skips it
 *                                     ──> transient: notBefore = when attempt 2 is due
 *                                     ──> cut short by W: not counted, notBefore = now
 *   the worker's copy surfaces, defers until notBefore, then attempts; if this process died
 *   mid-attempt the lease simply runs out and the worker makes the attempt. Nothing is lost.
 *
 * Storage calls of a message delivered inline: one read (the subscription), one write (the record;
 * on AWS followed by the queue's send), one write (the outcome). The subscription's delivery
 * status is rewritten at most once a minute while deliveries succeed (core/delivery.ts).
 *
 * Failures travel one way: a port that fails throws DependencyUnavailable (with the event id when
 * the event exists), which the edge maps for each surface (core/answers.ts).
 *
 * Deliberately not here: the attempt itself (core/delivery.ts), and wording of results for a
 * particular surface (core/answers.ts).
 */
import type { DeliveryJob, DeliveryMetrics, EventRecord, InboxStore, Logger, Outbox } from '../ports';
import { Budgets } from './budgets';
import { commitInline, send, type DeliveryDeps, type InlineDecision, type Ready, type Sent } from './delivery';
import { DependencyUnavailable, guardDependency } from './errors';
import { newEventId } from './identity';
import { EVENT_NAME, EventStatus, FailureReasons, Limits, type FailureReason } from './protocol';
import { reportDecision } from './runner';
import { checkMessage } from './validation';

export interface MessageDeps extends DeliveryDeps {
  outbox: Outbox;
  /** How long the inline first attempt may take; capped at Limits.deliveryWaitMaxMs. */
  deliveryWaitMs: number;
  /**
   * Where the runtime keeps work that may finish after the answer (its process outlives the
   * request). With it, a 2xx from the dot is answered "delivered" at once and the write that
   * records it finishes here; without it (Lambda, whose environment freezes when the handler
   * returns) the answer waits for it.
   */
  waitUntil?: (work: Promise<unknown>) => void;
  /** One `delivery` line per inline decision (ids and categories only), as the worker's (core/runner.ts). */
  log?: Logger;
  /** One metric per inline decision, `Via` inline; none when absent. */
  metrics?: DeliveryMetrics;
  /**
   * Present when the inbox is on (docs/contract/mcp.md, the inbox): every event is recorded
   * `inbox: true`, and a message sent while no dot is subscribed is kept instead of refused.
   */
  inbox?: InboxStore;
}

/** What a send came to. A failing port is not an outcome: it throws DependencyUnavailable. */
export type SendOutcome =
  | { kind: 'invalid'; error: string }
  | { kind: 'no_subscription' }
  | { kind: 'delivered'; eventId: string }
  | { kind: 'queued'; eventId: string }
  /** Recorded while no dot was subscribed, with the inbox on: it waits in the inbox, no webhook is attempted. */
  | { kind: 'kept'; eventId: string }
  | { kind: 'failed'; eventId: string; reason: FailureReason | null };

/** The event envelope of docs/contract/delivery.md, serialized once; these bytes are what every attempt sends. */
export function buildEvent(eventId: string, message: string, at: number): string {
  const json = JSON.stringify({ eventId, name: EVENT_NAME, timestamp: new Date(at).toISOString(), data: { message }, cursor: null });
  // U+FFFE and U+FFFF are valid in JSON strings but refused in SQS message bodies; as \u escapes
  // the event means exactly the same and its bytes can travel through any queue.
  return json.replace(/[\uFFFE\uFFFF]/g, (c) => `\\u${c.charCodeAt(0).toString(16)}`);
}

/** Who sends: what the event records as its sender (`connector` or a sender's name). */
export interface SendOrigin {
  sender?: string;
  /** The id the event gets: chosen beforehand when an idempotency key claimed it (core/idempotency.ts). */
  eventId?: string;
}

export async function sendMessage(deps: MessageDeps, args: unknown, origin: SendOrigin = {}): Promise<SendOutcome> {
  const checked = checkMessage(args);
  if (!checked.ok) return { kind: 'invalid', error: checked.error };
  const now = deps.clock.now();
  const subscription = await guardDependency('storage', () => deps.store.getSubscription(now));
  if (!subscription) return deps.inbox ? keepMessage(deps, checked.message, now, origin) : { kind: 'no_subscription' };

  const windowMs = Math.min(Math.max(0, deps.deliveryWaitMs), Limits.deliveryWaitMaxMs);
  const eventId = origin.eventId ?? newEventId();
  const body = buildEvent(eventId, checked.message, now);
  const generation = subscription.generation;
  const job: DeliveryJob = { eventId, subscriptionId: subscription.id, ...(generation !== undefined ? { generation } : {}), body };
  const record: EventRecord = {
    eventId,
    status: EventStatus.queued,
    subscriptionId: subscription.id,
    ...(generation !== undefined ? { generation } : {}),
    attempts: 0,
    createdAt: now,
    expiresAt: now + Limits.eventRecordMs,
    notBefore: windowMs > 0 ? now + windowMs + Budgets.inlineLeaseMarginMs : now,
    body,
    ...(origin.sender !== undefined ? { sender: origin.sender } : {}),
    ...(deps.inbox ? { inbox: true } : {}),
  };
  try {
    await guardDependency('storage', () => deps.outbox.add(record, job, { delayMs: safetyNetDelayMs(deps, windowMs) }));
  } catch (error) {
    // Undecided, yet something will settle it (core/outbox.ts): a stored `queued` record that the
    // reconciler (core/reconcile.ts) re-enqueues or fails, or a job whose worker restores the
    // record. "queued" is what is true.
    if (error instanceof DependencyUnavailable && error.willSettle && error.eventId === eventId) {
      deps.log?.warn('outbox_undecided', { eventId, cause: error.cause instanceof Error ? error.cause.name : 'unknown' });
      return { kind: 'queued', eventId };
    }
    throw error;
  }

  const left = now + windowMs - deps.clock.now();
  if (windowMs === 0 || left <= 0) return { kind: 'queued', eventId };
  const ready: Ready = { kind: 'ready', event: record, subscription };
  let decision: InlineDecision;
  try {
    const sent = await send(deps, ready, job, { inline: { timeoutMs: left } });
    if (deps.waitUntil && sent.verdict.kind === 'delivered') {
      // The dot answered 2xx: that is the answer. Were the process to die before the write, the
      // event stays queued under its lease and the safety-net job sends it again with the same
      // webhook-id, which the dot deduplicates.
      deps.waitUntil(commitInline(deps, ready, sent).then((settled) => reportInline(deps, record, sent, settled)));
      return { kind: 'delivered', eventId };
    }
    decision = await commitInline(deps, ready, sent);
    reportInline(deps, record, sent, decision);
  } catch {
    // The event is recorded and its job queued: the worker attempts it once the lease runs out.
    return { kind: 'queued', eventId };
  }
  return outcomeOf(deps, eventId, decision);
}

/** The inline decision in the worker's vocabulary: one `delivery` line and one metric, `via` inline. */
function reportInline(deps: MessageDeps, record: EventRecord, sent: Sent, decision: InlineDecision): void {
  const done = deps.clock.now();
  reportDecision(deps, {
    via: 'inline',
    eventId: record.eventId,
    decision,
    // From the POST to its record; the latency from the event's recording to its delivery.
    durationMs: Math.max(0, done - sent.entry.at),
    latencyMs: sent.doneAt - record.createdAt,
    // The first attempt is attempt 1 whatever it decided.
    ...(decision.action === 'done' && decision.status === 'delivered' ? { fields: { attempt: 1 } } : {}),
  });
}

/**
 * When the worker's copy surfaces: when attempt 2 would be due after a quick transient failure
 * (so the schedule stays exact), and never before the wait window when there is no schedule.
 * With no inline attempt (window 0) the worker takes the job at once.
 */
function safetyNetDelayMs(deps: MessageDeps, windowMs: number): number {
  if (windowMs === 0) return 0;
  const first = deps.retryDelaysS[0];
  return first === undefined ? windowMs + Budgets.inlineLeaseMarginMs : first * 1000;
}

async function outcomeOf(deps: MessageDeps, eventId: string, decision: InlineDecision): Promise<SendOutcome> {
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
  // Another copy of the job settled it first (rare): report what it recorded.
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
    case EventStatus.kept:
      return { kind: 'kept', eventId: record.eventId };
    default:
      return { kind: 'queued', eventId: record.eventId };
  }
}

function isFailureReason(reason: string): reason is FailureReason {
  return (FailureReasons as readonly string[]).includes(reason);
}

/**
 * With the inbox on and no dot subscribed: the event is recorded `kept`, with its bytes and no job
 * (nothing will ever POST it), for the dot to read with get_pending_messages.
 */
async function keepMessage(deps: MessageDeps, message: string, now: number, origin: SendOrigin): Promise<SendOutcome> {
  const eventId = origin.eventId ?? newEventId();
  const record: EventRecord = {
    eventId,
    status: EventStatus.kept,
    // No subscription: it belongs to none, and no job will ever name one.
    subscriptionId: '',
    attempts: 0,
    createdAt: now,
    expiresAt: now + Limits.eventRecordMs,
    body: buildEvent(eventId, message, now),
    ...(origin.sender !== undefined ? { sender: origin.sender } : {}),
    inbox: true,
  };
  await guardDependency('storage', () => deps.store.putEvent(record));
  return { kind: 'kept', eventId };
}
