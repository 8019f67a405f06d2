/**
 * AWS calls per message delivered inline by the MCP Lambda, counted at the wire on the asset the
 * stack deploys: `index.js` and `mcp-storage.js` built with lib/bundling.ts's options, kept warm in
 * one process on the Lambda runtime's Node major (warm-lambda.ts) with the synthesized environment, against DynamoDB Local and
 * fauxqs behind counting proxies (counting-proxy.ts: `AWS_ENDPOINT_URL_DYNAMODB`, and QUEUE_URL on
 * the SQS proxy's address, since the SDK sends to the queue URL's host) and a fake Secrets Manager.
 * A first send_to_dot warms the process (it loads mcp-storage.js and writes the subscription's
 * delivery status); then each measured send is counted alone, while the subscription's delivery
 * status is current. Each message is 1 KB, as the cost table assumes. Target: at most 3
 * DynamoDB calls and 1 SQS call (GetItem subscription, PutItem event, SendMessage, UpdateItem
 * delivered).
 *
 * Counts are exact, so they stand next to their target, not a timed baseline.
 *
 * The same proxy asks DynamoDB Local for each call's consumed capacity (`ReturnConsumedCapacity:
 * INDEXES`, added at the wire: counting-proxy.ts) and the section reports the read and write units
 * per delivered message, for the table and each index: those of the MCP function's calls, and
 * those of the Delivery Lambda's safety-net copy of the job, which is then received from fauxqs
 * and handled by the Delivery Lambda's code in this process (its DynamoDB client on the same
 * proxy) until every copy is settled; it finds the event delivered and stops. docs/deploying-aws.md's
 * cost table uses these units. DynamoDB Local computes units as DynamoDB documents them (4 KB a
 * read unit, 1 KB a write unit, an index write for each item that enters, changes in or leaves
 * the index); that it matches the service to the unit is assumed, not checked here.
 *
 * Deliberately not here: timing (the bundles and lambda sections time), the Delivery Lambda's
 * cold start and its SQS calls (receive and delete per copy, as the event source mapping makes
 * them), and AWS's own retries (the emulators answer every call).
 */
import { join } from 'node:path';
import { lambdaBundle, AFTER_RESPONSE_CHUNK, MCP_STORAGE_CHUNK } from '../../../lib/bundling';
import { DynamoDbStore } from '../../../lambda/adapters/dynamodb-store';
import { principalOf, subscriptionIdOf } from '../../../lambda/core/identity';
import { EVENT_NAME, TOOL_NAME } from '../../../lambda/core/protocol';
import { eventFromRequest } from '../../support/apigw';
import { startFakeSecretsManager } from '../../support/fake-secrets-manager';
import { inTaskRoot } from '../../support/task-root';
import { startCountingProxy, type ConsumedCapacity, type CountedCall } from '../counting-proxy';
import { buildLambdaBundle, LAMBDA_TEST_CREDENTIALS, lambdaRuntimeEnvironment, lambdaNodeBinary, seedDeployedSecrets } from '../lambda-bundles';
import { startReceiver } from '../sends';
import { messageOfBytes, newApiKey, newSecret, quantile, rpcBody, rpcHeaders, silentLog, sleep, type Section } from '../support';
import type { Fauxqs } from '../../support/fauxqs';
import { startWarmLambda } from '../warm-lambda';

/** DynamoDB Local keeps one database per access key id: the child signs with the test client's. */
const LOCAL_CREDENTIALS = { accessKeyId: 'local', secretAccessKey: 'local' };
const TABLE = 'dm-dot-bench-calls';
const MEASURED_SENDS = 5;
/** The cost table's message size (docs/deploying-aws.md): the units of the event's writes follow it. */
const MESSAGE = messageOfBytes(1_000);
/** After an answer, how long stray calls (none are expected: the Lambda awaits its writes) may still arrive. */
const SETTLE_MS = 300;

interface Counted {
  dynamodb: number;
  sqs: number;
  secretsManager: number;
  byOperation: Record<string, number>;
  /** The same operations, by service (for the rows). */
  byService: { dynamodb: Record<string, number>; sqs: Record<string, number> };
  /** DynamoDB's consumed units, by table and index. */
  capacity: Capacity;
  /** DynamoDB calls answered without ConsumedCapacity. */
  capacityMissing: number;
}

function tally(calls: readonly CountedCall[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const call of calls) out[call.operation] = (out[call.operation] ?? 0) + 1;
  return out;
}

function countOf(dynamodb: readonly CountedCall[], sqs: readonly CountedCall[], secretsManager: number): Counted {
  const byService = { dynamodb: tally(dynamodb), sqs: tally(sqs) };
  const { units, missing } = capacityOf(dynamodb);
  return {
    dynamodb: dynamodb.length,
    sqs: sqs.length,
    secretsManager,
    byOperation: { ...byService.dynamodb, ...byService.sqs },
    byService,
    capacity: units,
    capacityMissing: missing,
  };
}

/** Read and write units, by `table` or `index <name>`. */
type Capacity = Record<string, { read: number; write: number }>;

const READS = new Set(['GetItem', 'Query', 'Scan', 'BatchGetItem', 'TransactGetItems']);

/** The units the calls consumed, by table and index; `missing` counts calls the emulator gave no ConsumedCapacity for. */
function capacityOf(calls: readonly CountedCall[]): { units: Capacity; missing: number } {
  const units: Capacity = {};
  let missing = 0;
  const add = (where: string, read: number, write: number) => {
    const at = (units[where] ??= { read: 0, write: 0 });
    at.read += read;
    at.write += write;
  };
  for (const call of calls) {
    if (!call.capacity) {
      missing++;
      continue;
    }
    const isRead = READS.has(call.operation);
    // A side with no split names its total CapacityUnits, which are of the operation's kind.
    const split = (u: { CapacityUnits?: number; ReadCapacityUnits?: number; WriteCapacityUnits?: number }) =>
      [u.ReadCapacityUnits ?? (isRead ? (u.CapacityUnits ?? 0) : 0), u.WriteCapacityUnits ?? (isRead ? 0 : (u.CapacityUnits ?? 0))] as const;
    for (const entry of call.capacity as ConsumedCapacity[]) {
      const indexes = { ...entry.GlobalSecondaryIndexes, ...entry.LocalSecondaryIndexes };
      if (entry.Table) add('table', ...split(entry.Table));
      else {
        // Only the total: the table's share is what the indexes do not account for.
        const [read, write] = split(entry);
        const inIndexes = Object.values(indexes).map(split);
        add('table', read - inIndexes.reduce((n, [r]) => n + r, 0), write - inIndexes.reduce((n, [, w]) => n + w, 0));
      }
      for (const [name, u] of Object.entries(indexes)) add(`index ${name}`, ...split(u));
    }
  }
  return { units, missing };
}

/** The median of each side of each place over the sends (each send counted alone). */
function medianCapacity(sends: readonly Capacity[]): Capacity {
  const places = [...new Set(sends.flatMap((c) => Object.keys(c)))];
  const mid = (values: number[]) =>
    quantile(
      [...values].sort((a, b) => a - b),
      0.5,
    );
  return Object.fromEntries(
    places.map((where) => [where, { read: mid(sends.map((c) => c[where]?.read ?? 0)), write: mid(sends.map((c) => c[where]?.write ?? 0)) }]),
  );
}

function addCapacity(a: Capacity, b: Capacity): Capacity {
  const out: Capacity = {};
  for (const c of [a, b])
    for (const [where, u] of Object.entries(c)) out[where] = { read: (out[where]?.read ?? 0) + u.read, write: (out[where]?.write ?? 0) + u.write };
  return out;
}

/**
 * The Delivery Lambda's share: receives the sends' safety-net copies from fauxqs and hands them to
 * the Delivery Lambda's code in this process (its DynamoDB client on the counting proxy) until
 * `copies` distinct messages have been handled; returns the DynamoDB units and calls per copy.
 */
async function settleSafetyNet(
  ddbCalls: readonly CountedCall[],
  fauxqs: Fauxqs,
  deliveryEnvironment: Record<string, string>,
  ddbEndpoint: string,
  copies: number,
): Promise<{ perCopy: Capacity; callsPerCopy: number; copies: number; missing: number }> {
  const { DynamoDBClient } = await import('@aws-sdk/client-dynamodb');
  const { deliveryLambdaFromEnvironment } = await import('../../support/lambda-environment');
  const { pollOnce } = await import('../../support/event-source');
  const dynamodb = new DynamoDBClient({ endpoint: ddbEndpoint, region: 'us-east-1', credentials: LOCAL_CREDENTIALS, maxAttempts: 1 });
  const worker = deliveryLambdaFromEnvironment(
    { ...deliveryEnvironment, QUEUE_URL: fauxqs.queueUrl, DEAD_LETTER_QUEUE_URL: fauxqs.deadLetterQueueUrl, DMDOT_ALLOW_LOOPBACK_CALLBACKS: '1' },
    { dynamodb, sqs: fauxqs.client },
    { log: silentLog },
  );
  const mark = ddbCalls.length;
  const handled = new Set<string>();
  const deadline = Date.now() + 20_000;
  try {
    while (handled.size < copies && Date.now() < deadline) {
      const polled = await pollOnce(fauxqs, worker, { timeoutMs: 1_000 });
      for (const record of polled?.event.Records ?? []) handled.add(record.messageId);
    }
  } finally {
    dynamodb.destroy();
  }
  if (handled.size < copies) throw new Error(`the Delivery Lambda handled ${handled.size} of the ${copies} safety-net copies within 20 s`);
  await sleep(SETTLE_MS);
  const calls = ddbCalls.slice(mark);
  const { units, missing } = capacityOf(calls);
  const per = (n: number) => Math.round((n / handled.size) * 100) / 100;
  return {
    perCopy: Object.fromEntries(Object.entries(units).map(([where, u]) => [where, { read: per(u.read), write: per(u.write) }])),
    callsPerCopy: per(calls.length),
    copies: handled.size,
    missing,
  };
}

const describe = (ops: Record<string, number>) =>
  Object.entries(ops)
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([op, n]) => `${op} ${n}`)
    .join(', ') || 'none';

export const awsCallsSection: Section = {
  key: 'awscalls',
  title: 'AWS calls per delivered send (built MCP bundle, DynamoDB Local, fauxqs)',
  budgetMs: 90_000,
  async run(bench) {
    const { startDynamoDbLocal } = await import('../../support/dynamodb-local');
    const { startFauxqs } = await import('../../support/fauxqs');
    // This process's own clients (the emulators' set-up) run on Node 20: keep the AWS SDK's notice off the output.
    process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
    const root = bench.tempDir('awscalls');
    const [mcp, environments, ddb, fauxqs, receiver] = await Promise.all([
      buildLambdaBundle(join(root, 'mcp'), { file: 'lambda/handlers/mcp.ts' }, lambdaBundle(undefined, [MCP_STORAGE_CHUNK, AFTER_RESPONSE_CHUNK])),
      bench.stackEnvironments(),
      startDynamoDbLocal(),
      startFauxqs(),
      startReceiver(),
    ]);
    bench.cleanup(
      () => ddb.stop(),
      () => fauxqs.stop(),
      () => receiver.close(),
    );
    const [ddbProxy, sqsProxy] = await Promise.all([
      startCountingProxy(ddb.endpoint, { consumedCapacity: true }),
      startCountingProxy(fauxqs.endpoint, { rewriteOwnOrigin: true }),
    ]);
    bench.cleanup(
      () => ddbProxy.stop(),
      () => sqsProxy.stop(),
    );
    const secrets = await startFakeSecretsManager(environments.mcp.API_KEY_SECRET_ARN, { credentials: [LAMBDA_TEST_CREDENTIALS, LOCAL_CREDENTIALS] });
    bench.cleanup(() => secrets.stop());
    const apiKey = newApiKey();
    seedDeployedSecrets(secrets, environments.mcp, apiKey);
    await ddb.createTable(TABLE);

    // The dot, subscribed directly in the table (no subscribe call to count): no delivery status yet.
    const now = Date.now();
    const principal = principalOf(apiKey);
    const url = receiver.url('/hook');
    await new DynamoDbStore({ client: ddb.client, tableName: TABLE }).putSubscription(
      {
        id: subscriptionIdOf(principal, url, EVENT_NAME, {}),
        generation: 'gen-bench',
        url,
        name: EVENT_NAME,
        secret: newSecret(),
        principal,
        createdAt: now,
        refreshedAt: now,
        expiresAt: now + 3_600_000,
      },
      now,
      { kind: 'absent' },
    );

    const queueOnProxy = new URL(new URL(fauxqs.queueUrl).pathname, sqsProxy.endpoint).href;
    const env: Record<string, string> = {
      ...lambdaRuntimeEnvironment('dm-dot-mcp', secrets.endpoint),
      ...environments.mcp,
      AWS_ACCESS_KEY_ID: LOCAL_CREDENTIALS.accessKeyId,
      AWS_SECRET_ACCESS_KEY: LOCAL_CREDENTIALS.secretAccessKey,
      AWS_ENDPOINT_URL_DYNAMODB: ddbProxy.endpoint,
      AWS_ENDPOINT_URL_SQS: sqsProxy.endpoint,
      TABLE_NAME: TABLE,
      QUEUE_URL: queueOnProxy,
      // The one change from the stack's environment: the dot is on 127.0.0.1 here.
      DMDOT_ALLOW_LOOPBACK_CALLBACKS: '1',
    };
    const node = lambdaNodeBinary();
    // The stack's NODE_OPTIONS preloads a file from /var/task: here the bundle's folder is the task root.
    const lambda = await startWarmLambda(node.path, mcp.file, inTaskRoot(env, mcp.dir));
    bench.cleanup(() => lambda.stop());

    let counter = 0;
    const sendEvent = async () => {
      const request = new Request('https://abc123.execute-api.us-east-1.amazonaws.com/mcp', {
        method: 'POST',
        headers: rpcHeaders('tools/call', apiKey, TOOL_NAME),
        body: rpcBody('tools/call', { name: TOOL_NAME, arguments: { message: `${counter++} ${MESSAGE}` } }),
      });
      return JSON.stringify(await eventFromRequest(request));
    };
    /** One send, and the calls that reached each proxy from its start until SETTLE_MS after its answer. */
    const countedSend = async (): Promise<Counted> => {
      const event = await sendEvent();
      const marks = { ddb: ddbProxy.calls.length, sqs: sqsProxy.calls.length, secrets: secrets.calls(), received: receiver.count() };
      const answer = await lambda.invoke(event);
      await sleep(SETTLE_MS);
      let outcome: any;
      try {
        outcome = JSON.parse(answer.body)?.result?.structuredContent;
      } catch {
        outcome = undefined;
      }
      if (answer.status !== 200 || outcome?.status !== 'delivered') {
        const seen = [...ddbProxy.calls.slice(marks.ddb), ...sqsProxy.calls.slice(marks.sqs)].map((c) => `${c.operation} ${c.status}`).join(', ');
        const logged = lambda.stderr().trim().split('\n').at(-1)?.slice(0, 300) ?? '';
        throw new Error(
          `send_to_dot through the bundle was not delivered: ${answer.status} ${answer.body.slice(0, 120)}; calls: ${seen || 'none'}; last log line: ${logged}`,
        );
      }
      if (receiver.count() !== marks.received + 1) throw new Error(`the dot received ${receiver.count() - marks.received} events for one send`);
      return countOf(ddbProxy.calls.slice(marks.ddb), sqsProxy.calls.slice(marks.sqs), secrets.calls() - marks.secrets);
    };

    // Before any send: whatever init itself called (the secret reads go to Secrets Manager).
    await sleep(SETTLE_MS);
    const atInit = countOf(ddbProxy.calls, sqsProxy.calls, secrets.calls());
    const warmUp = await countedSend();
    const measured: Counted[] = [];
    for (let i = 0; i < MEASURED_SENDS; i++) measured.push(await countedSend());

    const median = (values: number[]) =>
      quantile(
        [...values].sort((a, b) => a - b),
        0.5,
      );
    const medianOps = (of: (m: Counted) => Record<string, number>) => {
      const operations = [...new Set(measured.flatMap((m) => Object.keys(of(m))))].sort();
      return Object.fromEntries(operations.map((op) => [op, median(measured.map((m) => of(m)[op] ?? 0))]));
    };
    const byService = { dynamodb: medianOps((m) => m.byService.dynamodb), sqs: medianOps((m) => m.byService.sqs) };
    const steady: Counted = {
      dynamodb: median(measured.map((m) => m.dynamodb)),
      sqs: median(measured.map((m) => m.sqs)),
      secretsManager: median(measured.map((m) => m.secretsManager)),
      byOperation: { ...byService.dynamodb, ...byService.sqs },
      byService,
      capacity: medianCapacity(measured.map((m) => m.capacity)),
      capacityMissing: median(measured.map((m) => m.capacityMissing)),
    };
    const safetyNet = await settleSafetyNet(ddbProxy.calls, fauxqs, { ...environments.delivery, TABLE_NAME: TABLE }, ddbProxy.endpoint, 1 + measured.length);
    const varied = new Set(measured.map((m) => describe(m.byOperation))).size > 1;
    const how =
      `Counted at the wire: counting HTTP proxies in front of DynamoDB Local and fauxqs recorded each request's X-Amz-Target (or SQS Action) while the built MCP asset (index.js + mcp-storage.js, lib/bundling.ts options) ran warm in one Node ${node.version} process with the synthesized environment; ` +
      `the figure is the median over ${MEASURED_SENDS} send_to_dot calls, each delivered inline to a loopback dot and counted alone, after one warm-up send had loaded mcp-storage.js and made the subscription's delivery status current.`;

    const target = { dynamodb: 3, sqs: 1 };
    const countRow = (what: string, ops: Record<string, number>, value: number, max: number, targetValue: number) =>
      bench.row({
        name: `MCP bundle: ${what} calls per send_to_dot delivered inline, steady state (n=${measured.length}; ${describe(ops)})`,
        median: String(value),
        p90: String(max),
        baseline: 'target (at most)',
        baselineMedian: String(targetValue),
        ratio: targetValue > 0 ? `${(value / targetValue).toFixed(2)}×` : 'n/a',
        ...(value > targetValue ? { missed: `${value} calls against at most ${targetValue}` } : {}),
      });
    countRow('DynamoDB', byService.dynamodb, steady.dynamodb, Math.max(...measured.map((m) => m.dynamodb)), target.dynamodb);
    countRow('SQS', byService.sqs, steady.sqs, Math.max(...measured.map((m) => m.sqs)), target.sqs);
    bench.row({
      name: `MCP bundle: the warm-up send (loads mcp-storage.js, writes the delivery status; ${describe(warmUp.byOperation)})`,
      median: `${warmUp.dynamodb} DynamoDB + ${warmUp.sqs} SQS`,
      p90: '-',
      baseline: 'steady state',
      baselineMedian: `${steady.dynamodb} DynamoDB + ${steady.sqs} SQS`,
      ratio: '-',
    });
    const perMessage = addCapacity(steady.capacity, safetyNet.perCopy);
    for (const where of Object.keys(perMessage).sort()) {
      const u = perMessage[where]!;
      const part = (c: Capacity) => `${c[where]?.read ?? 0} RRU + ${c[where]?.write ?? 0} WRU`;
      bench.row({
        name: `DynamoDB units per message delivered inline, ${where} (MCP function n=${measured.length}; its safety-net copy n=${safetyNet.copies})`,
        median: `${u.read} RRU + ${u.write} WRU`,
        p90: '-',
        baseline: 'MCP function / Delivery Lambda',
        baselineMedian: `${part(steady.capacity)} / ${part(safetyNet.perCopy)}`,
        ratio: '-',
      });
    }
    const missing = steady.capacityMissing + safetyNet.missing;
    if (missing > 0) bench.note(`awscalls: ${missing} DynamoDB call(s) came back without ConsumedCapacity; their units are not counted.`);
    bench.record({
      consumedCapacityPerDelivered: {
        perMessage,
        mcp: steady.capacity,
        deliverySafetyNet: safetyNet.perCopy,
        deliveryCallsPerCopy: safetyNet.callsPerCopy,
        copies: safetyNet.copies,
        how: 'ReturnConsumedCapacity INDEXES added at the wire by the counting proxy in front of DynamoDB Local; RRU/WRU as DynamoDB Local reports them',
      },
    });
    bench.record({
      awsCallsPerDelivered: {
        dynamodb: steady.dynamodb,
        sqs: steady.sqs,
        byOperation: steady.byOperation,
        byService,
        how,
        sends: measured.length,
        target,
        secretsManager: steady.secretsManager,
        warmUpSend: warmUp,
        atInit,
        ...(varied ? { perSend: measured } : {}),
      },
    });
    bench.note(
      `awscalls: ${how}${varied ? ' The counts varied between sends: results.json lists each (perSend).' : ''} At init: ${describe(atInit.byOperation)} on DynamoDB/SQS, ${atInit.secretsManager} Secrets Manager read(s).`,
    );
  },
};
