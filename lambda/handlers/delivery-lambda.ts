/**
 * The Delivery Lambda without its entry file (docs/contract/delivery.md): each SQS record is one delivery
 * job; the delivery core makes one attempt and returns a decision, and this module applies it to
 * the queue. Records of a batch are processed concurrently; the answer lists the records SQS must
 * keep (partial batch response, `ReportBatchItemFailures`).
 *
 *   decision / outcome        queue effect                                   batchItemFailures
 *   done (delivered, dropped,  none: the event source mapping deletes it      -
 *     already final, duplicate)
 *   retry(delayMs)            ChangeMessageVisibility ceil(delayMs / 1000) s  listed (SQS keeps it)
 *   defer(delayMs) (lease)    slept in place when <= 1 s, else as retry;      listed when kept
 *                             no attempt is counted
 *   dead_letter(reason)       copy to the DLQ with `reason`, then deleted    -
 *   malformed record          copy to the DLQ with `malformed`, then deleted -
 *   exception (storage down)  none: visible again after the queue's          listed
 *                             visibility timeout
 *   any kept record on its    event marked failed, copy to the DLQ with      -
 *     receive limit           `receive_limit`, then deleted
 *
 * A record of an event that is already `failed` after delivery attempts is copied to the DLQ
 * again (the core decides so): that happens when an earlier dead-letter send failed after the
 * event was marked, and a duplicate copy in the DLQ is better than an event that vanished. A
 * record that carries a `reason` attribute came back from the DLQ (an operator's redrive): its
 * failed event gets a new round of the retry schedule, once per redrive.
 *
 * Deadlines: an invocation runs under a deadline 1 s before the Lambda's own timeout
 * (core/budgets.ts `deliveryDeadline`, from the context's remaining time). Every DynamoDB and SQS call
 * carries what is left, so a stalled table fails the records it holds up (they stay in SQS for a
 * later receive) and the batch still answers: a timed-out invocation would make SQS redeliver the
 * whole batch, POSTs that succeeded included. A POST only starts with time left to record its
 * outcome (Budgets.deliveryRecordReserveMs), so a POST that succeeds is rarely sent again.
 *
 * Deliberately not here: the MCP SDK, the HTTP app and classic zod (bundle size: this module and
 * everything it imports stay small, a test walks the import graph), the retry decision
 * (core/delivery.ts), and the environment (delivery.ts reads it once, through lambda/config).
 */
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { SQSClient } from '@aws-sdk/client-sqs';
import type { SQSBatchResponse, SQSEvent, SQSRecord } from 'aws-lambda';
import { runWithDeadline, webhookWithinDeadline, withDeadlines } from '../adapters/deadline';
import { DynamoDbStore } from '../adapters/dynamodb-store';
import { createGuardedWebhookClient } from '../adapters/guarded-https';
import { QueueAttributes, receivedAtOf, SqsQueue, type DeadLetterMessage } from '../adapters/sqs-queue';
import { deliveryLambdaSettings, type DeliveryLambdaSettings, type Env } from '../config/settings';
import { Budgets, deliveryDeadline } from '../core/budgets';
import { deliver, failAtReceiveLimit, receiveLimit, type DeliveryDeps } from '../core/delivery';
import { EVENT_ID_PREFIX, SUBSCRIPTION_ID_PREFIX } from '../core/protocol';
import { createLogger } from '../log';
import { createMetrics, type DeliveryOutcome, type Metrics } from '../metrics';
import { systemClock, type Clock, type DeliveryJob, type Logger, type WebhookClient } from '../ports';
import { clientOptions } from './aws-clients';

/** The queue operations the worker needs (SqsQueue has them; tests may wrap it). */
export interface DeliveryQueue {
  /** `receivedAt`: when SQS received the record (receivedAtOf), so the delay fits SQS's 12 hours. */
  changeVisibility(receiptHandle: string, delaySeconds: number, receivedAt?: number): Promise<void>;
  sendToDeadLetter(message: DeadLetterMessage, reason: string): Promise<void>;
}

export interface DeliveryLambdaDeps {
  delivery: DeliveryDeps;
  queue: DeliveryQueue;
  log: Logger;
  /** One EMF line per record decision (outcome, attempt, time); none when absent. */
  metrics?: Metrics;
}

/** The part of the Lambda context the worker reads. */
export interface InvocationContext {
  getRemainingTimeInMillis(): number;
}

export type DeliveryLambda = (event: SQSEvent, context?: InvocationContext) => Promise<SQSBatchResponse>;

const EVENT_ID = new RegExp(`^${EVENT_ID_PREFIX}[0-9a-f]{32}$`);
const SUBSCRIPTION_ID = new RegExp(`^${SUBSCRIPTION_ID_PREFIX}[0-9a-f]{32}$`);

/** The record's string message attributes, by name (SQS events spell them `stringValue`). */
function stringAttributesOf(record: SQSRecord): Record<string, string> {
  const attributes: Record<string, string> = {};
  for (const [name, value] of Object.entries(record.messageAttributes ?? {})) {
    if (typeof value?.stringValue === 'string') attributes[name] = value.stringValue;
  }
  return attributes;
}

/** The job, or undefined when the record cannot be one of ours (it must not loop forever). */
export function jobOf(record: SQSRecord, attributes: Record<string, string>): DeliveryJob | undefined {
  const eventId = attributes[QueueAttributes.eventId];
  const subscriptionId = attributes[QueueAttributes.subscriptionId];
  if (!eventId || !EVENT_ID.test(eventId) || !subscriptionId || !SUBSCRIPTION_ID.test(subscriptionId)) return undefined;
  if (typeof record.body !== 'string' || record.body === '') return undefined;
  // The body exactly as enqueued: these are the bytes every attempt signs and sends. Only a copy
  // that went through the dead-letter queue carries `reason`, so its presence marks a redrive.
  const redriven = attributes[QueueAttributes.reason] !== undefined;
  const generation = attributes[QueueAttributes.generation];
  return { eventId, subscriptionId, ...(generation ? { generation } : {}), body: record.body, ...(redriven ? { redriven } : {}) };
}

function errorName(error: unknown): string {
  return error instanceof Error ? `${error.name}: ${error.message}` : String(error);
}

export function createDeliveryLambda(deps: DeliveryLambdaDeps): DeliveryLambda {
  const { queue, log } = deps;
  // On this receive a record without an outcome is dead-lettered by the handler, with a reason,
  // and its event marked failed: one rule for retries, deferrals and worker errors alike. The
  // stack's maxReceiveCount sits RECEIVE_LIMIT_AWS_MARGIN above it, so SQS's own redrive (which
  // carries no reason) only takes what the handler never got to see.
  const limit = receiveLimit(deps.delivery.retryDelaysS);

  /** True when SQS must keep the record (listed in batchItemFailures). */
  async function processRecord(record: SQSRecord, invokedAt: number): Promise<boolean> {
    const started = performance.now();
    // One metric per record decision. Latency is from the enqueue (SQS SentTimestamp) to delivery.
    const decided = (outcome: DeliveryOutcome, attempt?: number) => {
      const sentAt = Number(record.attributes?.SentTimestamp);
      const latencyMs = outcome === 'delivered' && sentAt > 0 ? Math.max(0, deps.delivery.clock.now() - sentAt) : undefined;
      deps.metrics?.delivery({ outcome, durationMs: performance.now() - started, ...(attempt === undefined ? {} : { attempt }), ...(latencyMs === undefined ? {} : { latencyMs }) });
    };
    const attributes = stringAttributesOf(record);
    const message: DeadLetterMessage = { body: record.body, attributes };
    const job = jobOf(record, attributes);
    if (!job) {
      log.warn('delivery_malformed', { messageId: record.messageId });
      await queue.sendToDeadLetter(message, 'malformed');
      decided('malformed');
      return false;
    }
    const ids = { messageId: record.messageId, eventId: job.eventId };
    const receives = Number(record.attributes?.ApproximateReceiveCount ?? 0);

    /** Keeps the record for later, unless it reached the receive limit. */
    async function keepOrGiveUp(delayS: number | undefined): Promise<boolean> {
      if (receives >= limit) {
        await failAtReceiveLimit(deps.delivery, job!.eventId);
        await queue.sendToDeadLetter(message, 'receive_limit');
        log.warn('delivery_dead_lettered', { ...ids, reason: 'receive_limit', receives });
        return false;
      }
      if (delayS !== undefined) await queue.changeVisibility(record.receiptHandle, delayS, receivedAtOf(record.attributes, invokedAt));
      return true;
    }

    try {
      let decision = await deliver(deps.delivery, job);
      if (decision.action === 'defer' && decision.delayMs <= Budgets.deferInPlaceMaxMs) {
        // A lease about to run out (attempt 2 due a moment from now): wait here rather than pay a
        // receive and a whole second of SQS granularity.
        await deps.delivery.clock.sleep(decision.delayMs);
        decision = await deliver(deps.delivery, job);
      }
      switch (decision.action) {
        case 'done':
          log.info('delivery_done', { ...ids, status: decision.status });
          decided(decision.status);
          return false;
        case 'dead_letter':
          await queue.sendToDeadLetter(message, decision.reason);
          log.warn('delivery_dead_lettered', { ...ids, attempt: decision.attempt, reason: decision.reason, ...(decision.subscriptionEnded ? { subscriptionEnded: true } : {}) });
          decided('dead_letter', decision.attempt);
          return false;
        case 'retry': {
          const delayS = Math.ceil(decision.delayMs / 1000);
          log.info('delivery_retry', { ...ids, attempt: decision.attempt, reason: decision.reason, delayS });
          const kept = await keepOrGiveUp(delayS);
          decided(kept ? 'retry' : 'receive_limit', decision.attempt);
          return kept;
        }
        case 'defer': {
          const delayS = Math.ceil(decision.delayMs / 1000);
          log.info('delivery_deferred', { ...ids, delayS });
          const kept = await keepOrGiveUp(delayS);
          decided(kept ? 'defer' : 'receive_limit');
          return kept;
        }
        case 'abandoned': {
          // Only the inline attempt abandons; keep the record if it ever gets here.
          const kept = await keepOrGiveUp(0);
          decided(kept ? 'abandoned' : 'receive_limit');
          return kept;
        }
      }
    } catch (error) {
      log.error('delivery_worker_error', { ...ids, cause: errorName(error) });
      try {
        const kept = await keepOrGiveUp(undefined);
        decided(kept ? 'worker_error' : 'receive_limit');
        return kept;
      } catch (dlqError) {
        log.error('delivery_worker_error', { ...ids, cause: errorName(dlqError) });
        decided('worker_error');
        return true;
      }
    }
  }

  return async (event, context) => {
    const startedAt = Date.now();
    const remaining = typeof context?.getRemainingTimeInMillis === 'function' ? context.getRemainingTimeInMillis() : undefined;
    return runWithDeadline(deliveryDeadline(startedAt, remaining), () => processBatch(event));
  };

  async function processBatch(event: SQSEvent): Promise<SQSBatchResponse> {
    const records = event.Records ?? [];
    // Wall clock, not deps.clock: SQS's receive times are wall-clock epoch milliseconds.
    const invokedAt = Date.now();
    const keep = await Promise.all(
      records.map((record) =>
        processRecord(record, invokedAt).catch((error: unknown) => {
          // Only a failed dead-letter send of a malformed record gets here; keep it for next time.
          log.error('delivery_worker_error', { messageId: record.messageId, cause: errorName(error) });
          return true;
        }),
      ),
    );
    return { batchItemFailures: records.filter((_, i) => keep[i]).map((record) => ({ itemIdentifier: record.messageId })) };
  }
}

export interface DeliveryAwsClients {
  dynamodb: DynamoDBClient;
  sqs: SQSClient;
}

export function createDeliveryAwsClients(): DeliveryAwsClients {
  return { dynamodb: new DynamoDBClient(clientOptions()), sqs: new SQSClient(clientOptions()) };
}

export interface DeliveryLambdaOverrides {
  log?: Logger;
  /** Default: EMF on stdout when running in Lambda (AWS_LAMBDA_FUNCTION_NAME set), nothing elsewhere. */
  metrics?: Metrics;
  webhook?: WebhookClient;
  clock?: Clock;
}

/** The Delivery Lambda from its settings (lambda/config/settings.ts `deliveryLambdaSettings`). */
export function deliveryLambdaFromSettings(settings: DeliveryLambdaSettings, clients: DeliveryAwsClients, overrides: DeliveryLambdaOverrides = {}): DeliveryLambda {
  const store = new DynamoDbStore({ client: clients.dynamodb, tableName: settings.tableName });
  const queue = new SqsQueue({ client: clients.sqs, queueUrl: settings.queueUrl, deadLetterQueueUrl: settings.deadLetterQueueUrl });
  // Every call of these clients carries the invocation deadline (a no-op when already applied).
  withDeadlines(clients.dynamodb);
  withDeadlines(clients.sqs);
  return createDeliveryLambda({
    delivery: {
      store,
      webhook: webhookWithinDeadline(overrides.webhook ?? createGuardedWebhookClient({ allowLoopback: settings.allowLoopbackCallbacks }), Budgets.deliveryRecordReserveMs),
      clock: overrides.clock ?? systemClock,
      retryDelaysS: settings.retryDelaysS,
    },
    queue,
    log: overrides.log ?? createLogger(),
    metrics: overrides.metrics ?? createMetrics({ enabled: settings.aws.functionName !== undefined }),
  });
}

/** The same from an environment record, for tests that set the environment as the stack does. Throws SettingsError. */
export function deliveryLambdaFromEnvironment(env: Env, clients: DeliveryAwsClients, overrides: DeliveryLambdaOverrides = {}): DeliveryLambda {
  return deliveryLambdaFromSettings(deliveryLambdaSettings(env), clients, overrides);
}
