/**
 * The Reconciler Lambda without its entry file: one scheduled run of core/reconcile.ts, under the
 * context's remaining time less Budgets.reconcileEndReserveMs, so a run always ends with its
 * metrics written (RecordsRepaired, ReconcileErrors, and the dead-letter queue's depth). A run with
 * an error then fails, so the function's own Errors count it too. It reads the Delivery Lambda's
 * settings: the stranded threshold follows from the same retry schedule.
 *
 * Deliberately not here: the decisions (core/reconcile.ts), the schedule (lib/constructs/reconciler.ts),
 * and the environment (reconciler.ts reads it once, through lambda/config).
 */
import { runWithDeadline, withDeadlines } from '../adapters/deadline';
import { DynamoDbTable } from '../adapters/dynamodb-store';
import { SqsQueue } from '../adapters/sqs-queue';
import type { DeliveryLambdaSettings } from '../config/settings';
import { Budgets } from '../core/budgets';
import { reconcile, type ReconcileDeps, type ReconcileReport } from '../core/reconcile';
import { EventStore } from '../core/store/event-store';
import { createLogger } from '../log';
import { createRepairMetrics } from '../metrics';
import { systemClock } from '../ports';
import type { DeliveryLambdaOverrides, InvocationContext } from './delivery-lambda';
import type { AwsClients } from './aws-clients';

export type ReconcilerLambda = (event?: unknown, context?: InvocationContext) => Promise<ReconcileReport>;

/** Without a Lambda context (tests): a minute, the function's own timeout. */
const DEFAULT_RUN_MS = 60_000;

/** Thrown by a run that could not do all it should: its report says how much. */
export class ReconcileRunError extends Error {
  constructor(readonly report: ReconcileReport | undefined) {
    super(report ? `reconcile: ${report.errors} error(s) in this run (found ${report.found})` : 'reconcile: the index of queued records could not be read');
    this.name = 'ReconcileRunError';
  }
}

export interface ReconcilerLambdaOverrides extends Pick<DeliveryLambdaOverrides, 'log' | 'clock'> {
  metrics?: ReturnType<typeof createRepairMetrics>;
}

/** The Reconciler Lambda from the delivery settings (lambda/config/settings.ts `deliveryLambdaSettings`). */
export function reconcilerLambdaFromSettings(
  settings: DeliveryLambdaSettings,
  clients: AwsClients,
  overrides: ReconcilerLambdaOverrides = {},
): ReconcilerLambda {
  withDeadlines(clients.dynamodb);
  withDeadlines(clients.sqs);
  // The events and their queued index only, as the delivery worker's.
  const store = new EventStore(new DynamoDbTable(clients.dynamodb, settings.tableName));
  const queue = new SqsQueue({ client: clients.sqs, queueUrl: settings.queueUrl, deadLetterQueueUrl: settings.deadLetterQueueUrl });
  const metrics = overrides.metrics ?? createRepairMetrics({ enabled: settings.aws.functionName !== undefined });
  const log = overrides.log ?? createLogger();
  const deps: ReconcileDeps = {
    store,
    queue,
    clock: overrides.clock ?? systemClock,
    retryDelaysS: settings.retryDelaysS,
    log,
    repaired: (action, count) => metrics.repaired(action, count),
  };
  return async (_event, context) => {
    const startedAt = Date.now();
    const remaining = typeof context?.getRemainingTimeInMillis === 'function' ? context.getRemainingTimeInMillis() : DEFAULT_RUN_MS;
    const deadline = startedAt + remaining - Budgets.reconcileEndReserveMs;
    const until = deps.clock.now() + (deadline - startedAt) - Budgets.reconcileEndReserveMs;
    return runWithDeadline(deadline, async () => {
      let report: ReconcileReport | undefined;
      let errors = 0;
      try {
        report = await reconcile(deps, { until });
        errors = report.errors;
      } catch (error) {
        errors = 1;
        log.error('reconcile_error', { cause: error instanceof Error ? error.name : 'unknown' });
      }
      // The dead-letter queue's depth, and what the run could not do, written on every run.
      try {
        metrics.deadLetters(await queue.deadLetterDepth());
      } catch (error) {
        errors++;
        log.error('reconcile_error', { deadLetters: 'unread', cause: error instanceof Error ? error.name : 'unknown' });
      }
      metrics.errors(errors);
      if (errors > 0) throw new ReconcileRunError(report && { ...report, errors });
      return report!;
    });
  };
}
