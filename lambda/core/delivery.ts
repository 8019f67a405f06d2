/**
 * One delivery attempt (docs/contract/delivery.md) in three steps: `prepare` (read the event and
 * the live subscription: skip, defer behind the lease, drop, or hand back what to send), `send`
 * (sign at send time, POST through the guarded client, classify) and `commit` (the compare-and-set
 * writes for that outcome and the decision the queue applies). The worker runs all three
 * (`deliver`); the MCP side's inline first attempt holds what it just read and wrote, so it runs
 * `send` and `commit` only.
 *
 * One POST per event (DEL-PIPE-21, DEL-LEASE-1..3), and every status change a compare-and-set on
 * the status and attempt count it moves from; a 2xx is recorded even over `dropped` or a `failed`
 * no attempt made (DEL-OUT-6): the dot did receive it.
 *
 * Deliberately not here: the queue mechanics, and any reading of a response body (a delivery only
 * cares about the status line).
 */
import type { AttemptEntry, Clock, DeliveryJob, EventRecord, Store, SubscriptionRecord, WebhookClient } from '../ports';
import { Budgets } from './budgets';
import { EventStatus, Limits, type DeadLetterReason, type FailureReason } from './protocol';
import { classify, nextDelayMs } from './retry-policy';
import { decodeSecret, signedHeaders } from './signing';

/** What a delivery reads and writes of the Store: the event, and the live subscription it is sent to. */
export type DeliveryStore = Pick<Store, 'getEvent' | 'updateEvent' | 'restoreEvent' | 'getSubscription' | 'deleteSubscription' | 'recordDeliveryOutcome'>;

export interface DeliveryDeps {
  store: DeliveryStore;
  webhook: WebhookClient;
  clock: Clock;
  /** Seconds to wait before attempts 2, 3, ...; its length + 1 is the number of attempts. */
  retryDelaysS: readonly number[];
  /**
   * The events this process is POSTing or recording now (the local runtime, where the inline attempt
   * and the worker share a process): the worker defers them whatever their lease says, so a slow
   * process never makes a second POST. Absent on Lambda, where the lease alone suffices.
   */
  inFlight?: Set<string>;
}

/** What the worker's attempt (`deliver`) decided: the delivery runner (core/runner.ts) applies it to the queue. */
export type DeliveryDecision =
  /** `duplicate`: another copy of the job committed this attempt's outcome first. */
  | { action: 'done'; status: 'delivered' | 'already_final' | 'dropped' | 'duplicate'; attempt?: number }
  | { action: 'retry'; delayMs: number; reason: FailureReason; attempt: number }
  /** A lease holds (the inline attempt's, another copy's): no attempt was made and none is counted; look again after delayMs. */
  | { action: 'defer'; delayMs: number }
  /** Final failure. `subscriptionEnded`: a 410 ended its subscription. `copy`: no attempt; the event had failed already and this is its dead letter. */
  | { action: 'dead_letter'; reason: DeadLetterReason; attempt: number; subscriptionEnded?: boolean; copy?: true };

/** The event and subscription an attempt is made with. */
export type Ready = { kind: 'ready'; event: EventRecord; subscription: SubscriptionRecord };

/** What `prepare` found: the decision itself when no POST is to be made, a record to drop, or `ready`, the only way to a POST. */
export type Prepared = DeliveryDecision | { kind: 'drop'; event: EventRecord } | Ready;

/** What `send` did: the answer's classification and HTTP status, and the log entry for it. */
export type Sent = Awaited<ReturnType<typeof send>>;

/**
 * The receive on which the worker itself dead-letters a job: the schedule's attempts plus room for
 * receives that are not attempts (deferrals, errors, timeouts). SQS's own redrive sits
 * RECEIVE_LIMIT_AWS_MARGIN above it, so it only catches what the handler never saw.
 */
export function receiveLimit(retryDelaysS: readonly number[]): number {
  return retryDelaysS.length + 1 + 4;
}

/** AWS recommends a maxReceiveCount that leaves room for throttled and failed receives (at least 5). */
export const RECEIVE_LIMIT_AWS_MARGIN = 5;

/**
 * Why a failed event failed: the note of a failure no attempt made (`stranded`, `receive_limit`)
 * when it came last, else its last attempt's error; `receive_limit` for a record older than notes.
 */
export function failureReasonOf(event: EventRecord): DeadLetterReason {
  const last = event.log?.[event.log.length - 1];
  if (last && 'note' in last && (last.note === 'stranded' || last.note === 'receive_limit')) return last.note;
  return event.lastError ?? 'receive_limit';
}

/** True when a job queued under `job` may still be sent to `subscription`. */
export function jobMatches(
  job: Pick<DeliveryJob, 'subscriptionId' | 'generation'>,
  subscription: SubscriptionRecord | undefined,
): subscription is SubscriptionRecord {
  if (!subscription || subscription.id !== job.subscriptionId) return false;
  // Jobs and items from before generations carry none: only the id can be compared then.
  return job.generation === undefined || subscription.generation === undefined || job.generation === subscription.generation;
}

/** Step 1: what to do with this job now. The only write is a redrive's reopening of a failed event. */
export async function prepare(deps: DeliveryDeps, job: DeliveryJob): Promise<Prepared> {
  const now = deps.clock.now();
  let event = (await deps.store.getEvent(job.eventId, now)) ?? (await restore(deps, job, now));
  let subscription: SubscriptionRecord | undefined;
  if (event.status === EventStatus.failed && job.redriven) {
    // A redrive whose subscription ended reopens nothing: the event is dropped as it failed.
    subscription = await deps.store.getSubscription(now);
    if (!jobMatches(job, subscription)) return { kind: 'drop', event };
    // A redrive is a fresh round of the schedule, once (a second copy finds the event queued).
    const reopened = { status: EventStatus.queued, attempts: 0, lastError: null, notBefore: now } as const;
    const note = { at: now, note: 'redriven' } as const;
    if (await deps.store.updateEvent(job.eventId, { ...reopened, appendLog: note }, { status: EventStatus.failed })) {
      event = { ...event, ...reopened, log: [...(event.log ?? []), note] };
    } else event = (await deps.store.getEvent(job.eventId, now)) ?? event;
  }
  if (event.status === EventStatus.failed && !job.redriven) {
    // Failed, yet a copy of its job is still queued (the inline attempt's safety net, or a failed
    // dead-letter send): a copy in the DLQ beats an event that vanished.
    return { action: 'dead_letter', reason: failureReasonOf(event), attempt: event.attempts, copy: true };
  }
  if (event.status !== EventStatus.queued) return { action: 'done', status: 'already_final' };
  if (deps.inFlight?.has(job.eventId)) return { action: 'defer', delayMs: Budgets.deferInPlaceMaxMs };
  if (event.notBefore !== undefined && event.notBefore > now) return { action: 'defer', delayMs: event.notBefore - now };
  subscription ??= await deps.store.getSubscription(now);
  if (!jobMatches(job, subscription)) return { kind: 'drop', event };
  return { kind: 'ready', event, subscription };
}

/**
 * Step 2: sign at send time, POST, classify. Throws only when no POST could be made at all.
 * `timeoutMs`: a deadline shorter than the guard's 5 s, so the POST ends inside its sender's lease.
 */
export async function send(deps: DeliveryDeps, ready: Ready, job: DeliveryJob, options: { timeoutMs?: number } = {}) {
  const { subscription } = ready;
  // Signed at send time: whatever came before (reads, the record write) may have taken a while.
  const sendAt = deps.clock.now();
  const keys = [subscription.secret];
  if (subscription.previousSecret && (subscription.previousSecretUntil ?? 0) > sendAt) keys.push(subscription.previousSecret);
  const decoded = keys.map(decodeSecret).filter((key): key is Uint8Array => key !== undefined);
  const body = new TextEncoder().encode(job.body);
  if (decoded.length === 0 || body.byteLength > Limits.outboundBodyMaxBytes) {
    // Cannot happen for records this service wrote; refuse loudly rather than send unsigned.
    throw new Error('delivery: unusable subscription secret or oversized event body');
  }
  const timestamp = Math.floor((deps.clock.wall?.() ?? sendAt) / 1000);
  const timeoutMs = options.timeoutMs === undefined ? undefined : Math.max(0, Math.min(options.timeoutMs, Limits.outboundDeadlineMs));
  const response = await deps.webhook.post({
    url: subscription.url,
    body,
    headers: signedHeaders(decoded, job.eventId, timestamp, body, subscription.id),
    ...(timeoutMs !== undefined ? { timeoutMs } : {}),
  });
  const doneAt = deps.clock.now();
  const httpStatus = response.kind === 'response' ? response.status : null;
  const verdict = classify(response, doneAt);
  const hundreds = httpStatus === null ? 0 : Math.floor(httpStatus / 100);
  const entry: AttemptEntry = {
    at: sendAt,
    outcome: verdict.kind === 'delivered' ? 'delivered' : verdict.reason,
    statusClass: hundreds >= 1 && hundreds <= 5 ? (`${hundreds}xx` as AttemptEntry['statusClass']) : null,
    durationMs: Math.max(0, doneAt - sendAt),
    counted: true,
  };
  return { verdict, httpStatus, entry, doneAt };
}

/** Step 3: record what `send` found and decide what the queue does next. */
export async function commit(deps: DeliveryDeps, ready: Ready, sent: Sent): Promise<DeliveryDecision> {
  const { event, subscription } = ready;
  const { verdict, httpStatus, entry, doneAt } = sent;
  const expected = { status: EventStatus.queued, attempts: event.attempts };
  const attempt = event.attempts + 1;
  if (verdict.kind === 'delivered') {
    // The delivery status holds even if this copy loses the race (the dot did answer 2xx); it is
    // left alone when it already says so and is recent, one write fewer on send_to_dot's path.
    const statusCurrent =
      subscription.lastError == null && subscription.lastDeliveryAt !== undefined && doneAt - subscription.lastDeliveryAt < Limits.deliveryStatusRefreshMs;
    const [recorded] = await Promise.all([
      deps.store.updateEvent(
        event.eventId,
        { status: EventStatus.delivered, attempts: attempt, deliveredAt: doneAt, lastHttpStatus: httpStatus, lastError: null, body: null, appendLog: entry },
        // `failed` with this attempt count: failed by no attempt (the reconciler, a receive limit) while this one was in flight.
        { status: [EventStatus.queued, EventStatus.dropped, EventStatus.failed], attempts: event.attempts },
      ),
      statusCurrent ? undefined : deps.store.recordDeliveryOutcome(subscription.id, { deliveredAt: doneAt, error: null }),
    ]);
    return recorded ? { action: 'done', status: 'delivered', attempt } : { action: 'done', status: 'duplicate' };
  }
  const delayMs = verdict.kind === 'transient' ? nextDelayMs(deps.retryDelaysS, attempt, verdict.retryAfterMs) : undefined;
  // Failed for good, or a retry whose lease moves to when it is due, so whichever copy surfaces first keeps to it.
  const next = delayMs === undefined ? { status: EventStatus.failed } : { notBefore: doneAt + delayMs };
  const patch = { ...next, attempts: attempt, lastHttpStatus: httpStatus, lastError: verdict.reason, appendLog: entry };
  if (!(await deps.store.updateEvent(event.eventId, patch, expected))) return { action: 'done', status: 'duplicate' };
  // Written only when it changes: rewriting the one subscription item on every failure made it hot.
  if (subscription.lastError !== verdict.reason) await deps.store.recordDeliveryOutcome(subscription.id, { error: verdict.reason });
  if (delayMs !== undefined) return { action: 'retry', delayMs, reason: verdict.reason, attempt };
  // 410 Gone: the endpoint is gone for good; ending its subscription lets a re-added dot subscribe at once.
  const subscriptionEnded = httpStatus === 410 && (await deps.store.deleteSubscription(subscription.url));
  return { action: 'dead_letter', reason: verdict.reason, attempt, ...(subscriptionEnded ? { subscriptionEnded } : {}) };
}

/** A decision as the fields of one `delivery` log line: what happened, or the decision's own action when nothing was decided. */
export function decisionLogFields(decision: DeliveryDecision): Record<string, unknown> {
  switch (decision.action) {
    case 'done':
      if (decision.status === 'delivered') return { action: 'delivered', ...(decision.attempt ? { attempt: decision.attempt } : {}) };
      if (decision.status === 'dropped') return { action: 'dropped' };
      return { action: 'done', status: decision.status };
    case 'retry':
      return { action: 'retry', attempt: decision.attempt, reason: decision.reason, delayS: Math.ceil(decision.delayMs / 1000) };
    case 'dead_letter':
      if (decision.copy) return { action: 'dead_letter_copy', attempt: decision.attempt, reason: decision.reason };
      return { action: 'failed', attempt: decision.attempt, reason: decision.reason, ...(decision.subscriptionEnded ? { subscriptionEnded: true } : {}) };
    case 'defer':
      return { action: 'defer', delayS: Math.ceil(decision.delayMs / 1000) };
  }
}

/** The worker's attempt: prepare, then send and commit, or the reason there is none. */
export async function deliver(deps: DeliveryDeps, job: DeliveryJob): Promise<DeliveryDecision> {
  const prepared = await prepare(deps, job);
  if ('action' in prepared) return prepared;
  const { event } = prepared;
  if (prepared.kind === 'drop') {
    // The event's subscription ended: it is never sent (a redriven failed event keeps its history).
    const dropped = await deps.store.updateEvent(event.eventId, { status: EventStatus.dropped }, { status: event.status, attempts: event.attempts });
    return { action: 'done', status: dropped ? 'dropped' : 'duplicate' };
  }
  // The lease before the POST. One POST per attempt: a copy that loses it (another copy took it, or settled the event) defers while it runs.
  const leased = { status: EventStatus.queued, attempts: event.attempts, notBefore: event.notBefore ?? null };
  if (!(await deps.store.updateEvent(event.eventId, { notBefore: deps.clock.now() + Budgets.workerLeaseMs }, leased))) {
    return { action: 'defer', delayMs: Budgets.workerLeaseMs };
  }
  return holding(deps, job.eventId, async () => commit(deps, prepared, await send(deps, prepared, job)));
}

/** Runs one attempt of `eventId` (its POST and its record) marked in `deps.inFlight` while it runs. */
export async function holding<T>(deps: Pick<DeliveryDeps, 'inFlight'>, eventId: string, attempt: () => Promise<T>): Promise<T> {
  deps.inFlight?.add(eventId);
  try {
    return await attempt();
  } finally {
    deps.inFlight?.delete(eventId);
  }
}

/** The record of a job whose record expired while it was in play (a dead letter redriven late). */
async function restore(deps: DeliveryDeps, job: DeliveryJob, now: number): Promise<EventRecord> {
  const record: EventRecord = {
    eventId: job.eventId,
    status: EventStatus.queued,
    subscriptionId: job.subscriptionId,
    ...(job.generation !== undefined ? { generation: job.generation } : {}),
    attempts: 0,
    createdAt: now,
    expiresAt: now + Limits.eventRecordMs,
    body: job.body,
  };
  if (await deps.store.restoreEvent(record)) return record;
  // Another copy restored it first.
  const current = await deps.store.getEvent(job.eventId, now);
  if (!current) throw new Error('delivery: event record could not be restored');
  return current;
}
