/**
 * SQS counts a message's 12-hour visibility limit from the receive, and refuses a
 * ChangeMessageVisibility that asks for more than what is left of it ("If you attempt to set the
 * VisibilityTimeout to a value greater than the maximum time left, Amazon SQS returns an error",
 * https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_ChangeMessageVisibility.html).
 * fauxqs checks only 0..43200, so the rule is reproduced here by a fake SQS client that enforces
 * it, and the clamp, the receive-time estimate and the settings caps are pinned one rule a test.
 */
import { ChangeMessageVisibilityCommand, type SQSClient } from '@aws-sdk/client-sqs';
import type { SQSRecord } from 'aws-lambda';
import { MAX_VISIBILITY_TIMEOUT_S, RECEIVE_BEFORE_INVOKE_ALLOWANCE_S, receivedAtOf, SqsQueue, visibilityTimeoutFor } from '../../../lambda/adapters/sqs-queue';
import { MAX_RETRY_DELAY_S, retryDelays, SettingsError } from '../../../lambda/config/fields';

const parseRetryDelays = (text: string) => retryDelays(text, 'DMDOT_RETRY_DELAYS');
import { EventStatus, Limits } from '../../../lambda/core/protocol';
import { createDeliveryLambda, type DeliveryQueue } from '../../../lambda/handlers/delivery-lambda';
import { MAX_RETRY_DELAY_S as STACK_MAX_RETRY_DELAY_S } from '../../../lib/settings';
import type { SubscriptionRecord } from '../../../lambda/ports';
import { FakeStore } from '../../support/fakes';

const HOUR_MS = 3_600_000;
const NOW = Date.UTC(2026, 10, 30, 12, 0, 0);

/** A fake SQS that applies the documented rule: the new timeout must fit in 12 h since the receive. */
function awsLikeSqs(receivedAt: number, now: () => number) {
  const asked: number[] = [];
  const client = {
    send: async (command: unknown) => {
      if (!(command instanceof ChangeMessageVisibilityCommand)) throw new Error('unexpected command');
      const seconds = command.input.VisibilityTimeout!;
      asked.push(seconds);
      const leftS = MAX_VISIBILITY_TIMEOUT_S - (now() - receivedAt) / 1000;
      if (seconds < 0 || seconds > MAX_VISIBILITY_TIMEOUT_S || seconds > leftS) {
        throw Object.assign(
          new Error('Value for parameter VisibilityTimeout is invalid. Reason: Total VisibilityTimeout for the message is beyond the limit [43200 seconds]'),
          {
            name: 'InvalidParameterValue',
          },
        );
      }
      return {};
    },
  };
  return { client: client as unknown as SQSClient, asked };
}

describe('visibilityTimeoutFor: what is left of 12 hours since the receive', () => {
  test('a short delay is asked for as is, in whole seconds rounded up', () => {
    expect(visibilityTimeoutFor(4, NOW - 1_000, NOW)).toBe(4);
    expect(visibilityTimeoutFor(0.2, NOW, NOW)).toBe(1);
  });

  test('a 12-hour delay one hour after the receive asks for the 11 hours left', () => {
    expect(visibilityTimeoutFor(43_200, NOW - HOUR_MS, NOW)).toBe(43_200 - 3_600);
  });

  test('a partly elapsed second counts as elapsed (the clamp errs short, never long)', () => {
    expect(visibilityTimeoutFor(43_200, NOW - 1_500, NOW)).toBe(43_198);
  });

  test('past 12 hours since the receive nothing is left: 0 (visible again at once)', () => {
    expect(visibilityTimeoutFor(600, NOW - 13 * HOUR_MS, NOW)).toBe(0);
  });

  test('without a receive time the cap is the plain 12 hours; negative or absurd delays stay in range', () => {
    expect(visibilityTimeoutFor(99_999, undefined, NOW)).toBe(43_200);
    expect(visibilityTimeoutFor(-5, undefined, NOW)).toBe(0);
    expect(visibilityTimeoutFor(Number.POSITIVE_INFINITY, NOW, NOW)).toBe(43_200);
    expect(visibilityTimeoutFor(Number.NaN, NOW, NOW)).toBe(43_200);
  });
});

describe('receivedAtOf: when the current receive happened', () => {
  const invokedAt = NOW;
  const allowanceMs = RECEIVE_BEFORE_INVOKE_ALLOWANCE_S * 1000;

  test('the bound is the handler start less the allowance', () => {
    expect(receivedAtOf({ ApproximateReceiveCount: '1', ApproximateFirstReceiveTimestamp: String(NOW - 2_000) }, invokedAt)).toBe(NOW - allowanceMs);
  });

  test('on the first receive, an older ApproximateFirstReceiveTimestamp (the receive itself) wins', () => {
    expect(receivedAtOf({ ApproximateReceiveCount: '1', ApproximateFirstReceiveTimestamp: String(NOW - HOUR_MS) }, invokedAt)).toBe(NOW - HOUR_MS);
  });

  test('on a later receive the first-receive time is stale: the handler start less the allowance is used', () => {
    expect(receivedAtOf({ ApproximateReceiveCount: '3', ApproximateFirstReceiveTimestamp: String(NOW - 5 * HOUR_MS) }, invokedAt)).toBe(NOW - allowanceMs);
  });

  test('missing or unreadable attributes fall back to the earlier bound', () => {
    expect(receivedAtOf(undefined, invokedAt)).toBe(NOW - allowanceMs);
    expect(receivedAtOf({ ApproximateReceiveCount: '1', ApproximateFirstReceiveTimestamp: 'soon' }, invokedAt)).toBe(NOW - allowanceMs);
  });

  test('a first-receive time in the future (clock skew) does not shorten the bound', () => {
    expect(receivedAtOf({ ApproximateReceiveCount: '1', ApproximateFirstReceiveTimestamp: String(NOW + 60_000) }, invokedAt)).toBe(NOW - allowanceMs);
  });
});

describe('SqsQueue.changeVisibility against the documented 12-hour rule', () => {
  test('the old clamp (43,200 s flat) is refused an hour after the receive; the new one is accepted', async () => {
    const receivedAt = NOW - HOUR_MS;
    const sqs = awsLikeSqs(receivedAt, () => NOW);
    // What the adapter asked for before the fix: min(43200, delay).
    await expect(sqs.client.send(new ChangeMessageVisibilityCommand({ QueueUrl: 'q', ReceiptHandle: 'r', VisibilityTimeout: 43_200 }))).rejects.toThrow(
      /beyond the limit/,
    );
    const queue = new SqsQueue({ client: sqs.client, queueUrl: 'q' });
    const realNow = Date.now;
    Date.now = () => NOW;
    try {
      await expect(queue.changeVisibility('r', 43_200, receivedAt)).resolves.toBeUndefined();
    } finally {
      Date.now = realNow;
    }
    expect(sqs.asked.at(-1)).toBe(43_200 - 3_600);
  });
});

describe('the delivery Lambda passes the receive time of each record', () => {
  test('a 12-hour backoff of a record first received 2 hours ago asks for 10 hours at most', async () => {
    const subscription: SubscriptionRecord = {
      id: `sub_${'b'.repeat(32)}`,
      url: 'https://dot.example/hook',
      name: 'message.created',
      secret: `whsec_${Buffer.alloc(32, 7).toString('base64')}`,
      principal: 'p',
      createdAt: 0,
      refreshedAt: 0,
      expiresAt: Number.MAX_SAFE_INTEGER,
    };
    const eventId = `evt_${'a'.repeat(32)}`;
    const store = new FakeStore();
    store.subscription = subscription;
    store.events.set(eventId, {
      eventId,
      status: EventStatus.queued,
      subscriptionId: subscription.id,
      attempts: 0,
      createdAt: 0,
      expiresAt: Date.now() + Limits.eventRecordMs,
    });
    const asked: { seconds: number; receivedAt: number | undefined }[] = [];
    const queue: DeliveryQueue = {
      changeVisibility: async (_handle, seconds, receivedAt) => void asked.push({ seconds, receivedAt }),
      sendToDeadLetter: async () => undefined,
    };
    const handler = createDeliveryLambda({
      delivery: {
        store,
        webhook: { post: async () => ({ kind: 'response', status: 503, body: new Uint8Array() }) },
        clock: { now: Date.now, sleep: async () => undefined },
        retryDelaysS: [43_200],
      },
      queue,
      log: { info: () => undefined, warn: () => undefined, error: () => undefined },
    });
    const firstReceive = Date.now() - 2 * HOUR_MS;
    const record = {
      messageId: 'm-1',
      receiptHandle: 'rh-1',
      body: '{}',
      attributes: { ApproximateReceiveCount: '1', SentTimestamp: '0', SenderId: 'x', ApproximateFirstReceiveTimestamp: String(firstReceive) },
      messageAttributes: { eventId: { dataType: 'String', stringValue: eventId }, subscriptionId: { dataType: 'String', stringValue: subscription.id } },
      md5OfBody: '',
      eventSource: 'aws:sqs',
      eventSourceARN: 'arn:aws:sqs:us-east-1:000000000000:q',
      awsRegion: 'us-east-1',
    } as unknown as SQSRecord;
    const response = await handler({ Records: [record] });
    expect(response.batchItemFailures).toEqual([{ itemIdentifier: 'm-1' }]);
    expect(asked).toHaveLength(1);
    expect(asked[0]!.receivedAt).toBe(firstReceive);
    // The adapter turns that into what is left: 10 hours, not the 12 asked for.
    expect(visibilityTimeoutFor(asked[0]!.seconds, asked[0]!.receivedAt, Date.now())).toBeLessThanOrEqual(43_200 - 7_200);
  });
});

describe('the settings cap agrees with the clamp', () => {
  test('the Lambda settings and the stack settings have the same cap, 15 minutes under 12 hours', () => {
    expect(MAX_RETRY_DELAY_S).toBe(STACK_MAX_RETRY_DELAY_S);
    expect(MAX_RETRY_DELAY_S).toBe(MAX_VISIBILITY_TIMEOUT_S - 900);
    // The room left covers the receive-to-invoke allowance and a whole delivery run.
    expect(MAX_VISIBILITY_TIMEOUT_S - MAX_RETRY_DELAY_S).toBeGreaterThan(RECEIVE_BEFORE_INVOKE_ALLOWANCE_S + 15);
  });

  test('LOCAL-12: DMDOT_RETRY_DELAYS accepts the cap and refuses 43,200 with a message naming the limit', () => {
    expect(parseRetryDelays(String(MAX_RETRY_DELAY_S))).toEqual([MAX_RETRY_DELAY_S]);
    expect(() => parseRetryDelays('43200')).toThrow(SettingsError);
    expect(() => parseRetryDelays('43200')).toThrow(/0\.\.42300 .*12 h from the receive/);
  });
});
