/**
 * The one delivery runner (docs/contract/delivery.md, "The delivery runner", DEL-RUN-1..6): what
 * both delivery workers (the Delivery Lambda over SQS, the local worker over the job table) do with
 * one received job: `deliver`, then its decision as the queue's JobEffects. The runtimes only say
 * how each effect is made. `reportDecision` is the one log line and metric of every decision,
 * inline or worker (a retry after a timeout is DEL-PIPE-21's `outcomeUnknown` warning).
 *
 * Deliberately not here: how a queue makes an effect (SQS calls, the job table's rows), reading
 * a queue's messages, and the decision itself (core/delivery.ts).
 */
import type { DeliveryJob, DeliveryMetrics, DeliveryOutcome, DeliveryVia, JobEffects, Logger } from '../ports';
import { describeCause } from './errors';
import { Budgets } from './budgets';
import { EventStatus } from './protocol';
import { decisionLogFields, deliver, receiveLimit, type DeliveryDecision, type DeliveryDeps } from './delivery';

/** One job as its queue handed it over. */
export interface ReceivedJob {
  /** The job; undefined when the message cannot be one of ours (it must not loop forever). */
  job: DeliveryJob | undefined;
  /** How often the queue has handed this job out, this time included (1 on the first receive). */
  receives: number;
  effects: JobEffects;
  /** When the job was enqueued (epoch ms): the delivery latency's start. */
  enqueuedAt?: number;
  /** The queue's own ids for the log line (an SQS message id). */
  ids?: Record<string, string>;
}

export interface RunnerDeps {
  delivery: DeliveryDeps;
  log?: Logger;
  metrics?: DeliveryMetrics;
}

/** What the runner did with one job: its outcome and the decision it applied, when there was one. */
export interface RunResult {
  outcome: DeliveryOutcome;
  decision?: DeliveryDecision;
  /** The worker's own failure, when there was one (already logged). */
  error?: unknown;
}

export type DeliveryRunner = (received: ReceivedJob) => Promise<RunResult>;

export function outcomeOfDecision(decision: DeliveryDecision): DeliveryOutcome {
  switch (decision.action) {
    case 'retry':
      return decision.reason === 'timeout' ? 'outcome_unknown' : 'retry';
    case 'done':
      return decision.status;
    case 'dead_letter':
      return decision.copy ? 'dead_letter_copy' : 'dead_letter';
    default:
      return decision.action;
  }
}

export interface DecisionReport {
  via: DeliveryVia;
  eventId: string;
  decision: DeliveryDecision;
  /** Overrides the decision's outcome (the runner's own: `receive_limit`). */
  outcome?: DeliveryOutcome;
  durationMs: number;
  latencyMs?: number;
  /** More fields for the log line (ids, the receive count). */
  fields?: Record<string, unknown>;
}

/** The one log line and the one metric of a delivery decision, inline or worker. Never throws. */
export function reportDecision(deps: Pick<RunnerDeps, 'log' | 'metrics'>, report: DecisionReport): void {
  const { decision } = report;
  const outcome = report.outcome ?? outcomeOfDecision(decision);
  const attempt = decision.action === 'retry' || decision.action === 'dead_letter' ? decision.attempt : undefined;
  try {
    const line = { eventId: report.eventId, via: report.via, ...decisionLogFields(decision), ...(report.fields ?? {}) };
    if (outcome === 'outcome_unknown') deps.log?.warn('delivery', { ...line, outcomeUnknown: true });
    else if (outcome === 'dead_letter' || outcome === 'receive_limit') deps.log?.warn('delivery', line);
    else deps.log?.info('delivery', line);
    deps.metrics?.delivery({
      outcome,
      via: report.via,
      durationMs: report.durationMs,
      ...(attempt === undefined ? {} : { attempt }),
      ...(outcome === 'delivered' && report.latencyMs !== undefined ? { latencyMs: Math.max(0, report.latencyMs) } : {}),
    });
  } catch {
    // A log or metric sink that fails must not change what happens to the job.
  }
}

export function createDeliveryRunner(deps: RunnerDeps): DeliveryRunner {
  const { delivery } = deps;
  const clock = delivery.clock;
  const limit = receiveLimit(delivery.retryDelaysS);

  return async (received) => {
    const started = clock.now();
    const { job, effects, receives } = received;
    const fields = { ...(received.ids ?? {}), receives };
    const report = (eventId: string, decision: DeliveryDecision, outcome?: DeliveryOutcome) => {
      const latencyMs = received.enqueuedAt === undefined ? undefined : clock.now() - received.enqueuedAt;
      reportDecision(deps, {
        via: 'worker',
        eventId,
        decision,
        durationMs: clock.now() - started,
        fields,
        ...(outcome ? { outcome } : {}),
        ...(latencyMs === undefined ? {} : { latencyMs }),
      });
    };
    if (!job) {
      deps.log?.warn('delivery', { via: 'worker', action: 'malformed', ...fields });
      deps.metrics?.delivery({ outcome: 'malformed', via: 'worker', durationMs: clock.now() - started });
      try {
        await effects.deadLetter('malformed');
      } catch (error) {
        deps.log?.error('delivery_worker_error', { ...fields, cause: describeCause(error) });
        await effects.keepFor(undefined).catch(() => undefined);
      }
      return { outcome: 'malformed' };
    }

    /** DEL-RUN-1: the event is failed (only from `queued`, with a note) and the job dead-lettered with why, whatever the decision was. */
    const giveUp = async (attempt: number | undefined): Promise<RunResult> => {
      const note = { at: clock.now(), note: 'receive_limit' } as const;
      await delivery.store.updateEvent(job.eventId, { status: EventStatus.failed, appendLog: note }, { status: EventStatus.queued });
      const decision: DeliveryDecision = { action: 'dead_letter', reason: 'receive_limit', attempt: attempt ?? 0 };
      report(job.eventId, decision, 'receive_limit');
      await effects.deadLetter('receive_limit');
      return { outcome: 'receive_limit', decision };
    };

    try {
      // Handed out this often without an outcome (the worker kept dying mid-attempt): no attempt.
      if (receives > limit) return await giveUp(undefined);
      let decision = await deliver(delivery, job);
      if (decision.action === 'defer' && decision.delayMs <= Budgets.deferInPlaceMaxMs) {
        // DEL-RUN-2: a lease about to run out: wait here rather than pay a receive (and SQS's whole-second granularity).
        await clock.sleep(decision.delayMs);
        decision = await deliver(delivery, job);
      }
      if (decision.action === 'retry' || decision.action === 'defer') {
        if (receives >= limit) return await giveUp(decision.action === 'retry' ? decision.attempt : undefined);
        report(job.eventId, decision);
        await effects.keepFor(decision.delayMs);
        return { outcome: decision.action, decision };
      }
      report(job.eventId, decision);
      await (decision.action === 'done' ? effects.complete() : effects.deadLetter(decision.reason));
      return { outcome: outcomeOfDecision(decision), decision };
    } catch (error) {
      // DEL-RUN-3: the job comes back by the queue's own redelivery, so an outage is not hammered.
      deps.log?.error('delivery_worker_error', { eventId: job.eventId, ...fields, cause: describeCause(error) });
      try {
        if (receives >= limit) return await giveUp(undefined);
      } catch (again) {
        deps.log?.error('delivery_worker_error', { eventId: job.eventId, ...fields, cause: describeCause(again) });
      }
      deps.metrics?.delivery({ outcome: 'worker_error', via: 'worker', durationMs: clock.now() - started });
      await effects.keepFor(undefined).catch(() => undefined);
      return { outcome: 'worker_error', error };
    }
  };
}
