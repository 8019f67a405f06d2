/**
 * The backings a command runs on, and the choice between them: the running local server's admin
 * routes or a stopped server's database (local-server/local-operator.ts), or with `--aws` the
 * stack's table (its events, subscription and sender keys) through the same DynamoDbStore the
 * Lambdas use, and for a resend an outbox of that store and the delivery queue, as the MCP Lambda
 * records and enqueues. Each runs the shared actions of lambda/operator, so the three never
 * disagree on what a view holds. On AWS the operator's IAM permissions are the admin credential.
 *
 * Deliberately not here: redrive on AWS (commands/redrive.ts), the connector key
 * (commands/key.ts) and any printing.
 */
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { SQSClient } from '@aws-sdk/client-sqs';
import { clearSubscription, listEventViews, resendEvent, showEvent, showSubscription } from '../operator/actions';
import type { AccessStore, Store } from '../ports';
import { type AwsFlags, type AwsSession, describeAwsError, unusableAws, withAws } from './aws/session';
import type { Context } from './context';
import { OperationError } from './errors';
import { type CliOperator, type LocalOperator, senderOperationsOf, withLocalOperator } from './local-server/local-operator';
import { wantsAws } from './options';

/** Runs `aws` on the stack's session when `--aws` asks for it, else `local` on the local backing. */
export function onBacking<T>(ctx: Context, values: AwsFlags, local: (op: LocalOperator) => Promise<T>, aws: (session: AwsSession) => Promise<T>): Promise<T> {
  return wantsAws(values) ? withAws(ctx, values, aws) : withLocalOperator(ctx, local);
}

/** Runs `work` on the operator `--aws` asks for, or on the local one. */
export function withOperator<T>(ctx: Context, values: AwsFlags, work: (op: CliOperator) => Promise<T>): Promise<T> {
  return onBacking(ctx, values, work, async (session) => work(await awsOperator(session)));
}

async function guarded<T>(what: string, work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (error) {
    if (error instanceof OperationError) throw error;
    const dependency = (error as { dependency?: string }).dependency;
    if ((error as Error).name === 'DependencyUnavailable' && dependency) {
      throw new OperationError(
        `${what}: the ${dependency === 'queue' ? 'delivery queue' : 'table'} is unavailable ` +
          `(${describeAwsError((error as { cause?: unknown }).cause ?? error)})`,
        `${dependency}_unavailable`,
      );
    }
    throw new OperationError(`${what}: ${describeAwsError(error)}`, unusableAws(error)?.code ?? 'aws_error');
  }
}

export async function storeOf(session: AwsSession): Promise<{ store: Store; access: AccessStore; table: string }> {
  const table = await session.table();
  const { DynamoDbStore } = await import('../adapters/dynamodb-store');
  const store = new DynamoDbStore({ client: (await session.client('dynamodb')) as DynamoDBClient, tableName: table });
  return { store, access: store, table };
}

async function awsOperator(session: AwsSession): Promise<CliOperator> {
  const { store, access, table } = await storeOf(session);
  const now = () => Date.now();
  const on = `table ${table}`;
  return {
    via: 'aws',
    where: on,
    listEvents: (status) => guarded(`could not read ${on}`, () => listEventViews(store, now(), status)),
    showEvent: (eventId) => guarded(`could not read ${on}`, () => showEvent(store, now(), eventId)),
    showSubscription: () => guarded(`could not read ${on}`, () => showSubscription(store, now())),
    clearSubscription: (expectedId) => guarded(`could not clear the subscription in ${on}`, () => clearSubscription(store, now(), expectedId)),
    async resendEvent(eventId) {
      const queueUrl = await session.queueUrl();
      const [{ SqsQueue }, { sequentialOutbox }] = await Promise.all([import('../adapters/sqs-queue'), import('../core/outbox')]);
      const queue = new SqsQueue({ client: (await session.client('sqs')) as SQSClient, queueUrl });
      return guarded(`could not resend ${eventId}`, () => resendEvent({ store, outbox: sequentialOutbox(store, queue) }, now(), eventId));
    },
    senders: senderOperationsOf(access),
  };
}
