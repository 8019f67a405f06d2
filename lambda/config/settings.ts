/**
 * The settings of each entry point (`npm start`, the two Lambdas, the CLI), read once from its
 * environment into a typed object through the parsers of fields.ts, so a bad value stops the entry
 * point with a SettingsError naming it. Nothing below an entry point reads `process.env`.
 *
 * Deliberately not here: the API key and pup's secrets on AWS (Secrets Manager, read by the
 * runtime that owns them; only their ARNs are settings), and CDK context (lib/settings.ts, which
 * uses the same parsers).
 */
import { readFileSync } from 'node:fs';
import { isAbsolute, resolve } from 'node:path';
import { isLoopbackHostname } from '../core/loopback';
import { DEFAULT_EVENTS_PROFILE, EVENTS_PROFILES } from '../core/protocol';
import * as field from './fields';

export { SettingsError } from './fields';

/** The environment as an entry point hands it in (process.env, or a test's record). */
export type Env = Readonly<Record<string, string | undefined>>;

/** The AWS runtime facts the Secrets Manager reader needs (what the SDK would read itself). */
export type AwsRuntime = ReturnType<typeof awsRuntime>;

export type LocalSettings = ReturnType<typeof localSettings>;
export type McpLambdaSettings = ReturnType<typeof mcpLambdaSettings>;
export type DeliveryLambdaSettings = ReturnType<typeof deliveryLambdaSettings>;

/** The ways the CLI points at AWS without `--table` and friends. */
export type CliAwsSettings = ReturnType<typeof cliAwsSettings>;

/** Reads a file named by a setting; a test may pass its own. */
export type ReadText = (path: string) => string;

function mcpSettings(env: Env, manifestBase: string, readFile: ReadText = (path) => readFileSync(path, 'utf8')) {
  const manifestFile = field.optional(env.PUP_MANIFEST_FILE);
  let pupManifest: string | undefined;
  if (manifestFile) {
    const path = isAbsolute(manifestFile) ? manifestFile : resolve(manifestBase, manifestFile);
    const name = `PUP_MANIFEST_FILE (${path})`;
    let content: string;
    try {
      content = readFile(path);
    } catch (error) {
      throw new field.SettingsError(`${name} cannot be read (${(error as NodeJS.ErrnoException).code ?? 'error'})`);
    }
    pupManifest = field.manifestText(content, name);
  }
  return {
    retryDelaysS: field.retryDelays(env.DMDOT_RETRY_DELAYS, 'DMDOT_RETRY_DELAYS'),
    deliveryWaitMs: field.deliveryWaitMs(env.DMDOT_DELIVERY_WAIT_MS, 'DMDOT_DELIVERY_WAIT_MS'),
    ttlPolicy: field.ttlPolicy(env.DMDOT_TTL_DEFAULT_MS, env.DMDOT_TTL_MAX_MS, 'DMDOT_TTL_DEFAULT_MS / DMDOT_TTL_MAX_MS'),
    allowedOrigins: field.origins(env.DMDOT_ALLOWED_ORIGINS, 'DMDOT_ALLOWED_ORIGINS'),
    // docs/contract/outbound-guard.md, GUARD-14: the CDK stack never sets it.
    allowLoopbackCallbacks: field.flag(env.DMDOT_ALLOW_LOOPBACK_CALLBACKS, 'DMDOT_ALLOW_LOOPBACK_CALLBACKS'),
    // Undefined: the default manifest.
    ...(pupManifest !== undefined ? { pupManifest } : {}),
    eventsProfile: field.oneOf(env.DMDOT_EVENTS_PROFILE, 'DMDOT_EVENTS_PROFILE', EVENTS_PROFILES, DEFAULT_EVENTS_PROFILE),
    inbox: field.flag(env.DMDOT_INBOX, 'DMDOT_INBOX'),
  };
}

export const DEFAULT_DELIVERY_CONCURRENCY = 8;
export const MAX_DELIVERY_CONCURRENCY = 256;

/** `npm start`'s settings; relative paths are taken from `projectRoot`, so the CLI finds the server's state from any folder. */
export function localSettings(env: Env, options: { projectRoot: string; readFile?: ReadText }) {
  const host = field.optional(env.HOST) ?? '127.0.0.1';
  const key = field.apiKey(env.MCP_API_KEY, 'MCP_API_KEY');
  const warnings: string[] = [];
  if (key?.warning) warnings.push(key.warning);
  if (!isLoopbackHostname(host)) {
    warnings.push(
      `HOST=${host} listens beyond this machine: anyone who can reach it and holds the API key can send to your dot; prefer 127.0.0.1 behind a tunnel`,
    );
  }
  return {
    ...mcpSettings(env, options.projectRoot, options.readFile),
    host,
    port: field.integer(env.PORT, 'PORT', 0, 65_535, 8787),
    stateDir: resolve(options.projectRoot, field.optional(env.DMDOT_STATE_DIR) ?? '.dm-dot'),
    deliveryConcurrency: field.integer(env.DMDOT_DELIVERY_CONCURRENCY, 'DMDOT_DELIVERY_CONCURRENCY', 1, MAX_DELIVERY_CONCURRENCY, DEFAULT_DELIVERY_CONCURRENCY),
    allowedHosts: field.hosts(env.DMDOT_ALLOWED_HOSTS, 'DMDOT_ALLOWED_HOSTS'),
    // No MCP_API_KEY: the key file in the state directory is used (or made).
    ...(key ? { apiKey: key.key } : {}),
    pupSecrets: field.pupSecrets(env.PUP_SIGNING_SECRETS, env.PUP_ROTATED_AT),
    warnings,
  };
}

export function awsRuntime(env: Env) {
  const ignoreConfigured = field.optional(env.AWS_IGNORE_CONFIGURED_ENDPOINT_URLS)?.toLowerCase() === 'true';
  const endpoint = ignoreConfigured ? undefined : (field.optional(env.AWS_ENDPOINT_URL_SECRETS_MANAGER) ?? field.optional(env.AWS_ENDPOINT_URL));
  const sessionToken = field.optional(env.AWS_SESSION_TOKEN);
  // Set inside Lambda only: metrics are written only there.
  const functionName = field.optional(env.AWS_LAMBDA_FUNCTION_NAME);
  return {
    region: field.optional(env.AWS_REGION) ?? field.optional(env.AWS_DEFAULT_REGION) ?? 'us-east-1',
    ...(endpoint ? { secretsManagerEndpoint: endpoint } : {}),
    useFips: field.optional(env.AWS_USE_FIPS_ENDPOINT)?.toLowerCase() === 'true',
    credentials: {
      accessKeyId: field.optional(env.AWS_ACCESS_KEY_ID) ?? '',
      secretAccessKey: field.optional(env.AWS_SECRET_ACCESS_KEY) ?? '',
      ...(sessionToken ? { sessionToken } : {}),
    },
    ...(functionName ? { functionName } : {}),
  };
}

/** The MCP Lambda's settings; PUP_MANIFEST_FILE names a file in the function's asset (out of the 4 KB environment). */
export function mcpLambdaSettings(env: Env, options: { readFile?: ReadText } = {}) {
  const apiKeySecretArn = field.optional(env.API_KEY_SECRET_ARN);
  const pupSecretArn = field.optional(env.PUP_SECRET_ARN);
  return {
    ...mcpSettings(env, field.optional(env.LAMBDA_TASK_ROOT) ?? process.cwd(), options.readFile),
    tableName: field.required(env.TABLE_NAME, 'TABLE_NAME'),
    queueUrl: field.required(env.QUEUE_URL, 'QUEUE_URL'),
    ...(apiKeySecretArn ? { apiKeySecretArn } : {}),
    ...(pupSecretArn ? { pupSecretArn } : {}),
    aws: awsRuntime(env),
  };
}

export function deliveryLambdaSettings(env: Env) {
  return {
    tableName: field.required(env.TABLE_NAME, 'TABLE_NAME'),
    queueUrl: field.required(env.QUEUE_URL, 'QUEUE_URL'),
    deadLetterQueueUrl: field.required(env.DEAD_LETTER_QUEUE_URL, 'DEAD_LETTER_QUEUE_URL'),
    retryDelaysS: field.retryDelays(env.DMDOT_RETRY_DELAYS, 'DMDOT_RETRY_DELAYS'),
    allowLoopbackCallbacks: field.flag(env.DMDOT_ALLOW_LOOPBACK_CALLBACKS, 'DMDOT_ALLOW_LOOPBACK_CALLBACKS'),
    aws: awsRuntime(env),
  };
}

/** DMDOT_STACK, DMDOT_TABLE, DMDOT_QUEUE_URL, DMDOT_DLQ_URL and the region, for `--aws`. */
export function cliAwsSettings(env: Env) {
  const region = field.optional(env.AWS_REGION) ?? field.optional(env.AWS_DEFAULT_REGION);
  const table = field.optional(env.DMDOT_TABLE);
  const queueUrl = field.optional(env.DMDOT_QUEUE_URL);
  const deadLetterQueueUrl = field.optional(env.DMDOT_DLQ_URL);
  return {
    ...(region ? { region } : {}),
    ...(table ? { table } : {}),
    ...(queueUrl ? { queueUrl } : {}),
    ...(deadLetterQueueUrl ? { deadLetterQueueUrl } : {}),
    stack: field.optional(env.DMDOT_STACK) ?? field.DEFAULT_STACK_NAME,
  };
}
