/**
 * The options of every AWS SDK client dm-dot creates (DynamoDB and SQS in both Lambdas; the CLI has
 * its own). The MCP Lambda loads this module only with its storage (mcp-storage.ts), after the first
 * `tools/list`, so that its cold start does not import the SDK.
 *
 * Deliberately not here: creating clients, and Secrets Manager (adapters/secrets-manager.ts, no SDK).
 */
import { fromEnv } from '@aws-sdk/credential-provider-env';
import { Budgets } from '../core/budgets';

/** Options every SDK client of dm-dot gets. Region and credentials come from the Lambda environment. */
export interface ClientOptions {
  maxAttempts: number;
  requestHandler: { connectionTimeout: number; requestTimeout: number; throwOnRequestTimeout: true };
  /**
   * The environment only: Lambda puts the execution role's credentials there
   * (https://docs.aws.amazon.com/lambda/latest/dg/configuration-envvars.html#configuration-envvars-runtime),
   * and the bundles carry no other provider (handlers/env-credentials.ts, docs/performance.md).
   */
  credentials: ReturnType<typeof fromEnv>;
}

/**
 * Per attempt: connection 1 s, whole attempt 2 s, and `throwOnRequestTimeout` (without it
 * `@smithy/node-http-handler` 4.x only logs a warning when `requestTimeout` passes: see its
 * `setRequestTimeout`). Up to 3 attempts, so a throttled or failed call is retried by the SDK
 * with backoff; the request deadline (an abort signal on every call, adapters/deadline.ts) bounds
 * all of it, so these settings only decide how a stall is split into attempts.
 */
export function clientOptions(): ClientOptions {
  return {
    maxAttempts: Budgets.awsMaxAttempts,
    requestHandler: { connectionTimeout: Budgets.awsConnectMs, requestTimeout: Budgets.awsAttemptMs, throwOnRequestTimeout: true },
    credentials: fromEnv(),
  };
}
