/**
 * Settings from the environment (SPEC 9), validated once at start-up with a clear message per bad
 * value. The same names are used by the local runtime and, through the CDK stack, by the Lambdas.
 *
 * Deliberately not here: the API key and, on AWS, the pup signing secrets (loaded by the runtime
 * that owns them from Secrets Manager) and defaults for AWS resources (lib/).
 */
import { readFileSync } from 'node:fs';
import { inboundSecretsProblem, parseRotationTime, type InboundSecrets } from './core/inbound';
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
  /** The pup door (SPEC 8): PUP_SIGNING_SECRETS / PUP_ROTATED_AT (local runtime) and the manifest text. */
  pup: PupSettings;
}

export interface PupSettings {
  /** Local runtime only (on AWS the secrets come from PUP_SECRET_ARN); empty: the POST routes answer 503. */
  secrets: InboundSecrets;
  /** PUP_MANIFEST_FILE's or PUP_MANIFEST_JSON's exact text, checked to be a JSON object; undefined: the default. */
  manifest?: string;
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

/**
 * PUP_SIGNING_SECRETS (comma-separated `whsec_` secrets, current first, at most two) and
 * PUP_ROTATED_AT (ISO time; required with two secrets: the previous one is accepted until 10
 * minutes after it). Messages name the setting and a secret's position, never a secret.
 */
export function parsePupSecrets(secretsText: string | undefined, rotatedAtText: string | undefined): InboundSecrets {
  const secrets = list(secretsText);
  let rotatedAt: number | undefined;
  if (rotatedAtText !== undefined && rotatedAtText.trim() !== '') {
    rotatedAt = parseRotationTime(rotatedAtText.trim());
    if (rotatedAt === undefined) throw new SettingsError('PUP_ROTATED_AT must be an ISO 8601 time with a zone, like 2026-11-30T12:00:00Z');
  }
  const config: InboundSecrets = rotatedAt === undefined ? { secrets } : { secrets, rotatedAt };
  const problem = inboundSecretsProblem(config);
  if (problem) throw new SettingsError(`PUP_SIGNING_SECRETS / PUP_ROTATED_AT: ${problem}`);
  return config;
}

/** The manifest as served (exact text), from PUP_MANIFEST_FILE (a path) or PUP_MANIFEST_JSON (inline, the Lambda's). */
export function loadPupManifest(env: NodeJS.ProcessEnv): string | undefined {
  const file = env.PUP_MANIFEST_FILE?.trim();
  const inline = env.PUP_MANIFEST_JSON;
  if (file && inline !== undefined && inline.trim() !== '') throw new SettingsError('PUP_MANIFEST_FILE and PUP_MANIFEST_JSON are both set; set one');
  let text: string;
  let name: string;
  if (file) {
    name = `PUP_MANIFEST_FILE (${file})`;
    try {
      text = readFileSync(file, 'utf8');
    } catch (error) {
      throw new SettingsError(`${name} cannot be read (${(error as NodeJS.ErrnoException).code ?? 'error'})`);
    }
  } else if (inline !== undefined && inline.trim() !== '') {
    name = 'PUP_MANIFEST_JSON';
    text = inline;
  } else {
    return undefined;
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new SettingsError(`${name} is not valid JSON`);
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) throw new SettingsError(`${name} must hold a JSON object`);
  if (Buffer.byteLength(text, 'utf8') > Limits.outboundResponseMaxBytes) throw new SettingsError(`${name} is over 1 MiB (pup reads at most 1 MiB)`);
  return text;
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
    pup: (() => {
      const manifest = loadPupManifest(env);
      const secrets = parsePupSecrets(env.PUP_SIGNING_SECRETS, env.PUP_ROTATED_AT);
      return manifest === undefined ? { secrets } : { secrets, manifest };
    })(),
  };
}
