/**
 * The Delivery Lambda's handling of decisions and failures (lambda/handlers/delivery-lambda.ts)
 * with an in-memory store, a scripted webhook and a recording queue: no network. The end-to-end
 * path against fauxqs and DynamoDB Local is in test/integration/lambdas.test.ts.
 */
import type { SQSRecord } from 'aws-lambda';
import { Budgets } from '../../../lambda/core/budgets';
import { EventStatus, Limits } from '../../../lambda/core/protocol';
import { createDeliveryLambda, type DeliveryQueue } from '../../../lambda/handlers/delivery-lambda';
import type { Logger } from '../../../lambda/log';
import type { EventRecord, Store, WebhookClient, WebhookResponse } from '../../../lambda/ports';
import { FakeStore } from '../../support/fakes';

const silentLog: Logger = { info: () => undefined, warn: () => undefined, error: () => undefined };
const SUB_ID = `sub_${'b'.repeat(32)}`;
const eventIdOf = (n: number) => `evt_${n.toString(16).padStart(32, '0')}`;

/** The shared FakeStore (test/support/fakes.ts), with one live subscription and a way to add events. */
function memoryStore(options: { failReads?: boolean } = {}) {
  const now = Date.now();
  const store = new FakeStore() as FakeStore & { add(eventId: string, patch?: Partial<EventRecord>): void };
  store.subscription = {
    id: SUB_ID,
    url: 'https://dot.example/hook',
    name: 'message.created',
    secret: `whsec_${Buffer.alloc(32, 1).toString('base64')}`,
    principal: 'p',
    createdAt: now,
    refreshedAt: now,
    expiresAt: now + Limits.ttlDefaultMs,
  };
  store.add = (eventId, patch = {}) => {
    store.events.set(eventId, {
      eventId,
      status: EventStatus.queued,
      subscriptionId: SUB_ID,
      attempts: 0,
      createdAt: now,
      expiresAt: now + Limits.eventRecordMs,
      ...patch,
    });
  };
  if (options.failReads) store.failing.add('getEvent');
  return store;
}

function recordingQueue(options: { failVisibility?: boolean; failDeadLetter?: boolean } = {}) {
  const visibility: { receiptHandle: string; seconds: number }[] = [];
  const deadLetters: { body: string; attributes: Record<string, string>; reason: string }[] = [];
  const queue: DeliveryQueue = {
    changeVisibility: async (receiptHandle, seconds) => {
      if (options.failVisibility) throw new Error('sqs down');
      visibility.push({ receiptHandle, seconds });
    },
    sendToDeadLetter: async (message, reason) => {
      if (options.failDeadLetter) throw new Error('sqs down');
      deadLetters.push({ ...message, reason });
    },
  };
  return { queue, visibility, deadLetters };
}

function respond(status: number, retryAfter?: string): WebhookClient {
  return { post: async () => ({ kind: 'response', status, body: new Uint8Array(), ...(retryAfter ? { retryAfter } : {}) }) };
}

function record(n: number, overrides: { attributes?: Record<string, string>; receives?: number; body?: string } = {}): SQSRecord {
  const attributes = overrides.attributes ?? { eventId: eventIdOf(n), subscriptionId: SUB_ID };
  return {
    messageId: `m-${n}`,
    receiptHandle: `rh-${n}`,
    body: overrides.body ?? `{"eventId":"${eventIdOf(n)}"}`,
    attributes: { ApproximateReceiveCount: String(overrides.receives ?? 1), SentTimestamp: '0', SenderId: 'x', ApproximateFirstReceiveTimestamp: '0' },
    messageAttributes: Object.fromEntries(Object.entries(attributes).map(([k, v]) => [k, { dataType: 'String', stringValue: v }])),
    md5OfBody: '',
    eventSource: 'aws:sqs',
    eventSourceARN: 'arn:aws:sqs:us-east-1:000000000000:q',
    awsRegion: 'us-east-1',
  };
}

function lambdaWith(store: Store, webhook: WebhookClient, queue: DeliveryQueue, retryDelaysS = [1, 4]) {
  return createDeliveryLambda({
    delivery: { store, webhook, clock: { now: () => Date.now(), sleep: async () => undefined }, retryDelaysS },
    queue,
    log: silentLog,
  });
}

test('ARCH-6, DEL-PIPE-10, DEL-PIPE-17: retry: visibility set to the delay rounded up to whole seconds, record listed as failed', async () => {
  const store = memoryStore();
  store.add(eventIdOf(1));
  const q = recordingQueue();
  const response = await lambdaWith(store, respond(503), q.queue, [2.5, 4])({ Records: [record(1)] });
  expect(response.batchItemFailures).toEqual([{ itemIdentifier: 'm-1' }]);
  expect(q.visibility).toEqual([{ receiptHandle: 'rh-1', seconds: 3 }]);
  expect(store.events.get(eventIdOf(1))).toMatchObject({ status: EventStatus.queued, attempts: 1, lastError: 'http_5xx' });
});

test('DEL-PIPE-18: dead_letter: copy with the reason and the original attributes, then deleted', async () => {
  const store = memoryStore();
  store.add(eventIdOf(2));
  const q = recordingQueue();
  const response = await lambdaWith(store, respond(404), q.queue)({ Records: [record(2)] });
  expect(response.batchItemFailures).toEqual([]);
  expect(q.deadLetters).toEqual([{ body: `{"eventId":"${eventIdOf(2)}"}`, attributes: { eventId: eventIdOf(2), subscriptionId: SUB_ID }, reason: 'http_4xx' }]);
});

test.each([
  ['no attributes', {}],
  ['no subscriptionId', { eventId: eventIdOf(3) }],
  ['an event id that is not ours', { eventId: 'evt_../../etc', subscriptionId: SUB_ID }],
  ['a subscription id that is not ours', { eventId: eventIdOf(3), subscriptionId: 'sub_x' }],
])('malformed record (%s): DLQ with reason malformed, never sent, not retried', async (_name, attributes) => {
  const q = recordingQueue();
  const webhook = { post: jest.fn() };
  const response = await lambdaWith(memoryStore(), webhook, q.queue)({ Records: [record(3, { attributes })] });
  expect(response.batchItemFailures).toEqual([]);
  expect(q.deadLetters.map((d) => d.reason)).toEqual(['malformed']);
  expect(webhook.post).not.toHaveBeenCalled();
});

test('DEL-RUN-3: an exception (storage down) keeps the record for SQS to redeliver, with no visibility change', async () => {
  const q = recordingQueue();
  const response = await lambdaWith(memoryStore({ failReads: true }), respond(200), q.queue)({ Records: [record(4)] });
  expect(response.batchItemFailures).toEqual([{ itemIdentifier: 'm-4' }]);
  expect(q.deadLetters).toEqual([]);
  expect(q.visibility).toEqual([]);
});

test('DEL-RUN-1: on its receive limit (attempts + 4; the stack adds 5 more for SQS), a crashing record goes to the DLQ as receive_limit', async () => {
  const q = recordingQueue();
  const lambda = lambdaWith(memoryStore({ failReads: true }), respond(200), q.queue, [1, 4]);
  // Two delays: three attempts, limit 7. Receive 6 is kept for SQS; receive 7 is dead-lettered.
  expect((await lambda({ Records: [record(5, { receives: 6 })] })).batchItemFailures).toHaveLength(1);
  expect(q.deadLetters).toEqual([]);
  expect((await lambda({ Records: [record(5, { receives: 7 })] })).batchItemFailures).toEqual([]);
  expect(q.deadLetters.map((d) => d.reason)).toEqual(['receive_limit']);
});

test('DEL-RUN-1: a record received past its limit (the worker kept dying mid-attempt) is failed and dead-lettered without a POST', async () => {
  const store = memoryStore();
  store.add(eventIdOf(15));
  const webhook = { post: jest.fn() };
  const q = recordingQueue();
  // Two delays: limit 7. Receive 8 means seven receives ended without an outcome.
  const response = await lambdaWith(store, webhook, q.queue, [1, 4])({ Records: [record(15, { receives: 8 })] });
  expect(response.batchItemFailures).toEqual([]);
  expect(webhook.post).not.toHaveBeenCalled();
  expect(q.deadLetters.map((d) => d.reason)).toEqual(['receive_limit']);
  expect(store.events.get(eventIdOf(15))?.status).toBe(EventStatus.failed);
});

test('DEL-RUN-4: at the receive limit with no attempt made, a dead-letter send that fails twice still ends with a dead-letter copy', async () => {
  const store = memoryStore();
  // Deferred on every receive (a lease far ahead): no attempt was ever made.
  store.add(eventIdOf(16), { notBefore: Date.now() + 60_000 });
  const down = recordingQueue({ failDeadLetter: true });
  const first = await lambdaWith(store, respond(200), down.queue, [1, 4])({ Records: [record(16, { receives: 7 })] });
  // Both dead-letter sends failed: the record stays in SQS, its event already failed.
  expect(first.batchItemFailures).toEqual([{ itemIdentifier: 'm-16' }]);
  expect(store.events.get(eventIdOf(16))).toMatchObject({ status: EventStatus.failed, attempts: 0 });
  const up = recordingQueue();
  const second = await lambdaWith(store, respond(200), up.queue, [1, 4])({ Records: [record(16, { receives: 8 })] });
  expect(second.batchItemFailures).toEqual([]);
  expect(up.deadLetters.map((d) => d.reason)).toEqual(['receive_limit']);
});

test("DEL-RUN-5: each record decision is one `delivery` line with via=worker (the inline attempt's vocabulary), with the SQS message id", async () => {
  const store = memoryStore();
  store.add(eventIdOf(17));
  store.add(eventIdOf(18));
  const lines: { level: string; event: string; fields?: Record<string, unknown> }[] = [];
  const log: Logger = {
    info: (event, fields) => void lines.push({ level: 'info', event, ...(fields ? { fields } : {}) }),
    warn: (event, fields) => void lines.push({ level: 'warn', event, ...(fields ? { fields } : {}) }),
    error: (event, fields) => void lines.push({ level: 'error', event, ...(fields ? { fields } : {}) }),
  };
  const answers: Record<string, number> = { [eventIdOf(17)]: 200, [eventIdOf(18)]: 404 };
  const webhook: WebhookClient = { post: async (request) => ({ kind: 'response', status: answers[request.headers['webhook-id']!]!, body: new Uint8Array() }) };
  const lambda = createDeliveryLambda({
    delivery: { store, webhook, clock: { now: () => Date.now(), sleep: async () => undefined }, retryDelaysS: [1, 4] },
    queue: recordingQueue().queue,
    log,
  });
  await lambda({ Records: [record(17), record(18)] });
  expect(lines).toEqual(
    expect.arrayContaining([
      { level: 'info', event: 'delivery', fields: { eventId: eventIdOf(17), via: 'worker', action: 'delivered', attempt: 1, messageId: 'm-17', receives: 1 } },
      {
        level: 'warn',
        event: 'delivery',
        fields: { eventId: eventIdOf(18), via: 'worker', action: 'failed', attempt: 1, reason: 'http_4xx', messageId: 'm-18', receives: 1 },
      },
    ]),
  );
  expect(lines).toHaveLength(2);
});

test('DEL-RUN-1: the receive limit holds on the retry path too: the event is marked failed and dead-lettered with a reason', async () => {
  // Before: only a thrown error consulted the limit, so a retried record was kept until SQS's own
  // redrive took it with no reason, leaving its event queued for ever.
  const store = memoryStore();
  store.add(eventIdOf(11), { attempts: 1 });
  const q = recordingQueue();
  const response = await lambdaWith(store, respond(503), q.queue, [1, 4])({ Records: [record(11, { receives: 7 })] });
  expect(response.batchItemFailures).toEqual([]);
  expect(q.visibility).toEqual([]);
  expect(q.deadLetters.map((d) => d.reason)).toEqual(['receive_limit']);
  expect(store.events.get(eventIdOf(11))?.status).toBe(EventStatus.failed);
});

test('DEL-PIPE-7: a lease held by the inline attempt defers the record without a POST or a counted attempt', async () => {
  const store = memoryStore();
  store.add(eventIdOf(12), { notBefore: Date.now() + 2_500 });
  const webhook = { post: jest.fn() };
  const q = recordingQueue();
  const response = await lambdaWith(store, webhook, q.queue)({ Records: [record(12)] });
  expect(response.batchItemFailures).toEqual([{ itemIdentifier: 'm-12' }]);
  expect(q.visibility).toEqual([{ receiptHandle: 'rh-12', seconds: 3 }]);
  expect(webhook.post).not.toHaveBeenCalled();
  expect(store.events.get(eventIdOf(12))).toMatchObject({ status: EventStatus.queued, attempts: 0 });
});

test('DEL-RUN-2: a lease that ends within a second is waited out in place, then the attempt is made', async () => {
  const store = memoryStore();
  store.add(eventIdOf(13), { notBefore: Date.now() + 300 });
  const slept: number[] = [];
  const q = recordingQueue();
  const lambda = createDeliveryLambda({
    delivery: {
      store,
      webhook: respond(200),
      clock: { now: () => Date.now() + slept.reduce((a, b) => a + b, 0), sleep: async (ms) => void slept.push(ms) },
      retryDelaysS: [1, 4],
    },
    queue: q.queue,
    log: silentLog,
  });
  expect((await lambda({ Records: [record(13)] })).batchItemFailures).toEqual([]);
  expect(slept).toHaveLength(1);
  expect(slept[0]).toBeLessThanOrEqual(300);
  expect(store.events.get(eventIdOf(13))).toMatchObject({ status: EventStatus.delivered, attempts: 1 });
});

test('DEL-LEASE-2: three copies of one job in one batch make one POST (the lease before it), one outcome, nothing dead-lettered', async () => {
  const store = memoryStore();
  store.add(eventIdOf(14));
  let posts = 0;
  const q = recordingQueue();
  const webhook: WebhookClient = {
    post: async () => {
      posts++;
      // In flight until both other copies have met the lease and been kept (or, were the lease
      // broken, one of them POSTs too): the fact, where a fixed pause only made it likely.
      while (q.visibility.length < 2 && posts === 1) await new Promise((resolve) => setImmediate(resolve));
      return { kind: 'response', status: 200, body: new Uint8Array() };
    },
  };
  const copy = (suffix: string) => ({ ...record(14), messageId: `m-14${suffix}`, receiptHandle: `rh-14${suffix}` });
  const response = await lambdaWith(store, webhook, q.queue)({ Records: [copy('a'), copy('b'), copy('c')] });
  expect(posts).toBe(1);
  expect(q.deadLetters).toEqual([]);
  expect(store.events.get(eventIdOf(14))).toMatchObject({ status: EventStatus.delivered, attempts: 1, lastHttpStatus: 200 });
  // The copies that met the lease are kept until it runs out; then they find the event delivered.
  expect(response.batchItemFailures).toHaveLength(2);
  expect(q.visibility.map((v) => v.seconds)).toEqual([Math.ceil(Budgets.workerLeaseMs / 1000), Math.ceil(Budgets.workerLeaseMs / 1000)]);
});

test('a failed visibility change keeps the record (it returns after the queue default instead)', async () => {
  const store = memoryStore();
  store.add(eventIdOf(6));
  const response = await lambdaWith(store, respond(503), recordingQueue({ failVisibility: true }).queue)({ Records: [record(6)] });
  expect(response.batchItemFailures).toEqual([{ itemIdentifier: 'm-6' }]);
});

test('a failed dead-letter send keeps the record; the redelivery dead-letters it without a second POST', async () => {
  const store = memoryStore();
  store.add(eventIdOf(7));
  const webhook = { post: jest.fn(async (): Promise<WebhookResponse> => ({ kind: 'response', status: 410, body: new Uint8Array() })) };
  expect((await lambdaWith(store, webhook, recordingQueue({ failDeadLetter: true }).queue)({ Records: [record(7)] })).batchItemFailures).toHaveLength(1);
  const q = recordingQueue();
  expect((await lambdaWith(store, webhook, q.queue)({ Records: [record(7, { receives: 2 })] })).batchItemFailures).toEqual([]);
  expect(webhook.post).toHaveBeenCalledTimes(1);
  expect(q.deadLetters.map((d) => d.reason)).toEqual(['http_4xx']);
});

test('DEL-RUN-4: a job of an event that failed with no attempt (its enqueue answer was lost) becomes its dead-letter copy', async () => {
  const store = memoryStore();
  store.add(eventIdOf(8), { status: EventStatus.failed, attempts: 0 });
  const q = recordingQueue();
  const webhook = { post: jest.fn() };
  expect((await lambdaWith(store, webhook, q.queue)({ Records: [record(8)] })).batchItemFailures).toEqual([]);
  expect(q.deadLetters.map((d) => d.reason)).toEqual(['receive_limit']);
  expect(webhook.post).not.toHaveBeenCalled();
});

test('DEL-PIPE-10: records of a batch are processed concurrently', async () => {
  const store = memoryStore();
  store.add(eventIdOf(9));
  store.add(eventIdOf(10));
  // Each POST waits until both are in flight: a sequential worker would never get there.
  let arrived = 0;
  let release: () => void = () => undefined;
  const bothInFlight = new Promise<void>((resolve) => (release = resolve));
  const webhook: WebhookClient = {
    post: async () => {
      if (++arrived === 2) release();
      let timer: NodeJS.Timeout | undefined;
      const stuck = new Promise((_, reject) => (timer = setTimeout(() => reject(new Error('records were processed one at a time')), 5_000)));
      try {
        await Promise.race([bothInFlight, stuck]);
      } finally {
        clearTimeout(timer);
      }
      return { kind: 'response', status: 200, body: new Uint8Array() };
    },
  };
  const response = await lambdaWith(store, webhook, recordingQueue().queue)({ Records: [record(9), record(10)] });
  expect(response.batchItemFailures).toEqual([]);
  expect(store.events.get(eventIdOf(9))?.status).toBe(EventStatus.delivered);
  expect(store.events.get(eventIdOf(10))?.status).toBe(EventStatus.delivered);
});

test('an empty batch is an empty answer', async () => {
  expect(await lambdaWith(memoryStore(), respond(200), recordingQueue().queue)({ Records: [] })).toEqual({ batchItemFailures: [] });
});

test('redrive: a record carrying the DLQ reason attribute gives its failed event a new round', async () => {
  const store = memoryStore();
  store.add(eventIdOf(9));
  store.events.set(eventIdOf(9), { ...store.events.get(eventIdOf(9))!, status: EventStatus.failed, attempts: 3, lastError: 'http_4xx' });
  const q = recordingQueue();
  const redriven = record(9, { attributes: { eventId: eventIdOf(9), subscriptionId: SUB_ID, reason: 'http_4xx' } });
  const response = await lambdaWith(store, respond(200), q.queue)({ Records: [redriven] });
  expect(response.batchItemFailures).toEqual([]);
  expect(q.deadLetters).toEqual([]);
  expect(store.events.get(eventIdOf(9))).toMatchObject({ status: EventStatus.delivered, attempts: 1 });
});

test('no redrive mark: the same failed event is not sent again (it is only re-dead-lettered)', async () => {
  const store = memoryStore();
  store.add(eventIdOf(10));
  store.events.set(eventIdOf(10), { ...store.events.get(eventIdOf(10))!, status: EventStatus.failed, attempts: 3, lastError: 'http_4xx' });
  let posts = 0;
  const q = recordingQueue();
  await lambdaWith(store, { post: async () => ((posts += 1), { kind: 'response', status: 200, body: new Uint8Array() }) }, q.queue)({ Records: [record(10)] });
  expect(posts).toBe(0);
  expect(store.events.get(eventIdOf(10))).toMatchObject({ status: EventStatus.failed });
});
