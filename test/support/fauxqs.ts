/**
 * Starts fauxqs (the in-memory SQS emulator) for tests: a child process listening on 127.0.0.1
 * on an ephemeral port, with a delivery queue and its dead-letter queue created, and an SQSClient
 * pointed at it with an explicit endpoint and dummy credentials.
 *
 * Why a child process: fauxqs is ESM-only, and Jest's CommonJS runtime cannot load it. Why not
 * `startFauxqs()`: it always listens on 0.0.0.0 and builds queue URLs on
 * `sqs.<region>.localhost`, which does not resolve on these machines. The child builds the app
 * itself, listens on 127.0.0.1 only, and gives its SQS store an empty URL host so queue URLs
 * are `http://127.0.0.1:<port>/000000000000/<name>`, usable with or without the explicit endpoint.
 *
 * Deliberately not here: SNS and S3 (fauxqs serves them too; dm-dot uses neither), persistence,
 * and sharing one emulator between test files (each file starts its own, about 300 ms).
 */
import type { ChildProcess } from 'node:child_process';
import { dirname, join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { CreateQueueCommand, GetQueueAttributesCommand, PurgeQueueCommand, ReceiveMessageCommand, SQSClient, type Message } from '@aws-sdk/client-sqs';
import { startGroup, waitUntilReady, type GroupChild } from './processes';

export interface Fauxqs {
  /** http://127.0.0.1:<port> */
  endpoint: string;
  client: SQSClient;
  queueUrl: string;
  deadLetterQueueUrl: string;
  /** Creates another queue (for tests that need a second one); returns its URL. */
  createQueue(name: string, attributes?: Record<string, string>): Promise<string>;
  /**
   * Receives up to `max` messages with every message attribute, retrying with short long polls
   * until at least one arrives or `timeoutMs` passes (then an empty array).
   */
  receive(queueUrl: string, options?: { max?: number; timeoutMs?: number; visibilityTimeout?: number }): Promise<Message[]>;
  /** Deletes every message of both queues. */
  purge(): Promise<void>;
  stop(): Promise<void>;
}

export interface FauxqsOptions {
  queueName?: string;
  deadLetterQueueName?: string;
  /** Redrive safety net of the main queue (docs/contract/delivery.md: a little above the attempt count). */
  maxReceiveCount?: number;
  /** Default visibility timeout of the main queue, seconds. */
  visibilityTimeout?: number;
}

const REGION = 'us-east-1';

/** Runs in the child (ESM): builds the fauxqs app and prints its address as one JSON line. */
function childScript(fauxqsDist: string): string {
  const app = pathToFileURL(join(fauxqsDist, 'app.js')).href;
  const store = pathToFileURL(join(fauxqsDist, 'sqs', 'sqsStore.js')).href;
  return `
import { buildApp } from ${JSON.stringify(app)};
import { SqsStore } from ${JSON.stringify(store)};
const sqsStore = new SqsStore();
sqsStore.host = '';
const app = buildApp({ logger: false, stores: { sqsStore } });
const address = await app.listen({ port: 0, host: '127.0.0.1' });
process.stdout.write(JSON.stringify({ address }) + '\\n');
const stop = () => app.close().finally(() => process.exit(0));
process.stdin.on('end', stop);
process.stdin.on('error', stop);
process.on('SIGTERM', stop);
process.stdin.resume();
`;
}

function fauxqsDistDir(): string {
  // fauxqs only exports "import"; its package.json is still resolvable through the file system.
  const pkg = require.resolve('fauxqs/package.json', { paths: [process.cwd()] });
  return join(dirname(pkg), 'dist');
}

async function spawnChild(): Promise<{ group: GroupChild; child: ChildProcess; endpoint: string }> {
  let dist: string;
  try {
    dist = fauxqsDistDir();
  } catch {
    dist = join(process.cwd(), 'node_modules', 'fauxqs', 'dist');
  }
  // stdin stays open as a lifeline: when the test process dies, the child sees EOF and exits. Its
  // own process group is killed on every other way out (processes.ts).
  const group = startGroup(process.execPath, ['--input-type=module', '-e', childScript(dist)], { stdio: ['pipe', 'pipe', 'pipe'] });
  const child = group.child;
  let stderr = '';
  child.stderr!.on('data', (chunk: Buffer) => {
    stderr = (stderr + chunk.toString('utf8')).slice(-4000);
  });
  let stdout = '';
  child.stdout!.on('data', (chunk: Buffer) => {
    stdout += chunk.toString('utf8');
  });
  let spawnError: Error | undefined;
  child.once('error', (error) => (spawnError = error));
  try {
    const endpoint = await waitUntilReady({
      what: 'fauxqs to print its address',
      child,
      output: () => stderr,
      pollMs: 25,
      onExit: () => new Error(`fauxqs exited during startup (code ${child.exitCode}): ${stderr.trim()}`),
      probe: () => {
        if (spawnError) throw spawnError;
        const line = stdout.split('\n')[0];
        if (!stdout.includes('\n') || !line) return undefined;
        const { address } = JSON.parse(line) as { address: string };
        return address.replace('localhost', '127.0.0.1');
      },
    });
    return { group, child, endpoint };
  } catch (error) {
    group.kill();
    throw error;
  }
}

export function sqsClientFor(endpoint: string): SQSClient {
  return new SQSClient({
    endpoint,
    region: REGION,
    credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
    maxAttempts: 1,
  });
}

export async function startFauxqs(options: FauxqsOptions = {}): Promise<Fauxqs> {
  const { group, child, endpoint } = await spawnChild();
  const client = sqsClientFor(endpoint);
  const exited = new Promise<void>((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) resolve();
    else child.once('exit', () => resolve());
  });

  const createQueue = async (name: string, attributes: Record<string, string> = {}) => {
    const created = await client.send(new CreateQueueCommand({ QueueName: name, Attributes: attributes }));
    if (!created.QueueUrl) throw new Error(`fauxqs: CreateQueue ${name} returned no URL`);
    return created.QueueUrl;
  };

  try {
    const deadLetterQueueUrl = await createQueue(options.deadLetterQueueName ?? 'dm-dot-dlq', { MessageRetentionPeriod: String(14 * 24 * 3600) });
    const dlqArn = (await client.send(new GetQueueAttributesCommand({ QueueUrl: deadLetterQueueUrl, AttributeNames: ['QueueArn'] }))).Attributes?.QueueArn;
    const queueUrl = await createQueue(options.queueName ?? 'dm-dot-delivery', {
      VisibilityTimeout: String(options.visibilityTimeout ?? 30),
      RedrivePolicy: JSON.stringify({ deadLetterTargetArn: dlqArn, maxReceiveCount: options.maxReceiveCount ?? 10 }),
    });

    const receive: Fauxqs['receive'] = async (url, { max = 10, timeoutMs = 5_000, visibilityTimeout } = {}) => {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const left = deadline - Date.now();
        const waitS = Math.max(0, Math.min(1, Math.floor(left / 1000)));
        const answer = await client.send(
          new ReceiveMessageCommand({
            QueueUrl: url,
            MaxNumberOfMessages: max,
            WaitTimeSeconds: waitS,
            MessageAttributeNames: ['All'],
            MessageSystemAttributeNames: ['All'],
            ...(visibilityTimeout !== undefined ? { VisibilityTimeout: visibilityTimeout } : {}),
          }),
        );
        if (answer.Messages?.length) return answer.Messages;
        if (Date.now() >= deadline) return [];
        if (waitS === 0) await new Promise((r) => setTimeout(r, 50));
      }
    };

    group.handOver();
    return {
      endpoint,
      client,
      queueUrl,
      deadLetterQueueUrl,
      createQueue,
      receive,
      async purge() {
        await client.send(new PurgeQueueCommand({ QueueUrl: queueUrl }));
        await client.send(new PurgeQueueCommand({ QueueUrl: deadLetterQueueUrl }));
      },
      async stop() {
        client.destroy();
        if (child.exitCode === null && child.signalCode === null) {
          child.stdin?.end();
          child.kill('SIGTERM');
          const timer = setTimeout(() => group.kill(), 3_000);
          await exited;
          clearTimeout(timer);
        }
        group.kill();
      },
    };
  } catch (error) {
    client.destroy();
    group.kill();
    throw error;
  }
}
