/**
 * The MCP Lambda's deployed asset (index.js and the mcp-storage.js beside it, built with the stack's
 * options) sending for real: a fresh process on the Lambda runtime's Node major with the synthesized environment, Secrets
 * Manager's signature checked, DynamoDB Local and fauxqs behind AWS_ENDPOINT_URL_*, a loopback dot.
 * The first request that needs storage is what loads mcp-storage.js, so this is the test that a split
 * which only worked in the source tree (tsx, Jest) would fail.
 *
 * Then the same asset under one fault each, through the fault proxy (test/support/aws-fault-proxy.ts):
 * SendMessage stalled on every attempt, and the event's PutItem applied with its answer lost. Each
 * is answered within the contract's 5 s, and no record is left `queued` that nothing will deliver
 * (the reconciler, run here with its clock past the stranded threshold, finds nothing to settle).
 *
 * Deliberately not here: sizes and aliases (test/build/bundles.test.ts), timing (npm run bench).
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Webhook } from 'standardwebhooks';
import { lambdaBundle, MCP_STORAGE_CHUNK } from '../../lib/bundling';
import { DynamoDbStore } from '../../lambda/adapters/dynamodb-store';
import { principalOf, subscriptionIdOf } from '../../lambda/core/identity';
import { EventStatus, Limits } from '../../lambda/core/protocol';
import { deliveryLambdaSettings } from '../../lambda/config/settings';
import { strandedAfterMs } from '../../lambda/core/reconcile';
import { reconcilerLambdaFromSettings } from '../../lambda/handlers/reconciler-lambda';
import { startFaultProxy, type FaultProxy } from '../support/aws-fault-proxy';
import {
  buildLambdaBundle,
  coldStart,
  LAMBDA_TEST_CREDENTIALS,
  lambdaRuntimeEnvironment,
  lambdaNodeBinary,
  stackEnvironments,
  type BuiltBundle,
  type StackEnvironments,
} from '../bench/lambda-bundles';
import { eventFromRequest } from '../support/apigw';
import { startDynamoDbLocal, type DynamoDbLocal } from '../support/dynamodb-local';
import { startFauxqs, type Fauxqs } from '../support/fauxqs';
import { startFakeSecretsManager, type FakeSecretsManager } from '../support/fake-secrets-manager';
import { startReceiver, type Receiver } from '../support/receiver';

const TABLE = 'dm-dot-bundle-send';
/** DynamoDB Local keeps one database per access key id: the child signs with the test client's. */
const LOCAL_CREDENTIALS = { accessKeyId: 'local', secretAccessKey: 'local' };

let root: string;
let mcp: BuiltBundle;
let environments: StackEnvironments;
let ddb: DynamoDbLocal;
let fauxqs: Fauxqs;
let secrets: FakeSecretsManager;
let receiver: Receiver;
let ddbProxy: FaultProxy;
let sqsProxy: FaultProxy;
const apiKey = `bundle-${randomBytes(18).toString('base64url')}`;

beforeAll(async () => {
  root = mkdtempSync(join(tmpdir(), 'dm-dot-bundle-send-'));
  [mcp, environments, ddb, fauxqs, receiver] = await Promise.all([
    buildLambdaBundle(join(root, 'mcp'), { file: 'lambda/handlers/mcp.ts' }, lambdaBundle(undefined, [MCP_STORAGE_CHUNK])),
    stackEnvironments(),
    startDynamoDbLocal(),
    startFauxqs(),
    startReceiver(),
  ]);
  secrets = await startFakeSecretsManager(environments.mcp.API_KEY_SECRET_ARN, { credentials: [LAMBDA_TEST_CREDENTIALS, LOCAL_CREDENTIALS] });
  secrets.setSecret(apiKey, environments.mcp.API_KEY_SECRET_ARN);
  await ddb.createTable(TABLE);
  [ddbProxy, sqsProxy] = await Promise.all([startFaultProxy('dynamodb', ddb.endpoint), startFaultProxy('sqs', fauxqs.endpoint, { rewriteOwnOrigin: true })]);
}, 180_000);

afterAll(async () => {
  await Promise.all([ddbProxy?.stop(), sqsProxy?.stop()]);
  await Promise.all([ddb?.stop(), fauxqs?.stop(), secrets?.stop(), receiver?.stop()]);
  if (root) rmSync(root, { recursive: true, force: true });
});

function childEnvironment(through?: { dynamodb: string; sqs: string }): Record<string, string> {
  return {
    ...lambdaRuntimeEnvironment('dm-dot-mcp', secrets.endpoint),
    ...environments.mcp,
    AWS_ACCESS_KEY_ID: LOCAL_CREDENTIALS.accessKeyId,
    AWS_SECRET_ACCESS_KEY: LOCAL_CREDENTIALS.secretAccessKey,
    AWS_ENDPOINT_URL_DYNAMODB: through?.dynamodb ?? ddb.endpoint,
    AWS_ENDPOINT_URL_SQS: through?.sqs ?? fauxqs.endpoint,
    TABLE_NAME: TABLE,
    // The SDK sends to the queue URL's host: through the proxy, the queue URL is on its origin.
    QUEUE_URL: through ? fauxqs.queueUrl.replace(new URL(fauxqs.queueUrl).origin, through.sqs) : fauxqs.queueUrl,
    // The one change from the stack's environment: the dot is on 127.0.0.1 here.
    DMDOT_ALLOW_LOOPBACK_CALLBACKS: '1',
  };
}

async function restSend(message: string): Promise<string> {
  const request = new Request(`https://abc123.execute-api.us-east-1.amazonaws.com/v1/messages?key=${encodeURIComponent(apiKey)}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ message }),
  });
  return JSON.stringify(await eventFromRequest(request));
}

test('with no dot subscribed, the first send loads mcp-storage.js, reads DynamoDB and answers 409 no_subscription', async () => {
  const started = await coldStart(lambdaNodeBinary().path, mcp.file, 'apigw', await restSend('nobody home'), childEnvironment());
  expect(started.answer.status).toBe(409);
  expect(JSON.parse(started.answer.body)).toMatchObject({ error: { code: 'no_subscription' } });
  expect(secrets.badSignatures()).toBe(0);
}, 60_000);

test('with a dot subscribed, a cold send is signed, delivered inline and answered "delivered"', async () => {
  const secret = `whsec_${randomBytes(32).toString('base64')}`;
  const principal = principalOf(apiKey);
  const now = Date.now();
  const store = new DynamoDbStore({ client: ddb.client, tableName: TABLE });
  await store.putSubscription(
    { id: subscriptionIdOf(principal, receiver.url, 'message.created', {}), generation: 'gen-bundle', url: receiver.url, name: 'message.created', secret, principal, createdAt: now, refreshedAt: now, expiresAt: now + 3_600_000 },
    now,
    { kind: 'absent' },
  );
  const started = await coldStart(lambdaNodeBinary().path, mcp.file, 'apigw', await restSend('through the deployed asset'), childEnvironment());
  expect({ status: started.answer.status, body: JSON.parse(started.answer.body) }).toMatchObject({ status: 200, body: { status: 'delivered' } });
  expect(receiver.events).toHaveLength(1);
  const delivery = receiver.events[0]!;
  const payload = new Webhook(secret).verify(delivery.raw.toString('utf8'), delivery.headers) as { data?: { message?: string } };
  expect(payload.data?.message).toBe('through the deployed asset');
  // The safety-net job went through SQS too (docs/contract/delivery.md), delayed until attempt 2's time.
  const eventId = (JSON.parse(started.answer.body) as { eventId: string }).eventId;
  const jobs = await fauxqs.receive(fauxqs.queueUrl, { timeoutMs: 10_000 });
  expect(jobs.map((job) => job.MessageAttributes?.eventId?.StringValue)).toEqual([eventId]);
  expect(secrets.badSignatures()).toBe(0);
}, 60_000);

describe('the built bundle under one fault: answered within 5 s, nothing left queued that nothing will deliver', () => {
  const through = () => ({ dynamodb: ddbProxy.endpoint, sqs: sqsProxy.endpoint });

  beforeAll(async () => {
    // The dot of the test above, or one of these tests' own when they run alone.
    const store = new DynamoDbStore({ client: ddb.client, tableName: TABLE });
    const now = Date.now();
    if (await store.getStoredSubscription()) return;
    const principal = principalOf(apiKey);
    await store.putSubscription(
      { id: subscriptionIdOf(principal, receiver.url, 'message.created', {}), generation: 'gen-faults', url: receiver.url, name: 'message.created', secret: `whsec_${randomBytes(32).toString('base64')}`, principal, createdAt: now, refreshedAt: now, expiresAt: now + 3_600_000 },
      now,
      { kind: 'absent' },
    );
  });

  /** The reconciler, in-process on the emulators, with its clock past the stranded threshold. */
  async function reconcileNow() {
    const settings = deliveryLambdaSettings({ TABLE_NAME: TABLE, QUEUE_URL: fauxqs.queueUrl, DEAD_LETTER_QUEUE_URL: fauxqs.deadLetterQueueUrl });
    const ahead = strandedAfterMs(settings.retryDelaysS) + 60_000;
    const run = reconcilerLambdaFromSettings(settings, { dynamodb: ddb.client, sqs: fauxqs.client }, {
      log: { info: () => undefined, warn: () => undefined, error: () => undefined },
      metrics: { repaired: () => undefined },
      clock: { now: () => Date.now() + ahead, sleep: (ms) => new Promise((resolve) => setTimeout(resolve, ms)) },
    });
    return run();
  }

  async function queued(): Promise<string[]> {
    const store = new DynamoDbStore({ client: ddb.client, tableName: TABLE });
    return (await store.listEvents(Date.now(), { status: EventStatus.queued })).map((e) => e.eventId);
  }

  afterEach(async () => {
    for (const proxy of [ddbProxy, sqsProxy]) {
      proxy.setRule(() => 'pass');
      proxy.releaseHeld();
    }
    await fauxqs.purge();
    receiver.reset();
  });

  test('DEL-OUT-2: SendMessage stalled on every attempt: "not sent" with the event id within 5 s, and the record is failed', async () => {
    sqsProxy.setRule((call) => (call.action === 'SendMessage' ? 'stall' : 'pass'));
    const started = await coldStart(lambdaNodeBinary().path, mcp.file, 'apigw', await restSend('queue stalled, deployed asset'), childEnvironment(through()));
    process.stdout.write(`\nbundle, SendMessage stalled: answered ${started.answer.status} after ${Math.round(started.firstRequestMs)} ms: ${started.answer.body} ${JSON.stringify([ddbProxy.counts(), sqsProxy.counts()])}\n`);
    expect(started.firstRequestMs).toBeLessThan(Limits.requestMs);
    expect(started.answer.status).toBe(503);
    const eventId = (JSON.parse(started.answer.body) as { error: { eventId: string } }).error.eventId;
    expect(eventId).toMatch(/^evt_/);
    const store = new DynamoDbStore({ client: ddb.client, tableName: TABLE });
    expect((await store.getEvent(eventId, Date.now()))?.status).toBe(EventStatus.failed);
    expect(await queued()).toEqual([]);
    expect(await reconcileNow()).toMatchObject({ requeued: 0, failed: 0 });
  }, 60_000);

  test("DEL-OUT-3: the event's PutItem answer lost: the event id within 5 s, and the event is delivered (or queued with its job)", async () => {
    let lost = 0;
    ddbProxy.setRule((call) => {
      const pk = (call.body as { Item?: { pk?: { S?: string } } } | undefined)?.Item?.pk?.S;
      return call.action === 'PutItem' && pk?.startsWith('EVENT#') && lost++ === 0 ? 'lost' : 'pass';
    });
    const started = await coldStart(lambdaNodeBinary().path, mcp.file, 'apigw', await restSend('put answer lost, deployed asset'), childEnvironment(through()));
    process.stdout.write(`\nbundle, PutItem answer lost: answered ${started.answer.status} after ${Math.round(started.firstRequestMs)} ms: ${started.answer.body}\n`);
    expect(started.firstRequestMs).toBeLessThan(Limits.requestMs);
    expect(lost).toBe(2);
    expect([200, 202]).toContain(started.answer.status);
    const eventId = (JSON.parse(started.answer.body) as { eventId: string }).eventId;
    expect(eventId).toMatch(/^evt_/);
    const jobs = await fauxqs.receive(fauxqs.queueUrl, { timeoutMs: 10_000 });
    expect(jobs.map((job) => job.MessageAttributes?.eventId?.StringValue)).toContain(eventId);
    // Whatever is still queued has its job; the reconciler, past its threshold, settles what is left.
    const report = await reconcileNow();
    expect(report.errors).toBe(0);
    expect(await queued()).toEqual(report.requeued > 0 ? [eventId] : []);
  }, 60_000);
});
