/**
 * The MCP Lambda's storage (the DynamoDB store, the outbox over DynamoDB and SQS), in a bundle file
 * of its own that mcp-lambda.ts `require`s on first use, so the SDK is not evaluated on every cold start.
 *
 * Deliberately not here: settings checks (handlers/mcp.ts checks TABLE_NAME and QUEUE_URL at init,
 * so a missing one still fails the cold start) and anything the first `tools/list` needs.
 */
import { keepingBack, withDeadlines } from '../adapters/deadline';
import { DynamoDbStore } from '../adapters/dynamodb-store';
import { SqsQueue } from '../adapters/sqs-queue';
import { Budgets } from '../core/budgets';
import { sequentialOutbox } from '../core/outbox';
import { createAwsClients, type AwsClients } from './aws-clients';

/** The store and outbox on the given clients (tests pass clients with local endpoints), or on new ones. */
export function createMcpStorage(tableName: string, queueUrl: string, clients?: AwsClients) {
  const { dynamodb, sqs } = clients ?? createAwsClients();
  // Every call of these clients carries the request deadline (a no-op when already applied).
  withDeadlines(dynamodb);
  withDeadlines(sqs);
  const store = new DynamoDbStore({ client: dynamodb, tableName });
  // The record's put and the job's send give up in time for the compensating write
  // (docs/decisions.md, "The outbox keeps time for its compensation").
  const keepBack = <T>(fn: () => Promise<T>) => keepingBack(Budgets.outboxCompensationReserveMs, Budgets.outboxAttemptMs, fn);
  return { store, outbox: sequentialOutbox(store, new SqsQueue({ client: sqs, queueUrl }), { keepBack }), access: store };
}
