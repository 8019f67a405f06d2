/**
 * Secrets Manager's `GetSecretValue` (the API key and pup's signing secrets) over node:https,
 * signed with Signature Version 4 by `aws4`: the SDK client costs the MCP Lambda's cold start more
 * than its budget allows (docs/decisions.md has the figures). It behaves as the SDK client would
 * where callers can tell: error names, the standard retry mode, the endpoint its variables configure
 * (config/settings.ts) or the ARN's partition gives, the attempt timeouts of core/budgets.ts, and
 * the caller's abort signal (the request deadline) over the whole call.
 *
 * Deliberately not here: any other action, version ids or stages (a read without them answers
 * AWSCURRENT), dual-stack endpoints, caching (the loader's), logging, and credentials from
 * anywhere but the environment (where Lambda puts the role's).
 */
import { once } from 'node:events';
import * as http from 'node:http';
import * as https from 'node:https';
import { setTimeout as delay } from 'node:timers/promises';
import { sign } from 'aws4';
import { Budgets } from '../core/budgets';
import { readCapped } from '../core/capped-body';

/** What a read answers: one of the two is set. */
export type SecretValue = { SecretString?: string; SecretBinary?: Uint8Array };

/** The port the secret loaders use (adapters/secret-loader.ts). */
export interface SecretsReader {
  getSecretValue(input: { SecretId: string }, options?: { abortSignal?: AbortSignal }): Promise<SecretValue>;
}

/** A Secrets Manager error answer; `name` is its error code (e.g. `ResourceNotFoundException`). */
export class SecretsManagerError extends Error {
  constructor(
    readonly code: string,
    readonly status: number,
  ) {
    // The code only: a message from the service may quote the secret's name or ARN.
    super(`Secrets Manager answered ${status} ${code}`);
    this.name = code;
  }
}

export type Credentials = { accessKeyId: string; secretAccessKey: string; sessionToken?: string };

export interface SecretsManagerOptions {
  /** Used when the secret id is not an ARN (the ARN's own region wins). */
  region: string;
  /** A configured endpoint (`http(s)://host[:port][/path]`); default: the partition's. */
  endpoint?: string;
  useFips?: boolean;
  credentials: () => Credentials;
  maxAttempts?: number;
  attemptTimeoutMs?: number;
  /** Tests: a deterministic backoff. */
  random?: () => number;
}

/** Error codes the SDK's standard retry mode treats as throttling or transient. */
const RETRYABLE_CODES = new Set(
  `ThrottlingException Throttling ThrottledException TooManyRequestsException RequestThrottled RequestThrottledException RequestLimitExceeded
  SlowDown RequestTimeout RequestTimeoutException TransactionInProgressException PriorRequestNotComplete`.split(/\s+/),
);
const THROTTLING_BASE_MS = 500;
const BASE_MS = 100;
const MAX_BACKOFF_MS = 20_000;
/** A secret is at most 64 KiB; anything far larger is not a GetSecretValue answer. */
const MAX_ANSWER_BYTES = 1024 * 1024;

/** A connection that failed or was cut: worth another attempt. */
class TransientNetworkError extends Error {
  constructor(name: string, message: string) {
    super(message);
    this.name = name;
  }
}

function transient(error: Error, code?: string): never {
  throw new TransientNetworkError(code ?? error.name, error.message);
}

/**
 * Each AWS partition's DNS suffix, and how its region names look (the SDK's partitions table,
 * `@aws-sdk/core`'s util-endpoints; importing it would bring the SDK's client core back into the cold
 * start). The first partition is the default, as in the SDK.
 */
export const PARTITIONS: ReadonlyArray<{ id: string; dnsSuffix: string; regionRegex: RegExp }> = [
  { id: 'aws', dnsSuffix: 'amazonaws.com', regionRegex: /^(us|eu|ap|sa|ca|me|af|il|mx)-\w+-\d+$/ },
  { id: 'aws-cn', dnsSuffix: 'amazonaws.com.cn', regionRegex: /^cn-\w+-\d+$/ },
  { id: 'aws-eusc', dnsSuffix: 'amazonaws.eu', regionRegex: /^eusc-(de)-\w+-\d+$/ },
  { id: 'aws-iso', dnsSuffix: 'c2s.ic.gov', regionRegex: /^us-iso-\w+-\d+$/ },
  { id: 'aws-iso-b', dnsSuffix: 'sc2s.sgov.gov', regionRegex: /^us-isob-\w+-\d+$/ },
  { id: 'aws-iso-e', dnsSuffix: 'cloud.adc-e.uk', regionRegex: /^eu-isoe-\w+-\d+$/ },
  { id: 'aws-iso-f', dnsSuffix: 'csp.hci.ic.gov', regionRegex: /^us-isof-\w+-\d+$/ },
  { id: 'aws-us-gov', dnsSuffix: 'amazonaws.com', regionRegex: /^us-gov-\w+-\d+$/ },
];

/** The DNS suffix of a partition named by an ARN, or else of the partition whose region names match. */
export function dnsSuffixOf(region: string, partitionId?: string): string {
  const known = partitionId === undefined ? undefined : PARTITIONS.find((p) => p.id === partitionId);
  // Several patterns can match one name (us-gov-… also fits aws's): the most specific wins.
  const byRegion = PARTITIONS.slice(1).find((p) => p.regionRegex.test(region)) ?? PARTITIONS[0]!;
  return (known ?? byRegion).dnsSuffix;
}

/** The region and partition of an ARN (`arn:<partition>:secretsmanager:<region>:…`), when it is one. */
function arnParts(secretId: string): { partition: string; region: string } | undefined {
  const parts = secretId.split(':');
  return parts[0] === 'arn' && parts.length >= 7 && parts[1] && parts[3] ? { partition: parts[1], region: parts[3] } : undefined;
}

export function defaultEndpoint(region: string, useFips = false, partitionId?: string): string {
  return `https://secretsmanager${useFips ? '-fips' : ''}.${region}.${dnsSuffixOf(region, partitionId)}`;
}

function abortError(signal: AbortSignal): Error {
  const reason = signal.reason as { name?: unknown; message?: unknown } | undefined;
  if (reason instanceof Error) return reason;
  // AbortSignal.timeout()'s reason is a DOMException named TimeoutError: keep its name, which is
  // what callers log, even where it is not an Error of this realm.
  const name = typeof reason?.name === 'string' ? reason.name : 'AbortError';
  return Object.assign(new Error(typeof reason?.message === 'string' ? reason.message : 'the call was aborted'), { name });
}

/** A complete answer's value, or the error it stands for. */
function readAnswer(status: number, errorType: unknown, text: string): SecretValue | SecretsManagerError {
  let parsed: Record<string, unknown> | undefined;
  try {
    parsed = JSON.parse(text) as Record<string, unknown>;
  } catch {
    parsed = undefined;
  }
  const ok = status >= 200 && status < 300;
  if (ok && parsed && typeof parsed === 'object') {
    const value: SecretValue = {};
    if (typeof parsed.SecretString === 'string') value.SecretString = parsed.SecretString;
    if (typeof parsed.SecretBinary === 'string') value.SecretBinary = Buffer.from(parsed.SecretBinary, 'base64');
    return value;
  }
  const type = [errorType, parsed?.__type, parsed?.code].find((t): t is string => typeof t === 'string' && t !== '') ?? '';
  const [code = ''] = type.replace(/^[\s\S]*#/, '').split(':');
  return new SecretsManagerError(code.trim() || (status >= 500 ? 'InternalServiceError' : ok ? 'UnreadableAnswer' : `Http${status}`), status);
}

export function createSecretsManagerReader(options: SecretsManagerOptions): SecretsReader {
  const maxAttempts = options.maxAttempts ?? Budgets.awsMaxAttempts;
  const attemptTimeoutMs = options.attemptTimeoutMs ?? Budgets.awsAttemptMs;
  const random = options.random ?? Math.random;
  const configured = options.endpoint ? new URL(options.endpoint) : undefined;

  async function attempt(secretId: string, signal: AbortSignal | undefined): Promise<SecretValue> {
    const arn = arnParts(secretId);
    const region = arn?.region ?? options.region;
    const url = configured ?? new URL(defaultEndpoint(region, options.useFips, arn?.partition));
    const body = JSON.stringify({ SecretId: secretId });
    const credentials = options.credentials();
    // As the SDK's environment provider, and named like its error: no key, no call (nothing to retry).
    if (!credentials.accessKeyId || !credentials.secretAccessKey) {
      throw Object.assign(new Error('AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY are not set'), { name: 'CredentialsProviderError' });
    }
    const headers = { 'content-type': 'application/x-amz-json-1.1', 'x-amz-target': 'secretsmanager.GetSecretValue' };
    const path = `${url.pathname.replace(/\/+$/, '')}/`;
    const port = url.port ? { port: Number(url.port) } : {};
    const unsigned = { protocol: url.protocol, host: url.hostname, ...port, method: 'POST', path, service: 'secretsmanager', region, headers, body };
    const signed = sign(unsigned, credentials);
    const req = (url.protocol === 'http:' ? http.request : https.request)({
      protocol: url.protocol,
      // An IPv6 literal is bracketed in a URL and in Host, but not as a name to connect to.
      hostname: url.hostname.replace(/^\[(.*)\]$/, '$1'),
      port: url.port || undefined,
      method: 'POST',
      path: signed.path,
      headers: signed.headers as http.OutgoingHttpHeaders,
      ...(signal ? { signal } : {}),
    });
    // A timeout ends the attempt with its own error, whatever the cut connection reports.
    let timedOut: Error | undefined;
    const expire = (ms: number, what: string) =>
      setTimeout(() => req.destroy((timedOut = new TransientNetworkError('TimeoutError', `no ${what} within ${ms} ms`))), ms);
    const attemptTimer = expire(attemptTimeoutMs, 'answer');
    let connectTimer: NodeJS.Timeout | undefined;
    req.on('socket', (socket) => {
      if (!socket.connecting) return;
      connectTimer = expire(Budgets.awsConnectMs, 'connection');
      socket.once('connect', () => clearTimeout(connectTimer));
    });
    // `once` reports an error before the answer; after it, the body's read does.
    req.on('error', () => undefined);
    try {
      req.end(body);
      const [res] = (await once(req, 'response').catch((error: NodeJS.ErrnoException) => transient(error, error.code))) as [http.IncomingMessage];
      const answer = await readCapped(res, MAX_ANSWER_BYTES).catch(transient);
      if (answer === undefined) throw new TransientNetworkError('ResponseTooLarge', 'the answer exceeded 1 MiB');
      const result = readAnswer(res.statusCode ?? 0, res.headers['x-amzn-errortype'], answer.toString('utf8'));
      if (result instanceof Error) throw result;
      return result;
    } catch (error) {
      req.destroy();
      throw signal?.aborted ? abortError(signal) : (timedOut ?? error);
    } finally {
      clearTimeout(attemptTimer);
      clearTimeout(connectTimer);
    }
  }

  return {
    async getSecretValue(input, callOptions = {}) {
      const signal = callOptions.abortSignal;
      for (let attemptNo = 1; ; attemptNo++) {
        if (signal?.aborted) throw abortError(signal);
        try {
          return await attempt(input.SecretId, signal);
        } catch (error) {
          if (signal?.aborted) throw abortError(signal);
          const throttled = error instanceof SecretsManagerError && RETRYABLE_CODES.has(error.code);
          const failedService = error instanceof SecretsManagerError && (error.status >= 500 || error.status === 429);
          if (attemptNo >= maxAttempts || !(throttled || failedService || error instanceof TransientNetworkError)) throw error;
          const backoffMs = Math.floor(random() * Math.min(MAX_BACKOFF_MS, (throttled ? THROTTLING_BASE_MS : BASE_MS) * 2 ** (attemptNo - 1)));
          // An abort ends the sleep early (with a generic AbortError): the loop's first check throws the signal's own reason.
          await delay(backoffMs, undefined, signal ? { signal } : {}).catch(() => undefined);
        }
      }
    },
  };
}

/** The MCP Lambda's reader, from config/settings' AwsRuntime (an adapter does not import config). */
export function secretsManagerFromRuntime(aws: { region: string; secretsManagerEndpoint?: string; useFips: boolean; credentials: Credentials }): SecretsReader {
  const { region, secretsManagerEndpoint: endpoint, useFips, credentials } = aws;
  return createSecretsManagerReader({ region, endpoint, useFips, credentials: () => credentials });
}
