/**
 * Settings from the environment (SPEC 9), validated once at start-up with a clear message per bad
 * value. The same names are used by the local runtime and, through the CDK stack, by the Lambdas.
 *
 * Deliberately not here: the API key (loaded by the runtime that owns it) and defaults for AWS
 * resources (lib/).
 */
import { DEFAULT_RETRY_DELAYS_S, Limits } from './core/protocol';
import { ttlPolicyProblem, type TtlPolicy } from './core/validation';

export interface Settings {
  host: string;
  port: number;
  stateDir: string;
  allowLoopbackCallbacks: boolean;
  retryDelaysS: number[];
  deliveryWaitMs: number;
  /** Local runtime only: delivery attempts the embedded queue runs at once (DMDOT_DELIVERY_CONCURRENCY). */
  deliveryConcurrency: number;
  allowedOrigins: string[];
  allowedHosts: string[];
  /** DMDOT_TTL_DEFAULT_MS / DMDOT_TTL_MAX_MS: subscription TTL default and cap (7 days each). */
  ttlPolicy: TtlPolicy;
}

export class SettingsError extends Error {}

function list(value: string | undefined): string[] {
  return (value ?? '').split(',').map((s) => s.trim()).filter(Boolean);
}

/**
 * The longest delay between two attempts: 12 hours (SQS's visibility limit, counted from the
 * receive) less 15 minutes for the time between the receive and the visibility change
 * (adapters/sqs-queue.ts clamps at run time as well). lib/settings.ts has the same cap for the stack.
 */
export const MAX_RETRY_DELAY_S = 43_200 - 900;

export function parseRetryDelays(value: string | undefined): number[] {
  if (value === undefined || value.trim() === '') return [...DEFAULT_RETRY_DELAYS_S];
  const delays = list(value).map(Number);
  if (delays.length === 0 || delays.length > 20 || delays.some((d) => !Number.isFinite(d) || d < 0 || d > MAX_RETRY_DELAY_S)) {
    throw new SettingsError(`DMDOT_RETRY_DELAYS must be 1 to 20 comma-separated numbers of seconds, each 0..${MAX_RETRY_DELAY_S} (SQS visibility limit of 12 h from the receive, less 15 min)`);
  }
  return delays;
}

export function parseDeliveryWait(value: string | undefined): number {
  if (value === undefined || value.trim() === '') return Limits.deliveryWaitDefaultMs;
  const ms = Number(value);
  if (!Number.isInteger(ms) || ms < 0 || ms > Limits.deliveryWaitMaxMs) {
    throw new SettingsError(`DMDOT_DELIVERY_WAIT_MS must be an integer from 0 to ${Limits.deliveryWaitMaxMs}`);
  }
  return ms;
}

export const DEFAULT_DELIVERY_CONCURRENCY = 8;
export const MAX_DELIVERY_CONCURRENCY = 256;

/** DMDOT_DELIVERY_CONCURRENCY: parallel attempts of the local queue (AWS scales by Lambda concurrency instead). */
export function parseDeliveryConcurrency(value: string | undefined): number {
  if (value === undefined || value.trim() === '') return DEFAULT_DELIVERY_CONCURRENCY;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1 || n > MAX_DELIVERY_CONCURRENCY) {
    throw new SettingsError(`DMDOT_DELIVERY_CONCURRENCY must be an integer from 1 to ${MAX_DELIVERY_CONCURRENCY}`);
  }
  return n;
}

export function parseFlag(value: string | undefined): boolean {
  return value === '1' || value?.toLowerCase() === 'true';
}

export function parseTtlPolicy(defaultText: string | undefined, maxText: string | undefined): TtlPolicy {
  const read = (text: string | undefined, fallback: number) => (text === undefined || text.trim() === '' ? fallback : Number(text));
  const maxMs = read(maxText, Limits.ttlMaxMs);
  const policy = { maxMs, defaultMs: read(defaultText, Math.min(Limits.ttlDefaultMs, maxMs)) };
  const problem = ttlPolicyProblem(policy);
  if (problem) throw new SettingsError(`DMDOT_TTL_DEFAULT_MS / DMDOT_TTL_MAX_MS: ${problem}`);
  return policy;
}

export function loadSettings(env: NodeJS.ProcessEnv = process.env): Settings {
  const port = env.PORT === undefined || env.PORT === '' ? 8787 : Number(env.PORT);
  if (!Number.isInteger(port) || port < 0 || port > 65_535) throw new SettingsError('PORT must be an integer from 0 to 65535');
  const origins = list(env.DMDOT_ALLOWED_ORIGINS);
  for (const origin of origins) {
    let parsed: URL | undefined;
    try {
      parsed = new URL(origin);
    } catch {
      parsed = undefined;
    }
    if (!parsed || parsed.origin !== origin.replace(/\/$/, '')) throw new SettingsError(`DMDOT_ALLOWED_ORIGINS: "${origin}" is not an origin like https://example.com`);
  }
  return {
    host: env.HOST || '127.0.0.1',
    port,
    stateDir: env.DMDOT_STATE_DIR || '.dm-dot',
    allowLoopbackCallbacks: parseFlag(env.DMDOT_ALLOW_LOOPBACK_CALLBACKS),
    retryDelaysS: parseRetryDelays(env.DMDOT_RETRY_DELAYS),
    deliveryWaitMs: parseDeliveryWait(env.DMDOT_DELIVERY_WAIT_MS),
    deliveryConcurrency: parseDeliveryConcurrency(env.DMDOT_DELIVERY_CONCURRENCY),
    allowedOrigins: origins.map((o) => o.replace(/\/$/, '')),
    allowedHosts: list(env.DMDOT_ALLOWED_HOSTS),
    ttlPolicy: parseTtlPolicy(env.DMDOT_TTL_DEFAULT_MS, env.DMDOT_TTL_MAX_MS),
  };
}
