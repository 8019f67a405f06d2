/**
 * Where `events` and `subscription` read and write: one `Operator` surface with three backings.
 *
 * - The running local server (its `runtime.json` names a live process): the admin routes, with
 *   the admin token from the state directory. The server's file store keeps state in memory, so
 *   a second process must never write `store.json` under it.
 * - A stopped local server: the state directory itself, through the same FileStore adapter.
 * - `--aws`: the stack's DynamoDB table through the same DynamoDbStore adapter the Lambdas use,
 *   with the operator's own AWS credentials (their IAM permissions are the admin credential).
 *
 * Deliberately not here: the operations themselves (lambda/local/admin.ts, shared with the
 * server's admin routes), and redrive (lambda/cli/redrive.ts: local files vs SQS).
 */
import { CloudFormationClient, DescribeStacksCommand } from '@aws-sdk/client-cloudformation';
import { stat } from 'node:fs/promises';
import { resolve } from 'node:path';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { SQSClient } from '@aws-sdk/client-sqs';
import { DynamoDbStore } from '../adapters/dynamodb-store';
import { FileStore } from '../adapters/file-store';
import type { EventStatus } from '../core/protocol';
import {
  clearSubscription,
  listEventViews,
  readAdminToken,
  showSubscription,
  type EventView,
  type SubscriptionView,
} from '../local/admin';
import type { Store } from '../ports';
import { OperationError, runningServer, settingsOf, UsageError, type CliIo } from './common';

export interface Operator {
  /** Where the answers come from, for the human output. */
  where: string;
  events(status?: EventStatus): Promise<EventView[]>;
  showSubscription(): Promise<SubscriptionView | null>;
  /** Clears only the subscription `id` (the one shown and confirmed). */
  clearSubscription(id: string): Promise<{ cleared: boolean; id: string | null }>;
}

function storeOperator(store: Store, where: string): Operator {
  return {
    where,
    events: (status) => listEventViews(store, Date.now(), status),
    showSubscription: () => showSubscription(store, Date.now()),
    clearSubscription: (id) => clearSubscription(store, Date.now(), id),
  };
}

/** The admin routes of a running local server. */
export function adminClient(baseUrl: string, token: string) {
  return async function call<T>(method: string, path: string): Promise<T> {
    let response: Response;
    try {
      response = await fetch(`${baseUrl}${path}`, {
        method,
        headers: { authorization: `Bearer ${token}` },
        signal: AbortSignal.timeout(30_000),
      });
    } catch (error) {
      throw new ServerGone(error);
    }
    const body = (await response.json().catch(() => ({}))) as { error?: { message?: string } } & T;
    if (response.status === 401) {
      throw new OperationError('the running server refused the admin token (was it restarted while this command ran? try again)');
    }
    if (!response.ok) throw new OperationError(`the running server answered ${response.status}: ${body.error?.message ?? 'no detail'}`);
    return body;
  };
}

/** The recorded server did not answer at all (it died without cleaning up): use the files. */
export class ServerGone extends Error {
  constructor(readonly reason: unknown) {
    super('the recorded local server did not answer');
  }
}

export async function openStateDir(stateDir: string): Promise<FileStore> {
  const absolute = resolve(stateDir);
  try {
    if (!(await stat(absolute)).isDirectory()) throw new Error('not a directory');
  } catch {
    throw new OperationError(`no state directory at ${absolute}: start the server once (npm start), or set DMDOT_STATE_DIR`);
  }
  return FileStore.open(absolute);
}

export interface LocalAccess {
  stateDir: string;
  /** Set when a live server runs on the state directory. */
  server?: { url: string; call: ReturnType<typeof adminClient> };
}

export async function localAccess(io: CliIo): Promise<LocalAccess> {
  const { stateDir } = settingsOf(io);
  const running = await runningServer(stateDir);
  if (!running) return { stateDir };
  const token = await readAdminToken(stateDir);
  if (!token) throw new OperationError(`a server runs on ${resolve(stateDir)} but its admin token is not readable (${resolve(stateDir, 'admin-token')})`);
  return { stateDir, server: { url: running.url, call: adminClient(running.url, token) } };
}

export async function localOperator(io: CliIo): Promise<Operator> {
  const access = await localAccess(io);
  const direct = async () => storeOperator(await openStateDir(access.stateDir), `state directory ${resolve(access.stateDir)} (no server running)`);
  if (!access.server) return direct();
  const { call, url } = access.server;
  // A server that vanished without removing runtime.json: fall back to the files, once.
  const viaServer = <T>(ask: () => Promise<T>, fallback: (op: Operator) => Promise<T>) => async () => {
    try {
      return await ask();
    } catch (error) {
      if (error instanceof ServerGone) return fallback(await direct());
      throw error;
    }
  };
  return {
    where: `the running server at ${url}`,
    events: (status) =>
      viaServer(
        async () => (await call<{ events: EventView[] }>('GET', `/admin/events${status ? `?status=${status}` : ''}`)).events,
        (op) => op.events(status),
      )(),
    showSubscription: viaServer(
      async () => (await call<{ subscription: SubscriptionView | null }>('GET', '/admin/subscription')).subscription,
      (op) => op.showSubscription(),
    ),
    clearSubscription: (id) =>
      viaServer(
        () => call<{ cleared: boolean; id: string | null }>('DELETE', `/admin/subscription?id=${encodeURIComponent(id)}`),
        (op) => op.clearSubscription(id),
      )(),
  };
}

export interface AwsResources {
  region?: string;
  table?: string;
  queueUrl?: string;
  deadLetterQueueUrl?: string;
}

type AwsFlags = { stack?: string; region?: string; table?: string; 'queue-url'?: string; 'dlq-url'?: string };

/**
 * The stack's resources: flags, then DMDOT_TABLE / DMDOT_QUEUE_URL / DMDOT_DLQ_URL, then the
 * CloudFormation outputs of `--stack` (default DmDot) for whatever is still missing.
 */
export async function awsResources(values: AwsFlags, io: CliIo, need: readonly ('table' | 'queueUrl' | 'deadLetterQueueUrl')[]): Promise<AwsResources> {
  const resources: AwsResources = {
    region: values.region ?? (io.env.AWS_REGION || io.env.AWS_DEFAULT_REGION || undefined),
    table: values.table ?? (io.env.DMDOT_TABLE || undefined),
    queueUrl: values['queue-url'] ?? (io.env.DMDOT_QUEUE_URL || undefined),
    deadLetterQueueUrl: values['dlq-url'] ?? (io.env.DMDOT_DLQ_URL || undefined),
  };
  const missing = need.filter((n) => !resources[n]);
  if (missing.length === 0) return resources;
  const stack = values.stack ?? (io.env.DMDOT_STACK || 'DmDot');
  const outputs = await stackOutputs(io, stack, resources.region);
  const fromOutput: Record<(typeof need)[number], string> = { table: 'TableName', queueUrl: 'DeliveryQueueUrl', deadLetterQueueUrl: 'DeadLetterQueueUrl' };
  for (const name of missing) {
    const value = outputs[fromOutput[name]];
    if (!value) throw new OperationError(`stack ${stack} has no output ${fromOutput[name]}; pass ${flagOf(name)} instead`);
    resources[name] = value;
  }
  return resources;
}

function flagOf(name: 'table' | 'queueUrl' | 'deadLetterQueueUrl'): string {
  return { table: '--table (or DMDOT_TABLE)', queueUrl: '--queue-url (or DMDOT_QUEUE_URL)', deadLetterQueueUrl: '--dlq-url (or DMDOT_DLQ_URL)' }[name];
}

/**
 * DescribeStacks outputs. The operator's own credentials and region; the Lambdas never read them
 * (the CloudFormation client is a dependency of the CLI only, and no handler imports this module).
 */
async function stackOutputs(io: CliIo, stack: string, region: string | undefined): Promise<Record<string, string>> {
  const client = io.aws?.cloudformation ?? new CloudFormationClient(region ? { region } : {});
  try {
    const result = await client.send(new DescribeStacksCommand({ StackName: stack }));
    const outputs: Record<string, string> = {};
    for (const output of result.Stacks?.[0]?.Outputs ?? []) if (output.OutputKey && output.OutputValue) outputs[output.OutputKey] = output.OutputValue;
    return outputs;
  } catch (error) {
    throw new OperationError(`could not read stack ${stack}: ${(error as Error).name ?? 'error'}: ${(error as Error).message}`);
  } finally {
    if (!io.aws?.cloudformation) (client as CloudFormationClient).destroy();
  }
}

export function dynamoDbClient(io: CliIo, region: string | undefined): DynamoDBClient {
  return io.aws?.dynamodb ?? new DynamoDBClient(region ? { region } : {});
}

export function sqsClient(io: CliIo, region: string | undefined): SQSClient {
  return io.aws?.sqs ?? new SQSClient(region ? { region } : {});
}

export async function awsOperator(values: AwsFlags, io: CliIo): Promise<Operator> {
  const { table, region } = await awsResources(values, io, ['table']);
  return storeOperator(new DynamoDbStore({ client: dynamoDbClient(io, region), tableName: table! }), `table ${table}`);
}

/** AWS SDK errors as one line that names the error, never a credential. */
export function describeAwsError(error: unknown): string {
  const e = error as { name?: string; message?: string };
  return `${e.name ?? 'Error'}: ${e.message ?? String(error)}`;
}
