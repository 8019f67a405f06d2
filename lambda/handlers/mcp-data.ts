/**
 * The MCP Lambda's DynamoDB store and SQS queue, in a module of their own so that mcp-lambda.ts
 * reaches it only through a dynamic `import()` (adapters/deferred.ts): the AWS SDK clients and
 * their command code are evaluated on the first request that needs storage, not on every cold start.
 *
 * Deliberately not here: settings checks (mcp-lambda.ts checks TABLE_NAME and QUEUE_URL at init, so
 * a missing one still fails the cold start) and anything the first `tools/list` needs.
 */
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { SQSClient } from '@aws-sdk/client-sqs';
import { withDeadlines } from '../adapters/deadline';
import { DynamoDbStore } from '../adapters/dynamodb-store';
import { SqsQueue } from '../adapters/sqs-queue';
import type { Queue, Store } from '../ports';
import { clientOptions } from './aws-clients';

export interface McpDataClients {
  dynamodb: DynamoDBClient;
  sqs: SQSClient;
}

/** The store and queue on the given clients (tests pass clients with local endpoints), or on new ones. */
export function createMcpData(tableName: string, queueUrl: string, clients?: McpDataClients): { store: Store; queue: Queue } {
  const dynamodb = clients?.dynamodb ?? new DynamoDBClient(clientOptions());
  const sqs = clients?.sqs ?? new SQSClient(clientOptions());
  // Every call of these clients carries the request deadline (a no-op when already applied).
  withDeadlines(dynamodb);
  withDeadlines(sqs);
  return { store: new DynamoDbStore({ client: dynamodb, tableName }), queue: new SqsQueue({ client: sqs, queueUrl }) };
}
