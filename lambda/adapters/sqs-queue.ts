/**
 * The SQS delivery queue (docs/contract/delivery.md), the AWS twin of adapters/embedded/jobs.ts:
 * one message per event, its body the event's exact serialized bytes (never parsed or rewritten on
 * the way), its routing data in message attributes.
 *
 * Deliberately not here: receiving and deleting (the event source mapping deletes every record
 * left out of `batchItemFailures`), the retry decision (core/delivery.ts), the redrive policy (the
 * stack's safety net for crashes), and the SDK calls' retries and deadline.
 */
import { ChangeMessageVisibilityCommand, GetQueueAttributesCommand, SendMessageCommand, type MessageAttributeValue, type SQSClient } from '@aws-sdk/client-sqs';
import type { DeliveryJob, EnqueueOptions, Queue } from '../ports';

/** Message attribute names: what a consumer (and an operator reading the DLQ) looks for. */
export const QueueAttributes = {
  eventId: 'eventId',
  subscriptionId: 'subscriptionId',
  /** The subscription generation the job was queued under (absent on messages from before generations). */
  generation: 'generation',
  /** Only on dead-lettered copies: the final failure category (or `malformed`, `receive_limit`). */
  reason: 'reason',
} as const;

const MAX_ATTRIBUTES = 10;
/** SendMessage accepts DelaySeconds 0..900 (15 minutes). */
const MAX_DELAY_S = 900;

// SQS counts its 12-hour visibility maximum from each receive and refuses (never clamps) more than
// what is left; it gives no time for the current receive, so the handler's start less an allowance
// stands for it (docs/reliability.md, "Readings of AWS behaviour", has the why of 300 s).
export const MAX_VISIBILITY_TIMEOUT_S = 43_200;
export const RECEIVE_BEFORE_INVOKE_ALLOWANCE_S = 300;

/**
 * When SQS received this record, as an earliest bound (an earlier time only makes the clamp safer).
 * On a later receive `ApproximateFirstReceiveTimestamp` is an earlier receive's time: not used.
 */
export function receivedAtOf(
  attributes: { ApproximateReceiveCount?: string; ApproximateFirstReceiveTimestamp?: string } | undefined,
  invokedAt: number,
): number {
  const earliest = invokedAt - RECEIVE_BEFORE_INVOKE_ALLOWANCE_S * 1000;
  const first = Number(attributes?.ApproximateFirstReceiveTimestamp);
  if (attributes?.ApproximateReceiveCount === '1' && Number.isFinite(first) && first > 0) return Math.min(earliest, first);
  return earliest;
}

/**
 * The visibility timeout to ask for: the delay in whole seconds, never negative, and never more
 * than what is left of the 12 hours since `receivedAt` (a longer delay still retries, just sooner).
 */
export function visibilityTimeoutFor(delaySeconds: number, receivedAt: number | undefined, now: number): number {
  const elapsedS = receivedAt === undefined ? 0 : Math.max(0, Math.ceil((now - receivedAt) / 1000));
  const leftS = Math.max(0, MAX_VISIBILITY_TIMEOUT_S - elapsedS);
  const wanted = Number.isFinite(delaySeconds) ? Math.ceil(delaySeconds) : MAX_VISIBILITY_TIMEOUT_S;
  return Math.min(leftS, Math.max(0, wanted));
}

export interface SqsQueueOptions {
  client: SQSClient;
  queueUrl: string;
  /** Needed only by the delivery side (`sendToDeadLetter`); the MCP Lambda never dead-letters. */
  deadLetterQueueUrl?: string;
}

/** A received message as the dead-letter send needs it: body and string attributes, unchanged. */
export type DeadLetterMessage = { body: string; attributes: Record<string, string> };

function stringAttributes(entries: [string, string][]): Record<string, MessageAttributeValue> {
  return Object.fromEntries(entries.map(([name, value]) => [name, { DataType: 'String', StringValue: value }]));
}

/** A job's routing data, as its message attributes carry it. */
function attributesOf(job: DeliveryJob): [string, string][] {
  const generation: [string, string][] = job.generation === undefined ? [] : [[QueueAttributes.generation, job.generation]];
  return [[QueueAttributes.eventId, job.eventId], [QueueAttributes.subscriptionId, job.subscriptionId], ...generation];
}

export class SqsQueue implements Queue {
  constructor(private readonly options: SqsQueueOptions) {}

  private get deadLetterQueueUrl(): string {
    if (!this.options.deadLetterQueueUrl) throw new Error('sqs queue: no dead-letter queue URL configured');
    return this.options.deadLetterQueueUrl;
  }

  async enqueue(job: DeliveryJob, options: EnqueueOptions = {}): Promise<void> {
    // Whole seconds, rounded up so the job never surfaces before the lease it waits for.
    const delaySeconds = Math.min(MAX_DELAY_S, Math.max(0, Math.ceil((options.delayMs ?? 0) / 1000)));
    await this.options.client.send(
      new SendMessageCommand({
        QueueUrl: this.options.queueUrl,
        ...(delaySeconds > 0 ? { DelaySeconds: delaySeconds } : {}),
        MessageBody: job.body,
        MessageAttributes: stringAttributes(attributesOf(job)),
      }),
    );
  }

  /**
   * Backoff: the received message becomes visible again after `delaySeconds` (visibilityTimeoutFor).
   * The caller must also report the record as failed, or the event source mapping deletes it.
   */
  async changeVisibility(receiptHandle: string, delaySeconds: number, receivedAt?: number): Promise<void> {
    const seconds = visibilityTimeoutFor(delaySeconds, receivedAt, Date.now());
    const { client, queueUrl } = this.options;
    await client.send(new ChangeMessageVisibilityCommand({ QueueUrl: queueUrl, ReceiptHandle: receiptHandle, VisibilityTimeout: seconds }));
  }

  /**
   * Copies a message to the dead-letter queue with its original attributes plus `reason`. The
   * caller then lets the original be deleted: nothing disappears without a copy that says why.
   */
  async sendToDeadLetter(message: DeadLetterMessage, reason: string): Promise<void> {
    // SQS allows 10 attributes and no empty values; `reason` is always ours and always last.
    const kept = Object.entries(message.attributes).filter(([name, value]) => name !== QueueAttributes.reason && value !== '');
    const attributes = stringAttributes([...kept.slice(0, MAX_ATTRIBUTES - 1), [QueueAttributes.reason, reason]]);
    await this.options.client.send(new SendMessageCommand({ QueueUrl: this.deadLetterQueueUrl, MessageBody: message.body, MessageAttributes: attributes }));
  }

  /** A job's copy in the dead-letter queue, as it would have been received (the reconciler's, for a job it gives up on). */
  deadLetter(job: DeliveryJob, reason: string): Promise<void> {
    return this.sendToDeadLetter({ body: job.body, attributes: Object.fromEntries(attributesOf(job)) }, reason);
  }

  /** The messages in the dead-letter queue (visible, in flight and delayed), as SQS approximates them. */
  async deadLetterDepth(): Promise<number> {
    const names = ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesNotVisible', 'ApproximateNumberOfMessagesDelayed'] as const;
    const answer = await this.options.client.send(new GetQueueAttributesCommand({ QueueUrl: this.deadLetterQueueUrl, AttributeNames: [...names] }));
    return names.reduce((sum, name) => sum + (Number(answer.Attributes?.[name] ?? 0) || 0), 0);
  }
}
