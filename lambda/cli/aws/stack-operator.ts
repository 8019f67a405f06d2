/**
 * The `--aws` backing of the operator commands: the stack's table through the same DynamoDbStore
 * the Lambdas use, and for a resend an outbox of that store and the delivery queue, as the MCP
 * Lambda records and enqueues, and the sender keys in that table. The operator's IAM permissions
 * are the admin credential.
 *
 * Deliberately not here: redrive (commands/redrive.ts) and printing.
 */
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { SQSClient } from '@aws-sdk/client-sqs';
import { clearSubscription, listEventViews, resendEvent, showEvent, showSubscription } from '../../operator/actions';
import type { AccessStore, Store } from '../../ports';
import { OperationError } from '../errors';
import { type CliOperator, senderOperationsOf } from '../local-server/local-operator';
import { describeAwsError, unusableAws, type AwsSession } from './session';

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
  const { DynamoDbStore } = await import('../../adapters/dynamodb-store');
  const store = new DynamoDbStore({ client: (await session.client('dynamodb')) as DynamoDBClient, tableName: table });
  return { store, access: store, table };
}

export async function awsOperator(session: AwsSession): Promise<CliOperator> {
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
      const [{ SqsQueue }, { sequentialOutbox }] = await Promise.all([import('../../adapters/sqs-queue'), import('../../core/outbox')]);
      const queue = new SqsQueue({ client: (await session.client('sqs')) as SQSClient, queueUrl });
      return guarded(`could not resend ${eventId}`, () => resendEvent({ store, outbox: sequentialOutbox(store, queue) }, now(), eventId));
    },
    senders: senderOperationsOf(access),
  };
}
