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
import { lambdaBundle, AFTER_RESPONSE_CHUNK, MCP_STORAGE_CHUNK } from '../../lib/bundling';
import { principalOf, subscriptionIdOf } from '../../lambda/core/identity';
import { EventStatus, Limits } from '../../lambda/core/protocol';
import { deliveryLambdaSettings } from '../../lambda/config/settings';
import { strandedAfterMs } from '../../lambda/core/reconcile';
import { reconcilerLambdaFromSettings } from '../../lambda/handlers/reconciler-lambda';
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
import { abandonedUpdates, newSecret, startAwsWorld, unsentMarkShortfall, type AwsWorld } from '../support/aws-world';
import { START_HOOK_MS } from '../support/processes';

const TABLE = 'dm-dot-bundle-send';
/** DynamoDB Local keeps one database per access key id: the child signs with the test client's. */
const LOCAL_CREDENTIALS = { accessKeyId: 'local', secretAccessKey: 'local' };

let root: string;
let mcp: BuiltBundle;
let environments: StackEnvironments;
let world: AwsWorld<'dynamodb' | 'sqs'>;
const apiKey = `bundle-${randomBytes(18).toString('base64url')}`;

beforeAll(async () => {
  root = mkdtempSync(join(tmpdir(), 'dm-dot-bundle-send-'));
  const synthesized = stackEnvironments();
  [mcp, environments, world] = await Promise.all([
    buildLambdaBundle(join(root, 'mcp'), { file: 'lambda/handlers/mcp.ts' }, lambdaBundle(undefined, [MCP_STORAGE_CHUNK, AFTER_RESPONSE_CHUNK])),
    synthesized,
    startAwsWorld({
      table: TABLE,
      apiKey,
      // The fake answers at the ARN the stack gives the function, and checks the child's signatures.
      secrets: { arn: synthesized.then((e) => e.mcp.API_KEY_SECRET_ARN), credentials: [LAMBDA_TEST_CREDENTIALS, LOCAL_CREDENTIALS] },
      proxies: ['dynamodb', 'sqs'],
      proxyOptions: { sqs: { rewriteOwnOrigin: true } },
    }),
  ]);
}, START_HOOK_MS);

afterAll(async () => {
  await world?.stop();
  if (root) rmSync(root, { recursive: true, force: true });
});

function childEnvironment(through?: { dynamodb: string; sqs: string }): Record<string, string> {
  return {
    ...lambdaRuntimeEnvironment('dm-dot-mcp', world.secrets.endpoint),
    ...environments.mcp,
    AWS_ACCESS_KEY_ID: LOCAL_CREDENTIALS.accessKeyId,
    AWS_SECRET_ACCESS_KEY: LOCAL_CREDENTIALS.secretAccessKey,
    AWS_ENDPOINT_URL_DYNAMODB: through?.dynamodb ?? world.ddb.endpoint,
    AWS_ENDPOINT_URL_SQS: through?.sqs ?? world.fauxqs.endpoint,
    TABLE_NAME: TABLE,
    // The SDK sends to the queue URL's host: through the proxy, the queue URL is on its origin.
    QUEUE_URL: through ? world.fauxqs.queueUrl.replace(new URL(world.fauxqs.queueUrl).origin, through.sqs) : world.fauxqs.queueUrl,
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
  expect(world.secrets.badSignatures()).toBe(0);
}, 60_000);

test('with a dot subscribed, a cold send is signed, delivered inline and answered "delivered"', async () => {
  const secret = newSecret();
  const principal = principalOf(apiKey);
  const now = Date.now();
  await world.store.putSubscription(
    {
      id: subscriptionIdOf(principal, world.receiver.url, 'message.created', {}),
      generation: 'gen-bundle',
      url: world.receiver.url,
      name: 'message.created',
      secret,
      principal,
      createdAt: now,
      refreshedAt: now,
      expiresAt: now + 3_600_000,
    },
    now,
    { kind: 'absent' },
  );
  const started = await coldStart(lambdaNodeBinary().path, mcp.file, 'apigw', await restSend('through the deployed asset'), childEnvironment());
  expect({ status: started.answer.status, body: JSON.parse(started.answer.body) }).toMatchObject({ status: 200, body: { status: 'delivered' } });
  expect(world.receiver.events).toHaveLength(1);
  const delivery = world.receiver.events[0]!;
  const payload = new Webhook(secret).verify(delivery.raw.toString('utf8'), delivery.headers) as { data?: { message?: string } };
  expect(payload.data?.message).toBe('through the deployed asset');
  // The safety-net job went through SQS too (docs/contract/delivery.md), delayed until attempt 2's time.
  const eventId = (JSON.parse(started.answer.body) as { eventId: string }).eventId;
  const jobs = await world.fauxqs.receive(world.fauxqs.queueUrl, { timeoutMs: 10_000 });
  expect(jobs.map((job) => job.MessageAttributes?.eventId?.StringValue)).toEqual([eventId]);
  expect(world.secrets.badSignatures()).toBe(0);
}, 60_000);

describe('the built bundle under one fault: answered within 5 s, nothing left queued that nothing will deliver', () => {
  const through = () => ({ dynamodb: world.proxies.dynamodb.endpoint, sqs: world.proxies.sqs.endpoint });

  beforeAll(async () => {
    // The dot of the test above, or one of these tests' own when they run alone.
    const now = Date.now();
    if (await world.store.getStoredSubscription()) return;
    const principal = principalOf(apiKey);
    await world.store.putSubscription(
      {
        id: subscriptionIdOf(principal, world.receiver.url, 'message.created', {}),
        generation: 'gen-faults',
        url: world.receiver.url,
        name: 'message.created',
        secret: newSecret(),
        principal,
        createdAt: now,
        refreshedAt: now,
        expiresAt: now + 3_600_000,
      },
      now,
      { kind: 'absent' },
    );
  });

  /** The reconciler, in-process on the emulators, with its clock past the stranded threshold. */
  async function reconcileNow() {
    const settings = deliveryLambdaSettings({ TABLE_NAME: TABLE, QUEUE_URL: world.fauxqs.queueUrl, DEAD_LETTER_QUEUE_URL: world.fauxqs.deadLetterQueueUrl });
    const ahead = strandedAfterMs(settings.retryDelaysS) + 60_000;
    const run = reconcilerLambdaFromSettings(
      settings,
      { dynamodb: world.ddb.client, sqs: world.fauxqs.client },
      {
        log: { info: () => undefined, warn: () => undefined, error: () => undefined },
        metrics: { repaired: () => undefined, errors: () => undefined, deadLetters: () => undefined },
        clock: { now: () => Date.now() + ahead, sleep: (ms) => new Promise((resolve) => setTimeout(resolve, ms)) },
      },
    );
    return run();
  }

  async function queued(): Promise<string[]> {
    return (await world.store.listEvents(Date.now(), { status: EventStatus.queued })).map((e) => e.eventId);
  }

  afterEach(async () => {
    world.resetProxies();
    await world.fauxqs.purge();
    world.receiver.reset();
  });

  test('DEL-OUT-2: SendMessage stalled on every attempt: "not sent" with the event id within 5 s, and the record is failed', async () => {
    world.proxies.sqs.setRule((call) => (call.action === 'SendMessage' ? 'stall' : 'pass'));
    const abandonedBefore = abandonedUpdates(world);
    const started = await coldStart(lambdaNodeBinary().path, mcp.file, 'apigw', await restSend('queue stalled, deployed asset'), childEnvironment(through()));
    process.stdout.write(
      `\nbundle, SendMessage stalled: answered ${started.answer.status} after ${Math.round(started.firstRequestMs)} ms: ${started.answer.body} ${JSON.stringify([world.proxies.dynamodb.counts(), world.proxies.sqs.counts()])}\n`,
    );
    expect(started.firstRequestMs).toBeLessThan(Limits.requestMs);
    expect(started.answer.status).toBe(503);
    const { eventId, message } = (JSON.parse(started.answer.body) as { error: { eventId: string; message: string } }).error;
    expect(eventId).toMatch(/^evt_/);
    const weaker = message.includes('may still be delivered');
    if (!weaker) expect(message).toContain('was not sent');
    expect(await unsentMarkShortfall(world, eventId, weaker, abandonedBefore)).toBeUndefined();
    expect(await queued()).toEqual([]);
    expect(await reconcileNow()).toMatchObject({ requeued: 0, failed: 0 });
  }, 60_000);

  test("DEL-OUT-3: the event's PutItem answer lost: the event id within 5 s, and the event is delivered (or queued with its job)", async () => {
    let lost = 0;
    world.proxies.dynamodb.setRule((call) => {
      const pk = (call.body as { Item?: { pk?: { S?: string } } } | undefined)?.Item?.pk?.S;
      return call.action === 'PutItem' && pk?.startsWith('EVENT#') && lost++ === 0 ? 'lost' : 'pass';
    });
    const started = await coldStart(lambdaNodeBinary().path, mcp.file, 'apigw', await restSend('put answer lost, deployed asset'), childEnvironment(through()));
    process.stdout.write(
      `\nbundle, PutItem answer lost: answered ${started.answer.status} after ${Math.round(started.firstRequestMs)} ms: ${started.answer.body}\n`,
    );
    expect(started.firstRequestMs).toBeLessThan(Limits.requestMs);
    expect(lost).toBe(2);
    expect([200, 202]).toContain(started.answer.status);
    const eventId = (JSON.parse(started.answer.body) as { eventId: string }).eventId;
    expect(eventId).toMatch(/^evt_/);
    const jobs = await world.fauxqs.receive(world.fauxqs.queueUrl, { timeoutMs: 10_000 });
    expect(jobs.map((job) => job.MessageAttributes?.eventId?.StringValue)).toContain(eventId);
    // Whatever is still queued has its job; the reconciler, past its threshold, settles what is left.
    const report = await reconcileNow();
    expect(report.errors).toBe(0);
    expect(await queued()).toEqual(report.requeued > 0 ? [eventId] : []);
  }, 60_000);
});
