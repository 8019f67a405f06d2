/**
 * Deployment settings of the dm-dot stack, read from CDK context (`cdk.json` or `-c key=value`)
 * and validated once, so a typo fails `cdk synth` with one clear line instead of a broken deploy.
 *
 * Every value goes through the parsers the Lambdas and the local runtime use for their own
 * environment (lambda/config/fields.ts), named `context <key>` in their messages: a value the stack
 * accepts is one the function accepts, with the same bounds and the same error type
 * (`SettingsError`, re-exported here). This module only adds what exists for CDK alone: reading
 * the context, the documented defaults, the log retention values CloudWatch knows, and SQS's
 * range for an event source's concurrency.
 *
 * Every setting has a documented default (DEFAULTS below; `cdk.json` repeats them and a test keeps
 * the two in step, and the defaults in step with the functions' own). Values from `-c` arrive as
 * strings, values from `cdk.json` may be numbers: both are accepted. An empty value means the
 * default, as it does for the functions' environment variables.
 *
 * Deliberately not here: anything that must never be configurable on AWS, such as
 * `DMDOT_ALLOW_LOOPBACK_CALLBACKS` (docs/contract/outbound-guard.md: the stack never sets it), and the API key (generated
 * by Secrets Manager, never a context value).
 */
import { RetentionDays } from 'aws-cdk-lib/aws-logs';
import type { Node } from 'constructs';
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as field from '../lambda/config/fields';
import { SettingsError, type Raw } from '../lambda/config/fields';
import { DEFAULT_EVENTS_PROFILE, EVENTS_PROFILES, Limits, type EventsProfileName } from '../lambda/core/protocol';

export { SettingsError };
/** The longest delay between two attempts (SQS's visibility limit); one constant for the stack and the functions. */
export const MAX_RETRY_DELAY_S = field.MAX_RETRY_DELAY_S;

/** The operator's pup manifest (docs/contract/pup.md), checked at synth to hold one JSON object. */
export interface PupManifest {
  /** Absolute path of the operator's file: the MCP function's asset gets a copy of it. */
  readonly file: string;
  /** Its exact text, as read and validated at synth. */
  readonly text: string;
}

export interface DmDotSettings {
  /** Seconds between delivery attempts after the first one (`DMDOT_RETRY_DELAYS`); fractions allowed, SQS rounds up. */
  readonly retryDelaysS: readonly number[];
  /** How long `send_to_dot` waits for the delivery outcome (`DMDOT_DELIVERY_WAIT_MS`). */
  readonly deliveryWaitMs: number;
  /** Subscription TTL granted when a subscriber asks for none (`DMDOT_TTL_DEFAULT_MS`). */
  readonly ttlDefaultMs: number;
  /** Longest subscription TTL granted (`DMDOT_TTL_MAX_MS`); at most 7 days (docs/contract/events.md). */
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
  /** The pup manifest when `pupManifestFile` is set; undefined: the MCP function serves its default. */
  readonly pupManifest?: PupManifest;
  /** The MCP Events profile (`DMDOT_EVENTS_PROFILE`): `chatgpt` (default) or `sep-3415`. */
  readonly eventsProfile: EventsProfileName;
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
  eventsProfile: 'chatgpt',
} as const;

export type ContextKey = keyof typeof DEFAULTS;

/**
 * What an SQS event source accepts as `MaximumConcurrency` (ScalingConfig: minimum 2, maximum 1000,
 * https://docs.aws.amazon.com/lambda/latest/dg/API_ScalingConfig.html).
 */
const MIN_DELIVERY_CONCURRENCY = 2;
const MAX_DELIVERY_CONCURRENCY = 1000;

/** CloudWatch's retention values, without "never expire". */
const VALID_RETENTION_DAYS: readonly number[] = Object.values(RetentionDays).filter(
  (v): v is number => typeof v === 'number' && v !== RetentionDays.INFINITE,
);

/** How a context key is named in a message. */
const named = (key: ContextKey) => `context ${key}`;

/** A context value as the parsers take it; a key that is not set, or set to nothing, gets its documented default. */
function raw(node: Node, key: ContextKey): Raw {
  const value: unknown = node.tryGetContext(key);
  if (value === undefined || value === null) return DEFAULTS[key];
  if (typeof value !== 'string' && typeof value !== 'number') throw new SettingsError(`${named(key)} must be a string or a number`);
  return field.isUnset(value) ? DEFAULTS[key] : value;
}

const integer = (node: Node, key: ContextKey, min: number, max: number) => field.integer(raw(node, key), named(key), min, max);

/**
 * Reads the pup manifest at synth and checks it with the functions' own rule (one JSON object of at
 * most 1 MiB, served as is: docs/contract/pup.md). A relative path is taken from the directory `cdk` runs in.
 */
function readManifest(value: Raw): PupManifest | undefined {
  const file = field.optional(value);
  if (file === undefined) return undefined;
  const resolved = path.resolve(file);
  const name = `${named('pupManifestFile')} (${resolved})`;
  let content: string;
  try {
    content = fs.readFileSync(resolved, 'utf8');
  } catch (error) {
    throw new SettingsError(`${name} cannot be read (${(error as NodeJS.ErrnoException).code ?? 'error'})`);
  }
  return { file: resolved, text: field.manifestText(content, name) };
}

/** Reads and validates every setting; throws SettingsError naming the bad key. */
export function readSettings(node: Node): DmDotSettings {
  const logRetentionDays = integer(node, 'logRetentionDays', 1, 3653);
  if (!VALID_RETENTION_DAYS.includes(logRetentionDays)) {
    throw new SettingsError(
      `${named('logRetentionDays')} must be one of CloudWatch's values (${VALID_RETENTION_DAYS.join(', ')}), got ${logRetentionDays}`,
    );
  }
  // Each bound on its own first, so the message names the key that is off; then the shared rule
  // that ties the two together (the default never above the cap).
  const ttlMaxMs = integer(node, 'ttlMaxMs', Limits.ttlMinMs, Limits.ttlMaxMs);
  const ttlDefaultMs = integer(node, 'ttlDefaultMs', Limits.ttlMinMs, ttlMaxMs);
  const ttl = field.ttlPolicy(ttlDefaultMs, ttlMaxMs, `${named('ttlDefaultMs')} / ${named('ttlMaxMs')}`);
  const pupManifest = readManifest(raw(node, 'pupManifestFile'));
  const alarmEmail = field.email(raw(node, 'alarmEmail'), named('alarmEmail'));
  return {
    retryDelaysS: field.retryDelays(raw(node, 'retryDelays'), named('retryDelays')),
    deliveryWaitMs: field.deliveryWaitMs(raw(node, 'deliveryWaitMs'), named('deliveryWaitMs')),
    ttlDefaultMs: ttl.defaultMs,
    ttlMaxMs: ttl.maxMs,
    allowedOrigins: field.origins(raw(node, 'allowedOrigins'), named('allowedOrigins')),
    ...(alarmEmail === undefined ? {} : { alarmEmail }),
    logRetention: logRetentionDays as RetentionDays,
    throttleRateLimit: integer(node, 'throttleRateLimit', 1, 10_000),
    throttleBurstLimit: integer(node, 'throttleBurstLimit', 1, 5_000),
    deliveryMaxConcurrency: integer(node, 'deliveryMaxConcurrency', MIN_DELIVERY_CONCURRENCY, MAX_DELIVERY_CONCURRENCY),
    ...(pupManifest === undefined ? {} : { pupManifest }),
    eventsProfile: field.oneOf(raw(node, 'eventsProfile'), named('eventsProfile'), EVENTS_PROFILES, DEFAULT_EVENTS_PROFILE),
  };
}
