/**
 * The MCP Lambda's deployed asset (index.js and the mcp-storage.js beside it, built with the stack's
 * options) sending for real: a fresh process on the Lambda runtime's Node major with the synthesized environment, Secrets
 * Manager's signature checked, DynamoDB Local and fauxqs behind AWS_ENDPOINT_URL_*, a loopback dot.
 * The first request that needs storage is what loads mcp-storage.js, so this is the test that a split
 * which only worked in the source tree (tsx, Jest) would fail.
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
}, 180_000);

afterAll(async () => {
  await Promise.all([ddb?.stop(), fauxqs?.stop(), secrets?.stop(), receiver?.stop()]);
  if (root) rmSync(root, { recursive: true, force: true });
});

function childEnvironment(): Record<string, string> {
  return {
    ...lambdaRuntimeEnvironment('dm-dot-mcp', secrets.endpoint),
    ...environments.mcp,
    AWS_ACCESS_KEY_ID: LOCAL_CREDENTIALS.accessKeyId,
    AWS_SECRET_ACCESS_KEY: LOCAL_CREDENTIALS.secretAccessKey,
    AWS_ENDPOINT_URL_DYNAMODB: ddb.endpoint,
    AWS_ENDPOINT_URL_SQS: fauxqs.endpoint,
    TABLE_NAME: TABLE,
    QUEUE_URL: fauxqs.queueUrl,
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
