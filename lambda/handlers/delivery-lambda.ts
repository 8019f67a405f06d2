/**
 * The Delivery Lambda without its entry file (docs/contract/delivery.md): each SQS record is one
 * job for the delivery runner (core/runner.ts), whose queue effects are made on SQS here: a record
 * SQS must keep is listed in `batchItemFailures` (after a ChangeMessageVisibility when it has a
 * delay), a dead letter is a copy sent to the DLQ, and everything else is left out (deleted).
 * Records of a batch run concurrently, under a deadline 1 s before the Lambda's own timeout, so a
 * stalled table fails only the records it holds up and the batch still answers (a timed-out
 * invocation would redeliver the whole batch, POSTs that succeeded included).
 *
 * Deliberately not here: the MCP SDK, the HTTP app and classic zod (bundle size; a test walks the
 * import graph), the decision and its queue effects (core/), and the environment (delivery.ts).
 */
import type { Context, SQSBatchResponse, SQSEvent, SQSRecord } from 'aws-lambda';
import { runWithDeadline, webhookWithinDeadline, withDeadlines } from '../adapters/deadline';
import { DynamoDbTable } from '../adapters/dynamodb-store';
import { createGuardedWebhookClient } from '../adapters/guarded-https';
import { QueueAttributes, receivedAtOf, SqsQueue } from '../adapters/sqs-queue';
import type { DeliveryLambdaSettings } from '../config/settings';
import { Budgets, deliveryDeadline } from '../core/budgets';
import { describeCause } from '../core/errors';
import type { DeliveryDeps } from '../core/delivery';
import { createDeliveryRunner } from '../core/runner';
import { EVENT_ID_PATTERN } from '../core/identity';
import { SUBSCRIPTION_ID_PREFIX } from '../core/protocol';
import { EventStore } from '../core/store/event-store';
import { createLogger } from '../log';
import { createMetrics, type Metrics } from '../metrics';
import { jobOf, systemClock, type Clock, type DeliveryJob, type JobEffects, type Logger, type WebhookClient } from '../ports';
import type { AwsClients } from './aws-clients';

/** The queue operations the worker needs (tests may wrap SqsQueue's). */
export type DeliveryQueue = Pick<SqsQueue, 'changeVisibility' | 'sendToDeadLetter'>;

export interface DeliveryLambdaDeps {
  delivery: DeliveryDeps;
  queue: DeliveryQueue;
  log: Logger;
  /** One EMF line per record decision (outcome, via, attempt, time); none when absent. */
  metrics?: Metrics;
}

/** The part of the Lambda context the worker reads. */
export type InvocationContext = Pick<Context, 'getRemainingTimeInMillis'>;

export type DeliveryLambda = (event: SQSEvent, context?: InvocationContext) => Promise<SQSBatchResponse>;

const SUBSCRIPTION_ID = new RegExp(`^${SUBSCRIPTION_ID_PREFIX}[0-9a-f]{32}$`);

/** The record's string message attributes, by name (SQS events spell them `stringValue`). */
function stringAttributesOf(record: SQSRecord): Record<string, string> {
  const strings = Object.entries(record.messageAttributes ?? {}).filter(([, value]) => typeof value?.stringValue === 'string');
  return Object.fromEntries(strings.map(([name, value]) => [name, value.stringValue!]));
}

/** The job, or undefined when the record cannot be one of ours (it must not loop forever). */
function jobOfRecord(record: SQSRecord, attributes: Record<string, string>): DeliveryJob | undefined {
  const eventId = attributes[QueueAttributes.eventId];
  const subscriptionId = attributes[QueueAttributes.subscriptionId];
  if (!eventId || !EVENT_ID_PATTERN.test(eventId) || !subscriptionId || !SUBSCRIPTION_ID.test(subscriptionId)) return undefined;
  if (typeof record.body !== 'string' || record.body === '') return undefined;
  const job = jobOf({ eventId, subscriptionId, generation: attributes[QueueAttributes.generation] }, record.body);
  // Only a copy that went through the dead-letter queue carries `reason`: its presence marks a redrive.
  return attributes[QueueAttributes.reason] !== undefined ? { ...job, redriven: true } : job;
}

export function createDeliveryLambda(deps: DeliveryLambdaDeps): DeliveryLambda {
  const { queue, log } = deps;
  const run = createDeliveryRunner({ delivery: deps.delivery, log, ...(deps.metrics ? { metrics: deps.metrics } : {}) });

  /** True when SQS must keep the record (listed in batchItemFailures). */
  async function processRecord(record: SQSRecord, invokedAt: number): Promise<boolean> {
    const attributes = stringAttributesOf(record);
    // Kept until an effect says otherwise: a dead-letter send that fails leaves the record in SQS.
    let kept = true;
    const effects: JobEffects = {
      complete: async () => {
        kept = false;
      },
      keepFor: async (delayMs) => {
        kept = true;
        if (delayMs !== undefined) await queue.changeVisibility(record.receiptHandle, Math.ceil(delayMs / 1000), receivedAtOf(record.attributes, invokedAt));
      },
      deadLetter: async (reason) => {
        kept = true;
        await queue.sendToDeadLetter({ body: record.body, attributes }, reason);
        kept = false;
      },
    };
    const sentAt = Number(record.attributes?.SentTimestamp);
    await run({
      job: jobOfRecord(record, attributes),
      receives: Number(record.attributes?.ApproximateReceiveCount ?? 0),
      effects,
      ids: { messageId: record.messageId },
      ...(sentAt > 0 ? { enqueuedAt: sentAt } : {}),
    });
    return kept;
  }

  return async (event, context) => {
    const startedAt = Date.now();
    const remaining = typeof context?.getRemainingTimeInMillis === 'function' ? context.getRemainingTimeInMillis() : undefined;
    return runWithDeadline(deliveryDeadline(startedAt, remaining), async () => {
      const records = event.Records ?? [];
      // Wall clock, not deps.clock: SQS's receive times are wall-clock epoch milliseconds.
      const invokedAt = Date.now();
      const keep = await Promise.all(
        records.map((record) =>
          processRecord(record, invokedAt).catch((error: unknown) => {
            // Only a failed dead-letter send of a malformed record gets here; keep it for next time.
            log.error('delivery_worker_error', { messageId: record.messageId, cause: describeCause(error) });
            return true;
          }),
        ),
      );
      return { batchItemFailures: records.filter((_, i) => keep[i]).map((record) => ({ itemIdentifier: record.messageId })) };
    });
  };
}

export interface DeliveryLambdaOverrides {
  log?: Logger;
  /** Default: EMF on stdout when running in Lambda (AWS_LAMBDA_FUNCTION_NAME set), nothing elsewhere. */
  metrics?: Metrics;
  /** Tests only: replaces the guarded client (the settings' loopback switch is how tests allow 127.0.0.1). */
  webhook?: WebhookClient;
  clock?: Clock;
}

/** The Delivery Lambda from its settings (lambda/config/settings.ts `deliveryLambdaSettings`). */
export function deliveryLambdaFromSettings(settings: DeliveryLambdaSettings, clients: AwsClients, overrides: DeliveryLambdaOverrides = {}): DeliveryLambda {
  // The events and the subscription only: the worker's bundle carries no other record's meaning.
  const store = new EventStore(new DynamoDbTable(clients.dynamodb, settings.tableName));
  const queue = new SqsQueue({ client: clients.sqs, queueUrl: settings.queueUrl, deadLetterQueueUrl: settings.deadLetterQueueUrl });
  // Every call of these clients carries the invocation deadline (a no-op when already applied).
  withDeadlines(clients.dynamodb);
  withDeadlines(clients.sqs);
  return createDeliveryLambda({
    delivery: {
      store,
      webhook: webhookWithinDeadline(
        overrides.webhook ?? createGuardedWebhookClient({ allowLoopback: settings.allowLoopbackCallbacks }),
        Budgets.deliveryRecordReserveMs,
      ),
      clock: overrides.clock ?? systemClock,
      retryDelaysS: settings.retryDelaysS,
    },
    queue,
    log: overrides.log ?? createLogger(),
    metrics: overrides.metrics ?? createMetrics({ enabled: settings.aws.functionName !== undefined }),
  });
}
