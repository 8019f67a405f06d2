/**
 * The MCP Lambda's storage: the DynamoDB store and the outbox over DynamoDB and SQS, in a module of
 * their own so that mcp-lambda.ts reaches it only through `require` on first use
 * (adapters/deferred.ts): the AWS SDK clients and their command code are evaluated on the first
 * request that needs storage, not on every cold start. lib/bundling.ts builds it as a file of its
 * own beside `index.js`.
 *
 * Deliberately not here: settings checks (handlers/mcp.ts checks TABLE_NAME and QUEUE_URL at init,
 * so a missing one still fails the cold start) and anything the first `tools/list` needs.
 */
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { SQSClient } from '@aws-sdk/client-sqs';
import { keepingBack, withDeadlines } from '../adapters/deadline';
import { DynamoDbStore } from '../adapters/dynamodb-store';
import { SqsQueue } from '../adapters/sqs-queue';
import { Budgets } from '../core/budgets';
import { sequentialOutbox } from '../core/outbox';
import type { AccessStore, IdempotencyStore, InboxStore, Outbox, Store } from '../ports';
import { clientOptions } from './aws-clients';

export interface McpStorageClients {
  dynamodb: DynamoDBClient;
  sqs: SQSClient;
}

/** The store and outbox on the given clients (tests pass clients with local endpoints), or on new ones. */
export function createMcpStorage(
  tableName: string,
  queueUrl: string,
  clients?: McpStorageClients,
): { store: Store & IdempotencyStore & InboxStore; outbox: Outbox; access: AccessStore } {
  const dynamodb = clients?.dynamodb ?? new DynamoDBClient(clientOptions());
  const sqs = clients?.sqs ?? new SQSClient(clientOptions());
  // Every call of these clients carries the request deadline (a no-op when already applied).
  withDeadlines(dynamodb);
  withDeadlines(sqs);
  const store = new DynamoDbStore({ client: dynamodb, tableName });
  // The record's put and the job's send give up in time for the compensating write
  // (docs/decisions.md, "The outbox keeps time for its compensation").
  const keepBack = <T>(fn: () => Promise<T>) => keepingBack(Budgets.outboxCompensationReserveMs, Budgets.outboxAttemptMs, fn);
  return { store, outbox: sequentialOutbox(store, new SqsQueue({ client: sqs, queueUrl }), { keepBack }), access: store };
}
