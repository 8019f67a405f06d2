/**
 * The Delivery Lambda writes one embedded-metric-format line per record decision
 * (lambda/metrics.ts): the outcome as a dimension, the attempt number when the decision has one,
 * the worker's time on the record and, for a delivery, the latency from the enqueue (SQS
 * SentTimestamp). In-memory store, scripted webhook, recording queue; lines collected from the
 * emitter's sink.
 */
import type { SQSRecord } from 'aws-lambda';
import { EventStatus, Limits } from '../../../lambda/core/protocol';
import { createDeliveryLambda, type DeliveryQueue } from '../../../lambda/handlers/delivery-lambda';
import { deliveryLambdaFromEnvironment } from '../../support/lambda-environment';
import type { Logger } from '../../../lambda/log';
import { createMetrics, DimensionName, MetricName } from '../../../lambda/metrics';
import type { EventRecord, Store, SubscriptionRecord, WebhookClient } from '../../../lambda/ports';

const silentLog: Logger = { info: () => undefined, warn: () => undefined, error: () => undefined };
const SUB_ID = `sub_${'c'.repeat(32)}`;
const NOW = 1_764_500_000_000;
const eventIdOf = (n: number) => `evt_${n.toString(16).padStart(32, '0')}`;

function memoryStore(options: { failReads?: boolean; subscriptionId?: string } = {}) {
  const subscription: SubscriptionRecord = {
    id: options.subscriptionId ?? SUB_ID,
    url: 'https://dot.example/hook',
    name: 'message.created',
    secret: `whsec_${Buffer.alloc(32, 2).toString('base64')}`,
    principal: 'p',
    createdAt: NOW,
    refreshedAt: NOW,
    expiresAt: NOW + Limits.ttlDefaultMs,
  };
  const events = new Map<string, EventRecord>();
  const store = {
    add(eventId: string, patch: Partial<EventRecord> = {}) {
      events.set(eventId, {
        eventId,
        status: EventStatus.queued,
        subscriptionId: SUB_ID,
        attempts: 0,
        createdAt: NOW,
        expiresAt: NOW + Limits.eventRecordMs,
        ...patch,
      });
    },
    getSubscription: async () => subscription,
    getEvent: async (id: string) => {
      if (options.failReads) throw new Error('ProvisionedThroughputExceededException');
      return events.get(id);
    },
    updateEvent: async (id: string, patch: Partial<EventRecord>) => {
      const event = events.get(id);
      if (event) Object.assign(event, patch);
      return true;
    },
    deleteSubscription: async () => true,
    recordDeliveryOutcome: async () => undefined,
  };
  return store as unknown as typeof store & Store;
}

const queue: DeliveryQueue = { changeVisibility: async () => undefined, sendToDeadLetter: async () => undefined };
const respond = (status: number): WebhookClient => ({ post: async () => ({ kind: 'response', status, body: new Uint8Array() }) });

function record(n: number, options: { sentAt?: number; receives?: number; attributes?: Record<string, string> } = {}): SQSRecord {
  const attributes = options.attributes ?? { eventId: eventIdOf(n), subscriptionId: SUB_ID };
  return {
    messageId: `m-${n}`,
    receiptHandle: `rh-${n}`,
    body: `{"eventId":"${eventIdOf(n)}"}`,
    attributes: {
      ApproximateReceiveCount: String(options.receives ?? 1),
      SentTimestamp: String(options.sentAt ?? NOW - 1_500),
      SenderId: 'x',
      ApproximateFirstReceiveTimestamp: String(NOW),
    },
    messageAttributes: Object.fromEntries(Object.entries(attributes).map(([k, v]) => [k, { dataType: 'String', stringValue: v }])),
    md5OfBody: '',
    eventSource: 'aws:sqs',
    eventSourceARN: 'arn:aws:sqs:us-east-1:000000000000:q',
    awsRegion: 'us-east-1',
  };
}

function instrumented(store: Store, webhook: WebhookClient) {
  const lines: string[] = [];
  const lambda = createDeliveryLambda({
    delivery: { store, webhook, clock: { now: () => NOW, sleep: async () => undefined }, retryDelaysS: [1, 4] },
    queue,
    log: silentLog,
    metrics: createMetrics({ sink: (line) => lines.push(line), clock: () => NOW }),
  });
  const docs = () => lines.map((l) => JSON.parse(l) as Record<string, unknown>);
  return { lambda, docs };
}

test('delivered: outcome, attempt 1, worker time, and the latency from the enqueue (SentTimestamp)', async () => {
  const store = memoryStore();
  store.add(eventIdOf(1));
  const { lambda, docs } = instrumented(store, respond(204));
  await lambda({ Records: [record(1, { sentAt: NOW - 1_500 })] });
  expect(docs()).toHaveLength(1);
  const [doc] = docs();
  expect(doc).toMatchObject({
    [DimensionName.outcome]: 'delivered',
    [DimensionName.via]: 'worker',
    [MetricName.deliveries]: 1,
    [MetricName.deliveryLatency]: 1_500,
  });
  expect(doc?.[MetricName.deliveryDuration]).toEqual(expect.any(Number));
});

test.each([
  ['a transient failure', 503, 'retry', 1],
  ['a permanent failure', 404, 'dead_letter', 1],
])('%s: outcome %s with its attempt, and no delivery latency', async (_name, status, outcome, attempt) => {
  const store = memoryStore();
  store.add(eventIdOf(2));
  const { lambda, docs } = instrumented(store, respond(status));
  await lambda({ Records: [record(2)] });
  expect(docs()).toEqual([expect.objectContaining({ Outcome: outcome, DeliveryAttempt: attempt })]);
  expect(docs()[0]).not.toHaveProperty(MetricName.deliveryLatency);
});

test('already final, dropped and malformed records are counted by outcome too', async () => {
  const store = memoryStore();
  store.add(eventIdOf(3), { status: EventStatus.delivered, attempts: 1 });
  const webhook = { post: jest.fn() };
  const { lambda, docs } = instrumented(store, webhook);
  await lambda({ Records: [record(3), record(4, { attributes: {} })] });
  const other = memoryStore({ subscriptionId: `sub_${'d'.repeat(32)}` });
  other.add(eventIdOf(5));
  const second = instrumented(other, webhook);
  await second.lambda({ Records: [record(5)] });
  expect(
    docs()
      .map((d) => d.Outcome)
      .sort(),
  ).toEqual(['already_final', 'malformed']);
  expect(second.docs().map((d) => d.Outcome)).toEqual(['dropped']);
  expect(webhook.post).not.toHaveBeenCalled();
});

test('a storage failure is a worker_error; at the receive limit it is receive_limit', async () => {
  const { lambda, docs } = instrumented(memoryStore({ failReads: true }), respond(200));
  await lambda({ Records: [record(6, { receives: 1 }), record(7, { receives: 999 })] });
  expect(
    docs()
      .map((d) => d.Outcome)
      .sort(),
  ).toEqual(['receive_limit', 'worker_error']);
});

test('a batch writes one line per record, each carrying no id, URL or secret', async () => {
  const store = memoryStore();
  for (const n of [10, 11, 12]) store.add(eventIdOf(n));
  const { lambda, docs } = instrumented(store, respond(200));
  await lambda({ Records: [record(10), record(11), record(12)] });
  expect(docs()).toHaveLength(3);
  const text = JSON.stringify(docs());
  expect(text).not.toMatch(/evt_|sub_|whsec_|dot\.example|m-1/);
});

test('deliveryLambdaFromEnvironment writes EMF only inside Lambda (AWS_LAMBDA_FUNCTION_NAME set)', async () => {
  const env = { TABLE_NAME: 't', QUEUE_URL: 'https://q', DEAD_LETTER_QUEUE_URL: 'https://dlq' };
  const clients = { dynamodb: {} as never, sqs: { send: async () => ({}) } as never };
  for (const [extra, expected] of [
    [{}, 0],
    [{ AWS_LAMBDA_FUNCTION_NAME: 'DmDot-Delivery' }, 1],
  ] as const) {
    const writes: string[] = [];
    const spy = jest.spyOn(process.stdout, 'write').mockImplementation((chunk: string | Uint8Array) => {
      writes.push(String(chunk));
      return true;
    });
    try {
      // A malformed record needs no storage: the decision is made from the record alone.
      const lambda = deliveryLambdaFromEnvironment({ ...env, ...extra }, clients, { log: silentLog, webhook: respond(200) });
      await lambda({ Records: [record(20, { attributes: {} })] });
    } finally {
      spy.mockRestore();
    }
    expect(writes.filter((w) => w.includes('"_aws"'))).toHaveLength(expected);
  }
});
