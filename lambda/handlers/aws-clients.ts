/**
 * The AWS SDK clients of the Lambdas (the CLI has its own) and their options; the MCP Lambda loads
 * them only with its storage (mcp-storage.ts).
 *
 * Deliberately not here: Secrets Manager (adapters/secrets-manager.ts, no SDK).
 */
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { SQSClient } from '@aws-sdk/client-sqs';
import { fromEnv } from '@aws-sdk/credential-provider-env';
import { Budgets } from '../core/budgets';

/** The two SDK clients every Lambda's storage and queue use (tests pass ones with local endpoints). */
export type AwsClients = ReturnType<typeof createAwsClients>;

export function createAwsClients() {
  return { dynamodb: new DynamoDBClient(clientOptions()), sqs: new SQSClient(clientOptions()) };
}

/**
 * Options every SDK client of dm-dot gets, region and credentials from the Lambda environment
 * (docs/reliability.md, "`requestTimeout` only warns"): the request deadline bounds them all, so
 * these only decide how a stall is split into attempts.
 */
export function clientOptions() {
  return {
    maxAttempts: Budgets.awsMaxAttempts,
    requestHandler: { connectionTimeout: Budgets.awsConnectMs, requestTimeout: Budgets.awsAttemptMs, throwOnRequestTimeout: true as const },
    // The environment only, where Lambda puts the execution role's credentials (handlers/env-credentials.ts).
    credentials: fromEnv(),
  };
}
