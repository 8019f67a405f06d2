/**
 * The send use case behind `send_to_dot` and `POST /v1/messages` (docs/contract/delivery.md steps
 * 1-3): validate, read the live subscription, hand the event to the outbox (its record, queued under
 * a lease, and its job, delayed as a safety net), then make the first attempt inline with what was
 * just read and written (core/delivery.ts `send` and `commit`, without reading anything back).
 *
 * The wait window decides only what the caller is told (DEL-PIPE-5, DEL-PIPE-8); the lease and the
 * worker's delayed copy cover a process that dies mid-attempt (DEL-PIPE-3, DEL-PIPE-7).
 *
 * Deliberately not here: the attempt itself (core/delivery.ts), and wording of results for a
 * particular surface (core/answers.ts).
 */
import { jobOf, type DeliveryMetrics, type EventRecord, type InboxStore, type Logger, type Outbox, type Store, type SubscriptionRecord } from '../ports';
import { Budgets } from './budgets';
import { commit, holding, send, type DeliveryDecision, type DeliveryDeps, type DeliveryStore, type Ready } from './delivery';
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
   * Runs work that may outlive the answer and keeps the runtime alive until it settles (the local
   * process; on Lambda the after-response extension). Without it the answer waits for the attempt.
   */
  background?: <T>(work: () => Promise<T>) => Promise<T>;
  /** One `delivery` line per inline decision (ids and categories only), as the worker's (core/runner.ts). */
  log?: Logger;
  /** One metric per inline decision, `Via` inline; none when absent. */
  metrics?: DeliveryMetrics;
  /** Present when the inbox is on: every event is recorded `inbox: true`, and one sent with no dot subscribed is kept. */
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
  const eventId = origin.eventId ?? newEventId();
  if (!subscription) {
    if (!deps.inbox) return { kind: 'no_subscription' };
    // With the inbox on and no dot subscribed: recorded `kept`, with its bytes and no job.
    await guardDependency('storage', () => deps.store.putEvent(newRecord(deps, eventId, checked.message, now, origin)));
    return { kind: 'kept', eventId };
  }

  const windowMs = Math.min(Math.max(0, deps.deliveryWaitMs), Limits.deliveryWaitMaxMs);
  // The inline attempt's lease: its whole POST and the write after it.
  const notBefore = windowMs > 0 ? now + Limits.outboundDeadlineMs + Budgets.inlineLeaseMarginMs : now;
  const record = newRecord(deps, eventId, checked.message, now, origin, { subscription, notBefore });
  const job = jobOf(record, record.body!);
  try {
    await guardDependency('storage', () => deps.outbox.add(record, job, { delayMs: safetyNetDelayMs(deps, windowMs) }));
  } catch (error) {
    // Undecided, yet something will settle it (the reconciler, or a worker restoring the record).
    if (error instanceof DependencyUnavailable && error.willSettle && error.eventId === eventId) {
      deps.log?.warn('outbox_undecided', { eventId, cause: error.cause instanceof Error ? error.cause.name : 'unknown' });
      return { kind: 'queued', eventId };
    }
    throw error;
  }

  if (windowMs === 0) return { kind: 'queued', eventId };
  const ready: Ready = { kind: 'ready', event: record, subscription };
  // The POST ends inside the lease (leaving its margin for the write), and within the wait window where the answer waits for it.
  const leaseLeftMs = notBefore - Budgets.inlineLeaseMarginMs - deps.clock.now();
  const timeoutMs = deps.background ? leaseLeftMs : Math.min(leaseLeftMs, now + windowMs - deps.clock.now());
  let accepted: () => void = () => undefined;
  const acceptedByDot = new Promise<'accepted'>((resolve) => (accepted = () => resolve('accepted')));
  const attempt = (): Promise<DeliveryDecision> =>
    holding(deps, eventId, async () => {
      const sent = await send(deps, ready, job, { timeoutMs });
      if (sent.verdict.kind === 'delivered') accepted();
      const decision = await commit(deps, ready, sent);
      // The inline decision in the worker's vocabulary: one `delivery` line and one metric, `via` inline.
      const durationMs = Math.max(0, deps.clock.now() - sent.entry.at);
      reportDecision(deps, { via: 'inline', eventId, decision, durationMs, latencyMs: sent.doneAt - record.createdAt });
      return decision;
    });

  if (!deps.background) {
    // A POST cut short is a timeout, an unknown outcome; a failure after the event was accepted
    // leaves it to the worker once the lease runs out.
    const decision = await attempt().catch(() => undefined);
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
    // A 2xx is the answer; the write that records it finishes in the background.
    if (first === 'accepted') return { kind: 'delivered', eventId };
    if (first === 'window' || first === 'failed') return { kind: 'queued', eventId };
    return await outcomeOf(deps, eventId, first.decision);
  } finally {
    clearTimeout(timer);
  }
}

/** When the worker's copy surfaces: when attempt 2 would be due, never before the inline lease, at once with no inline attempt. */
function safetyNetDelayMs(deps: MessageDeps, windowMs: number): number {
  if (windowMs === 0) return 0;
  const first = deps.retryDelaysS[0];
  return first === undefined ? Limits.outboundDeadlineMs + Budgets.inlineLeaseMarginMs : first * 1000;
}

async function outcomeOf(deps: MessageDeps, eventId: string, decision: DeliveryDecision): Promise<SendOutcome> {
  switch (decision.action) {
    case 'dead_letter':
      return { kind: 'failed', eventId, reason: (FailureReasons as readonly string[]).includes(decision.reason) ? (decision.reason as FailureReason) : null };
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

/** A new event's record with its exact bytes: `queued` under a subscription, else `kept` (the inbox's, with no job). */
function newRecord(
  deps: MessageDeps,
  eventId: string,
  message: string,
  now: number,
  origin: SendOrigin,
  queued?: { subscription: SubscriptionRecord; notBefore: number },
): EventRecord {
  const generation = queued?.subscription.generation;
  return {
    eventId,
    status: queued ? EventStatus.queued : EventStatus.kept,
    subscriptionId: queued?.subscription.id ?? '',
    ...(generation !== undefined ? { generation } : {}),
    attempts: 0,
    createdAt: now,
    expiresAt: now + Limits.eventRecordMs,
    ...(queued ? { notBefore: queued.notBefore } : {}),
    body: buildEvent(eventId, message, now),
    ...(origin.sender !== undefined ? { sender: origin.sender } : {}),
    ...(deps.inbox ? { inbox: true } : {}),
  };
}
