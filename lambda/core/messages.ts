/**
 * The send use case behind `send_to_dot` and `POST /v1/messages` (docs/contract/delivery.md steps 1-3): validate,
 * read the live subscription, hand the event to the outbox (its record, queued under a lease, and
 * its job, delayed as a safety net), then make the first attempt inline with the subscription just
 * read and the record just written (core/delivery.ts `send` and `commit`: the same code the worker
 * runs, without reading anything back).
 *
 * Timeline of one send (t = 0 when the event is recorded; W = the wait window; L = the lease,
 * the outbound 5 s deadline plus a margin for the write after it):
 *
 *   0 ── record EVENT (queued, notBefore = L) + its job (delay = first retry delay)
 *   └─ inline attempt (its POST ends by L - margin, whatever W is)
 *        ──> delivered / failed: final, the worker's copy skips it
 *        ──> transient: notBefore = when attempt 2 is due
 *   the caller is answered with the outcome if it came within W, else "queued" while the attempt
 *   runs on and settles the event (`background`); the worker's copy surfaces, defers until
 *   notBefore, then attempts; if this process died mid-attempt the lease simply runs out and the
 *   worker makes the attempt (the dot may then get the event twice: an unknown outcome).
 *
 * The wait window decides what the caller is told, never whether an attempt's outcome counts: a
 * POST the caller stopped waiting for is not thrown away and sent again (the dot may not
 * deduplicate by webhook-id). Where nothing may run after the answer (`background` absent: Lambda
 * without its after-response extension), the answer waits for the attempt, whose POST then ends
 * within the wait window; one it cuts short is a timeout, an unknown outcome.
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
import type { DeliveryJob, DeliveryMetrics, EventRecord, InboxStore, Logger, Outbox, Store } from '../ports';
import { Budgets } from './budgets';
import { commit, holding, send, type DeliveryDecision, type DeliveryDeps, type DeliveryStore, type Ready, type Sent } from './delivery';
import { DependencyUnavailable, guardDependency } from './errors';
import { newEventId } from './identity';
import { EVENT_NAME, EventStatus, FailureReasons, Limits, type FailureReason } from './protocol';
import { reportDecision } from './runner';
import { checkMessage } from './validation';

/** What a send reads and writes of the Store: a delivery's part, and the put of a kept event (the outbox puts the others). */
export type MessageStore = DeliveryStore & Pick<Store, 'putEvent'>;

export interface MessageDeps extends DeliveryDeps {
  store: MessageStore;
  outbox: Outbox;
  /** How long the inline first attempt may take; capped at Limits.deliveryWaitMaxMs. */
  deliveryWaitMs: number;
  /**
   * Runs work that may outlive the answer, outside the request's deadline, and keeps the runtime
   * alive until it settles: the local process tracks it (a clean stop waits for it); on Lambda the
   * after-response extension holds the environment (handlers/after-response.ts). With it the
   * inline attempt gets its whole lease, a 2xx is answered "delivered" before the write that
   * records it, and the wait window only decides when the caller stops waiting. Without it the
   * answer waits for the attempt.
   */
  background?: <T>(work: () => Promise<T>) => Promise<T>;
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
    // The inline attempt's lease: its whole POST and the write after it, so the worker's copy never
    // overlaps it, whenever the caller stops waiting.
    notBefore: windowMs > 0 ? now + Limits.outboundDeadlineMs + Budgets.inlineLeaseMarginMs : now,
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

  if (windowMs === 0) return { kind: 'queued', eventId };
  const ready: Ready = { kind: 'ready', event: record, subscription };
  // The POST ends inside the lease, leaving its margin for the write that records the outcome;
  // where nothing may run after the answer, also within the wait window (the caller's answer waits for it).
  const leaseLeftMs = (record.notBefore ?? now) - Budgets.inlineLeaseMarginMs - deps.clock.now();
  const timeoutMs = deps.background ? leaseLeftMs : Math.min(leaseLeftMs, now + windowMs - deps.clock.now());
  let accepted: () => void = () => undefined;
  const acceptedByDot = new Promise<'accepted'>((resolve) => (accepted = () => resolve('accepted')));
  const attempt = (): Promise<DeliveryDecision> =>
    holding(deps, eventId, async () => {
      const sent = await send(deps, ready, job, { timeoutMs });
      if (sent.verdict.kind === 'delivered') accepted();
      const decision = await commit(deps, ready, sent);
      reportInline(deps, record, sent, decision);
      return decision;
    });

  if (!deps.background) {
    // Nothing runs after the answer: it waits for the attempt, which ends within the wait window. A
    // POST it cuts short is a timeout, an unknown outcome: the worker's attempt 2 is a second POST.
    const decision = await attempt().catch(() => undefined);
    // A failure after the event was accepted (storage, no time left for a POST): the worker attempts it once the lease runs out.
    return decision ? outcomeOf(deps, eventId, decision) : { kind: 'queued', eventId };
  }
  const settled = deps.background(attempt);
  const left = now + windowMs - deps.clock.now();
  let timer: ReturnType<typeof setTimeout> | undefined;
  const windowEnds = new Promise<'window'>((resolve) => (timer = setTimeout(() => resolve('window'), Math.max(0, left))));
  try {
    const first = await Promise.race([
      settled.then(
        (decision) => ({ decision }),
        () => 'failed' as const,
      ),
      acceptedByDot,
      windowEnds,
    ]);
    // The dot answered 2xx: that is the answer, and the write that records it finishes in the background.
    if (first === 'accepted') return { kind: 'delivered', eventId };
    // The window ended (the attempt runs on and settles the event), or the attempt failed after the
    // event was accepted (the worker attempts it once the lease runs out).
    if (first === 'window' || first === 'failed') return { kind: 'queued', eventId };
    return await outcomeOf(deps, eventId, first.decision);
  } finally {
    clearTimeout(timer);
  }
}

/** The inline decision in the worker's vocabulary: one `delivery` line and one metric, `via` inline. */
function reportInline(deps: MessageDeps, record: EventRecord, sent: Sent, decision: DeliveryDecision): void {
  const done = deps.clock.now();
  reportDecision(deps, {
    via: 'inline',
    eventId: record.eventId,
    decision,
    // From the POST to its record; the latency from the event's recording to its delivery.
    durationMs: Math.max(0, done - sent.entry.at),
    latencyMs: sent.doneAt - record.createdAt,
  });
}

/**
 * When the worker's copy surfaces: when attempt 2 would be due after a quick transient failure
 * (so the schedule stays exact), and never before the inline attempt's lease when there is no
 * schedule. With no inline attempt (window 0) the worker takes the job at once.
 */
function safetyNetDelayMs(deps: MessageDeps, windowMs: number): number {
  if (windowMs === 0) return 0;
  const first = deps.retryDelaysS[0];
  return first === undefined ? Limits.outboundDeadlineMs + Budgets.inlineLeaseMarginMs : first * 1000;
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
