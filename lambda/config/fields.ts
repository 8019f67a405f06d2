/**
 * Pure parsers for every setting dm-dot has, one per kind of field, each throwing `SettingsError`
 * with a sentence that names the setting. The runtimes and the CLI (config/settings.ts) and the CDK
 * stack (lib/settings.ts) use the very same functions, so a value the stack accepts is one the
 * Lambda accepts. Each takes the raw value and the name its message uses.
 *
 * Deliberately not here: reading the environment or files (settings.ts does, once per entry
 * point), defaults of AWS resources (lib/), and quoting a secret in any message.
 */
import { inboundSecretsOf, type InboundSecrets } from '../core/inbound';
import { DEFAULT_RETRY_DELAYS_S, Limits } from '../core/protocol';
import { isObject, ttlPolicyProblem, type TtlPolicy } from '../core/validation';

export class SettingsError extends Error {
  override name = 'SettingsError';
}

/** What a setting may arrive as: CDK context values from cdk.json may be numbers. */
export type Raw = string | number | undefined | null;

function text(value: Raw): string {
  return value === undefined || value === null ? '' : String(value).trim();
}

export function isUnset(value: Raw): boolean {
  return text(value) === '';
}

export function list(value: Raw): string[] {
  return text(value)
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
}

export function required(value: Raw, name: string): string {
  const t = text(value);
  if (t === '') throw new SettingsError(`${name} must be set (the stack sets it)`);
  return t;
}

export function optional(value: Raw): string | undefined {
  const t = text(value);
  return t === '' ? undefined : t;
}

/** A switch: unset, `0` or `false` is off; `1` or `true` is on; anything else is refused. */
export function flag(value: Raw, name: string): boolean {
  const t = text(value).toLowerCase();
  if (t === '' || t === '0' || t === 'false') return false;
  if (t === '1' || t === 'true') return true;
  throw new SettingsError(`${name} must be 1 or true (on), or 0, false or empty (off), got "${text(value).slice(0, 40)}"`);
}

/** One of a fixed set of words; unset: the fallback. */
export function oneOf<T extends string>(value: Raw, name: string, allowed: readonly T[], fallback: T): T {
  const t = text(value).toLowerCase();
  if (t === '') return fallback;
  if ((allowed as readonly string[]).includes(t)) return t as T;
  throw new SettingsError(`${name} must be one of ${allowed.join(', ')}, got "${text(value).slice(0, 40)}"`);
}

export function integer(value: Raw, name: string, min: number, max: number, fallback?: number): number {
  const t = text(value);
  if (t === '' && fallback !== undefined) return fallback;
  const n = Number(t);
  if (t === '' || !/^-?\d+$/.test(t) || !Number.isSafeInteger(n) || n < min || n > max) {
    throw new SettingsError(`${name} must be an integer from ${min} to ${max}, got "${t.slice(0, 40)}"`);
  }
  return n;
}

/** The longest delay between two attempts: SQS's 12-hour visibility limit, from the receive, less 15 minutes of slack. */
export const MAX_RETRY_DELAY_S = 43_200 - 900;
export const MAX_RETRY_DELAYS = 20;

/** Seconds before attempts 2, 3, …: 1 to 20 numbers, each 0..42,300 (fractions allowed; SQS rounds them up). */
export function retryDelays(value: Raw, name: string): number[] {
  if (isUnset(value)) return [...DEFAULT_RETRY_DELAYS_S];
  const delays = list(value).map(Number);
  if (delays.length === 0 || delays.length > MAX_RETRY_DELAYS || delays.some((d) => !Number.isFinite(d) || d < 0 || d > MAX_RETRY_DELAY_S)) {
    throw new SettingsError(
      `${name} must be 1 to ${MAX_RETRY_DELAYS} comma-separated numbers of seconds, each 0..${MAX_RETRY_DELAY_S} (SQS visibility limit of 12 h ` +
        `from the receive, less 15 min), got "${text(value).slice(0, 80)}"`,
    );
  }
  return delays;
}

/** The wait window of send_to_dot's inline first attempt: 0..4000 ms, so a request never exceeds 5 s. */
export function deliveryWaitMs(value: Raw, name: string): number {
  return integer(value, name, 0, Limits.deliveryWaitMaxMs, Limits.deliveryWaitDefaultMs);
}

/** The subscription TTL default and cap: both 60 s..7 days, default ≤ cap; a cap alone lowers the default to it. */
export function ttlPolicy(defaultValue: Raw, maxValue: Raw, names: string): TtlPolicy {
  const read = (value: Raw, fallback: number) => (isUnset(value) ? fallback : Number(text(value)));
  const maxMs = read(maxValue, Limits.ttlMaxMs);
  const policy = { maxMs, defaultMs: read(defaultValue, Math.min(Limits.ttlDefaultMs, maxMs)) };
  const problem = ttlPolicyProblem(policy);
  if (problem) throw new SettingsError(`${names}: ${problem}`);
  return policy;
}

/** Browser origins, `scheme://host[:port]` each (a trailing slash is dropped), http or https. */
export function origins(value: Raw, name: string): string[] {
  return list(value).map((origin) => {
    let parsed: URL | undefined;
    try {
      parsed = new URL(origin);
    } catch {
      parsed = undefined;
    }
    const bare = origin.replace(/\/$/, '');
    if (!parsed || parsed.origin !== bare || !/^https?:$/.test(parsed.protocol)) {
      throw new SettingsError(`${name}: "${origin.slice(0, 80)}" is not an origin like https://example.com`);
    }
    return bare;
  });
}

/** Extra `Host` values: `host` or `host:port`, no scheme, no path. */
export function hosts(value: Raw, name: string): string[] {
  return list(value).map((host) => {
    if (!/^(\[[0-9a-f:.]+\]|[a-z0-9.-]+)(:\d{1,5})?$/i.test(host)) {
      throw new SettingsError(`${name}: "${host.slice(0, 80)}" is not a host name like abc.example-tunnel.dev (no scheme, no path)`);
    }
    return host.toLowerCase();
  });
}

/** An optional value of one shape: undefined when unset, else its match of `pattern`; no match throws "NAME must be `must`, got …". */
function matching(value: Raw, name: string, pattern: RegExp, must: string, shown: number): RegExpExecArray | undefined {
  const t = text(value);
  if (t === '') return undefined;
  const match = pattern.exec(t);
  if (!match) throw new SettingsError(`${name} must be ${must}, got "${t.slice(0, shown)}"`);
  return match;
}

export function email(value: Raw, name: string): string | undefined {
  return matching(value, name, /^[^\s@,]+@[^\s@,]+\.[^\s@,]+$/, 'one e-mail address', 80)?.[0];
}

/** pup's signing secrets (current first, at most two) and the rotation time; messages never quote a secret. */
export function pupSecrets(secretsValue: Raw, rotatedAtValue: Raw, names = 'PUP_SIGNING_SECRETS / PUP_ROTATED_AT'): InboundSecrets {
  return inboundSecretsOf(list(secretsValue), isUnset(rotatedAtValue) ? undefined : text(rotatedAtValue), (problem) =>
    problem === undefined
      ? new SettingsError('PUP_ROTATED_AT must be an ISO 8601 time with a zone, like 2026-11-30T12:00:00Z')
      : new SettingsError(`${names}: ${problem}`),
  );
}

/** A pup manifest as served: the exact text, which must hold one JSON object of at most 1 MiB. */
export function manifestText(content: string, name: string): string {
  let parsed: unknown;
  try {
    parsed = JSON.parse(content);
  } catch {
    throw new SettingsError(`${name} is not valid JSON`);
  }
  if (!isObject(parsed)) throw new SettingsError(`${name} must hold a JSON object`);
  if (Buffer.byteLength(content, 'utf8') > Limits.outboundResponseMaxBytes) throw new SettingsError(`${name} is over 1 MiB (pup reads at most 1 MiB)`);
  return content;
}

/** An API key given by the operator (`MCP_API_KEY`): the key and, when it is short, a warning. Never quoted. */
export function apiKey(value: Raw, name: string): { key: string; warning?: string } | undefined {
  if (value === undefined || value === null || String(value) === '') return undefined;
  const key = String(value);
  if (key !== key.trim() || /\s/.test(key)) throw new SettingsError(`${name} must not contain spaces or line breaks`);
  if (key.length < Limits.apiKeyMinChars) {
    throw new SettingsError(
      `${name} is ${key.length} characters; it must have at least ${Limits.apiKeyMinChars} (leave it unset and a 43-character key is generated)`,
    );
  }
  return key.length < Limits.apiKeyRecommendedChars
    ? {
        key,
        warning:
          `${name} has ${key.length} characters; ${Limits.apiKeyRecommendedChars} or more are recommended (leave it unset and a 43-character key is ` +
          'generated)',
      }
    : { key };
}

/** The CloudFormation stack of the default deployment; `-c stage=NAME` deploys `DmDot-NAME` beside it. */
export const DEFAULT_STACK_NAME = 'DmDot';

/** A stage name (`-c stage=NAME`, `--stage`): at most 24 characters, so the names derived from `DmDot-NAME` stay within their limits. */
export function stageName(value: Raw, name: string): string | undefined {
  const must = '1 to 24 letters, digits or single hyphens, starting with a letter (the stack is named DmDot-<stage>)';
  return matching(value, name, /^(?!.*--)(?!.*-$)[A-Za-z][A-Za-z0-9-]{0,23}$/, must, 40)?.[0];
}

/** The stack a stage is deployed as: `DmDot` without one, `DmDot-<stage>` with one. */
export function stackNameOf(stage: string | undefined): string {
  return stage === undefined ? DEFAULT_STACK_NAME : `${DEFAULT_STACK_NAME}-${stage}`;
}

/** One of a fixed set of words (case-insensitive); unset gives the first. */
export function choice<T extends string>(value: Raw, name: string, options: readonly [T, ...T[]]): T {
  return oneOf(value, name, options, options[0]);
}

/** A fully qualified DNS name for a custom domain (`mcp.example.com`): lower-cased, no scheme, port, path or wildcard. */
export function dnsName(value: Raw, name: string): string | undefined {
  const t = text(value).toLowerCase().replace(/\.$/, '');
  if (t === '') return undefined;
  const label = /^(?!-)[a-z0-9-]{1,63}(?<!-)$/;
  const labels = t.split('.');
  if (t.length > 253 || labels.length < 2 || !labels.every((l) => label.test(l)) || /^\d+$/.test(labels[labels.length - 1] ?? '')) {
    throw new SettingsError(`${name} must be a DNS name like mcp.example.com (no scheme, port, path or wildcard), got "${text(value).slice(0, 80)}"`);
  }
  return t;
}

/** An ACM certificate ARN, and the region it lives in (CloudFront takes only us-east-1 certificates, API Gateway the API's own region). */
export function certificateArn(value: Raw, name: string): { arn: string; region: string } | undefined {
  const must = 'an ACM certificate ARN like arn:aws:acm:us-east-1:123456789012:certificate/<uuid>';
  const match = matching(value, name, /^arn:aws[a-z-]*:acm:([a-z]{2}(?:-[a-z]+)+-\d):\d{12}:certificate\/[0-9a-f-]{36}$/, must, 100);
  return match && { arn: match[0], region: match[1] as string };
}

/** An S3 object as `s3://bucket/key` (API Gateway's mutual TLS trust store), optionally `?versionId=…`. */
export function s3Uri(value: Raw, name: string): { bucket: string; key: string; version?: string } | undefined {
  const must = 'an S3 object like s3://my-bucket/truststore.pem';
  const match = matching(value, name, /^s3:\/\/([a-z0-9][a-z0-9.-]{1,61}[a-z0-9])\/([^?#\s]+?)(?:\?versionId=([^&#\s]+))?$/, must, 100);
  return match && { bucket: match[1] as string, key: match[2] as string, ...(match[3] ? { version: match[3] } : {}) };
}
