/**
 * What both Lambdas share about AWS: required environment variables and the SDK client options
 * (bounded timeouts, so a hung connection fails a request instead of holding the function until
 * its own timeout).
 *
 * Deliberately not here: creating the clients (each entry file creates only the ones it uses, at
 * module scope, once per cold start) and anything of the MCP SDK or the HTTP app: the Delivery
 * Lambda imports this module and must stay small.
 */
import { fromEnv } from '@aws-sdk/credential-provider-env';
import { SettingsError } from '../config';

/** Options every SDK client of dm-dot gets. Region and credentials come from the Lambda environment. */
export interface ClientOptions {
  maxAttempts: number;
  requestHandler: { connectionTimeout: number; requestTimeout: number };
  /**
   * The environment only: Lambda puts the execution role's credentials there
   * (https://docs.aws.amazon.com/lambda/latest/dg/configuration-envvars.html#configuration-envvars-runtime),
   * and the bundles carry no other provider (handlers/env-credentials.ts, README "Performance").
   */
  credentials: ReturnType<typeof fromEnv>;
}

/**
 * Connection 1 s, whole request 3 s, 2 attempts: the MCP Lambda's outcome wait polls storage every
 * 100 ms and must never push a request past 5 s, and the delivery worker has its own 5 s budget
 * per POST.
 */
export function clientOptions(): ClientOptions {
  return { maxAttempts: 2, requestHandler: { connectionTimeout: 1_000, requestTimeout: 3_000 }, credentials: fromEnv() };
}

export function required(env: NodeJS.ProcessEnv, name: string): string {
  const value = env[name]?.trim();
  if (!value) throw new SettingsError(`${name} must be set (the stack sets it)`);
  return value;
}

/**
 * DMDOT_ALLOW_LOOPBACK_CALLBACKS (SPEC 7) on AWS: exactly "1", nothing else. The stack never sets
 * it; tests of the handlers do.
 */
export function loopbackAllowed(env: NodeJS.ProcessEnv): boolean {
  return env.DMDOT_ALLOW_LOOPBACK_CALLBACKS === '1';
}
