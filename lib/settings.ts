/**
 * Deployment settings of the dm-dot stack, read from CDK context (`cdk.json` or `-c key=value`)
 * and validated once, so a typo fails `cdk synth` with one clear line instead of a broken deploy.
 *
 * Every setting has a documented default (DEFAULTS below; `cdk.json` repeats them and a test keeps
 * the two in step). Values from `-c` arrive as strings, values from `cdk.json` may be numbers:
 * both are accepted.
 *
 * Deliberately not here: anything that must never be configurable on AWS, such as
 * `DMDOT_ALLOW_LOOPBACK_CALLBACKS` (SPEC 7: the stack never sets it), and the API key (generated
 * by Secrets Manager, never a context value).
 */
import { RetentionDays } from 'aws-cdk-lib/aws-logs';
import type { Node } from 'constructs';
import * as fs from 'node:fs';
import * as path from 'node:path';

export interface DmDotSettings {
  /** Seconds between delivery attempts after the first one (`DMDOT_RETRY_DELAYS`). */
  readonly retryDelaysS: readonly number[];
  /** How long `send_to_dot` waits for the delivery outcome (`DMDOT_DELIVERY_WAIT_MS`). */
  readonly deliveryWaitMs: number;
  /** Subscription TTL granted when a subscriber asks for none (`DMDOT_TTL_DEFAULT_MS`). */
  readonly ttlDefaultMs: number;
  /** Longest subscription TTL granted (`DMDOT_TTL_MAX_MS`); at most 7 days (SPEC 4.2). */
  readonly ttlMaxMs: number;
  /** Browser origins allowed to call the API (`DMDOT_ALLOWED_ORIGINS`); none by default. */
  readonly allowedOrigins: readonly string[];
  /** E-mail address subscribed to the alarms' SNS topic; no topic when absent. */
  readonly alarmEmail?: string;
  /** Retention of every log group of the stack. */
  readonly logRetention: RetentionDays;
  /** Steady-state requests per second of the API's default stage. */
  readonly throttleRateLimit: number;
  /** Burst of requests of the API's default stage. */
  readonly throttleBurstLimit: number;
  /**
   * Most delivery function instances the SQS event source runs at once (its `maxConcurrency`).
   * Each instance sends up to a batch of 10 at once, so this caps the POSTs in flight at one dot.
   */
  readonly deliveryMaxConcurrency: number;
  /**
   * The pup manifest (SPEC 8) exactly as the operator's file holds it, checked to be JSON at synth;
   * undefined when `pupManifestFile` is not set (the MCP function then serves its default).
   */
  readonly pupManifestJson?: string;
}

/** Context keys and their defaults, exactly as they appear in `cdk.json`. */
export const DEFAULTS = {
  retryDelays: '1,4,30,120,600',
  deliveryWaitMs: 3000,
  ttlDefaultMs: 604_800_000,
  ttlMaxMs: 604_800_000,
  allowedOrigins: '',
  alarmEmail: '',
  logRetentionDays: 30,
  throttleRateLimit: 10,
  throttleBurstLimit: 20,
  deliveryMaxConcurrency: 2,
  pupManifestFile: '',
} as const;

export type ContextKey = keyof typeof DEFAULTS;

/** Same bounds as the Lambda's own settings parser (lambda/config.ts). */
const MAX_DELIVERY_WAIT_MS = 4000;
/** SPEC 4.2: a subscription lives at least 60 s and at most 7 days. */
const MIN_TTL_MS = 60_000;
const MAX_TTL_MS = 604_800_000;
/**
 * SQS caps a message's visibility timeout at 12 hours counted from the receive; 15 minutes are left
 * for the time between the receive and the visibility change. Equal to lambda/config.ts's
 * MAX_RETRY_DELAY_S (a unit test keeps them equal).
 */
export const MAX_RETRY_DELAY_S = 43_200 - 900;
const MAX_RETRY_DELAYS = 20;
/**
 * What an SQS event source accepts as `MaximumConcurrency` (ScalingConfig: minimum 2, maximum 1000,
 * https://docs.aws.amazon.com/lambda/latest/dg/API_ScalingConfig.html).
 */
const MIN_DELIVERY_CONCURRENCY = 2;
const MAX_DELIVERY_CONCURRENCY = 1000;

export class SettingsError extends Error {
  override name = 'SettingsError';
}

/** CloudWatch's retention values, without "never expire". */
const VALID_RETENTION_DAYS: readonly number[] = Object.values(RetentionDays).filter(
  (v): v is number => typeof v === 'number' && v !== RetentionDays.INFINITE,
);

function raw(node: Node, key: ContextKey): string {
  const value: unknown = node.tryGetContext(key);
  if (value === undefined || value === null) return String(DEFAULTS[key]);
  if (typeof value === 'string' || typeof value === 'number') return String(value).trim();
  throw new SettingsError(`context ${key} must be a string or a number`);
}

function integer(node: Node, key: ContextKey, min: number, max: number): number {
  const text = raw(node, key);
  const value = Number(text);
  if (text === '' || !Number.isInteger(value) || value < min || value > max) {
    throw new SettingsError(`context ${key} must be an integer from ${min} to ${max}, got "${text}"`);
  }
  return value;
}

function list(text: string): string[] {
  return text
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
}

export function parseRetryDelays(text: string): number[] {
  const delays = list(text).map(Number);
  if (
    delays.length === 0 ||
    delays.length > MAX_RETRY_DELAYS ||
    delays.some((d) => !Number.isInteger(d) || d < 0 || d > MAX_RETRY_DELAY_S)
  ) {
    throw new SettingsError(
      `context retryDelays must be 1 to ${MAX_RETRY_DELAYS} comma-separated whole seconds, each 0..${MAX_RETRY_DELAY_S}, got "${text}"`,
    );
  }
  return delays;
}

function parseOrigins(text: string): string[] {
  return list(text).map((origin) => {
    let parsed: URL | undefined;
    try {
      parsed = new URL(origin);
    } catch {
      parsed = undefined;
    }
    const bare = origin.replace(/\/$/, '');
    if (!parsed || parsed.origin !== bare || !/^https?:$/.test(parsed.protocol)) {
      throw new SettingsError(`context allowedOrigins: "${origin}" is not an origin like https://example.com`);
    }
    return bare;
  });
}

function parseEmail(text: string): string | undefined {
  if (text === '') return undefined;
  if (!/^[^\s@,]+@[^\s@,]+\.[^\s@,]+$/.test(text)) {
    throw new SettingsError(`context alarmEmail must be one e-mail address, got "${text}"`);
  }
  return text;
}

/**
 * Reads the pup manifest at synth. It must parse as JSON; it is passed on byte for byte (SPEC 8:
 * "validated as JSON, served as is"). A relative path is taken from the directory `cdk` runs in.
 * The size check against Lambda's 4 KB environment limit happens in the stack, where the other
 * variables of the function are known (lib/lambda-environment.ts).
 */
function readManifest(file: string): string | undefined {
  if (file === '') return undefined;
  const resolved = path.resolve(file);
  let text: string;
  try {
    text = fs.readFileSync(resolved, 'utf8');
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? 'unreadable';
    throw new SettingsError(`context pupManifestFile: cannot read "${resolved}" (${code})`);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (error) {
    throw new SettingsError(`context pupManifestFile: "${resolved}" is not JSON (${(error as Error).message})`);
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    throw new SettingsError(`context pupManifestFile: "${resolved}" must hold one JSON object`);
  }
  return text;
}

/** Reads and validates every setting; throws SettingsError naming the bad key. */
export function readSettings(node: Node): DmDotSettings {
  const logRetentionDays = integer(node, 'logRetentionDays', 1, 3653);
  if (!VALID_RETENTION_DAYS.includes(logRetentionDays)) {
    throw new SettingsError(
      `context logRetentionDays must be one of CloudWatch's values (${VALID_RETENTION_DAYS.join(', ')}), got ${logRetentionDays}`,
    );
  }
  const throttleRateLimit = integer(node, 'throttleRateLimit', 1, 10_000);
  const throttleBurstLimit = integer(node, 'throttleBurstLimit', 1, 5_000);
  const ttlMaxMs = integer(node, 'ttlMaxMs', MIN_TTL_MS, MAX_TTL_MS);
  const ttlDefaultMs = integer(node, 'ttlDefaultMs', MIN_TTL_MS, ttlMaxMs);
  return {
    retryDelaysS: parseRetryDelays(raw(node, 'retryDelays')),
    deliveryWaitMs: integer(node, 'deliveryWaitMs', 0, MAX_DELIVERY_WAIT_MS),
    ttlDefaultMs,
    ttlMaxMs,
    allowedOrigins: parseOrigins(raw(node, 'allowedOrigins')),
    alarmEmail: parseEmail(raw(node, 'alarmEmail')),
    logRetention: logRetentionDays as RetentionDays,
    throttleRateLimit,
    throttleBurstLimit,
    deliveryMaxConcurrency: integer(node, 'deliveryMaxConcurrency', MIN_DELIVERY_CONCURRENCY, MAX_DELIVERY_CONCURRENCY),
    pupManifestJson: readManifest(raw(node, 'pupManifestFile')),
  };
}
