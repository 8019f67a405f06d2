/**
 * The `--aws` variants of the operator CLI, in-process through `main`, against DynamoDB Local (the
 * table, read and written with the same DynamoDbStore the Lambdas use) and fauxqs (the queues):
 * `events`, `events show`, `events resend`, `subscription show|clear`, `redrive`, `status`,
 * `connect` and `key rotate` (with a warm MCP Lambda in-process, which must follow it). DescribeStacks, CloudWatch, Lambda and Secrets Manager are fakes (an
 * object with `send`) injected through the CLI's io, as the SDK clients would be.
 *
 * fauxqs 1.9.2 does not implement StartMessageMoveTask / ListMessageMoveTasks (its README lists
 * them as unsupported), so `MoveTaskSqs` below plays SQS's part for those two actions, as the API
 * reference describes them, over fauxqs's real queues (receive from the DLQ, send to the
 * destination with body and attributes unchanged, delete); every other call goes to fauxqs.
 * https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_StartMessageMoveTask.html
 * https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_ListMessageMoveTasksResultEntry.html
 */
import { ScanCommand, type DynamoDBClient } from '@aws-sdk/client-dynamodb';
import {
  DeleteMessageCommand,
  GetQueueAttributesCommand,
  ListMessageMoveTasksCommand,
  ReceiveMessageCommand,
  SendMessageCommand,
  StartMessageMoveTaskCommand,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { DynamoDbStore } from '../../lambda/adapters/dynamodb-store';
import { QueueAttributes, SqsQueue } from '../../lambda/adapters/sqs-queue';
import { movePoll } from '../../lambda/cli/commands/redrive';
import type { AwsClients, SendsCommands } from '../../lambda/cli/io';
import { AccessLimits, Limits } from '../../lambda/core/protocol';
import { mcpLambdaFromEnvironment } from '../support/lambda-environment';
import { createLogger } from '../../lambda/log';
import { localApiGateway } from '../support/apigw';
import { messageInit } from '../support/app';
import type { EventRecord, SubscriptionRecord } from '../../lambda/ports';
import { sha256Hex } from '../../lambda/core/identity';
import { startDynamoDbLocal, type DynamoDbLocal } from '../support/dynamodb-local';
import { startFauxqs, type Fauxqs } from '../support/fauxqs';
import { ROOT } from '../support/paths';
import { START_HOOK_MS } from '../support/processes';
import { run as runCli } from '../unit/cli/support';

let dynamo: DynamoDbLocal;
let fauxqs: Fauxqs;
let tables = 0;

beforeAll(async () => {
  [dynamo, fauxqs] = await Promise.all([startDynamoDbLocal(), startFauxqs()]);
  movePoll.intervalMs = 10;
}, START_HOOK_MS);

afterAll(async () => {
  await Promise.all([dynamo?.stop(), fauxqs?.stop()]);
});

/** No AWS_REGION, no DMDOT_TABLE: everything comes from the flags, the injected clients and the stack outputs. */
async function run(argv: string[], aws: AwsClients, answer?: string) {
  const r = await runCli(argv, { aws, env: {}, ...(answer !== undefined ? { answer } : {}) });
  return { code: r.code, out: r.out, err: r.err };
}

const NOW = Date.now();
const SECRET = 'whsec_c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0';

function subscription(overrides: Partial<SubscriptionRecord> = {}): SubscriptionRecord {
  return {
    id: `sub_${'1'.repeat(32)}`,
    url: 'https://dot.example.com/hooks/private-path?token=abc',
    name: 'message.created',
    secret: SECRET,
    principal: 'p',
    createdAt: NOW - 60_000,
    refreshedAt: NOW - 30_000,
    expiresAt: NOW + 3_600_000,
    lastDeliveryAt: NOW - 10_000,
    lastError: 'http_5xx',
    ...overrides,
  };
}

function event(n: number, overrides: Partial<EventRecord> = {}): EventRecord {
  return {
    eventId: `evt_${n.toString(16).padStart(32, '0')}`,
    status: 'delivered',
    subscriptionId: `sub_${'1'.repeat(32)}`,
    attempts: 1,
    createdAt: NOW - 100_000 + n * 1000,
    deliveredAt: NOW - 100_000 + n * 1000 + 50,
    expiresAt: NOW + Limits.eventRecordMs,
    ...overrides,
  };
}

async function seededTable() {
  const tableName = `dm-dot-cli-${++tables}`;
  await dynamo.createTable(tableName);
  const store = new DynamoDbStore({ client: dynamo.client, tableName });
  return { tableName, store };
}

/** Forces small Scan pages (Limit 2) so that the paging loop over LastEvaluatedKey is exercised. */
function smallPages(client: DynamoDBClient): { client: DynamoDBClient; scans: () => number } {
  let scans = 0;
  const wrapped = {
    send(command: unknown) {
      if (command instanceof ScanCommand) {
        scans++;
        return client.send(new ScanCommand({ ...command.input, Limit: 2 }));
      }
      return client.send(command as never);
    },
  };
  return { client: wrapped as unknown as DynamoDBClient, scans: () => scans };
}

describe('CLI-4, CLI-13: dm-dot events --aws', () => {
  it('lists the live events of the table, newest first, through a paged Scan; filters by status; --last', async () => {
    const { tableName, store } = await seededTable();
    await store.putSubscription(subscription(), NOW, { kind: 'absent' });
    for (let n = 1; n <= 5; n++) await store.putEvent(event(n));
    await store.putEvent(event(6, { status: 'failed', attempts: 6, lastError: 'http_5xx', lastHttpStatus: 503, deliveredAt: undefined }));
    await store.putEvent(event(7, { createdAt: NOW - Limits.eventRecordMs - 1000, expiresAt: NOW - 1000 })); // expired, TTL not yet run
    const paged = smallPages(dynamo.client);

    const all = await run(['events', '--aws', '--table', tableName, '--json', '--last', '100'], { dynamodb: paged.client });
    expect(all.code).toBe(0);
    const listed = JSON.parse(all.out).events as { eventId: string; status: string }[];
    expect(listed.map((e) => e.eventId)).toEqual([6, 5, 4, 3, 2, 1].map((n) => event(n).eventId));
    expect(paged.scans()).toBeGreaterThanOrEqual(4); // 8 items in pages of 2

    const failed = await run(['events', '--aws', '--table', tableName, '--status', 'failed'], { dynamodb: dynamo.client });
    expect(failed.code).toBe(0);
    expect(failed.out).toMatch(/^EVENT +STATUS +ATTEMPTS +LAST ERROR +CREATED +DELIVERED +SENDER +READ$/m);
    expect(failed.out).toMatch(new RegExp(`^${event(6).eventId}  failed +6 +http_5xx +\\S+Z +- +- +-$`, 'm'));
    expect(failed.out.trim().split('\n')).toHaveLength(2);

    const last = await run(['events', '--aws', '--table', tableName, '--last', '2', '--json'], { dynamodb: dynamo.client });
    expect(JSON.parse(last.out).events.map((e: { eventId: string }) => e.eventId)).toEqual([event(6).eventId, event(5).eventId]);
  }, 30_000);

  it('is read-only: the table holds the same items after listing', async () => {
    const { tableName, store } = await seededTable();
    await store.putEvent(event(1));
    const before = await dynamo.client.send(new ScanCommand({ TableName: tableName }));
    expect((await run(['events', '--aws', '--table', tableName], { dynamodb: dynamo.client })).code).toBe(0);
    const after = await dynamo.client.send(new ScanCommand({ TableName: tableName }));
    expect(after.Items).toEqual(before.Items);
  });
});

describe('CLI-6: dm-dot subscription --aws', () => {
  it('show never prints the secret or the callback path; clear asks (no keeps it, yes ends it) and another callback subscribes at once', async () => {
    const { tableName, store } = await seededTable();
    await store.putSubscription(subscription(), NOW, { kind: 'absent' });
    const aws = { dynamodb: dynamo.client };

    const show = await run(['subscription', 'show', '--aws', '--table', tableName], aws);
    expect(show.code).toBe(0);
    expect(show.out).toMatch(/^callback host +dot\.example\.com$/m);
    expect(show.out).toMatch(/^last error +http_5xx$/m);
    expect(show.out).not.toMatch(/private-path|token=abc|whsec_|c2VjcmV0/);

    const json = await run(['subscription', '--aws', '--table', tableName, '--json'], aws);
    expect(JSON.parse(json.out).subscription).toEqual({
      id: subscription().id,
      callbackHost: 'dot.example.com',
      createdAt: new Date(NOW - 60_000).toISOString(),
      refreshedAt: new Date(NOW - 30_000).toISOString(),
      expiresAt: new Date(NOW + 3_600_000).toISOString(),
      lastDeliveryAt: new Date(NOW - 10_000).toISOString(),
      lastError: 'http_5xx',
    });

    const refused = await run(['subscription', 'clear', '--aws', '--table', tableName], aws, 'n');
    expect(refused.code).toBe(1);
    expect(await store.getSubscription(Date.now())).toBeDefined();

    const blocked = await store.putSubscription(subscription({ id: `sub_${'2'.repeat(32)}`, url: 'https://new-dot.example.com/hook' }), Date.now(), {
      kind: 'absent',
    });
    expect(blocked.ok).toBe(false);

    const cleared = await run(['subscription', 'clear', '--aws', '--table', tableName], aws, 'yes');
    expect(cleared.code).toBe(0);
    expect(cleared.out).toContain(`Cleared subscription ${subscription().id}`);
    expect(await store.getSubscription(Date.now())).toBeUndefined();
    const next = await store.putSubscription(subscription({ id: `sub_${'2'.repeat(32)}`, url: 'https://new-dot.example.com/hook' }), Date.now(), {
      kind: 'absent',
    });
    expect(next).toEqual({ ok: true });

    const nothing = await run(['subscription', 'clear', '--yes', '--aws', '--table', `${tableName}-missing`], aws);
    expect(nothing.code).toBe(1); // ResourceNotFoundException: the table name is wrong
  }, 30_000);
});

/**
 * SQS's message move task, as documented, over fauxqs's queues: a snapshot of the DLQ is moved on
 * start; ListMessageMoveTasks reports RUNNING once, then the final status.
 */
class MoveTaskSqs {
  readonly started: StartMessageMoveTaskCommand['input'][] = [];
  private task: { handle: string; source: string; moved: number; toMove: number; listed: number } | undefined;

  constructor(
    private readonly real: SQSClient,
    private readonly outcome: 'COMPLETED' | 'FAILED' = 'COMPLETED',
  ) {}

  private urlOf(arn: string): string {
    return `${fauxqs.endpoint}/000000000000/${arn.split(':').pop()}`;
  }

  async send(command: unknown): Promise<unknown> {
    if (command instanceof StartMessageMoveTaskCommand) {
      const { SourceArn, DestinationArn } = command.input;
      this.started.push(command.input);
      if (this.task && this.task.listed < 2) throw Object.assign(new Error('There is already a task running.'), { name: 'UnsupportedOperation' });
      let moved = 0;
      for (;;) {
        const { Messages = [] } = await this.real.send(
          new ReceiveMessageCommand({ QueueUrl: this.urlOf(SourceArn!), MaxNumberOfMessages: 10, MessageAttributeNames: ['All'], WaitTimeSeconds: 0 }),
        );
        if (Messages.length === 0 || this.outcome === 'FAILED') break;
        for (const m of Messages) {
          await this.real.send(new SendMessageCommand({ QueueUrl: this.urlOf(DestinationArn!), MessageBody: m.Body!, MessageAttributes: m.MessageAttributes }));
          await this.real.send(new DeleteMessageCommand({ QueueUrl: this.urlOf(SourceArn!), ReceiptHandle: m.ReceiptHandle! }));
          moved++;
        }
      }
      this.task = { handle: `task-${this.started.length}`, source: SourceArn!, moved, toMove: moved, listed: 0 };
      return { TaskHandle: this.task.handle };
    }
    if (command instanceof ListMessageMoveTasksCommand) {
      const task = this.task!;
      task.listed++;
      const done = task.listed > 1;
      return {
        Results: [
          {
            TaskHandle: task.handle,
            SourceArn: task.source,
            Status: done ? this.outcome : 'RUNNING',
            ApproximateNumberOfMessagesMoved: done ? task.moved : 0,
            ApproximateNumberOfMessagesToMove: task.toMove,
            ...(done && this.outcome === 'FAILED' ? { FailureReason: 'AWS.SimpleQueueService.NonExistentQueue' } : {}),
          },
        ],
      };
    }
    return this.real.send(command as never);
  }
}

describe('CLI-9: dm-dot redrive --aws', () => {
  const flags = () => ['--aws', '--queue-url', fauxqs.queueUrl, '--dlq-url', fauxqs.deadLetterQueueUrl];

  beforeEach(() => fauxqs.purge());

  it('moves the dead letters back to the delivery queue with body and attributes (reason marks the redrive) and reports how many', async () => {
    const queue = new SqsQueue({ client: fauxqs.client, queueUrl: fauxqs.queueUrl, deadLetterQueueUrl: fauxqs.deadLetterQueueUrl });
    const body = '{"eventId":"evt_1","name":"message.created"}';
    await queue.sendToDeadLetter({ body, attributes: { eventId: 'evt_1', subscriptionId: 'sub_1' } }, 'http_4xx');
    await queue.sendToDeadLetter({ body: '{"second":true}', attributes: { eventId: 'evt_2', subscriptionId: 'sub_1' } }, 'http_5xx');
    const sqs = new MoveTaskSqs(fauxqs.client);

    const result = await run(['redrive', ...flags()], { sqs: sqs as unknown as SQSClient });
    expect(result.code).toBe(0);
    expect(result.out).toBe('Moved 2 messages from the dead-letter queue back to the delivery queue.\n');
    const arns = await Promise.all(
      [fauxqs.deadLetterQueueUrl, fauxqs.queueUrl].map(
        async (url) => (await fauxqs.client.send(new GetQueueAttributesCommand({ QueueUrl: url, AttributeNames: ['QueueArn'] }))).Attributes!.QueueArn,
      ),
    );
    // The destination is explicit: dm-dot's worker wrote these copies, so SQS knows no source queue.
    expect(sqs.started).toEqual([{ SourceArn: arns[0], DestinationArn: arns[1] }]);

    const moved = await fauxqs.receive(fauxqs.queueUrl, { max: 10 });
    const first = moved.find((m) => m.MessageAttributes?.[QueueAttributes.eventId]?.StringValue === 'evt_1');
    expect(first?.Body).toBe(body);
    expect(first?.MessageAttributes?.[QueueAttributes.reason]?.StringValue).toBe('http_4xx');
    expect(await fauxqs.receive(fauxqs.deadLetterQueueUrl, { timeoutMs: 300 })).toEqual([]);
  }, 30_000);

  it('an empty dead-letter queue starts no task; --json says so', async () => {
    const sqs = new MoveTaskSqs(fauxqs.client);
    const result = await run(['redrive', ...flags(), '--json'], { sqs: sqs as unknown as SQSClient });
    expect(result.code).toBe(0);
    expect(JSON.parse(result.out)).toEqual({ moved: 0, toMove: 0, status: 'NOTHING_TO_MOVE', failureReason: null });
    expect(sqs.started).toEqual([]);
  });

  it('a failed move task is exit 1 with its reason', async () => {
    await new SqsQueue({ client: fauxqs.client, queueUrl: fauxqs.queueUrl, deadLetterQueueUrl: fauxqs.deadLetterQueueUrl }).sendToDeadLetter(
      { body: '{}', attributes: { eventId: 'evt_3' } },
      'http_5xx',
    );
    const result = await run(['redrive', ...flags(), '--json'], { sqs: new MoveTaskSqs(fauxqs.client, 'FAILED') as unknown as SQSClient });
    expect(result.code).toBe(1);
    expect(JSON.parse(result.out)).toMatchObject({ status: 'FAILED', moved: 0, failureReason: 'AWS.SimpleQueueService.NonExistentQueue' });
    expect(result.err).toMatch(/the move task ended FAILED: AWS\.SimpleQueueService\.NonExistentQueue/);
  });

  it('a queue URL that does not exist is exit 1 naming the queue', async () => {
    const result = await run(['redrive', '--aws', '--queue-url', fauxqs.queueUrl, '--dlq-url', `${fauxqs.endpoint}/000000000000/no-such-queue`], {
      sqs: fauxqs.client,
    });
    expect(result.code).toBe(1);
    expect(result.err).toMatch(/could not read queue .*no-such-queue/);
  });
});

describe('CLI-13: --aws usage', () => {
  it('--stack reads the table from the stack outputs (DescribeStacks) and names the stack it asked', async () => {
    const asked: unknown[] = [];
    const cloudformation = {
      send: async (command: { input: unknown }) => {
        asked.push(command.input);
        return {
          Stacks: [
            {
              Outputs: [
                { OutputKey: 'TableName', OutputValue: 'no-such-table-here' },
                { OutputKey: 'DeliveryQueueUrl', OutputValue: fauxqs.queueUrl },
              ],
            },
          ],
        };
      },
    } as unknown as AwsClients['cloudformation'];
    const result = await run(['events', '--aws', '--stack', 'MyDot'], { dynamodb: dynamo.client, cloudformation });
    expect(asked).toEqual([{ StackName: 'MyDot' }]);
    // The table named by the output was used: DynamoDB Local has no such table.
    expect(result.code).toBe(1);
    expect(result.err).toMatch(/no-such-table-here|ResourceNotFound/);
  });

  it('--stack without the output it needs is exit 1 naming the output and the flag to pass instead', async () => {
    const cloudformation = { send: async () => ({ Stacks: [{ Outputs: [] }] }) } as unknown as AwsClients['cloudformation'];
    const result = await run(['events', '--aws', '--stack', 'OldDot'], { cloudformation });
    expect(result.code).toBe(1);
    expect(result.err).toMatch(/no output TableName/);
    expect(result.err).toMatch(/--table/);
  });

  it('AWS flags without --aws are bad usage', async () => {
    const result = await run(['events', '--table', 'x'], {});
    expect(result.code).toBe(2);
    expect(result.err).toMatch(/--table needs --aws/);
  });
});

describe('the executable with --aws', () => {
  it("builds its own clients from the environment (region, credentials, AWS_ENDPOINT_URL_DYNAMODB) like any AWS tool, without the SDK's Node end-of-life warning", async () => {
    const { tableName, store } = await seededTable();
    await store.putEvent(event(1, { status: 'dropped' }));
    // The bundle of this source (the launcher would only build a missing one).
    expect(spawnSync(process.execPath, [join(ROOT, 'lambda/cli/build.mjs')], { cwd: ROOT, encoding: 'utf8', timeout: 60_000 }).status).toBe(0);
    // The bin, as npx dm-dot runs it (it builds the bundle once if it is missing).
    const result = spawnSync(process.execPath, [join(ROOT, 'lambda/cli/dm-dot.mjs'), 'events', '--aws', '--json'], {
      cwd: ROOT,
      encoding: 'utf8',
      timeout: 60_000,
      env: {
        PATH: process.env.PATH ?? '',
        HOME: process.env.HOME ?? '',
        AWS_REGION: 'us-east-1',
        // DynamoDB Local keeps one database per access key and region: the same as the support client's.
        AWS_ACCESS_KEY_ID: 'local',
        AWS_SECRET_ACCESS_KEY: 'local',
        AWS_ENDPOINT_URL_DYNAMODB: dynamo.endpoint,
        DMDOT_TABLE: tableName,
      },
    });
    expect(result.stderr).not.toMatch(/dm-dot events:/);
    // On Node 20 the SDK would print nine lines about its releases after January 2027 (the pins keep them away).
    expect(result.stderr).not.toMatch(/NodeVersionSupportWarning|node >=22/);
    expect(result.status).toBe(0);
    expect(JSON.parse(result.stdout).events).toEqual([expect.objectContaining({ eventId: event(1).eventId, status: 'dropped' })]);
  }, 60_000);
});

/** The stack's outputs as DescribeStacks answers them, and the stack names it was asked for. */
function stackOf(outputs: Record<string, string>) {
  const asked: string[] = [];
  const cloudformation: SendsCommands = {
    send: async (command: { constructor: { name: string }; input: { StackName?: string } }) => {
      expect(command.constructor.name).toBe('DescribeStacksCommand');
      asked.push(command.input.StackName!);
      return { Stacks: [{ Outputs: Object.entries(outputs).map(([OutputKey, OutputValue]) => ({ OutputKey, OutputValue })) }] };
    },
  };
  return { cloudformation, asked };
}

/** A fake AWS client: answers each command by its name, and keeps what it was sent. */
function fakeClient(answers: Record<string, (input: any) => unknown>) {
  const sent: { name: string; input: any }[] = [];
  const client: SendsCommands = {
    send: async (command: { constructor: { name: string }; input: unknown }) => {
      sent.push({ name: command.constructor.name, input: command.input });
      const answer = answers[command.constructor.name];
      if (!answer) throw Object.assign(new Error(`unexpected ${command.constructor.name}`), { name: 'UnexpectedCommand' });
      return answer(command.input);
    },
  };
  return { client, sent };
}

const MCP_ENDPOINT = 'https://abc123.execute-api.eu-west-1.amazonaws.com/mcp';
const SECRET_ARN = 'arn:aws:secretsmanager:eu-west-1:111122223333:secret:DmDotApiKey-AbCdEf';
const FUNCTION = 'DmDot-McpFunction-1A2B3C';

describe('CLI-5: dm-dot events show --aws and events resend --aws', () => {
  beforeEach(() => fauxqs.purge());

  it('events show lists the attempts kept in the table', async () => {
    const { tableName, store } = await seededTable();
    await store.putEvent(
      event(20, {
        status: 'failed',
        attempts: 1,
        lastError: 'http_4xx',
        lastHttpStatus: 404,
        deliveredAt: undefined,
        body: '{"eventId":"x"}',
        log: [{ at: NOW - 5000, outcome: 'http_4xx', statusClass: '4xx', durationMs: 12, counted: true }],
      }),
    );
    const r = await run(['events', 'show', event(20).eventId, '--aws', '--table', tableName], { dynamodb: dynamo.client });
    expect(r.code).toBe(0);
    expect(r.out).toMatch(/^\S+Z +http_4xx +4xx +12 ms +yes$/m);
    expect(r.out).toMatch(/^resendable +yes/m);
    const missing = await run(['events', 'show', event(21).eventId, '--aws', '--table', tableName], { dynamodb: dynamo.client });
    expect(missing.code).toBe(1);
    expect(missing.err).toMatch(/no event evt_0+15 in the delivery log \(table /);
  });

  it('events resend reopens a failed event and queues its exact bytes on the delivery queue (same id), for the live subscription', async () => {
    const { tableName, store } = await seededTable();
    await store.putSubscription(subscription({ generation: 'gen-2' }), NOW, { kind: 'absent' });
    const body = JSON.stringify({
      eventId: event(22).eventId,
      name: 'message.created',
      timestamp: new Date(NOW).toISOString(),
      data: { message: 'again' },
      cursor: null,
    });
    await store.putEvent(event(22, { status: 'failed', attempts: 6, lastError: 'http_5xx', deliveredAt: undefined, body }));
    const r = await run(['events', 'resend', event(22).eventId, '--aws', '--table', tableName, '--queue-url', fauxqs.queueUrl, '--json'], {
      dynamodb: dynamo.client,
      sqs: fauxqs.client,
    });
    expect(r.code).toBe(0);
    expect(JSON.parse(r.out)).toEqual({ resent: true, eventId: event(22).eventId, subscriptionId: subscription().id });
    const [message, ...others] = await fauxqs.receive(fauxqs.queueUrl, { max: 10 });
    expect(others).toEqual([]);
    expect(message!.Body).toBe(body);
    expect(message!.MessageAttributes?.[QueueAttributes.eventId]?.StringValue).toBe(event(22).eventId);
    expect(message!.MessageAttributes?.[QueueAttributes.generation]?.StringValue).toBe('gen-2');
    const record = await store.getEvent(event(22).eventId, Date.now());
    expect(record).toMatchObject({ status: 'queued', attempts: 0, generation: 'gen-2' });
    expect(record!.log?.at(-1)).toMatchObject({ note: 'resent' });
  });

  it('events resend of a delivered event is exit 1 and queues nothing', async () => {
    const { tableName, store } = await seededTable();
    await store.putSubscription(subscription(), NOW, { kind: 'absent' });
    await store.putEvent(event(23));
    const r = await run(['events', 'resend', event(23).eventId, '--aws', '--table', tableName, '--queue-url', fauxqs.queueUrl], {
      dynamodb: dynamo.client,
      sqs: fauxqs.client,
    });
    expect(r.code).toBe(1);
    expect(r.err).toMatch(/not resent: evt_0+17 was delivered already/);
    expect(await fauxqs.receive(fauxqs.queueUrl, { timeoutMs: 300 })).toEqual([]);
  });
});

describe('CLI-7: dm-dot status --aws', () => {
  beforeEach(() => fauxqs.purge());

  async function stackWithTable() {
    const { tableName, store } = await seededTable();
    await store.putSubscription(subscription(), NOW, { kind: 'absent' });
    const dlq = new SqsQueue({ client: fauxqs.client, queueUrl: fauxqs.queueUrl, deadLetterQueueUrl: fauxqs.deadLetterQueueUrl });
    await dlq.sendToDeadLetter({ body: '{}', attributes: { eventId: 'evt_a' } }, 'http_5xx');
    await dlq.sendToDeadLetter({ body: '{}', attributes: { eventId: 'evt_b' } }, 'http_4xx');
    return stackOf({
      TableName: tableName,
      DeliveryQueueUrl: fauxqs.queueUrl,
      DeadLetterQueueUrl: fauxqs.deadLetterQueueUrl,
      McpEndpoint: MCP_ENDPOINT,
      ApiKeySecretArn: SECRET_ARN,
      McpFunctionName: FUNCTION,
      AlarmNames: 'DmDot-DeadLetters,DmDot-Errors',
    });
  }

  /** The MCP function's configuration: DMDOT_EVENTS_PROFILE only when the stack set it. */
  const mcpFunction = (profile?: string) =>
    fakeClient({
      GetFunctionConfigurationCommand: () => ({ FunctionName: FUNCTION, Environment: { Variables: profile ? { DMDOT_EVENTS_PROFILE: profile } : {} } }),
    });

  const cloudwatch = () =>
    fakeClient({
      DescribeAlarmsCommand: (input: { AlarmNames: string[] }) => ({
        MetricAlarms: input.AlarmNames.map((name) => ({
          AlarmName: name,
          StateValue: name.endsWith('DeadLetters') ? 'ALARM' : 'OK',
          StateReason: 'threshold',
          StateUpdatedTimestamp: new Date(NOW),
        })),
      }),
    });

  it('shows the stack outputs, the alarm states (DescribeAlarms on AlarmNames), the queue depths and the subscription; exit 0', async () => {
    const stack = await stackWithTable();
    const watch = cloudwatch();
    const r = await run(['status', '--aws', '--stack', 'MyDot', '--json'], {
      cloudformation: stack.cloudformation,
      cloudwatch: watch.client,
      sqs: fauxqs.client,
      dynamodb: dynamo.client,
      lambda: mcpFunction('sep-3415').client,
    });
    expect(r.code).toBe(0);
    expect(stack.asked).toEqual(['MyDot']);
    expect(watch.sent).toEqual([{ name: 'DescribeAlarmsCommand', input: { AlarmNames: ['DmDot-DeadLetters', 'DmDot-Errors'], MaxRecords: 100 } }]);
    const doc = JSON.parse(r.out);
    expect(doc).toMatchObject({
      mode: 'aws',
      stack: 'MyDot',
      outputs: { McpEndpoint: MCP_ENDPOINT, McpFunctionName: FUNCTION },
      alarms: [
        { name: 'DmDot-DeadLetters', state: 'ALARM' },
        { name: 'DmDot-Errors', state: 'OK' },
      ],
      queues: { delivery: { visible: 0 }, deadLetter: { visible: 2 } },
      subscription: { id: subscription().id, callbackHost: 'dot.example.com' },
      eventsProfile: 'sep-3415',
      problems: [],
    });
    const text = await run(['status', '--aws', '--stack', 'MyDot'], {
      cloudformation: (await stackWithTable()).cloudformation,
      cloudwatch: cloudwatch().client,
      sqs: fauxqs.client,
      dynamodb: dynamo.client,
      lambda: mcpFunction().client,
    });
    expect(text.out).toMatch(/^events profile +chatgpt$/m);
    expect(text.out).toMatch(/^alarms +DmDot-DeadLetters: ALARM; DmDot-Errors: OK$/m);
    expect(text.out).toMatch(/^dead letters +[1-9]\d* \(dm-dot redrive --aws\)$/m);
    expect(text.out).not.toMatch(/private-path|token=abc|whsec_/);
  });

  it('exit 1 when it could not look at everything (alarms unreadable), still one JSON document naming the problem', async () => {
    const stack = await stackWithTable();
    const denied = fakeClient({});
    const r = await run(['status', '--aws', '--json'], {
      cloudformation: stack.cloudformation,
      cloudwatch: denied.client,
      sqs: fauxqs.client,
      dynamodb: dynamo.client,
      lambda: mcpFunction().client,
    });
    expect(r.code).toBe(1);
    const doc = JSON.parse(r.out);
    expect(doc.alarms).toBeNull();
    expect(doc.problems).toEqual([expect.stringMatching(/^could not read the alarms: UnexpectedCommand/)]);
    expect(r.err).toMatch(/^dm-dot status: could not look at everything: could not read the alarms/);
  });

  it('exit 1 when the stack cannot be read at all', async () => {
    const broken: SendsCommands = {
      send: async () => Promise.reject(Object.assign(new Error('Stack with id Nope does not exist'), { name: 'ValidationError' })),
    };
    const r = await run(['status', '--aws', '--stack', 'Nope'], { cloudformation: broken });
    expect(r.code).toBe(1);
    expect(r.err).toBe(
      'dm-dot status: could not read stack Nope: ValidationError: Stack with id Nope does not exist (name another with --stack or DMDOT_STACK)\n',
    );
  });
});

describe('CLI-8: dm-dot connect --aws', () => {
  const KEY = 'A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8S9t0U1v2W3x4';

  it('prints McpEndpoint?key=<KEY> and the pup manifest URL without reading the secret', async () => {
    const stack = stackOf({ McpEndpoint: MCP_ENDPOINT, ApiKeySecretArn: SECRET_ARN, PupSecretArn: 'arn:pup' });
    const secrets = fakeClient({ GetSecretValueCommand: () => ({ SecretString: KEY }) });
    const r = await run(['connect', '--aws'], { cloudformation: stack.cloudformation, secretsManager: secrets.client });
    expect(r.code).toBe(0);
    expect(r.out).toContain(`  ${MCP_ENDPOINT}?key=<KEY>\n`);
    expect(r.out).toContain(`<KEY> is the API key in the Secrets Manager secret ${SECRET_ARN}; dm-dot connect --aws --show-key prints the URL with it.`);
    expect(r.out).toContain('  https://abc123.execute-api.eu-west-1.amazonaws.com/pup/manifest.json');
    expect(secrets.sent).toEqual([]);
    expect(r.err).toBe('');
  });

  it('--show-key reads the key from Secrets Manager (ApiKeySecretArn) and prints it after the notice', async () => {
    const stack = stackOf({ McpEndpoint: MCP_ENDPOINT, ApiKeySecretArn: SECRET_ARN });
    const secrets = fakeClient({ GetSecretValueCommand: () => ({ SecretString: KEY }) });
    const r = await run(['connect', '--aws', '--show-key', '--json'], { cloudformation: stack.cloudformation, secretsManager: secrets.client });
    expect(r.code).toBe(0);
    expect(secrets.sent).toEqual([{ name: 'GetSecretValueCommand', input: { SecretId: SECRET_ARN } }]);
    expect(r.err).toBe('dm-dot connect: --show-key prints the API key: a secret; keep this output out of logs, screenshots and shared terminals\n');
    expect(JSON.parse(r.out)).toMatchObject({
      mode: 'aws',
      keyShown: true,
      connectorUrl: `${MCP_ENDPOINT}?key=${KEY}`,
      key: { from: 'secretsManager', secretArn: SECRET_ARN },
    });
  });

  it('a secret that cannot be read is exit 1 naming it, never a key', async () => {
    const stack = stackOf({ McpEndpoint: MCP_ENDPOINT, ApiKeySecretArn: SECRET_ARN });
    const secrets = fakeClient({ GetSecretValueCommand: () => Promise.reject(Object.assign(new Error('not allowed'), { name: 'AccessDeniedException' })) });
    const r = await run(['connect', '--aws', '--show-key'], { cloudformation: stack.cloudformation, secretsManager: secrets.client });
    expect(r.code).toBe(1);
    expect(r.err).toBe(`dm-dot connect: could not read the API key from ${SECRET_ARN}: AccessDeniedException: not allowed\n`);
    expect(r.out).toBe('');
  });
});

describe('CLI-10: dm-dot key rotate --aws', () => {
  const OLD_KEY = 'old-connector-key-0123456789abcdefghijklmnopqrs';

  async function fakes(lambdaFails = false) {
    const { tableName, store } = await seededTable();
    const outputs = { McpEndpoint: MCP_ENDPOINT, ApiKeySecretArn: SECRET_ARN, McpFunctionName: FUNCTION, TableName: tableName };
    const secrets = fakeClient({
      GetSecretValueCommand: () => ({ ARN: SECRET_ARN, SecretString: OLD_KEY }),
      PutSecretValueCommand: () => ({ ARN: SECRET_ARN, VersionId: 'v2' }),
    });
    const lambda = fakeClient({
      GetFunctionConfigurationCommand: () => ({ FunctionName: FUNCTION, Description: 'dm-dot MCP endpoint (API key rotated 2026-01-01T00:00:00.000Z)' }),
      UpdateFunctionConfigurationCommand: () =>
        lambdaFails ? Promise.reject(Object.assign(new Error('rate exceeded'), { name: 'TooManyRequestsException' })) : { LastUpdateStatus: 'InProgress' },
    });
    return {
      secrets,
      lambda,
      store,
      aws: { cloudformation: stackOf(outputs).cloudformation, secretsManager: secrets.client, lambda: lambda.client, dynamodb: dynamo.client },
    };
  }
  const puts = (secrets: { sent: { name: string; input: any }[] }) => secrets.sent.filter((c) => c.name === 'PutSecretValueCommand');

  it('puts a new 48-character key into the secret, recycles the MCP function with a changed description, and says what to update; never prints the key', async () => {
    const { secrets, lambda, aws, store } = await fakes();
    const r = await run(['key', 'rotate', '--aws', '--yes'], aws);
    expect(r.code).toBe(0);
    expect(puts(secrets)).toEqual([
      { name: 'PutSecretValueCommand', input: { SecretId: SECRET_ARN, SecretString: expect.stringMatching(/^[A-Za-z0-9]{48}$/) } },
    ]);
    const key = puts(secrets)[0]!.input.SecretString as string;
    // HTTP-KEY-9: the deployment keeps the principal its ids were made from; no overlap was asked.
    const deployment = await store.getDeployment();
    expect(deployment).toMatchObject({ principal: sha256Hex(OLD_KEY), keyHash: sha256Hex(key) });
    expect(deployment?.previousKeyHash).toBeUndefined();
    expect(r.out + r.err).not.toContain(OLD_KEY);
    expect(lambda.sent.map((c) => c.name)).toEqual(['GetFunctionConfigurationCommand', 'UpdateFunctionConfigurationCommand']);
    expect(lambda.sent[1]!.input).toEqual({
      FunctionName: FUNCTION,
      Description: expect.stringMatching(/^dm-dot MCP endpoint \(API key rotated \d{4}-\d\d-\d\dT[\d:.]+Z\)$/),
    });
    expect(lambda.sent[1]!.input.Description).not.toContain('2026-01-01T00:00:00.000Z');
    expect(r.out).toContain(`Rotated the API key in ${SECRET_ARN}.`);
    expect(r.out).toMatch(/Reconnect it with the new URL \(dm-dot connect --aws prints it/);
    expect(r.out + r.err).not.toContain(key);
  });

  it('--show-key prints the key it put, after the notice', async () => {
    const { secrets, aws } = await fakes();
    const r = await run(['key', 'rotate', '--aws', '--yes', '--show-key', '--json'], aws);
    expect(r.code).toBe(0);
    expect(r.err).toMatch(/^dm-dot key rotate: --show-key prints the API key: a secret/);
    expect(JSON.parse(r.out)).toMatchObject({
      rotated: true,
      mode: 'aws',
      secretArn: SECRET_ARN,
      functionName: FUNCTION,
      key: puts(secrets)[0]!.input.SecretString,
    });
  });

  it('HTTP-KEY-10: --overlap records the old key and the end of its overlap in the DEPLOYMENT item before the new key is put', async () => {
    const { secrets, aws, store } = await fakes();
    const before = Date.now();
    const r = await run(['key', 'rotate', '--aws', '--yes', '--overlap', '1h', '--json'], aws);
    expect(r.code).toBe(0);
    const doc = JSON.parse(r.out);
    const deployment = await store.getDeployment();
    expect(deployment).toMatchObject({
      principal: sha256Hex(OLD_KEY),
      previousKeyHash: sha256Hex(OLD_KEY),
      keyHash: sha256Hex(puts(secrets)[0]!.input.SecretString),
    });
    expect(deployment!.previousKeyUntil).toBeGreaterThanOrEqual(before + 3_600_000);
    expect(doc.overlapUntil).toBe(new Date(deployment!.previousKeyUntil!).toISOString());
    expect(doc.next[0]).toMatch(/the old key keeps working until/);
  });

  it('an unreadable current key changes nothing', async () => {
    const { secrets, lambda, aws } = await fakes();
    const failing = fakeClient({ GetSecretValueCommand: () => Promise.reject(Object.assign(new Error('denied'), { name: 'AccessDeniedException' })) });
    const r = await run(['key', 'rotate', '--aws', '--yes'], { ...aws, secretsManager: failing.client });
    expect(r.code).toBe(1);
    expect(r.err).toMatch(/could not read the current key .*AccessDeniedException.*nothing was changed/);
    expect(puts(secrets)).toEqual([]);
    expect(lambda.sent).toEqual([]);
  });

  it('without --yes and no terminal it changes nothing', async () => {
    const { secrets, lambda, aws } = await fakes();
    const r = await run(['key', 'rotate', '--aws'], aws);
    expect(r.code).toBe(1);
    expect(r.err).toBe('dm-dot key rotate: not rotated: there is no terminal to confirm on; pass --yes to do it without asking\n');
    expect(secrets.sent).toEqual([]);
    expect(lambda.sent).toEqual([]);
  });

  it('a function that cannot be recycled is exit 1 saying the new key is in the secret but warm environments still take the old one', async () => {
    const { aws, secrets } = await fakes(true);
    const r = await run(['key', 'rotate', '--aws', '--yes'], aws);
    expect(r.code).toBe(1);
    expect(r.err).toMatch(
      new RegExp(`the new key is in ${SECRET_ARN}, but the MCP function ${FUNCTION} could not be recycled \\(TooManyRequestsException: rate exceeded\\)`),
    );
    expect(r.err).not.toContain(puts(secrets)[0]!.input.SecretString);
  });
});

describe('HTTP-KEY-14: a warm MCP Lambda and key rotate --aws agree on the keys, on DynamoDB', () => {
  it('the warm environment takes the new key right after the rotation, the old one through its overlap, and drops it after a second rotation without one', async () => {
    const { tableName } = await seededTable();
    let current = 'first-connector-key-0123456789abcdefghijklmno';
    // One secret, as Secrets Manager keeps it: the CLI reads and puts it, the MCP Lambda reads it once, at its cold start.
    const secrets = fakeClient({
      GetSecretValueCommand: () => ({ ARN: SECRET_ARN, SecretString: current }),
      PutSecretValueCommand: (input: { SecretString: string }) => ((current = input.SecretString), { ARN: SECRET_ARN, VersionId: 'v' }),
    });
    // Recycling asked for, and not done yet: the environment below stays warm.
    const lambda = fakeClient({
      GetFunctionConfigurationCommand: () => ({ FunctionName: FUNCTION, Description: 'dm-dot MCP endpoint' }),
      UpdateFunctionConfigurationCommand: () => ({}),
    });
    const outputs = { McpEndpoint: MCP_ENDPOINT, ApiKeySecretArn: SECRET_ARN, McpFunctionName: FUNCTION, TableName: tableName };
    const aws = { cloudformation: stackOf(outputs).cloudformation, secretsManager: secrets.client, lambda: lambda.client, dynamodb: dynamo.client };
    const warm = localApiGateway(
      mcpLambdaFromEnvironment(
        { TABLE_NAME: tableName, QUEUE_URL: fauxqs.queueUrl, API_KEY_SECRET_ARN: SECRET_ARN },
        { dynamodb: dynamo.client, sqs: fauxqs.client, secrets: { getSecretValue: async () => ({ SecretString: current }) } },
        { log: createLogger(() => undefined) },
      ),
    );
    // No subscription on this table: 409 says the key got past the door, 401 that it did not.
    const status = async (key: string) => (await warm.fetch('https://api.example/v1/messages', messageInit('hi', key))).status;
    const first = current;
    expect(await status(first)).toBe(409);

    expect((await run(['key', 'rotate', '--aws', '--yes', '--overlap', '1h'], aws)).code).toBe(0);
    const second = current;
    expect(second).not.toBe(first);
    expect(await status(second)).toBe(409);
    expect(await status(first)).toBe(409);

    expect((await run(['key', 'rotate', '--aws', '--yes'], aws)).code).toBe(0);
    const third = current;
    // At once, unless a refused key made the environment read the item less than deploymentRecheckMs ago (the second key did).
    const until = async (key: string, wanted: number, withinMs: number) => {
      const deadline = Date.now() + withinMs + 5_000;
      while ((await status(key)) !== wanted && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
      return status(key);
    };
    expect(await until(third, 409, AccessLimits.deploymentRecheckMs)).toBe(409);
    // The superseded keys stop once the item the environment trusts is renewed (AccessLimits.deploymentCacheMs).
    await until(first, 401, AccessLimits.deploymentCacheMs);
    expect(await status(first)).toBe(401);
    expect(await status(second)).toBe(401);
    expect(await status(third)).toBe(409);
  }, 30_000);
});

describe('dm-dot senders --aws', () => {
  it('CLI-SND-1, CLI-SND-2, CLI-SND-3, HTTP-KEY-1: add prints the key once and stores only its hash; list never shows it; revoke sets revokedAt once', async () => {
    const { tableName, store } = await seededTable();
    const aws = { dynamodb: dynamo.client };
    const added = await run(['senders', 'add', 'ci-bot', '--rate', '30', '--aws', '--table', tableName, '--region', 'eu-west-1', '--json'], aws);
    expect(added.code).toBe(0);
    const { key } = JSON.parse(added.out) as { key: string };
    expect(key).toMatch(/^dmsk_ci-bot_[A-Za-z0-9_-]{43}$/);
    const stored = await store.getSender('ci-bot');
    expect(stored).toMatchObject({ name: 'ci-bot', rate: 30, keyHash: sha256Hex(key) });
    expect(JSON.stringify(stored)).not.toContain(key);

    const list = await run(['senders', 'list', '--aws', '--table', tableName, '--region', 'eu-west-1'], aws);
    expect(list.code).toBe(0);
    expect(list.out).toMatch(/^ci-bot +30\/min +\S+Z +- +no$/m);
    expect(list.out).not.toContain(key.slice(-43));

    const revoked = await run(['senders', 'revoke', 'ci-bot', '--yes', '--aws', '--table', tableName, '--region', 'eu-west-1'], aws);
    expect(revoked.code).toBe(0);
    expect((await store.getSender('ci-bot'))?.revokedAt).toEqual(expect.any(Number));
    expect((await run(['senders', 'revoke', 'ci-bot', '--yes', '--aws', '--table', tableName, '--region', 'eu-west-1'], aws)).code).toBe(1);
    expect((await run(['senders', 'add', 'Bad_Name', '--aws', '--table', tableName, '--region', 'eu-west-1'], aws)).code).toBe(2);
  });
});
