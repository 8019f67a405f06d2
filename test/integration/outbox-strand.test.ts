/**
 * Nothing strands on AWS (docs/contract/delivery.md, DEL-OUT-2 to DEL-OUT-5): the outbox's two
 * writes under one fault each, and the reconciler over the sparse index of queued records. The MCP
 * Lambda runs in-process, wired from its environment with dm-dot's own SDK client options, against
 * DynamoDB Local and fauxqs behind the fault proxy (test/support/aws-fault-proxy.ts); the
 * reconciler runs the same way, its clock moved forward where a test needs a record to be old.
 *
 * What is pinned, one fault a test:
 * - SendMessage stalled on every attempt: the answer comes within 5 s and says "not sent" only
 *   because the record was marked failed in the time the outbox kept for it (or, when a starved
 *   DynamoDB Local let that mark outrun the deadline, "may still be delivered", and the mark lands);
 * - the event's PutItem applied and its answer lost: the SDK's retry meets its own record, and the
 *   caller gets the event id (delivered or queued), never "nothing was sent";
 * - every PutItem answer lost: "nothing was sent", and a `failed` record stands in its place;
 * - a record left `queued` with no job (a function that died between its writes, a job SQS moved
 *   to the dead-letter queue itself) is requeued once, then failed with a dead letter, by
 *   compare-and-set, and counted in RecordsRepaired;
 * - the reconciler never fights a worker: a requeued record whose worker is still POSTing when
 *   the next run comes ends `delivered` with one POST, and a 2xx wins over a `stranded` failure
 *   whose dead letter, redriven, makes no second POST;
 * - a run that could not settle a record writes ReconcileErrors and fails;
 * - the index holds queued records only, keys only.
 *
 * Timing: only the contract's 5 s is asserted.
 */
import { randomBytes } from 'node:crypto';
import { DescribeTableCommand } from '@aws-sdk/client-dynamodb';
import { QueuedIndex } from '../../lambda/core/store/items';
import { createGuardedWebhookClient } from '../../lambda/adapters/guarded-https';
import { QueueAttributes, SqsQueue } from '../../lambda/adapters/sqs-queue';
import { deliveryLambdaSettings } from '../../lambda/config/settings';
import { buildEvent } from '../../lambda/core/messages';
import { EventStatus, Limits } from '../../lambda/core/protocol';
import { strandedAfterMs } from '../../lambda/core/reconcile';
import { reconcilerLambdaFromSettings } from '../../lambda/handlers/reconciler-lambda';
import { createRepairMetrics } from '../../lambda/metrics';
import type { EventRecord, WebhookClient } from '../../lambda/ports';
import type { Call } from '../support/aws-fault-proxy';
import { sqsEventOf } from '../support/event-source';
import { abandonedUpdates, startAwsWorld, subscribeForSetUp, timed, unsentMarkShortfall, type AwsWorld } from '../support/aws-world';
import { START_HOOK_MS } from '../support/processes';

const TABLE = 'dm-dot-outbox-strand';
const API_KEY = `os-${randomBytes(24).toString('base64url')}`;
const RETRY_DELAYS = [1, 1];

let world: AwsWorld<'dynamodb' | 'sqs'>;
let subscriptionId: string;

/** The reconciler on the proxies, its clock `aheadMs` in the future; its EMF lines land in `metricLines`. */
function reconciler(aheadMs = 0, metricLines: string[] = []) {
  return reconcilerLambdaFromSettings(deliveryLambdaSettings(world.env()), world.sdkClients(), {
    log: world.logger(),
    metrics: createRepairMetrics({ sink: (line) => metricLines.push(line) }),
    clock: { now: () => Date.now() + aheadMs, sleep: (ms) => new Promise((resolve) => setTimeout(resolve, ms)) },
  });
}

/** Every record of the table that is `queued` (read past the proxies). */
async function queuedRecords(): Promise<EventRecord[]> {
  return world.store.listEvents(Date.now(), { status: EventStatus.queued });
}

/** True when a call is the PutItem of an event record. */
function isEventPut(call: Call): boolean {
  const item = (call.body as { Item?: { pk?: { S?: string } } } | undefined)?.Item;
  return call.action === 'PutItem' && item?.pk?.S?.startsWith('EVENT#') === true;
}

/** DEL-OUT-2's end state (aws-world.ts `unsentMarkShortfall`), and nothing queued or POSTed. */
async function expectMarkedFailed(eventId: string, compensated: boolean, abandonedBefore: number): Promise<void> {
  expect(await unsentMarkShortfall(world, eventId, !compensated, abandonedBefore)).toBeUndefined();
  expect(await queuedRecords()).toEqual([]);
  expect(world.receiver.events).toHaveLength(0);
}

/** A queued record with no job, `ageMs` old: what a function that died between its two writes leaves. */
async function strandedRecord(ageMs: number, message = 'stranded'): Promise<EventRecord> {
  const eventId = `evt_${randomBytes(16).toString('hex')}`;
  const createdAt = Date.now() - ageMs;
  const record: EventRecord = {
    eventId,
    status: EventStatus.queued,
    subscriptionId,
    attempts: 0,
    createdAt,
    expiresAt: createdAt + Limits.eventRecordMs,
    notBefore: createdAt,
    body: buildEvent(eventId, message, createdAt),
  };
  await world.store.putEvent(record);
  return record;
}

beforeAll(async () => {
  world = await startAwsWorld({
    table: TABLE,
    apiKey: API_KEY,
    env: { DMDOT_RETRY_DELAYS: RETRY_DELAYS.join(',') },
    secrets: { verifySignatures: false },
    proxies: ['dynamodb', 'sqs'],
  });
  subscriptionId = await subscribeForSetUp(world, world.receiver.url);
  expect(subscriptionId).toMatch(/^sub_/);
}, START_HOOK_MS);

afterEach(async () => {
  world.resetProxies();
  world.receiver.reset();
  await world.fauxqs.purge();
  // Each test starts with no queued record left by another.
  for (const record of await queuedRecords()) await world.store.updateEvent(record.eventId, { status: EventStatus.dropped });
  expect(world.logLines.join('\n')).not.toContain(API_KEY);
});

afterAll(() => world?.stop());

describe('the outbox under one fault', () => {
  test('DEL-OUT-2: SendMessage stalled on every attempt: answered within 5 s, "not sent" with the event id, and the record is failed', async () => {
    const gateway = world.mcpGateway();
    world.proxies.sqs.setRule((call) => (call.action === 'SendMessage' ? 'stall' : 'pass'));
    const abandonedBefore = abandonedUpdates(world);
    const { value, ms, cpuWaitMs } = await timed(() => gateway.postMessage('queue stalled'));
    expect(ms).toBeLessThan(Limits.requestMs + cpuWaitMs);
    expect(value.status).toBe(503);
    const eventId = value.body.error?.eventId;
    expect(eventId).toMatch(/^evt_/);
    // Two stalled attempts fit; the compensation had time of its own.
    expect(world.proxies.sqs.counts()['SendMessage:stall']).toBeGreaterThanOrEqual(2);
    const compensated = !value.body.error?.message?.includes('may still be delivered');
    expect(value.body.error?.message).toContain(compensated ? 'was not sent' : 'it may still be delivered');
    await expectMarkedFailed(eventId!, compensated, abandonedBefore);
  }, 20_000);

  test('DEL-OUT-2: SendMessage stalled on every attempt, send_to_dot: an error result within 5 s whose record is failed', async () => {
    const gateway = world.mcpGateway();
    world.proxies.sqs.setRule((call) => (call.action === 'SendMessage' ? 'stall' : 'pass'));
    const abandonedBefore = abandonedUpdates(world);
    const { value, ms, cpuWaitMs } = await timed(() => gateway.sendToDot('queue stalled (tool)'));
    expect(ms).toBeLessThan(Limits.requestMs + cpuWaitMs);
    expect(value.body.result?.isError).toBe(true);
    const eventId = value.body.result?.structuredContent?.eventId;
    expect(eventId).toMatch(/^evt_/);
    // The undecided answer's status is `queued` ("may still be delivered"), the compensated one's `failed`.
    const compensated = value.body.result?.structuredContent?.status !== 'queued';
    expect(value.body.result?.structuredContent?.status).toBe(compensated ? 'failed' : 'queued');
    await expectMarkedFailed(eventId!, compensated, abandonedBefore);
  }, 20_000);

  test("DEL-OUT-3, STORE-IDX-2: the event's PutItem applied and its answer lost: the caller gets the event id, and the event is delivered", async () => {
    const gateway = world.mcpGateway();
    let lost = 0;
    world.proxies.dynamodb.setRule((call) => (isEventPut(call) && lost++ === 0 ? 'lost' : 'pass'));
    const { value, ms, cpuWaitMs } = await timed(() => gateway.postMessage('put answer lost'));
    expect(ms).toBeLessThan(Limits.requestMs + cpuWaitMs);
    expect(lost).toBe(2);
    // The SDK's retry met its own record: treated as written, so the job went out.
    expect([200, 202]).toContain(value.status);
    const eventId = value.body.eventId;
    expect(eventId).toMatch(/^evt_/);
    const record = await world.store.getEvent(eventId!, Date.now());
    if (record?.status === EventStatus.queued) {
      // Not delivered inline (the lost answer used the window): its job is in the queue.
      const jobs = await world.fauxqs.receive(world.fauxqs.queueUrl, { timeoutMs: 5_000 });
      expect(jobs.map((job) => job.MessageAttributes?.[QueueAttributes.eventId]?.StringValue)).toContain(eventId);
    } else {
      expect(record?.status).toBe(EventStatus.delivered);
    }
  }, 20_000);

  test('DEL-OUT-3: every PutItem answer of the event lost: "nothing was sent", and a failed record stands in its place', async () => {
    const gateway = world.mcpGateway();
    const puts: string[] = [];
    world.proxies.dynamodb.setRule((call) => {
      if (!isEventPut(call)) return 'pass';
      puts.push(String((call.body as { Item: { pk: { S: string } } }).Item.pk.S));
      return 'lost';
    });
    const sentBefore = world.proxies.sqs.counts()['SendMessage:pass'] ?? 0;
    const { value, ms, cpuWaitMs } = await timed(() => gateway.postMessage('every put answer lost'));
    expect(ms).toBeLessThan(Limits.requestMs + cpuWaitMs);
    expect(value.status).toBe(503);
    expect(value.body.error?.code).toBe('storage_unavailable');
    expect(value.body.error?.message).toContain('nothing was sent');
    const eventId = puts[0]!.slice('EVENT#'.length);
    expect((await world.store.getEvent(eventId, Date.now()))?.status).toBe(EventStatus.failed);
    expect(await queuedRecords()).toEqual([]);
    expect(world.proxies.sqs.counts()['SendMessage:pass'] ?? 0).toBe(sentBefore);
  }, 20_000);
});

describe('the reconciler', () => {
  const staleMs = strandedAfterMs(RETRY_DELAYS);

  test('DEL-OUT-4: a record queued with no job is requeued once by compare-and-set, then failed with a stranded dead letter, and RecordsRepaired counts both', async () => {
    const record = await strandedRecord(staleMs + 60_000, 'died between its writes');
    const fresh = await strandedRecord(0, 'just queued');
    const metrics: string[] = [];

    const first = await reconciler(0, metrics)();
    expect(first).toMatchObject({ requeued: 1, failed: 0 });
    const jobs = await world.fauxqs.receive(world.fauxqs.queueUrl, { timeoutMs: 5_000 });
    expect(jobs).toHaveLength(1);
    expect(jobs[0]!.MessageAttributes?.[QueueAttributes.eventId]?.StringValue).toBe(record.eventId);
    expect(jobs[0]!.Body).toBe(record.body);
    const requeued = await world.store.getEvent(record.eventId, Date.now());
    expect(requeued).toMatchObject({ status: EventStatus.queued, repairedAt: expect.any(Number) });
    // Once: a second run right after finds nothing stale (the requeue restarted its time).
    expect(await reconciler(0)()).toMatchObject({ requeued: 0, failed: 0 });
    await world.fauxqs.purge();

    // The job is lost again (SQS moved it to the dead-letter queue, say): one bound later it is failed.
    const second = await reconciler(staleMs + 60_000, metrics)();
    expect(second).toMatchObject({ failed: 1 });
    const failed = await world.store.getEvent(record.eventId, Date.now());
    expect(failed?.status).toBe(EventStatus.failed);
    expect(failed).not.toHaveProperty('repairedAt');
    const letters = await world.fauxqs.receive(world.fauxqs.deadLetterQueueUrl, { timeoutMs: 5_000 });
    const letter = letters.find((m) => m.MessageAttributes?.[QueueAttributes.eventId]?.StringValue === record.eventId);
    expect(letter?.MessageAttributes?.[QueueAttributes.reason]?.StringValue).toBe('stranded');
    expect(letter?.Body).toBe(record.body);
    // The fresh record, as old as the moved clock makes it, was requeued in that run: not failed.
    expect((await world.store.getEvent(fresh.eventId, Date.now()))?.status).toBe(EventStatus.queued);

    const repaired = metrics.map((line) => JSON.parse(line) as Record<string, unknown>).filter((m) => 'RecordsRepaired' in m);
    expect(repaired.every((m) => JSON.stringify(m._aws).includes('"Namespace":"DmDot"') && JSON.stringify(m._aws).includes('RecordsRepaired'))).toBe(true);
    expect(repaired).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ Action: 'requeued', RecordsRepaired: 1 }),
        expect.objectContaining({ Action: 'failed', RecordsRepaired: 1 }),
      ]),
    );
  }, 30_000);

  /**
   * A record requeued one bound ago (the reconciler's clock set back) whose new job a worker is
   * working now: its POST reached the dot, and the dot's 200 is held until `release()`.
   */
  async function workedAfterRequeue(message: string) {
    const staleAgo = staleMs + 60_000;
    const record = await strandedRecord(2 * staleAgo, message);
    expect(await reconciler(-staleAgo)()).toMatchObject({ requeued: 1 });
    const jobs = await world.fauxqs.receive(world.fauxqs.queueUrl, { timeoutMs: 5_000 });
    expect(jobs).toHaveLength(1);
    let reached!: () => void;
    const posted = new Promise<void>((resolve) => (reached = resolve));
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    const guarded = createGuardedWebhookClient({ allowLoopback: true });
    const slowDot: WebhookClient = {
      post: async (request) => {
        const response = await guarded.post(request);
        reached();
        await held;
        return response;
      },
    };
    const batch = world.deliveryLambda({ overrides: { webhook: slowDot } })(sqsEventOf(jobs));
    await posted;
    return { record, batch, release };
  }

  const deadLetterDepth = () =>
    new SqsQueue({ client: world.fauxqs.client, queueUrl: world.fauxqs.queueUrl, deadLetterQueueUrl: world.fauxqs.deadLetterQueueUrl }).deadLetterDepth();

  test('DEL-OUT-6: a requeued record whose worker is POSTing to a slow dot when the next run comes ends delivered, with one POST and no dead letter', async () => {
    const { record, batch, release } = await workedAfterRequeue('requeued, then worked slowly');
    const metrics: string[] = [];
    // The next run, on time: the record was requeued a bound ago, but its lease is live.
    const run = await reconciler(0, metrics)();
    release();
    expect((await batch).batchItemFailures).toEqual([]);
    expect(run).toMatchObject({ requeued: 0, failed: 0, errors: 0 });
    expect(await world.store.getEvent(record.eventId, Date.now())).toMatchObject({ status: EventStatus.delivered, attempts: 1 });
    expect(world.receiver.events).toHaveLength(1);
    expect(metrics.map((line) => JSON.parse(line) as Record<string, unknown>)).toContainEqual(expect.objectContaining({ DeadLetters: 0 }));
    expect(await deadLetterDepth()).toBe(0);
    expect(world.logLines.join('\n')).not.toMatch(/"action":"done","status":"duplicate"/);
  }, 30_000);

  test('DEL-OUT-6, DEL-OUT-7: a run that sees the lease long over fails the record as stranded; the 2xx wins, and the redriven letter makes no second POST', async () => {
    const { record, batch, release } = await workedAfterRequeue('requeued, then worked past its lease');
    // A run whose clock is a bound ahead (as for a POST that outlasted its lease by that much):
    // its compare-and-set expects the lease it read, the worker's own, so it lands.
    expect(await reconciler(staleMs + 60_000)()).toMatchObject({ failed: 1 });
    expect(await world.store.getEvent(record.eventId, Date.now())).toMatchObject({ status: EventStatus.failed });
    release();
    expect((await batch).batchItemFailures).toEqual([]);
    expect(await world.store.getEvent(record.eventId, Date.now())).toMatchObject({ status: EventStatus.delivered, attempts: 1 });
    const letters = await world.fauxqs.receive(world.fauxqs.deadLetterQueueUrl, { timeoutMs: 5_000 });
    expect(letters.map((m) => m.MessageAttributes?.[QueueAttributes.reason]?.StringValue)).toEqual(['stranded']);
    // The runbook's redrive: the copy finds its event delivered and is done with, without a POST.
    expect((await world.deliveryLambda()(sqsEventOf(letters))).batchItemFailures).toEqual([]);
    expect(world.receiver.events).toHaveLength(1);
  }, 30_000);

  test('DEL-OUT-8: a run that could not settle a record writes ReconcileErrors and fails; a clean run writes 0', async () => {
    const record = await strandedRecord(staleMs + 60_000, 'SendMessage down');
    world.proxies.sqs.setRule((call) => (call.action === 'SendMessage' ? 'error500' : 'pass'));
    const metrics: string[] = [];
    await expect(reconciler(0, metrics)()).rejects.toMatchObject({ name: 'ReconcileRunError', report: expect.objectContaining({ found: 1, errors: 1 }) });
    world.resetProxies();
    const lines = metrics.map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(lines).toContainEqual(expect.objectContaining({ ReconcileErrors: 1 }));
    expect((await world.store.getEvent(record.eventId, Date.now()))?.status).toBe(EventStatus.queued);
    const clean: string[] = [];
    expect(await reconciler(0, clean)()).toMatchObject({ requeued: 1, errors: 0 });
    expect(clean.map((line) => JSON.parse(line) as Record<string, unknown>)).toContainEqual(expect.objectContaining({ ReconcileErrors: 0 }));
  }, 30_000);

  test('DEL-OUT-4: a record settled meanwhile is left alone: the reconciler changes nothing it did not read', async () => {
    const record = await strandedRecord(staleMs + 60_000, 'delivered meanwhile');
    await world.store.updateEvent(
      record.eventId,
      { status: EventStatus.delivered, attempts: 1, deliveredAt: Date.now(), body: null },
      { status: EventStatus.queued },
    );
    expect(await reconciler()()).toMatchObject({ found: 0, requeued: 0, failed: 0 });
    expect((await world.store.getEvent(record.eventId, Date.now()))?.status).toBe(EventStatus.delivered);
  }, 30_000);

  test('DEL-OUT-4: a record whose attempts are used up is failed, not requeued', async () => {
    const record = await strandedRecord(staleMs + 60_000, 'out of attempts');
    await world.store.updateEvent(record.eventId, { attempts: RETRY_DELAYS.length + 1 }, { status: EventStatus.queued });
    expect(await reconciler()()).toMatchObject({ requeued: 0, failed: 1 });
    expect((await world.store.getEvent(record.eventId, Date.now()))?.status).toBe(EventStatus.failed);
  }, 30_000);

  test('DEL-OUT-2: SendMessage stalled and the compensation applied but answered 500: read back, "not sent" is true', async () => {
    const gateway = world.mcpGateway();
    world.proxies.sqs.setRule((call) => (call.action === 'SendMessage' ? 'stall' : 'pass'));
    // The first queued -> failed write is applied and answered 500; the SDK's retry meets it.
    let updates = 0;
    world.proxies.dynamodb.setRule((call) => (call.action === 'UpdateItem' && updates++ === 0 ? 'applied500' : 'pass'));
    const { value, ms, cpuWaitMs } = await timed(() => gateway.postMessage('mark lost'));
    expect(ms).toBeLessThan(Limits.requestMs + cpuWaitMs);
    expect(value.status).toBe(503);
    expect(value.body.error?.message).toContain('was not sent');
    expect(updates).toBeGreaterThanOrEqual(2);
    expect((await world.store.getEvent(value.body.error!.eventId!, Date.now()))?.status).toBe(EventStatus.failed);
    expect(await queuedRecords()).toEqual([]);
  }, 20_000);

  test('DEL-OUT-2 + DEL-OUT-4: SendMessage stalled and the compensation unanswered too: "may still be delivered", and the reconciler settles the record', async () => {
    const gateway = world.mcpGateway();
    world.proxies.sqs.setRule((call) => (call.action === 'SendMessage' ? 'stall' : 'pass'));
    // The compensating queued -> failed write gets no answer either: two faults. It could have
    // landed (a lost answer looks the same), so nothing may be promised.
    world.proxies.dynamodb.setRule((call) => (call.action === 'UpdateItem' ? 'stall' : 'pass'));
    const { value, ms, cpuWaitMs } = await timed(() => gateway.postMessage('two faults'));
    expect(ms).toBeLessThan(Limits.requestMs + cpuWaitMs);
    expect(value.status).toBe(503);
    expect(value.body.error?.message).toContain('may still be delivered');
    const eventId = value.body.error!.eventId!;
    expect((await world.store.getEvent(eventId, Date.now()))?.status).toBe(EventStatus.queued);
    world.resetProxies();
    expect(await reconciler(staleMs + 60_000)()).toMatchObject({ requeued: 1 });
    const jobs = await world.fauxqs.receive(world.fauxqs.queueUrl, { timeoutMs: 5_000 });
    expect(jobs.map((job) => job.MessageAttributes?.[QueueAttributes.eventId]?.StringValue)).toContain(eventId);
  }, 30_000);

  test('DEL-OUT-5: what the reconciler costs, counted at the wire: an idle run is one Query per shard and the dead-letter depth; a requeue adds GetItem, SendMessage and UpdateItem', async () => {
    const delta = (before: Record<string, number>, after: Record<string, number>) =>
      Object.fromEntries(
        Object.entries(after)
          .map(([k, v]) => [k, v - (before[k] ?? 0)])
          .filter(([, v]) => v !== 0),
      );
    const counts = () => ({ ...world.proxies.dynamodb.counts(), ...world.proxies.sqs.counts() });
    let before = counts();
    await reconciler()();
    const idle = delta(before, counts());
    expect(idle).toEqual({ 'Query:pass': QueuedIndex.shards, 'GetQueueAttributes:pass': 1 });
    await strandedRecord(staleMs + 60_000, 'counted');
    before = counts();
    await reconciler()();
    const repaired = delta(before, counts());
    expect(repaired).toEqual({ ...idle, 'GetItem:pass': 1, 'SendMessage:pass': 1, 'UpdateItem:pass': 1 });
    process.stdout.write(`\nreconciler calls: idle run ${JSON.stringify(idle)}, run with one requeue ${JSON.stringify(repaired)}\n`);
  }, 30_000);

  test('STORE-IDX-1: the queued index is keys only, and a record leaves it with every status but queued', async () => {
    const described = await world.ddb.client.send(new DescribeTableCommand({ TableName: TABLE }));
    const index = described.Table?.GlobalSecondaryIndexes?.find((i) => i.IndexName === QueuedIndex.name);
    expect(index?.Projection?.ProjectionType).toBe('KEYS_ONLY');
    const records = await Promise.all([1, 2, 3].map((n) => strandedRecord(staleMs + 60_000, `index ${n}`)));
    const listed = async () => (await world.store.listQueuedBefore(Date.now(), 100)).map((e) => e.eventId);
    expect(await listed()).toEqual(expect.arrayContaining(records.map((r) => r.eventId)));
    await world.store.updateEvent(records[0]!.eventId, { status: EventStatus.delivered }, { status: EventStatus.queued });
    await world.store.updateEvent(records[1]!.eventId, { status: EventStatus.failed }, { status: EventStatus.queued });
    await world.store.updateEvent(records[2]!.eventId, { status: EventStatus.dropped }, { status: EventStatus.queued });
    expect(await listed()).toEqual([]);
    // A resend puts it back, queued from now.
    await world.store.updateEvent(records[1]!.eventId, { status: EventStatus.queued, attempts: 0 }, { status: EventStatus.failed });
    const back = await world.store.listQueuedBefore(Date.now() + 1, 100);
    expect(back.map((e) => e.eventId)).toEqual([records[1]!.eventId]);
    expect(back[0]!.queuedSince).toBeGreaterThan(records[1]!.createdAt);
    // The record as read carries none of the index's attributes.
    expect(Object.keys((await world.store.getEvent(records[1]!.eventId, Date.now()))!)).not.toContain(QueuedIndex.partition);
  }, 30_000);
});
