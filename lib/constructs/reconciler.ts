/**
 * The reconciler (docs/contract/delivery.md, "Nothing strands"; what it decides is
 * lambda/core/reconcile.ts's): a small function that an EventBridge schedule rule runs every
 * Budgets.reconcileEveryMs (5 minutes), over the table's sparse `queued` index (keys only).
 *
 * Least privilege: `EVENT#` items only, never the subscription, whose item holds the secret; the
 * dead-letter queue's grant includes GetQueueAttributes, which reads its depth. No PutItem,
 * DeleteItem, Scan or secret.
 *
 * An EventBridge rule rather than a Scheduler schedule, and no retry of a failed run by the rule's
 * target or by Lambda's asynchronous invocation (whose default is two; a retry would only blur the
 * alarm's count): docs/decisions.md, "The reconciler". A run's timeout (1 minute) is far shorter
 * than the period, so two runs do not overlap.
 *
 * Deliberately not here: the alarms on its errors, its silence and its metrics (observability.ts).
 */
import { Duration } from 'aws-cdk-lib';
import * as events from 'aws-cdk-lib/aws-events';
import * as targets from 'aws-cdk-lib/aws-events-targets';
import { Construct } from 'constructs';
import { ItemKeys, QueuedIndex } from '../../lambda/core/store/items';
import { Budgets } from '../../lambda/core/budgets';
import type { DeliveryPipeline } from './delivery-pipeline';
import { HandlerFunction } from './handler-function';
import type { DmDotSettings } from '../settings';
import type { Storage } from './storage';

export class Reconciler extends Construct {
  readonly worker: HandlerFunction;

  constructor(scope: Construct, id: string, props: { storage: Storage; delivery: DeliveryPipeline; settings: DmDotSettings }) {
    super(scope, id);

    this.worker = new HandlerFunction(this, 'Function', {
      entry: 'lambda/handlers/reconciler.ts',
      description: 'dm-dot: requeues or fails event records left queued with nothing to deliver them',
      memorySize: 256,
      timeout: Duration.minutes(1),
      logRetention: props.settings.logRetention,
      environment: { ...props.delivery.settingsEnvironment },
    });

    props.storage.grantItems(this.worker.role, ['dynamodb:GetItem', 'dynamodb:UpdateItem'], { leadingKeys: [ItemKeys.event('*')] });
    props.storage.grantIndexQuery(this.worker.role, QueuedIndex.name);
    props.delivery.queue.grantSendMessages(this.worker.role);
    props.delivery.deadLetterQueue.grantSendMessages(this.worker.role);
    this.worker.function.configureAsyncInvoke({ retryAttempts: 0 });

    new events.Rule(this, 'Schedule', {
      description: 'dm-dot: runs the reconciler of queued event records',
      schedule: events.Schedule.rate(Duration.millis(Budgets.reconcileEveryMs)),
      targets: [new targets.LambdaFunction(this.worker.function, { retryAttempts: 0, maxEventAge: Duration.minutes(1) })],
    });
  }
}
