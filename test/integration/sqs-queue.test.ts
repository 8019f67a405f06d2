/**
 * The SQS queue adapter (lambda/adapters/sqs-queue.ts) against fauxqs: enqueue keeps the body
 * byte-exact with the routing attributes, a backoff hides the message until its delay has passed,
 * a dead-letter copy carries the original attributes plus the reason, and a job whose retry
 * schedule runs out ends in the DLQ with its category. Waits are bounded polls; the only timing
 * facts asserted are "not visible right after the change" and "visible again later".
 */
import { GetQueueAttributesCommand, ReceiveMessageCommand } from '@aws-sdk/client-sqs';
import { QueueAttributes, SqsQueue } from '../../lambda/adapters/sqs-queue';
import { buildEvent } from '../../lambda/core/messages';
import { EventStatus, Limits } from '../../lambda/core/protocol';
import { createDeliveryLambda } from '../../lambda/handlers/delivery-lambda';
import type { Logger } from '../../lambda/log';
import { systemClock, type WebhookClient } from '../../lambda/ports';
import { FakeStore } from '../support/fakes';
import { startFauxqs, type Fauxqs } from '../support/fauxqs';
import { pollOnce } from '../support/event-source';
import { START_HOOK_MS } from '../support/processes';

const silentLog: Logger = { info: () => undefined, warn: () => undefined, error: () => undefined };
const EVENT_ID = `evt_${'a'.repeat(32)}`;
const SUB_ID = `sub_${'b'.repeat(32)}`;

let fauxqs: Fauxqs;
let queue: SqsQueue;

beforeAll(async () => {
  fauxqs = await startFauxqs();
  queue = new SqsQueue({ client: fauxqs.client, queueUrl: fauxqs.queueUrl, deadLetterQueueUrl: fauxqs.deadLetterQueueUrl });
}, START_HOOK_MS);

afterAll(async () => {
  await fauxqs?.stop();
});

beforeEach(async () => {
  await fauxqs.purge();
});

/** Nothing visible right now (a receive that does not wait). */
async function visibleNow(queueUrl: string): Promise<number> {
  const answer = await fauxqs.client.send(new ReceiveMessageCommand({ QueueUrl: queueUrl, MaxNumberOfMessages: 10, WaitTimeSeconds: 0, VisibilityTimeout: 0 }));
  return answer.Messages?.length ?? 0;
}

test('DEL-PIPE-3: enqueue sends the exact body with eventId and subscriptionId attributes', async () => {
  // Bytes that a re-serialization would change: escapes, key order, non-ASCII, spacing.
  const body = '{"eventId":"evt_x","data":{"message":"h\\u00e9llo ☃ \\"quoted\\""},"z":1,"a":2}';
  await queue.enqueue({ eventId: EVENT_ID, subscriptionId: SUB_ID, body });
  const [message] = await fauxqs.receive(fauxqs.queueUrl);
  expect(message?.Body).toBe(body);
  expect(message?.MessageAttributes).toEqual({
    eventId: { DataType: 'String', StringValue: EVENT_ID },
    subscriptionId: { DataType: 'String', StringValue: SUB_ID },
  });
});

test('DEL-PIPE-17: a backoff hides the message: not visible right after, visible again after the delay', async () => {
  await queue.enqueue({ eventId: EVENT_ID, subscriptionId: SUB_ID, body: '{}' });
  const [first] = await fauxqs.receive(fauxqs.queueUrl);
  await queue.changeVisibility(first!.ReceiptHandle!, 3);
  expect(await visibleNow(fauxqs.queueUrl)).toBe(0);
  // Well under the queue's 30 s default visibility: it is the change that brought it back.
  const [again] = await fauxqs.receive(fauxqs.queueUrl, { timeoutMs: 15_000 });
  expect(again?.MessageId).toBe(first!.MessageId);
  expect(again?.Attributes?.ApproximateReceiveCount).toBe('2');
});

test('a fractional delay is rounded up to whole seconds, never to zero', async () => {
  await queue.enqueue({ eventId: EVENT_ID, subscriptionId: SUB_ID, body: '{}' });
  const [first] = await fauxqs.receive(fauxqs.queueUrl);
  await queue.changeVisibility(first!.ReceiptHandle!, 0.2);
  expect(await visibleNow(fauxqs.queueUrl)).toBe(0);
  expect(await fauxqs.receive(fauxqs.queueUrl, { timeoutMs: 10_000 })).toHaveLength(1);
});

test('a 12-hour backoff late in the 12 hours since the receive asks only for what is left', async () => {
  // SQS refuses more than what is left of 12 h since the receive (fauxqs does not model that rule;
  // test/unit/adapters/sqs-visibility.test.ts does). Here: received "11 h 59 min 57 s ago", so at most 3 s
  // are left, and the message is visible again within seconds instead of the call failing.
  await queue.enqueue({ eventId: EVENT_ID, subscriptionId: SUB_ID, body: '{}' });
  const [first] = await fauxqs.receive(fauxqs.queueUrl);
  await queue.changeVisibility(first!.ReceiptHandle!, 43_200, Date.now() - (43_200 - 3) * 1000);
  expect(await visibleNow(fauxqs.queueUrl)).toBe(0);
  const [again] = await fauxqs.receive(fauxqs.queueUrl, { timeoutMs: 15_000 });
  expect(again?.MessageId).toBe(first!.MessageId);
});

test('DEL-PIPE-18: sendToDeadLetter copies body and attributes and adds the reason', async () => {
  const body = '{"eventId":"evt_x"}';
  await queue.sendToDeadLetter({ body, attributes: { eventId: EVENT_ID, subscriptionId: SUB_ID, reason: 'stale' } }, 'http_4xx');
  const [dead] = await fauxqs.receive(fauxqs.deadLetterQueueUrl);
  expect(dead?.Body).toBe(body);
  expect(dead?.MessageAttributes).toEqual({
    eventId: { DataType: 'String', StringValue: EVENT_ID },
    subscriptionId: { DataType: 'String', StringValue: SUB_ID },
    reason: { DataType: 'String', StringValue: 'http_4xx' },
  });
});

test('sendToDeadLetter without a DLQ URL is a programming error', async () => {
  const mcpSide = new SqsQueue({ client: fauxqs.client, queueUrl: fauxqs.queueUrl });
  await expect(mcpSide.sendToDeadLetter({ body: '{}', attributes: {} }, 'http_4xx')).rejects.toThrow(/dead-letter/);
});

test('DEL-PIPE-18: an exhausted retry schedule lands in the DLQ with its reason, and leaves the main queue', async () => {
  {
    // The store is not what this test is about: the unit tests' double keeps docs/contract/storage.md's semantics.
    const store = new FakeStore();
    const now = Date.now();
    await store.putSubscription(
      {
        id: SUB_ID,
        url: 'https://dot.example/hook',
        name: 'message.created',
        secret: `whsec_${Buffer.alloc(32, 7).toString('base64')}`,
        principal: 'p',
        createdAt: now,
        refreshedAt: now,
        expiresAt: now + Limits.ttlDefaultMs,
      },
      now,
      { kind: 'absent' },
    );
    await store.putEvent({
      eventId: EVENT_ID,
      status: EventStatus.queued,
      subscriptionId: SUB_ID,
      attempts: 0,
      createdAt: now,
      expiresAt: now + Limits.eventRecordMs,
    });
    const posts: number[] = [];
    const webhook: WebhookClient = {
      post: async () => {
        posts.push(Date.now());
        return { kind: 'response', status: 503, body: new Uint8Array() };
      },
    };
    const handler = createDeliveryLambda({ delivery: { store, webhook, clock: systemClock, retryDelaysS: [1] }, queue, log: silentLog });
    const body = buildEvent(EVENT_ID, 'hello', now);
    await queue.enqueue({ eventId: EVENT_ID, subscriptionId: SUB_ID, body });

    const first = await pollOnce(fauxqs, handler);
    expect(first?.response.batchItemFailures).toHaveLength(1);
    const second = await pollOnce(fauxqs, handler, { timeoutMs: 15_000 });
    expect(second?.response.batchItemFailures).toEqual([]);
    expect(posts).toHaveLength(2);

    const [dead] = await fauxqs.receive(fauxqs.deadLetterQueueUrl);
    expect(dead?.Body).toBe(body);
    expect(dead?.MessageAttributes?.[QueueAttributes.reason]?.StringValue).toBe('http_5xx');
    expect(dead?.MessageAttributes?.[QueueAttributes.eventId]?.StringValue).toBe(EVENT_ID);
    expect((await store.getEvent(EVENT_ID, Date.now()))?.status).toBe(EventStatus.failed);

    const counts = await fauxqs.client.send(
      new GetQueueAttributesCommand({ QueueUrl: fauxqs.queueUrl, AttributeNames: ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesNotVisible'] }),
    );
    expect(counts.Attributes).toMatchObject({ ApproximateNumberOfMessages: '0', ApproximateNumberOfMessagesNotVisible: '0' });
  }
});
