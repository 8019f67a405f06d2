/**
 * The SQS delivery queue (SPEC 6.2): the AWS twin of the file queue. The MCP Lambda enqueues one
 * message per event; the Delivery Lambda (SQS event source) applies the delivery core's decision
 * with the two operations below: a backoff is a visibility change of the received message, and a
 * final failure is a copy in the dead-letter queue that carries its reason.
 *
 * Message shape: the body is the event's exact serialized bytes (what every attempt signs and
 * sends), and the routing data travels as message attributes (`eventId`, `subscriptionId`), so
 * the body is never parsed or rewritten on the way.
 *
 * Deliberately not here: receiving and deleting (the Lambda event source mapping does both; a
 * record left out of `batchItemFailures` is deleted by it), the retry decision
 * (core/delivery.ts), the redrive policy (the stack's safety net for crashes), and retries of the
 * SDK calls themselves (the client's configuration).
 */
import { ChangeMessageVisibilityCommand, SendMessageCommand, type MessageAttributeValue, type SQSClient } from '@aws-sdk/client-sqs';
import type { DeliveryJob, EnqueueOptions, Queue } from '../ports';

/** Message attribute names: what a consumer (and an operator reading the DLQ) looks for. */
export const QueueAttributes = {
  eventId: 'eventId',
  subscriptionId: 'subscriptionId',
  /** Only on dead-lettered copies: the final failure category (or `malformed`, `receive_limit`). */
  reason: 'reason',
} as const;

/** SQS allows at most this many message attributes. */
const MAX_ATTRIBUTES = 10;

/** SendMessage accepts DelaySeconds 0..900 (15 minutes). */
export const MAX_DELAY_S = 900;

/** SQS refuses a visibility timeout above 12 hours. */
export const MAX_VISIBILITY_TIMEOUT_S = 43_200;

export interface SqsQueueOptions {
  client: SQSClient;
  queueUrl: string;
  /** Needed only by the delivery side (`sendToDeadLetter`); the MCP Lambda never dead-letters. */
  deadLetterQueueUrl?: string;
}

/** A received message as the dead-letter send needs it: body and string attributes, unchanged. */
export interface DeadLetterMessage {
  body: string;
  attributes: Record<string, string>;
}

function stringAttribute(value: string): MessageAttributeValue {
  return { DataType: 'String', StringValue: value };
}

export class SqsQueue implements Queue {
  private readonly client: SQSClient;
  private readonly queueUrl: string;
  private readonly deadLetterQueueUrl: string | undefined;

  constructor(options: SqsQueueOptions) {
    this.client = options.client;
    this.queueUrl = options.queueUrl;
    this.deadLetterQueueUrl = options.deadLetterQueueUrl;
  }

  async enqueue(job: DeliveryJob, options: EnqueueOptions = {}): Promise<void> {
    // Whole seconds, rounded up so the job never surfaces before the lease it waits for.
    const delaySeconds = Math.min(MAX_DELAY_S, Math.max(0, Math.ceil((options.delayMs ?? 0) / 1000)));
    await this.client.send(
      new SendMessageCommand({
        QueueUrl: this.queueUrl,
        ...(delaySeconds > 0 ? { DelaySeconds: delaySeconds } : {}),
        // The exact bytes built once by the MCP Lambda: every attempt signs and sends these.
        MessageBody: job.body,
        MessageAttributes: {
          [QueueAttributes.eventId]: stringAttribute(job.eventId),
          [QueueAttributes.subscriptionId]: stringAttribute(job.subscriptionId),
        },
      }),
    );
  }

  /**
   * Backoff: the received message becomes visible again after `delaySeconds`. The caller must
   * also report the record as failed, or the event source mapping deletes it.
   */
  async changeVisibility(receiptHandle: string, delaySeconds: number): Promise<void> {
    // Whole seconds only; never beyond what SQS accepts (a longer delay still retries, just sooner).
    const seconds = Math.min(MAX_VISIBILITY_TIMEOUT_S, Math.max(0, Math.ceil(delaySeconds)));
    await this.client.send(new ChangeMessageVisibilityCommand({ QueueUrl: this.queueUrl, ReceiptHandle: receiptHandle, VisibilityTimeout: seconds }));
  }

  /**
   * Copies a message to the dead-letter queue with its original attributes plus `reason`. The
   * caller then lets the original be deleted: nothing disappears without a copy that says why.
   */
  async sendToDeadLetter(message: DeadLetterMessage, reason: string): Promise<void> {
    if (!this.deadLetterQueueUrl) throw new Error('sqs queue: no dead-letter queue URL configured');
    const attributes: Record<string, MessageAttributeValue> = {};
    for (const [name, value] of Object.entries(message.attributes)) {
      // SQS allows 10 attributes and no empty values; `reason` is always ours and always last.
      if (name === QueueAttributes.reason || value === '' || Object.keys(attributes).length >= MAX_ATTRIBUTES - 1) continue;
      attributes[name] = stringAttribute(value);
    }
    attributes[QueueAttributes.reason] = stringAttribute(reason);
    await this.client.send(new SendMessageCommand({ QueueUrl: this.deadLetterQueueUrl, MessageBody: message.body, MessageAttributes: attributes }));
  }
}
