/**
 * Every AWS call on a request path has a deadline. Both Lambdas run in-process,
 * wired from their environment with dm-dot's own SDK client options (handlers/aws-clients.ts), against
 * DynamoDB Local, fauxqs and the fake Secrets Manager, each behind a fault proxy
 * (test/support/aws-fault-proxy.ts) whose `stall` accepts the connection and never answers: the
 * behaviour that, with `requestTimeout` alone, held a Lambda until its own timeout (the SDK's
 * node-http-handler only warns unless `throwOnRequestTimeout` is set).
 *
 * What is pinned, one failure mode a test: a stalled table gives `/v1/messages` a 503 and
 * `send_to_dot` an isError result within the contract's 5 s; `/healthz` answers while Secrets Manager is
 * stalled (it never waits for the key); a stalled table cannot hold a delivery batch past the
 * Lambda's timeout (each record answers failure and stays in SQS); a write stalled after a
 * successful POST fails only its own record, so the other records' POSTs are not repeated.
 *
 * Timing: the mechanism, not the number, is what most tests check, so they run it at a short
 * injected budget (the MCP Lambda's `requestMs` override; the Delivery Lambda's context with little
 * time left): the answer must come before that budget ends, and after the stall really held the
 * call (the proxy counted it, and the time reached the point where the deadline cuts in). One test,
 * the real entry file, keeps the contract's 5 s end to end, so the production number stays proven.
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { resolve } from 'node:path';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { SendMessageCommand, SQSClient } from '@aws-sdk/client-sqs';
import { DynamoDbStore } from '../../lambda/adapters/dynamodb-store';
import { QueueAttributes } from '../../lambda/adapters/sqs-queue';
import { buildEvent } from '../../lambda/core/messages';
import { Budgets, mcpDeadline } from '../../lambda/core/budgets';
import { EventStatus, Limits } from '../../lambda/core/protocol';
import { clientOptions } from '../../lambda/handlers/aws-clients';
import { deliveryLambdaFromEnvironment } from '../../lambda/handlers/delivery-lambda';
import { mcpLambdaFromEnvironment, type McpAwsClients } from '../../lambda/handlers/mcp-lambda';
import { createLogger } from '../../lambda/log';
import { systemClock, type Clock } from '../../lambda/ports';
import { eventFromRequest, localApiGateway } from '../support/apigw';
import { startFaultProxy, type FaultProxy } from '../support/aws-fault-proxy';
import { startDynamoDbLocal, type DynamoDbLocal } from '../support/dynamodb-local';
import { startFauxqs, type Fauxqs } from '../support/fauxqs';
import { sqsEventOf } from '../support/event-source';
import { startFakeSecretsManager, testSecretsReader, type FakeSecretsManager } from '../support/fake-secrets-manager';
import { startReceiver, type Receiver } from '../support/receiver';

const TABLE = 'dm-dot-deadlines';
const API_KEY = `dl-${randomBytes(24).toString('base64url')}`;
const MODERN = '2026-07-28';
const REGION = 'us-east-1';

/** The contract's budget of one MCP request: only the real entry file's test runs at it. */
const MCP_REQUEST_BUDGET_MS = Limits.requestMs;
/**
 * The budget the other MCP tests inject (McpLambdaOverrides.requestMs). Its deadline comes
 * Budgets.mcpAnswerReserveMs before its end, at 1.2 s: a stalled call is cut there by the abort
 * signal alone, as the SDK's own per-attempt timeout (Budgets.awsAttemptMs, 2 s) comes later.
 */
const SHORT_REQUEST_MS = 2_000;
/** Node's timers may fire a millisecond early against Date.now(): the slack of the lower bounds. */
const TIMER_SLACK_MS = 10;
/** Where a stalled call is cut at `requestMs`, counted from when the request was made. */
const cutAt = (requestMs: number) => mcpDeadline(0, requestMs);

let ddb: DynamoDbLocal;
let fauxqs: Fauxqs;
let secrets: FakeSecretsManager;
let receiver: Receiver;
let ddbProxy: FaultProxy;
let sqsProxy: FaultProxy;
let secretsProxy: FaultProxy;
let store: DynamoDbStore;
let subscriptionId: string;
const logLines: string[] = [];
const clients: { destroy(): void }[] = [];

/** Fresh clients (a cold start) with dm-dot's options, through the fault proxies. */
function awsClients(): McpAwsClients {
  const made = {
    // DynamoDB Local keeps one database per access key id: the same as the helper's client.
    dynamodb: new DynamoDBClient({ ...clientOptions(), endpoint: ddbProxy.endpoint, region: REGION, credentials: { accessKeyId: 'local', secretAccessKey: 'local' } }),
    sqs: new SQSClient({ ...clientOptions(), endpoint: sqsProxy.endpoint, region: REGION, credentials: { accessKeyId: 'test', secretAccessKey: 'test' } }),
    secrets: testSecretsReader(secretsProxy.endpoint),
  };
  clients.push(made.dynamodb, made.sqs);
  return made;
}

function env(): NodeJS.ProcessEnv {
  return {
    TABLE_NAME: TABLE,
    QUEUE_URL: fauxqs.queueUrl,
    DEAD_LETTER_QUEUE_URL: fauxqs.deadLetterQueueUrl,
    API_KEY_SECRET_ARN: secrets.arn,
    DMDOT_DELIVERY_WAIT_MS: '0',
    DMDOT_RETRY_DELAYS: '2,2',
    DMDOT_ALLOW_LOOPBACK_CALLBACKS: '1',
  };
}

/** The MCP Lambda behind a local API Gateway; `requestMs` injects a short request budget. */
function mcpGateway(options: { requestMs?: number } = {}, awsClientsForIt: McpAwsClients = awsClients()) {
  const log = createLogger((line) => logLines.push(line));
  return localApiGateway(mcpLambdaFromEnvironment(env(), awsClientsForIt, { log, ...options }));
}

function deliveryLambda(clock?: Clock) {
  const { dynamodb, sqs } = awsClients();
  return deliveryLambdaFromEnvironment(env(), { dynamodb, sqs }, { log: createLogger((line) => logLines.push(line)), ...(clock ? { clock } : {}) });
}

/** Calls the proxy has stalled so far, of one action or of all (its counts run over the whole file). */
function stalls(proxy: FaultProxy, action?: string): number {
  return Object.entries(proxy.counts())
    .filter(([key]) => (action === undefined ? key.endsWith(':stall') : key === `${action}:stall`))
    .reduce((sum, [, n]) => sum + n, 0);
}

/** A Lambda context whose remaining time runs down from `ms`. */
function contextWith(ms: number) {
  const started = Date.now();
  return { getRemainingTimeInMillis: () => ms - (Date.now() - started) };
}

async function timed<T>(fn: () => Promise<T>): Promise<{ value: T; ms: number }> {
  const started = Date.now();
  const value = await fn();
  return { value, ms: Date.now() - started };
}

async function postMessage(gateway: ReturnType<typeof mcpGateway>, message: string) {
  const response = await gateway.fetch('https://api.example/v1/messages', {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${API_KEY}` },
    body: JSON.stringify({ message }),
  });
  return { status: response.status, body: (await response.json()) as { eventId?: string; status?: string; error?: { code: string } } };
}

async function rpc(gateway: ReturnType<typeof mcpGateway>, method: string, params: Record<string, unknown>) {
  const response = await gateway.fetch(`https://api.example/mcp?key=${encodeURIComponent(API_KEY)}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': MODERN, 'mcp-method': method, ...(method === 'tools/call' ? { 'mcp-name': String(params.name) } : {}) },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method,
      params: { ...params, _meta: { 'io.modelcontextprotocol/protocolVersion': MODERN, 'io.modelcontextprotocol/clientCapabilities': {} } },
    }),
  });
  return { status: response.status, body: (await response.json()) as { result?: Record<string, unknown>; error?: { code: number } } };
}

/** A queued event in the table and its message in fauxqs (what the MCP side would have made). */
async function queuedJob(message: string): Promise<string> {
  const eventId = `evt_${randomBytes(16).toString('hex')}`;
  const now = Date.now();
  await store.putEvent({ eventId, status: EventStatus.queued, subscriptionId, attempts: 0, createdAt: now, expiresAt: now + Limits.eventRecordMs });
  await fauxqs.client.send(
    new SendMessageCommand({
      QueueUrl: fauxqs.queueUrl,
      MessageBody: buildEvent(eventId, message, now),
      MessageAttributes: {
        [QueueAttributes.eventId]: { DataType: 'String', StringValue: eventId },
        [QueueAttributes.subscriptionId]: { DataType: 'String', StringValue: subscriptionId },
      },
    }),
  );
  return eventId;
}

beforeAll(async () => {
  [ddb, fauxqs, secrets, receiver] = await Promise.all([startDynamoDbLocal(), startFauxqs(), startFakeSecretsManager(undefined, { verifySignatures: false }), startReceiver()]);
  [ddbProxy, sqsProxy, secretsProxy] = await Promise.all([
    startFaultProxy('dynamodb', ddb.endpoint),
    startFaultProxy('sqs', fauxqs.endpoint),
    startFaultProxy('secretsmanager', secrets.endpoint),
  ]);
  await ddb.createTable(TABLE);
  secrets.setSecret(API_KEY);
  store = new DynamoDbStore({ client: ddb.client, tableName: TABLE });
  const subscribed = await rpc(mcpGateway(), 'events/subscribe', {
    name: 'message.created',
    arguments: {},
    delivery: { mode: 'webhook', url: receiver.url, secret: `whsec_${randomBytes(32).toString('base64')}` },
  });
  expect(subscribed.body.error).toBeUndefined();
  subscriptionId = String(subscribed.body.result?.id);
}, 60_000);

afterEach(async () => {
  for (const proxy of [ddbProxy, sqsProxy, secretsProxy]) {
    proxy.setRule(() => 'pass');
    proxy.releaseHeld();
  }
  receiver.reset();
  await fauxqs.purge();
  expect(logLines.join('\n')).not.toContain(API_KEY);
});

afterAll(async () => {
  for (const client of clients) client.destroy();
  await Promise.all([ddbProxy?.stop(), sqsProxy?.stop(), secretsProxy?.stop()]);
  await Promise.all([ddb?.stop(), fauxqs?.stop(), secrets?.stop(), receiver?.stop()]);
});

describe('DEL-PIPE-9: MCP Lambda: a stalled dependency is an answer within 5 s', () => {
  test('DEL-REST-2: stalled DynamoDB: POST /v1/messages answers 503 within 5 s, at a short injected budget', async () => {
    const gateway = mcpGateway({ requestMs: SHORT_REQUEST_MS });
    // The key loads first (Secrets Manager passes), then every table call stalls.
    await gateway.fetch('https://api.example/healthz');
    ddbProxy.setRule(() => 'stall');
    const before = stalls(ddbProxy, 'GetItem');
    const { value, ms } = await timed(() => postMessage(gateway, 'into the void'));
    expect(value.status).toBe(503);
    expect(value.body.error?.code).toBeDefined();
    expect(stalls(ddbProxy, 'GetItem')).toBeGreaterThan(before);
    expect(ms).toBeGreaterThanOrEqual(cutAt(SHORT_REQUEST_MS) - TIMER_SLACK_MS);
    expect(ms).toBeLessThan(SHORT_REQUEST_MS);
  }, 20_000);

  test('TOOL-8: stalled DynamoDB: send_to_dot is an isError tool result within 5 s, at a short injected budget', async () => {
    const gateway = mcpGateway({ requestMs: SHORT_REQUEST_MS });
    ddbProxy.setRule(() => 'stall');
    const before = stalls(ddbProxy);
    const { value, ms } = await timed(() => rpc(gateway, 'tools/call', { name: 'send_to_dot', arguments: { message: 'into the void' } }));
    expect(value.status).toBe(200);
    expect(value.body.error).toBeUndefined();
    expect(value.body.result).toMatchObject({ isError: true });
    expect(stalls(ddbProxy)).toBeGreaterThan(before);
    expect(ms).toBeGreaterThanOrEqual(cutAt(SHORT_REQUEST_MS) - TIMER_SLACK_MS);
    expect(ms).toBeLessThan(SHORT_REQUEST_MS);
  }, 20_000);

  test('the real entry file, its clients found through AWS_ENDPOINT_URL_DYNAMODB: a stalled table is a 503 within 5 s (the real 5 s budget, end to end)', async () => {
    ddbProxy.setRule(() => 'stall');
    const before = stalls(ddbProxy, 'GetItem');
    const root = resolve(__dirname, '../..');
    const request = new Request('https://api.example/v1/messages', {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${API_KEY}` },
      body: JSON.stringify({ message: 'through the entry' }),
    });
    const child = spawn(resolve(root, 'node_modules/.bin/tsx'), [resolve(__dirname, '../support/invoke-entry.ts'), resolve(root, 'lambda/handlers/mcp.ts')], {
      cwd: root,
      env: {
        PATH: process.env.PATH,
        HOME: process.env.HOME,
        ...env(),
        AWS_REGION: REGION,
        AWS_ACCESS_KEY_ID: 'local',
        AWS_SECRET_ACCESS_KEY: 'local',
        AWS_EC2_METADATA_DISABLED: 'true',
        AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
        AWS_ENDPOINT_URL_DYNAMODB: ddbProxy.endpoint,
        AWS_ENDPOINT_URL_SQS: fauxqs.endpoint,
        AWS_ENDPOINT_URL_SECRETS_MANAGER: secrets.endpoint,
        INVOKE_ENTRY_TIMINGS: '1',
      },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString('utf8')));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString('utf8')));
    child.stdin.end(JSON.stringify([await eventFromRequest(request)]));
    const timer = setTimeout(() => child.kill('SIGKILL'), 40_000);
    const code = await new Promise<number | null>((done) => child.once('close', done));
    clearTimeout(timer);
    logLines.push(stderr);
    expect(code).toBe(0);
    const [result] = JSON.parse(stdout.trim().split('\n').at(-1)!) as { statusCode: number; body: string }[];
    expect(result!.statusCode).toBe(503);
    // The table's 503, not the key's: the key loaded, the storage call was cut at the deadline.
    expect(JSON.parse(result!.body)).toMatchObject({ error: { code: 'storage_unavailable' } });
    const timings = JSON.parse(/invoke-entry timings: (\[.*\])/.exec(stderr)![1]!) as number[];
    // Cut at the production deadline: not later than the contract's 5 s, and not earlier either
    // (no test budget reaches the entry file).
    expect(timings[0]).toBeGreaterThanOrEqual(cutAt(MCP_REQUEST_BUDGET_MS) - TIMER_SLACK_MS);
    expect(timings[0]).toBeLessThan(MCP_REQUEST_BUDGET_MS);
    expect(stalls(ddbProxy, 'GetItem')).toBeGreaterThan(before);
  }, 60_000);

  test('DEL-REST-2: stalled SQS: the send answers 503 within 5 s, at a short injected budget', async () => {
    // The outbox keeps Budgets.outboxCompensationReserveMs (absolute) back from the deadline for
    // its compensating write, so this budget adds that reserve to the short one: the stalled
    // SendMessage gets the same 1.2 s the other stalls do, after the reads and PutItem before it.
    const requestMs = SHORT_REQUEST_MS + Budgets.outboxCompensationReserveMs;
    const gateway = mcpGateway({ requestMs });
    sqsProxy.setRule(() => 'stall');
    const before = stalls(sqsProxy, 'SendMessage');
    const { value, ms } = await timed(() => postMessage(gateway, 'queue is stuck'));
    expect(value.status).toBe(503);
    expect(stalls(sqsProxy, 'SendMessage')).toBeGreaterThan(before);
    // Held at least one attempt's cap (or to the keep-back, whichever came first): the stall, not an early failure.
    expect(ms).toBeGreaterThanOrEqual(Math.min(Budgets.outboxAttemptMs, cutAt(requestMs) - Budgets.outboxCompensationReserveMs) - TIMER_SLACK_MS);
    expect(ms).toBeLessThan(requestMs);
    expect(receiver.events).toHaveLength(0);
  }, 20_000);

  test('HTTP-4: stalled Secrets Manager: /healthz answers 200 while the key read is still held', async () => {
    secretsProxy.setRule(() => 'stall');
    // A cold start: the init-phase key read goes out and stalls.
    const gateway = mcpGateway();
    for (let i = 0; i < 100 && secretsProxy.held() === 0; i++) await new Promise((r) => setTimeout(r, 20));
    expect(secretsProxy.held()).toBe(1);
    const health = await gateway.fetch('https://api.example/healthz');
    expect(health.status).toBe(200);
    expect(await health.json()).toEqual({ ok: true });
    // The key read was still held by the proxy when /healthz answered: it did not wait for it.
    expect(secretsProxy.held()).toBe(1);
  }, 20_000);

  test('HTTP-8: stalled Secrets Manager: an authenticated route answers 503 within 5 s, at a short injected budget', async () => {
    secretsProxy.setRule(() => 'stall');
    const before = stalls(secretsProxy);
    const gateway = mcpGateway({ requestMs: SHORT_REQUEST_MS });
    const { value, ms } = await timed(() => postMessage(gateway, 'no key yet'));
    expect(value.status).toBe(503);
    expect(stalls(secretsProxy)).toBeGreaterThan(before);
    // Cut at the request's own deadline, which comes before the key read's cap (Budgets.secretReadCapMs).
    expect(ms).toBeGreaterThanOrEqual(cutAt(SHORT_REQUEST_MS) - TIMER_SLACK_MS);
    expect(ms).toBeLessThan(SHORT_REQUEST_MS);
  }, 20_000);
});

describe('Delivery Lambda: a stalled table cannot time out the batch', () => {
  test('every record of a batch answers failure before the Lambda timeout, and nothing is POSTed, at a short injected budget', async () => {
    const ids = [await queuedJob('one'), await queuedJob('two'), await queuedJob('three')];
    const messages = await fauxqs.receive(fauxqs.queueUrl, { max: 10 });
    expect(messages).toHaveLength(3);
    ddbProxy.setRule(() => 'stall');
    const before = stalls(ddbProxy);
    // The invocation's budget is its context's remaining time; its deadline comes
    // Budgets.deliveryEndReserveMs before the end, at 1 s, before the SDK's 2 s attempt cap.
    const remainingMs = 2_000;
    const { value, ms } = await timed(() => deliveryLambda()(sqsEventOf(messages), contextWith(remainingMs)));
    expect(value.batchItemFailures.map((f) => f.itemIdentifier).sort()).toEqual(messages.map((m) => m.MessageId!).sort());
    expect(stalls(ddbProxy)).toBeGreaterThanOrEqual(before + messages.length);
    expect(ms).toBeGreaterThanOrEqual(remainingMs - Budgets.deliveryEndReserveMs - TIMER_SLACK_MS);
    expect(ms).toBeLessThan(remainingMs);
    expect(receiver.events).toHaveLength(0);
    ddbProxy.setRule(() => 'pass');
    for (const id of ids) expect((await store.getEvent(id, Date.now()))?.status).toBe(EventStatus.queued);
  }, 30_000);

  test('a write stalled after a successful POST fails only its own record: the others are recorded and not sent again', async () => {
    const stuck = await queuedJob('stuck after POST');
    const fine = await queuedJob('fine');
    const messages = await fauxqs.receive(fauxqs.queueUrl, { max: 10 });
    expect(messages).toHaveLength(2);
    // Only the update that records `stuck` as delivered stalls (its lease before the POST, which
    // sets no status, passes; it runs out before the invocation's deadline).
    ddbProxy.setRule((call) => {
      const body = call.body as { Key?: { pk?: { S?: string } }; UpdateExpression?: string } | undefined;
      return call.action === 'UpdateItem' && body?.Key?.pk?.S === `EVENT#${stuck}` && body.UpdateExpression?.includes('#status =') ? 'stall' : 'pass';
    });
    // Room for the POST (Budgets.minPostMs after Budgets.deliveryRecordReserveMs and the end reserve,
    // webhookWithinDeadline) and 1.5 s for the reads and the lease before it, even on a busy machine.
    const remainingMs = Budgets.deliveryEndReserveMs + Budgets.deliveryRecordReserveMs + Budgets.minPostMs + 1_500;
    // The worker judges its lease on this clock; the test moves it past the lease instead of waiting.
    let skippedMs = 0;
    const clock: Clock = { now: () => Date.now() + skippedMs, sleep: (ms) => systemClock.sleep(ms) };
    const lambda = deliveryLambda(clock);
    const { value, ms } = await timed(() => lambda(sqsEventOf(messages), contextWith(remainingMs)));
    expect(ms).toBeLessThan(remainingMs);
    const stuckMessage = messages.find((m) => m.MessageAttributes?.eventId?.StringValue === stuck)!;
    expect(value.batchItemFailures).toEqual([{ itemIdentifier: stuckMessage.MessageId }]);
    expect((await store.getEvent(fine, Date.now()))?.status).toBe(EventStatus.delivered);
    expect(receiver.events.map((e) => e.headers['webhook-id']).sort()).toEqual([fine, stuck].sort());

    // SQS hands back only the record that was listed; the table recovers; `fine` is never sent again.
    ddbProxy.setRule(() => 'pass');
    ddbProxy.releaseHeld();
    // Its lease before the POST still holds (DEL-LEASE-2): until it ends no copy POSTs again.
    const leasedUntil = (await store.getEvent(stuck, Date.now()))?.notBefore ?? 0;
    if (leasedUntil > clock.now() + 1_000) {
      const early = await lambda(sqsEventOf([stuckMessage]), contextWith(remainingMs));
      expect(early).toEqual({ batchItemFailures: [{ itemIdentifier: stuckMessage.MessageId }] });
      expect(receiver.events.filter((e) => e.headers['webhook-id'] === stuck)).toHaveLength(1);
    }
    // The rest of the lease (Budgets.workerLeaseMs from before the POST) passes on the worker's clock.
    skippedMs = Math.max(0, leasedUntil - Date.now()) + 50;
    const again = await lambda(sqsEventOf([stuckMessage]), contextWith(remainingMs));
    expect(again).toEqual({ batchItemFailures: [] });
    const ids = receiver.events.map((e) => e.headers['webhook-id']);
    expect(ids.filter((id) => id === fine)).toHaveLength(1);
    expect((await store.getEvent(stuck, Date.now()))?.status).toBe(EventStatus.delivered);
  }, 40_000);
});
