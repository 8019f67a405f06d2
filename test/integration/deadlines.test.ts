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
import { spawnGroup as spawn, START_HOOK_MS } from '../support/processes';
import { randomBytes } from 'node:crypto';
import { resolve } from 'node:path';
import { SendMessageCommand } from '@aws-sdk/client-sqs';
import { QueueAttributes } from '../../lambda/adapters/sqs-queue';
import { buildEvent } from '../../lambda/core/messages';
import { Budgets, mcpDeadline } from '../../lambda/core/budgets';
import { EventStatus, Limits } from '../../lambda/core/protocol';
import { systemClock, type Clock } from '../../lambda/ports';
import { eventFromRequest } from '../support/apigw';
import { messageInit } from '../support/app';
import type { FaultProxy } from '../support/aws-fault-proxy';
import { startAwsWorld, subscribeForSetUp, timed, type AwsWorld } from '../support/aws-world';
import { sqsEventOf } from '../support/event-source';
import { pollUntil } from '../support/cpu-wait';

const TABLE = 'dm-dot-deadlines';
const API_KEY = `dl-${randomBytes(24).toString('base64url')}`;
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

let world: AwsWorld<'dynamodb' | 'sqs' | 'secretsmanager'>;
let subscriptionId: string;

/** The MCP Lambda behind a local API Gateway, a cold start on fresh clients; `requestMs` injects a short request budget. */
function mcpGateway(options: { requestMs?: number } = {}) {
  return world.mcpGateway({ overrides: options });
}

function deliveryLambda(clock?: Clock) {
  return world.deliveryLambda({ overrides: clock ? { clock } : {} });
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

/** A queued event in the table and its message in fauxqs (what the MCP side would have made). */
async function queuedJob(message: string): Promise<string> {
  const eventId = `evt_${randomBytes(16).toString('hex')}`;
  const now = Date.now();
  await world.store.putEvent({ eventId, status: EventStatus.queued, subscriptionId, attempts: 0, createdAt: now, expiresAt: now + Limits.eventRecordMs });
  await world.fauxqs.client.send(
    new SendMessageCommand({
      QueueUrl: world.fauxqs.queueUrl,
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
  world = await startAwsWorld({
    table: TABLE,
    apiKey: API_KEY,
    env: { DMDOT_DELIVERY_WAIT_MS: '0', DMDOT_RETRY_DELAYS: '2,2' },
    secrets: { verifySignatures: false },
    proxies: ['dynamodb', 'sqs', 'secretsmanager'],
  });
  subscriptionId = await subscribeForSetUp(world, world.receiver.url);
}, START_HOOK_MS);

afterEach(async () => {
  world.resetProxies();
  world.receiver.reset();
  await world.fauxqs.purge();
  expect(world.logLines.join('\n')).not.toContain(API_KEY);
});

afterAll(() => world?.stop());

describe('DEL-PIPE-9: MCP Lambda: a stalled dependency is an answer within 5 s', () => {
  test('DEL-REST-2: stalled DynamoDB: POST /v1/messages answers 503 within 5 s, at a short injected budget', async () => {
    const gateway = mcpGateway({ requestMs: SHORT_REQUEST_MS });
    // The key loads first (Secrets Manager passes), then every table call stalls.
    await gateway.fetch('https://api.example/healthz');
    world.proxies.dynamodb.setRule(() => 'stall');
    const before = stalls(world.proxies.dynamodb, 'GetItem');
    const { value, ms, cpuWaitMs } = await timed(() => gateway.postMessage('into the void'));
    expect(value.status).toBe(503);
    expect(value.body.error?.code).toBeDefined();
    expect(stalls(world.proxies.dynamodb, 'GetItem')).toBeGreaterThan(before);
    expect(ms).toBeGreaterThanOrEqual(cutAt(SHORT_REQUEST_MS) - TIMER_SLACK_MS);
    expect(ms).toBeLessThan(SHORT_REQUEST_MS + cpuWaitMs);
  }, 20_000);

  test('TOOL-8: stalled DynamoDB: send_to_dot is an isError tool result within 5 s, at a short injected budget', async () => {
    const gateway = mcpGateway({ requestMs: SHORT_REQUEST_MS });
    world.proxies.dynamodb.setRule(() => 'stall');
    const before = stalls(world.proxies.dynamodb);
    const { value, ms, cpuWaitMs } = await timed(() => gateway.sendToDot('into the void'));
    expect(value.status).toBe(200);
    expect(value.body.error).toBeUndefined();
    expect(value.body.result).toMatchObject({ isError: true });
    expect(stalls(world.proxies.dynamodb)).toBeGreaterThan(before);
    expect(ms).toBeGreaterThanOrEqual(cutAt(SHORT_REQUEST_MS) - TIMER_SLACK_MS);
    expect(ms).toBeLessThan(SHORT_REQUEST_MS + cpuWaitMs);
  }, 20_000);

  test('the real entry file, its clients found through AWS_ENDPOINT_URL_DYNAMODB: a stalled table is a 503 within 5 s (the real 5 s budget, end to end)', async () => {
    world.proxies.dynamodb.setRule(() => 'stall');
    const before = stalls(world.proxies.dynamodb, 'GetItem');
    const root = resolve(__dirname, '../..');
    const request = new Request('https://api.example/v1/messages', messageInit('through the entry', API_KEY));
    const child = spawn(resolve(root, 'node_modules/.bin/tsx'), [resolve(__dirname, '../support/invoke-entry.ts'), resolve(root, 'lambda/handlers/mcp.ts')], {
      cwd: root,
      env: {
        PATH: process.env.PATH,
        HOME: process.env.HOME,
        ...world.env(),
        AWS_REGION: REGION,
        AWS_ACCESS_KEY_ID: 'local',
        AWS_SECRET_ACCESS_KEY: 'local',
        AWS_EC2_METADATA_DISABLED: 'true',
        AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
        AWS_ENDPOINT_URL_DYNAMODB: world.proxies.dynamodb.endpoint,
        AWS_ENDPOINT_URL_SQS: world.fauxqs.endpoint,
        AWS_ENDPOINT_URL_SECRETS_MANAGER: world.secrets.endpoint,
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
    world.logLines.push(stderr);
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
    expect(stalls(world.proxies.dynamodb, 'GetItem')).toBeGreaterThan(before);
  }, 60_000);

  test('DEL-REST-2: stalled SQS: the send answers 503 within 5 s, at a short injected budget', async () => {
    // The outbox keeps Budgets.outboxCompensationReserveMs (absolute) back from the deadline for
    // its compensating write, so this budget adds that reserve to the short one: the stalled
    // SendMessage gets the same 1.2 s the other stalls do, after the reads and PutItem before it.
    const requestMs = SHORT_REQUEST_MS + Budgets.outboxCompensationReserveMs;
    const gateway = mcpGateway({ requestMs });
    world.proxies.sqs.setRule(() => 'stall');
    const before = stalls(world.proxies.sqs, 'SendMessage');
    const { value, ms, cpuWaitMs } = await timed(() => gateway.postMessage('queue is stuck'));
    expect(value.status).toBe(503);
    expect(stalls(world.proxies.sqs, 'SendMessage')).toBeGreaterThan(before);
    // Held at least one attempt's cap (or to the keep-back, whichever came first): the stall, not an early failure.
    expect(ms).toBeGreaterThanOrEqual(Math.min(Budgets.outboxAttemptMs, cutAt(requestMs) - Budgets.outboxCompensationReserveMs) - TIMER_SLACK_MS);
    expect(ms).toBeLessThan(requestMs + cpuWaitMs);
    expect(world.receiver.events).toHaveLength(0);
  }, 20_000);

  test('HTTP-4: stalled Secrets Manager: /healthz answers 200 while the key read is still held', async () => {
    world.proxies.secretsmanager.setRule(() => 'stall');
    // A cold start: the init-phase key read goes out and stalls.
    const gateway = mcpGateway();
    await pollUntil(() => world.proxies.secretsmanager.held() > 0, { limitMs: 2_000 });
    expect(world.proxies.secretsmanager.held()).toBe(1);
    const health = await gateway.fetch('https://api.example/healthz');
    expect(health.status).toBe(200);
    expect(await health.json()).toEqual({ ok: true });
    // The key read was still held by the proxy when /healthz answered: it did not wait for it.
    expect(world.proxies.secretsmanager.held()).toBe(1);
  }, 20_000);

  test('HTTP-8: stalled Secrets Manager: an authenticated route answers 503 within 5 s, at a short injected budget', async () => {
    world.proxies.secretsmanager.setRule(() => 'stall');
    const before = stalls(world.proxies.secretsmanager);
    const gateway = mcpGateway({ requestMs: SHORT_REQUEST_MS });
    const { value, ms, cpuWaitMs } = await timed(() => gateway.postMessage('no key yet'));
    expect(value.status).toBe(503);
    expect(stalls(world.proxies.secretsmanager)).toBeGreaterThan(before);
    // Cut at the request's own deadline, which comes before the key read's cap (Budgets.secretReadCapMs).
    expect(ms).toBeGreaterThanOrEqual(cutAt(SHORT_REQUEST_MS) - TIMER_SLACK_MS);
    expect(ms).toBeLessThan(SHORT_REQUEST_MS + cpuWaitMs);
  }, 20_000);
});

describe('Delivery Lambda: a stalled table cannot time out the batch', () => {
  test('every record of a batch answers failure before the Lambda timeout, and nothing is POSTed, at a short injected budget', async () => {
    const ids = [await queuedJob('one'), await queuedJob('two'), await queuedJob('three')];
    const messages = await world.fauxqs.receive(world.fauxqs.queueUrl, { max: 10 });
    expect(messages).toHaveLength(3);
    world.proxies.dynamodb.setRule(() => 'stall');
    const before = stalls(world.proxies.dynamodb);
    // The invocation's budget is its context's remaining time; its deadline comes
    // Budgets.deliveryEndReserveMs before the end, at 1 s, before the SDK's 2 s attempt cap.
    const remainingMs = 2_000;
    const { value, ms, cpuWaitMs } = await timed(() => deliveryLambda()(sqsEventOf(messages), contextWith(remainingMs)));
    expect(value.batchItemFailures.map((f) => f.itemIdentifier).sort()).toEqual(messages.map((m) => m.MessageId!).sort());
    expect(stalls(world.proxies.dynamodb)).toBeGreaterThanOrEqual(before + messages.length);
    expect(ms).toBeGreaterThanOrEqual(remainingMs - Budgets.deliveryEndReserveMs - TIMER_SLACK_MS);
    expect(ms).toBeLessThan(remainingMs + cpuWaitMs);
    expect(world.receiver.events).toHaveLength(0);
    world.proxies.dynamodb.setRule(() => 'pass');
    for (const id of ids) expect((await world.store.getEvent(id, Date.now()))?.status).toBe(EventStatus.queued);
  }, 30_000);

  test('a write stalled after a successful POST fails only its own record: the others are recorded and not sent again', async () => {
    const stuck = await queuedJob('stuck after POST');
    const fine = await queuedJob('fine');
    const messages = await world.fauxqs.receive(world.fauxqs.queueUrl, { max: 10 });
    expect(messages).toHaveLength(2);
    // Only the update that records `stuck` as delivered stalls (its lease before the POST, which
    // sets no status, passes; it runs out before the invocation's deadline).
    world.proxies.dynamodb.setRule((call) => {
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
    const { value, ms, cpuWaitMs } = await timed(() => lambda(sqsEventOf(messages), contextWith(remainingMs)));
    expect(ms).toBeLessThan(remainingMs + cpuWaitMs);
    const stuckMessage = messages.find((m) => m.MessageAttributes?.eventId?.StringValue === stuck)!;
    expect(value.batchItemFailures).toEqual([{ itemIdentifier: stuckMessage.MessageId }]);
    expect((await world.store.getEvent(fine, Date.now()))?.status).toBe(EventStatus.delivered);
    expect(world.receiver.events.map((e) => e.headers['webhook-id']).sort()).toEqual([fine, stuck].sort());

    // SQS hands back only the record that was listed; the table recovers; `fine` is never sent again.
    world.proxies.dynamodb.setRule(() => 'pass');
    world.proxies.dynamodb.releaseHeld();
    // Its lease before the POST still holds (DEL-LEASE-2): until it ends no copy POSTs again.
    const leasedUntil = (await world.store.getEvent(stuck, Date.now()))?.notBefore ?? 0;
    if (leasedUntil > clock.now() + 1_000) {
      const early = await lambda(sqsEventOf([stuckMessage]), contextWith(remainingMs));
      expect(early).toEqual({ batchItemFailures: [{ itemIdentifier: stuckMessage.MessageId }] });
      expect(world.receiver.events.filter((e) => e.headers['webhook-id'] === stuck)).toHaveLength(1);
    }
    // The rest of the lease (Budgets.workerLeaseMs from before the POST) passes on the worker's clock.
    skippedMs = Math.max(0, leasedUntil - Date.now()) + 50;
    const again = await lambda(sqsEventOf([stuckMessage]), contextWith(remainingMs));
    expect(again).toEqual({ batchItemFailures: [] });
    const ids = world.receiver.events.map((e) => e.headers['webhook-id']);
    expect(ids.filter((id) => id === fine)).toHaveLength(1);
    expect((await world.store.getEvent(stuck, Date.now()))?.status).toBe(EventStatus.delivered);
  }, 40_000);
});
