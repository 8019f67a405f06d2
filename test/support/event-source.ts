/**
 * A tiny local SQS event source mapping: receives a batch from fauxqs, hands it to a handler as
 * the SQSEvent Lambda would get, and deletes the records the handler did not list in
 * `batchItemFailures` (what `ReportBatchItemFailures` does on AWS). Records listed stay in
 * flight until their visibility timeout, which the handler may have changed.
 *
 * Deliberately not here: batching windows, concurrency, and the redrive policy (fauxqs applies
 * the queue's own).
 */
import { DeleteMessageCommand, type Message, type SQSClient } from '@aws-sdk/client-sqs';
import type { SQSBatchResponse, SQSEvent, SQSRecord, SQSMessageAttributes } from 'aws-lambda';
import type { Fauxqs } from './fauxqs';

export function sqsRecordOf(message: Message, queueArn = 'arn:aws:sqs:us-east-1:000000000000:dm-dot-delivery'): SQSRecord {
  const messageAttributes: SQSMessageAttributes = {};
  for (const [name, value] of Object.entries(message.MessageAttributes ?? {})) {
    messageAttributes[name] = {
      dataType: value.DataType ?? 'String',
      stringListValues: [],
      binaryListValues: [],
      ...(value.StringValue !== undefined ? { stringValue: value.StringValue } : {}),
    };
  }
  const system = message.Attributes ?? {};
  return {
    messageId: message.MessageId!,
    receiptHandle: message.ReceiptHandle!,
    body: message.Body ?? '',
    attributes: {
      ApproximateReceiveCount: system.ApproximateReceiveCount ?? '1',
      SentTimestamp: system.SentTimestamp ?? String(Date.now()),
      SenderId: system.SenderId ?? '000000000000',
      ApproximateFirstReceiveTimestamp: system.ApproximateFirstReceiveTimestamp ?? String(Date.now()),
    },
    messageAttributes,
    md5OfBody: message.MD5OfBody ?? '',
    eventSource: 'aws:sqs',
    eventSourceARN: queueArn,
    awsRegion: 'us-east-1',
  };
}

export function sqsEventOf(messages: Message[]): SQSEvent {
  return { Records: messages.map((m) => sqsRecordOf(m)) };
}

export interface PollResult {
  event: SQSEvent;
  response: SQSBatchResponse;
}

async function deleteSucceeded(client: SQSClient, queueUrl: string, event: SQSEvent, response: SQSBatchResponse): Promise<void> {
  const failed = new Set(response.batchItemFailures.map((f) => f.itemIdentifier));
  for (const record of event.Records) {
    if (!failed.has(record.messageId)) await client.send(new DeleteMessageCommand({ QueueUrl: queueUrl, ReceiptHandle: record.receiptHandle }));
  }
}

/**
 * One poll of the event source: waits up to `timeoutMs` for at least one message; undefined
 * when none arrived.
 */
export async function pollOnce(
  fauxqs: Fauxqs,
  handler: (event: SQSEvent) => Promise<SQSBatchResponse>,
  options: { timeoutMs?: number } = {},
): Promise<PollResult | undefined> {
  const messages = await fauxqs.receive(fauxqs.queueUrl, { max: 10, timeoutMs: options.timeoutMs ?? 5_000 });
  if (messages.length === 0) return undefined;
  const event = sqsEventOf(messages);
  const response = await handler(event);
  await deleteSucceeded(fauxqs.client, fauxqs.queueUrl, event, response);
  return { event, response };
}
