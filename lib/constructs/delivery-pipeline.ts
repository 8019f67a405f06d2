/**
 * The delivery pipeline (docs/contract/delivery.md): the SQS delivery queue the MCP function enqueues
 * into, its dead-letter queue, and the delivery function that consumes the queue, signs each event
 * and posts it to the dot. Sizes follow from one another (DeliverySizing and the functions below).
 *
 * The delivery function may read, update and delete the `SUBSCRIPTION` item (a 410 ends the
 * subscription) and read and update `EVENT#` items, nothing else of the table (`dynamodb:LeadingKeys`);
 * it never puts an item: an UpdateItem is what restores a missing event record. It may send to the
 * dead-letter queue and consume the delivery queue; it reads no secret.
 *
 * Every resource here keeps the logical ID the first deployments gave it (logical-ids.ts).
 *
 * Deliberately not here: the MCP side's access to the queue (SendMessage, mcp-function.ts), alarms on the
 * queues (observability.ts), FIFO ordering (events are independent; the record decides what is
 * sent), and a queue of the stack's own KMS key (SQS-managed encryption: no key policy to get wrong).
 */
import { Duration, Stack } from 'aws-cdk-lib';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import { SqsEventSource } from 'aws-cdk-lib/aws-lambda-event-sources';
import * as sqs from 'aws-cdk-lib/aws-sqs';
import { Construct } from 'constructs';
import { RECEIVE_LIMIT_AWS_MARGIN, receiveLimit } from '../../lambda/core/delivery';
import { Limits } from '../../lambda/core/protocol';
import { ItemKeys } from '../../lambda/core/store/items';
import { HandlerFunction } from './handler-function';
import { keepLogicalId, logicalIdAt } from './logical-ids';
import type { DmDotSettings } from '../settings';
import type { Storage } from './storage';

/** A batch of 10 is sent concurrently, each request with a 5 s deadline (docs/contract/outbound-guard.md), plus margin. */
const TIMEOUT = Duration.seconds(15);
export const DeliverySizing = {
  timeout: TIMEOUT,
  memoryMiB: 256,
  /** AWS's guidance for an SQS event source: at least 6x the function timeout. */
  visibilityTimeout: Duration.seconds(TIMEOUT.toSeconds() * 6),
  batchSize: 10,
  deadLetterRetention: Duration.days(Limits.deadLetterRetentionDays),
} as const;

/** SQS's own redrive (maxReceiveCount): RECEIVE_LIMIT_AWS_MARGIN receives above the worker's own dead-lettering (lambda/core/delivery.ts says why). */
export function redriveMaxReceiveCount(retryDelaysS: readonly number[]): number {
  return receiveLimit(retryDelaysS) + RECEIVE_LIMIT_AWS_MARGIN;
}

/**
 * The delivery queue must keep a message for its whole retry schedule; four days (the SQS
 * default) covers the default schedule of about 13 minutes many times over.
 */
export function mainQueueRetention(retryDelaysS: readonly number[]): Duration {
  const scheduleS = retryDelaysS.reduce((sum, d) => sum + d, 0);
  const days = Math.min(14, Math.max(4, Math.ceil(scheduleS / 86_400) + 1));
  return Duration.days(days);
}

export class DeliveryPipeline extends Construct {
  readonly queue: sqs.Queue;
  readonly deadLetterQueue: sqs.Queue;
  readonly worker: HandlerFunction;
  /** The variables lambda/config/settings.ts `deliveryLambdaSettings` reads: the worker's, and the reconciler's (which shares them). */
  readonly settingsEnvironment: Readonly<Record<string, string>>;

  constructor(scope: Construct, id: string, props: { storage: Storage; settings: DmDotSettings }) {
    super(scope, id);
    const { retryDelaysS } = props.settings;

    const encrypted = { encryption: sqs.QueueEncryption.SQS_MANAGED, enforceSSL: true };
    this.deadLetterQueue = new sqs.Queue(this, 'DeadLetterQueue', { ...encrypted, retentionPeriod: DeliverySizing.deadLetterRetention });
    this.queue = new sqs.Queue(this, 'Queue', {
      ...encrypted,
      visibilityTimeout: DeliverySizing.visibilityTimeout,
      retentionPeriod: mainQueueRetention(retryDelaysS),
      deadLetterQueue: { queue: this.deadLetterQueue, maxReceiveCount: redriveMaxReceiveCount(retryDelaysS) },
    });
    for (const [queue, legacyId] of [
      [this.deadLetterQueue, 'DeadLetterQueue'],
      [this.queue, 'DeliveryQueue'],
    ] as const) {
      keepLogicalId(queue, [legacyId, 'Resource']);
      // enforceSSL gave each queue its policy already.
      keepLogicalId(queue.node.findChild('Policy'), [legacyId, 'Policy', 'Resource']);
    }

    this.settingsEnvironment = {
      TABLE_NAME: props.storage.table.tableName,
      QUEUE_URL: this.queue.queueUrl,
      DEAD_LETTER_QUEUE_URL: this.deadLetterQueue.queueUrl,
      DMDOT_RETRY_DELAYS: retryDelaysS.join(','),
    };
    this.worker = new HandlerFunction(this, 'Function', {
      entry: 'lambda/handlers/delivery.ts',
      description: 'dm-dot: signs and delivers queued events to the dot callback',
      memorySize: DeliverySizing.memoryMiB,
      timeout: DeliverySizing.timeout,
      logRetention: props.settings.logRetention,
      environment: { ...this.settingsEnvironment },
    });

    // maxConcurrency caps the delivery instances at once, and so the POSTs in flight at the one dot
    // (each instance sends its batch concurrently) and the account concurrency the MCP function has to share.
    this.worker.function.addEventSource(
      new SqsEventSource(this.queue, {
        batchSize: DeliverySizing.batchSize,
        reportBatchItemFailures: true,
        maxConcurrency: props.settings.deliveryMaxConcurrency,
      }),
    );

    props.storage.grantItems(this.worker.role, ['dynamodb:GetItem', 'dynamodb:UpdateItem', 'dynamodb:DeleteItem'], {
      leadingKeys: [ItemKeys.subscription, ItemKeys.event('*')],
    });
    this.deadLetterQueue.grantSendMessages(this.worker.role);

    // The function's parts were first created at `Delivery/…` directly under the stack, and its event
    // source mapping was named after the queue's path then (`SqsEventSource:<stack>DeliveryQueue…`).
    const { worker } = this;
    keepLogicalId(worker.logGroup, ['Delivery', 'Logs', 'Resource']);
    keepLogicalId(worker.role, ['Delivery', 'Role', 'Resource']);
    keepLogicalId(worker.role.node.findChild('DefaultPolicy'), ['Delivery', 'Role', 'DefaultPolicy', 'Resource']);
    keepLogicalId(worker.function, ['Delivery', 'Function', 'Resource']);
    const mapping = worker.function.node.children.find((child) => child instanceof lambda.EventSourceMapping);
    if (!mapping) throw new Error(`${worker.function.node.path} has no event source mapping`);
    const firstQueueId = logicalIdAt([Stack.of(this).node.id, 'DeliveryQueue']);
    keepLogicalId(mapping, ['Delivery', 'Function', `SqsEventSource:${firstQueueId}`, 'Resource']);
  }
}
