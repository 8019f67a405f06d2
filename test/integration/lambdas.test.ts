/**
 * Both Lambdas in-process, wired from their environment the way the stack wires them, against
 * DynamoDB Local, fauxqs and a fake Secrets Manager, with a real loopback webhook receiver
 * (node:http on 127.0.0.1, allowed by DMDOT_ALLOW_LOOPBACK_CALLBACKS=1). The MCP Lambda is
 * reached through a tiny local API Gateway (payload 2.0 events); the Delivery Lambda through a
 * tiny local SQS event source (receive, invoke, delete what succeeded).
 *
 * Each test pins one rule of docs/contract: http, delivery. No timing assertions: waits are bounded polls.
 */
import { spawnGroup as spawn, START_HOOK_MS } from '../support/processes';
import { randomBytes } from 'node:crypto';
import { resolve } from 'node:path';
import type { APIGatewayProxyStructuredResultV2, SQSBatchResponse } from 'aws-lambda';
import { DeleteMessageCommand, GetQueueAttributesCommand, SendMessageCommand } from '@aws-sdk/client-sqs';
import { Webhook } from 'standardwebhooks';
import { DynamoDbStore } from '../../lambda/adapters/dynamodb-store';
import { EventStatus } from '../../lambda/core/protocol';
import { sha256Hex } from '../../lambda/core/identity';
import { addSender, recordRotation, revokeSender } from '../../lambda/operator/access';
import { eventFromRequest } from '../support/apigw';
import { MODERN, MODERN_META } from '../support/app';
import { newSecret, startAwsWorld, type AwsWorld, type McpGateway } from '../support/aws-world';
import { pollOnce, sqsEventOf } from '../support/event-source';
import { startFakeSecretsManager, TEST_CREDENTIALS, testSecretsReader } from '../support/fake-secrets-manager';

const TABLE = 'dm-dot-integration';
const API_KEY = `it-${randomBytes(24).toString('base64url')}`;

let world: AwsWorld;

/** The MCP Lambda on the emulators' own clients (no proxy), its key read once, from `secretsEndpoint`. */
function mcpGateway(env: NodeJS.ProcessEnv = world.env(), secretsEndpoint = world.secrets.endpoint) {
  return world.mcpGateway({
    env,
    clients: { dynamodb: world.ddb.client, sqs: world.fauxqs.client, secrets: testSecretsReader(secretsEndpoint, { maxAttempts: 1 }) },
  });
}

function deliveryLambda(env: NodeJS.ProcessEnv = world.env()) {
  return world.deliveryLambda({ env, clients: { dynamodb: world.ddb.client, sqs: world.fauxqs.client } });
}

let rpcId = 0;

/** events/subscribe through the local API Gateway, a 2026-07-28 call that says who the client is. */
async function subscribe(gateway: McpGateway, secret: string) {
  return gateway.subscribe(world.receiver.url, { secret, id: ++rpcId, meta: { 'io.modelcontextprotocol/clientInfo': { name: 'it', version: '0' } } });
}

/** Verifies a recorded delivery with the Standard Webhooks reference library over the raw bytes. */
function verify(secret: string, delivery: { raw: Buffer; headers: Record<string, string> }): unknown {
  return new Webhook(secret).verify(delivery.raw, {
    'webhook-id': delivery.headers['webhook-id']!,
    'webhook-timestamp': delivery.headers['webhook-timestamp']!,
    'webhook-signature': delivery.headers['webhook-signature']!,
  });
}

async function queueCounts(queueUrl: string): Promise<{ visible: number; inFlight: number }> {
  const answer = await world.fauxqs.client.send(
    new GetQueueAttributesCommand({ QueueUrl: queueUrl, AttributeNames: ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesNotVisible'] }),
  );
  return { visible: Number(answer.Attributes?.ApproximateNumberOfMessages), inFlight: Number(answer.Attributes?.ApproximateNumberOfMessagesNotVisible) };
}

const ROOT = resolve(__dirname, '../..');

/**
 * Invokes a Lambda entry file (middy-wrapped `handler`, module-scope clients from the environment)
 * in a fresh tsx process; the AWS SDK finds the emulators through AWS_ENDPOINT_URL_* variables.
 */
async function invokeEntry<T>(entry: string, env: NodeJS.ProcessEnv, events: unknown[]): Promise<T[]> {
  const child = spawn(resolve(ROOT, 'node_modules/.bin/tsx'), [resolve(__dirname, '../support/invoke-entry.ts'), resolve(ROOT, entry)], {
    cwd: ROOT,
    env: {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      AWS_REGION: 'us-east-1',
      // DynamoDB Local keeps one database per access key id: the same one as the test's client.
      AWS_ACCESS_KEY_ID: 'local',
      AWS_SECRET_ACCESS_KEY: 'local',
      AWS_EC2_METADATA_DISABLED: 'true',
      AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
      AWS_ENDPOINT_URL_DYNAMODB: world.ddb.endpoint,
      AWS_ENDPOINT_URL_SQS: world.fauxqs.endpoint,
      AWS_ENDPOINT_URL_SECRETS_MANAGER: world.secrets.endpoint,
      ...env,
    },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (c: Buffer) => (stdout += c.toString('utf8')));
  child.stderr.on('data', (c: Buffer) => (stderr += c.toString('utf8')));
  child.stdin.end(JSON.stringify(events));
  const timer = setTimeout(() => child.kill('SIGKILL'), 25_000);
  const code = await new Promise<number | null>((done) => child.once('close', done));
  clearTimeout(timer);
  // The child's own log lines (stderr) must not hold the key either.
  world.logLines.push(stderr);
  if (code !== 0) throw new Error(`${entry} exited with ${code}: ${stderr.slice(-2000)}`);
  return JSON.parse(stdout.trim().split('\n').at(-1)!) as T[];
}

beforeAll(async () => {
  world = await startAwsWorld({
    table: TABLE,
    apiKey: API_KEY,
    env: { DMDOT_DELIVERY_WAIT_MS: '0', DMDOT_RETRY_DELAYS: '2,2' },
    // The entry files sign with the environment's credentials (`local`, DynamoDB Local's database).
    secrets: { credentials: [TEST_CREDENTIALS, { accessKeyId: 'local', secretAccessKey: 'local' }] },
  });
}, START_HOOK_MS);

afterAll(() => world?.stop());

beforeEach(async () => {
  world.receiver.reset();
  await world.fauxqs.purge();
});

afterEach(() => {
  // The API key never reaches a log line, whatever happened in the test.
  expect(world.logLines.join('\n')).not.toContain(API_KEY);
});

describe('HTTP-10: MCP Lambda: authentication (docs/contract/http.md)', () => {
  test('HTTP-3, HTTP-9: a missing key is 401 with WWW-Authenticate: Bearer', async () => {
    const response = await mcpGateway().fetch('https://api.example/v1/messages', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"message":"x"}',
    });
    expect(response.status).toBe(401);
    expect(response.headers.get('www-authenticate')).toBe('Bearer');
  });

  test('HTTP-9: a wrong key is 401, on /mcp as a JSON-RPC error', async () => {
    const response = await mcpGateway().fetch('https://api.example/mcp?key=wrong-key', {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: '{"jsonrpc":"2.0","id":1,"method":"ping"}',
    });
    expect(response.status).toBe(401);
    expect(await response.json()).toMatchObject({ jsonrpc: '2.0', error: { code: -32600 } });
  });

  test('ARCH-10, HTTP-8: an unreadable secret is 503, and Secrets Manager is not asked again on every request', async () => {
    const broken = await startFakeSecretsManager();
    broken.setFailing(true);
    try {
      const gateway = mcpGateway(world.env(), broken.endpoint);
      const callsAfter: number[] = [];
      for (let i = 0; i < 3; i++) {
        const response = await gateway.fetch(`https://api.example/v1/messages?key=${encodeURIComponent(API_KEY)}`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: '{"message":"x"}',
        });
        expect(response.status).toBe(503);
        callsAfter.push(broken.calls());
      }
      // The init-phase read's failure starts no back-off (a frozen environment's read is not a
      // real failure), so the first request reads once more; its real failure does back off.
      expect(callsAfter[0]).toBeGreaterThan(0);
      expect(callsAfter[2]).toBe(callsAfter[0]);
    } finally {
      await broken.stop();
    }
  });

  test('HTTP-8: no secret configured (no API_KEY_SECRET_ARN) is 503 too', async () => {
    const { API_KEY_SECRET_ARN: _unused, ...env } = world.env();
    const response = await mcpGateway(env).fetch(`https://api.example/v1/messages?key=${encodeURIComponent(API_KEY)}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"message":"x"}',
    });
    expect(response.status).toBe(503);
  });

  test('MCP-10, MCP-12, MCP-14: the legacy era answers through the translation too (one SSE event, then the stream ends)', async () => {
    const response = await mcpGateway().fetch(`https://api.example/mcp?key=${encodeURIComponent(API_KEY)}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'initialize',
        params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'it', version: '0' } },
      }),
    });
    expect(response.status).toBe(200);
    const text = await response.text();
    const data = text.split('\n').find((line) => line.startsWith('data:'));
    expect(JSON.parse(data!.slice(5))).toMatchObject({ result: { serverInfo: { name: 'dm-dot' }, capabilities: { events: {} } } });
  });
});

describe('MCP Lambda: sender keys and the rotation overlap, on DynamoDB (docs/contract/http.md, keys)', () => {
  async function keyed(key: string, path: string, body: unknown, method?: string) {
    const headers: Record<string, string> = {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      authorization: `Bearer ${key}`,
    };
    if (method) Object.assign(headers, { 'mcp-protocol-version': MODERN, 'mcp-method': method });
    return gatewayOnOwnTable.fetch(`https://api.example${path}`, { method: 'POST', headers, body: JSON.stringify(body) });
  }
  let gatewayOnOwnTable: McpGateway;
  let own: DynamoDbStore;

  beforeAll(async () => {
    // A table of its own: the DEPLOYMENT item made here must not change the principal of the other tests.
    await world.ddb.createTable(`${TABLE}-keys`);
    own = new DynamoDbStore({ client: world.ddb.client, tableName: `${TABLE}-keys` });
    gatewayOnOwnTable = mcpGateway({ ...world.env(), TABLE_NAME: `${TABLE}-keys`, DMDOT_EVENTS_PROFILE: 'sep-3415' });
  });

  test('HTTP-KEY-2, HTTP-KEY-4, HTTP-KEY-5: a sender key sends, is Forbidden (-32024 under sep-3415) on subscribe, and 401 once revoked', async () => {
    const added = await addSender(own, 'lambda-bot', null, Date.now());
    if (!added.added) throw new Error(added.message);
    // No subscription on this table: 409 says the key got past the door.
    expect((await keyed(added.key, '/v1/messages', { message: 'hi' })).status).toBe(409);
    const refused = await keyed(
      added.key,
      '/mcp',
      {
        jsonrpc: '2.0',
        id: 1,
        method: 'events/subscribe',
        params: { name: 'message.created', delivery: { mode: 'webhook', url: world.receiver.url, secret: newSecret() }, _meta: MODERN_META },
      },
      'events/subscribe',
    );
    expect(((await refused.json()) as { error: { code: number } }).error.code).toBe(-32024);
    await revokeSender(own, 'lambda-bot', Date.now());
    expect((await keyed(added.key, '/v1/messages', { message: 'hi' })).status).toBe(401);
    expect(world.logLines.join('\n')).not.toContain(added.key);
  });

  test('HTTP-KEY-10: the previous connector key recorded in DEPLOYMENT is accepted until its overlap ends', async () => {
    const previous = `old-${randomBytes(24).toString('base64url')}`;
    const overlapMs = 10 * 60_000;
    await recordRotation(own, previous, API_KEY, overlapMs, Date.now());
    // A fresh environment (the rotation recycles them): it reads DEPLOYMENT on the first unknown key.
    // Its clock is the test's, so the overlap's end is a step of it, not a wait that a slow request could outrun.
    let aheadMs = 0;
    const clock = { now: () => Date.now() + aheadMs, sleep: (ms: number) => new Promise<void>((r) => setTimeout(r, ms)) };
    gatewayOnOwnTable = world.mcpGateway({
      env: { ...world.env(), TABLE_NAME: `${TABLE}-keys` },
      clients: { dynamodb: world.ddb.client, sqs: world.fauxqs.client, secrets: testSecretsReader(world.secrets.endpoint, { maxAttempts: 1 }) },
      overrides: { clock },
    });
    expect((await keyed(previous, '/v1/messages', { message: 'hi' })).status).toBe(409);
    expect((await keyed(API_KEY, '/v1/messages', { message: 'hi' })).status).toBe(409);
    aheadMs = overlapMs + 1_000;
    expect((await keyed(previous, '/v1/messages', { message: 'hi' })).status).toBe(401);
    expect((await keyed(API_KEY, '/v1/messages', { message: 'hi' })).status).toBe(409);
    expect((await own.getDeployment())?.principal).toBe(sha256Hex(previous));
  });
});

describe('EV-CHAL-2, EV-CHAL-5, EV-SUB-13: subscribe, send, deliver (docs/contract: events, delivery)', () => {
  let secret: string;
  let gateway: McpGateway;
  let delivery: ReturnType<typeof deliveryLambda>;

  beforeAll(async () => {
    gateway = mcpGateway();
    delivery = deliveryLambda();
    secret = newSecret();
    world.receiver.reset();
    const answer = await subscribe(gateway, secret);
    expect(answer.body.error).toBeUndefined();
    expect(answer.body.result).toMatchObject({ id: expect.stringMatching(/^sub_[0-9a-f]{32}$/), cursor: null, truncated: false });
    // The challenge went to the receiver, signed with the new secret over the raw bytes.
    expect(world.receiver.challenges).toHaveLength(1);
    expect(verify(secret, world.receiver.challenges[0]!)).toMatchObject({ type: 'verification' });
    expect(world.receiver.challenges[0]!.headers[':path']).toBe(new URL(world.receiver.url).pathname + new URL(world.receiver.url).search);
  });

  test('ARCH-1, ARCH-4, ARCH-6, DEL-EVT-1, DEL-PIPE-14, DEL-REST-2, HTTP-3: a message is queued (202), and one delivery run brings it to the receiver with a valid signature', async () => {
    const sent = await gateway.postMessage('  hello dot  ');
    expect(sent).toMatchObject({ status: 202, body: { status: 'queued', eventId: expect.stringMatching(/^evt_[0-9a-f]{32}$/) } });
    const eventId = sent.body.eventId!;

    const run = await pollOnce(world.fauxqs, delivery);
    expect(run?.response).toEqual({ batchItemFailures: [] });
    expect(world.receiver.events).toHaveLength(1);
    const got = world.receiver.events[0]!;
    expect(verify(secret, got)).toMatchObject({ eventId, name: 'message.created', data: { message: 'hello dot' }, cursor: null });
    // The exact bytes that were queued, no re-serialization on the way.
    expect(got.raw.toString('utf8')).toBe(run!.event.Records[0]!.body);
    expect(got.headers).toMatchObject({ 'webhook-id': eventId, 'content-type': 'application/json', 'x-mcp-subscription-id': expect.stringMatching(/^sub_/) });
    expect((await world.store.getEvent(eventId, Date.now()))?.status).toBe(EventStatus.delivered);
    expect(await queueCounts(world.fauxqs.queueUrl)).toEqual({ visible: 0, inFlight: 0 });
  });

  test('DEL-PIPE-11: a duplicate SQS delivery of a delivered event makes no second POST', async () => {
    const sent = await gateway.postMessage('only once');
    const run = await pollOnce(world.fauxqs, delivery);
    expect(world.receiver.events).toHaveLength(1);
    // SQS may hand the same message over again: the same record, a second time.
    const again = await delivery(run!.event);
    expect(again).toEqual({ batchItemFailures: [] });
    expect(world.receiver.events).toHaveLength(1);
    expect((await world.store.getEvent(sent.body.eventId!, Date.now()))?.attempts).toBe(1);
  });

  test('DEL-PIPE-10, DEL-PIPE-17: 503 keeps the record (batchItemFailures) with a backoff; the next run after the delay delivers', async () => {
    world.receiver.respondWith(503);
    const sent = await gateway.postMessage('try again');
    const first = await pollOnce(world.fauxqs, delivery);
    expect(first?.response.batchItemFailures).toEqual([{ itemIdentifier: first!.event.Records[0]!.messageId }]);
    expect(world.receiver.events.map((e) => e.status)).toEqual([503]);
    expect(await world.store.getEvent(sent.body.eventId!, Date.now())).toMatchObject({ status: EventStatus.queued, attempts: 1, lastError: 'http_5xx' });

    // Visibility changed: hidden right after the run, back well before the queue's 30 s default.
    expect(await queueCounts(world.fauxqs.queueUrl)).toEqual({ visible: 0, inFlight: 1 });
    const second = await pollOnce(world.fauxqs, delivery, { timeoutMs: 15_000 });
    expect(second?.event.Records[0]?.attributes.ApproximateReceiveCount).toBe('2');
    expect(second?.response).toEqual({ batchItemFailures: [] });
    expect(world.receiver.events.map((e) => e.status)).toEqual([503, 200]);
    for (const delivered of world.receiver.events) expect(verify(secret, delivered)).toMatchObject({ eventId: sent.body.eventId });
    expect(await world.store.getEvent(sent.body.eventId!, Date.now())).toMatchObject({ status: EventStatus.delivered, attempts: 2 });
  });

  test('DEL-PIPE-16, DEL-PIPE-18: 410 is permanent and ends the subscription: one attempt, event failed, DLQ with reason http_4xx, a new subscribe succeeds', async () => {
    world.receiver.respondWith(410);
    const sent = await gateway.postMessage('gone');
    const run = await pollOnce(world.fauxqs, delivery);
    expect(run?.response).toEqual({ batchItemFailures: [] });
    expect(world.receiver.events.map((e) => e.status)).toEqual([410]);
    expect(await world.store.getEvent(sent.body.eventId!, Date.now())).toMatchObject({ status: EventStatus.failed, attempts: 1, lastError: 'http_4xx' });

    const [dead] = await world.fauxqs.receive(world.fauxqs.deadLetterQueueUrl);
    expect(dead?.Body).toBe(run!.event.Records[0]!.body);
    expect(dead?.MessageAttributes?.reason?.StringValue).toBe('http_4xx');
    expect(dead?.MessageAttributes?.eventId?.StringValue).toBe(sent.body.eventId);
    expect(await queueCounts(world.fauxqs.queueUrl)).toEqual({ visible: 0, inFlight: 0 });
    // Nothing left to retry: no second attempt ever happens.
    expect(await pollOnce(world.fauxqs, delivery, { timeoutMs: 1_000 })).toBeUndefined();
    expect(world.receiver.events).toHaveLength(1);
    // Standard Webhooks: 410 Gone ends the subscription (the dot was removed), so nothing is locked out.
    expect(await world.store.getSubscription(Date.now())).toBeUndefined();
    expect((await gateway.postMessage('after gone')).status).toBe(409);
    world.receiver.reset();
    expect((await subscribe(gateway, secret)).body.error).toBeUndefined();
  });

  test('DEL-PIPE-18: the retry schedule exhausted: the DLQ gets it with the last category', async () => {
    world.receiver.setDefaultStatus(500);
    const sent = await gateway.postMessage('always failing');
    const statuses: string[][] = [];
    // DMDOT_RETRY_DELAYS=2,2: three attempts, the third dead-letters.
    for (let run = 0; run < 3; run++) {
      const result = await pollOnce(world.fauxqs, delivery, { timeoutMs: 15_000 });
      statuses.push(result!.response.batchItemFailures.map((f) => f.itemIdentifier));
    }
    expect(statuses.map((s) => s.length)).toEqual([1, 1, 0]);
    expect(world.receiver.events).toHaveLength(3);
    const [dead] = await world.fauxqs.receive(world.fauxqs.deadLetterQueueUrl);
    expect(dead?.MessageAttributes?.reason?.StringValue).toBe('http_5xx');
    expect(await world.store.getEvent(sent.body.eventId!, Date.now())).toMatchObject({ status: EventStatus.failed, attempts: 3 });
  });

  test('a malformed record (no attributes) goes to the DLQ as malformed instead of looping', async () => {
    await world.fauxqs.client.send(new SendMessageCommand({ QueueUrl: world.fauxqs.queueUrl, MessageBody: '{"not":"ours"}' }));
    const run = await pollOnce(world.fauxqs, delivery);
    expect(run?.response).toEqual({ batchItemFailures: [] });
    const [dead] = await world.fauxqs.receive(world.fauxqs.deadLetterQueueUrl);
    expect(dead?.Body).toBe('{"not":"ours"}');
    expect(dead?.MessageAttributes?.reason?.StringValue).toBe('malformed');
    expect(world.receiver.events).toHaveLength(0);
  });

  test('storage down: the record is reported failed and kept, nothing is sent', async () => {
    const sent = await gateway.postMessage('storage outage');
    const broken = deliveryLambda({ ...world.env(), TABLE_NAME: 'no-such-table' });
    const messages = await world.fauxqs.receive(world.fauxqs.queueUrl);
    const event = sqsEventOf(messages);
    expect(await broken(event)).toEqual({ batchItemFailures: [{ itemIdentifier: messages[0]!.MessageId }] });
    expect(world.receiver.events).toHaveLength(0);
    // The same record, once storage is back, is delivered.
    expect(await delivery(event)).toEqual({ batchItemFailures: [] });
    expect(world.receiver.events).toHaveLength(1);
    expect((await world.store.getEvent(sent.body.eventId!, Date.now()))?.status).toBe(EventStatus.delivered);
  });

  test('the real entry files (middy, env, module-scope clients) serve a send and its delivery', async () => {
    const key = encodeURIComponent(API_KEY);
    const post = (path: string) =>
      new Request(`https://api.example${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"message":"via the entry files"}' });
    const events = [
      await eventFromRequest(new Request('https://api.example/healthz')),
      await eventFromRequest(post('/v1/messages')),
      await eventFromRequest(post(`/v1/messages?key=${key}`)),
    ];
    const [health, unauthenticated, queued] = await invokeEntry<APIGatewayProxyStructuredResultV2>('lambda/handlers/mcp.ts', world.env(), events);
    expect(health).toMatchObject({ statusCode: 200, body: '{"ok":true}' });
    expect(unauthenticated?.statusCode).toBe(401);
    expect(queued?.statusCode).toBe(202);
    const { eventId } = JSON.parse(queued!.body!) as { eventId: string };

    const messages = await world.fauxqs.receive(world.fauxqs.queueUrl);
    const [batch] = await invokeEntry<SQSBatchResponse>('lambda/handlers/delivery.ts', world.env(), [sqsEventOf(messages)]);
    expect(batch).toEqual({ batchItemFailures: [] });
    expect(world.receiver.events).toHaveLength(1);
    expect(verify(secret, world.receiver.events[0]!)).toMatchObject({ eventId, data: { message: 'via the entry files' } });
  }, 60_000);

  test('a failed dead-letter send is not a silent loss: the redelivered record reaches the DLQ, with no second POST', async () => {
    world.receiver.respondWith(404);
    const sent = await gateway.postMessage('dlq hiccup');
    const noDlq = deliveryLambda({ ...world.env(), DEAD_LETTER_QUEUE_URL: `${world.fauxqs.endpoint}/000000000000/no-such-queue` });
    const messages = await world.fauxqs.receive(world.fauxqs.queueUrl);
    const event = sqsEventOf(messages);
    expect((await noDlq(event)).batchItemFailures).toHaveLength(1);
    expect(await world.store.getEvent(sent.body.eventId!, Date.now())).toMatchObject({ status: EventStatus.failed, lastError: 'http_4xx' });

    expect(await delivery(event)).toEqual({ batchItemFailures: [] });
    expect(world.receiver.events).toHaveLength(1);
    const [dead] = await world.fauxqs.receive(world.fauxqs.deadLetterQueueUrl);
    expect(dead?.MessageAttributes?.reason?.StringValue).toBe('http_4xx');
    expect(dead?.MessageAttributes?.eventId?.StringValue).toBe(sent.body.eventId);
  });

  test('DEL-LEASE-2: three SendMessage copies of one job (retries that were all applied) in one batch make one POST', async () => {
    const sent = await gateway.postMessage('three copies, one POST');
    const [original] = await world.fauxqs.receive(world.fauxqs.queueUrl);
    expect(original?.MessageAttributes?.eventId?.StringValue).toBe(sent.body.eventId);
    for (let copy = 0; copy < 2; copy++) {
      await world.fauxqs.client.send(
        new SendMessageCommand({ QueueUrl: world.fauxqs.queueUrl, MessageBody: original!.Body!, MessageAttributes: original!.MessageAttributes! }),
      );
    }
    const copies = await world.fauxqs.receive(world.fauxqs.queueUrl, { max: 10 });
    if (copies.length < 2) copies.push(...(await world.fauxqs.receive(world.fauxqs.queueUrl, { max: 10 })));
    expect(copies).toHaveLength(2);
    const event = sqsEventOf([original!, ...copies]);
    const response = await delivery(event);
    expect(world.receiver.events).toHaveLength(1);
    expect(world.receiver.events[0]!.headers['webhook-id']).toBe(sent.body.eventId);
    expect(await world.store.getEvent(sent.body.eventId!, Date.now())).toMatchObject({ status: EventStatus.delivered, attempts: 1 });
    // The two that met the lease are kept until it runs out; when they surface they find it delivered.
    expect(response.batchItemFailures).toHaveLength(2);
    expect(await delivery(event)).toEqual({ batchItemFailures: [] });
    expect(world.receiver.events).toHaveLength(1);
    for (const record of event.Records)
      await world.fauxqs.client.send(new DeleteMessageCommand({ QueueUrl: world.fauxqs.queueUrl, ReceiptHandle: record.receiptHandle }));
  });

  test('DEL-PIPE-10: a batch is processed record by record: one failure does not fail the others', async () => {
    world.receiver.respondWith(503, 200, 200);
    const ids = [];
    for (const text of ['one', 'two', 'three']) ids.push((await gateway.postMessage(text)).body.eventId!);
    const messages = await world.fauxqs.receive(world.fauxqs.queueUrl, { max: 10 });
    // fauxqs may split the three over two receives; take what is there, then the rest.
    if (messages.length < 3) messages.push(...(await world.fauxqs.receive(world.fauxqs.queueUrl, { max: 10 })));
    expect(messages).toHaveLength(3);
    const response = await delivery(sqsEventOf(messages));
    expect(response.batchItemFailures).toHaveLength(1);
    expect(world.receiver.events.map((e) => e.status).sort()).toEqual([200, 200, 503]);
  });
});
