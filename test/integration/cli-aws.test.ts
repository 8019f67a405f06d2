/**
 * The `--aws` variants of the operator CLI, in-process through `main`, against DynamoDB Local (the
 * table read with the same DynamoDbStore the Lambdas use) and fauxqs (the queues):
 * `events --aws` (a paged Scan), `subscription show|clear --aws`, `redrive --aws`.
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
import { DynamoDbStore } from '../../lambda/adapters/dynamodb-store';
import { QueueAttributes, SqsQueue } from '../../lambda/adapters/sqs-queue';
import { Limits } from '../../lambda/core/protocol';
import { main } from '../../lambda/cli/main';
import { movePoll } from '../../lambda/cli/redrive';
import type { AwsClients, CliIo } from '../../lambda/cli/common';
import type { EventRecord, SubscriptionRecord } from '../../lambda/ports';
import { startDynamoDbLocal, type DynamoDbLocal } from '../support/dynamodb-local';
import { startFauxqs, type Fauxqs } from '../support/fauxqs';

let dynamo: DynamoDbLocal;
let fauxqs: Fauxqs;
let tables = 0;

beforeAll(async () => {
  [dynamo, fauxqs] = await Promise.all([startDynamoDbLocal(), startFauxqs()]);
  movePoll.intervalMs = 10;
}, 60_000);

afterAll(async () => {
  await Promise.all([dynamo?.stop(), fauxqs?.stop()]);
});

async function run(argv: string[], aws: AwsClients, answer?: string) {
  let out = '';
  let err = '';
  const io: CliIo = {
    out: (t) => (out += t),
    err: (t) => (err += t),
    // No AWS_REGION, no DMDOT_TABLE: everything comes from the flags.
    env: {},
    aws,
    ...(answer !== undefined ? { ask: async () => answer } : {}),
  };
  const code = await main(argv, io);
  return { code, out, err };
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

describe('dm-dot events --aws', () => {
  it('lists the live events of the table, newest first, through a paged Scan; filters by status; --last', async () => {
    const { tableName, store } = await seededTable();
    await store.putSubscription(subscription(), NOW);
    for (let n = 1; n <= 5; n++) await store.putEvent(event(n));
    await store.putEvent(event(6, { status: 'failed', attempts: 6, lastError: 'http_5xx', lastHttpStatus: 503, deliveredAt: undefined }));
    await store.putEvent(event(7, { createdAt: NOW - Limits.eventRecordMs - 1000, expiresAt: NOW - 1000 })); // expired, TTL not yet run
    const paged = smallPages(dynamo.client);

    const all = await run(['events', '--aws', '--table', tableName, '--json', '--last', '100'], { dynamodb: paged.client });
    expect(all.code).toBe(0);
    const listed = JSON.parse(all.out) as { eventId: string; status: string }[];
    expect(listed.map((e) => e.eventId)).toEqual([6, 5, 4, 3, 2, 1].map((n) => event(n).eventId));
    expect(paged.scans()).toBeGreaterThanOrEqual(4); // 8 items in pages of 2

    const failed = await run(['events', '--aws', '--table', tableName, '--status', 'failed'], { dynamodb: dynamo.client });
    expect(failed.code).toBe(0);
    expect(failed.out).toMatch(/^EVENT +STATUS +ATTEMPTS +LAST ERROR +CREATED +DELIVERED$/m);
    expect(failed.out).toMatch(new RegExp(`^${event(6).eventId}  failed +6 +http_5xx +\\S+Z +-$`, 'm'));
    expect(failed.out.trim().split('\n')).toHaveLength(2);

    const last = await run(['events', '--aws', '--table', tableName, '--last', '2', '--json'], { dynamodb: dynamo.client });
    expect(JSON.parse(last.out).map((e: { eventId: string }) => e.eventId)).toEqual([event(6).eventId, event(5).eventId]);
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

describe('dm-dot subscription --aws', () => {
  it('show never prints the secret or the callback path; clear asks (no keeps it, yes ends it) and another callback subscribes at once', async () => {
    const { tableName, store } = await seededTable();
    await store.putSubscription(subscription(), NOW);
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

    const blocked = await store.putSubscription(subscription({ id: `sub_${'2'.repeat(32)}`, url: 'https://new-dot.example.com/hook' }), Date.now());
    expect(blocked.ok).toBe(false);

    const cleared = await run(['subscription', 'clear', '--aws', '--table', tableName], aws, 'yes');
    expect(cleared.code).toBe(0);
    expect(cleared.out).toContain(`Cleared subscription ${subscription().id}`);
    expect(await store.getSubscription(Date.now())).toBeUndefined();
    const next = await store.putSubscription(subscription({ id: `sub_${'2'.repeat(32)}`, url: 'https://new-dot.example.com/hook' }), Date.now());
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

describe('dm-dot redrive --aws', () => {
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
    expect(result.out).toBe('Moved 2 message(s) from the dead-letter queue back to the delivery queue.\n');
    const arns = await Promise.all(
      [fauxqs.deadLetterQueueUrl, fauxqs.queueUrl].map(async (url) => (await fauxqs.client.send(new GetQueueAttributesCommand({ QueueUrl: url, AttributeNames: ['QueueArn'] }))).Attributes!.QueueArn),
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
    expect(JSON.parse(result.out)).toEqual({ moved: 0, status: 'NOTHING_TO_MOVE' });
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

describe('--aws usage', () => {
  it('--stack reads the table from the stack outputs (DescribeStacks) and names the stack it asked', async () => {
    const asked: unknown[] = [];
    const cloudformation = {
      send: async (command: { input: unknown }) => {
        asked.push(command.input);
        return { Stacks: [{ Outputs: [{ OutputKey: 'TableName', OutputValue: 'no-such-table-here' }, { OutputKey: 'DeliveryQueueUrl', OutputValue: fauxqs.queueUrl }] }] };
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
  it('builds its own clients from the environment (region, credentials, AWS_ENDPOINT_URL_DYNAMODB) like any AWS tool', async () => {
    const { tableName, store } = await seededTable();
    await store.putEvent(event(1, { status: 'dropped' }));
    const { spawnSync } = await import('node:child_process');
    const { join } = await import('node:path');
    const root = join(__dirname, '..', '..');
    const result = spawnSync(process.execPath, [join(root, 'lambda/cli/dm-dot.mjs'), 'events', '--aws', '--json'], {
      cwd: root,
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
    expect(result.status).toBe(0);
    expect(JSON.parse(result.stdout)).toEqual([expect.objectContaining({ eventId: event(1).eventId, status: 'dropped' })]);
  }, 60_000);
});
