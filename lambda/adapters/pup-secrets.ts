/**
 * The pup signing secrets of the MCP Lambda (SPEC 8), from the Secrets Manager secret named by
 * PUP_SECRET_ARN. Its SecretString is JSON:
 *
 *   {"secrets": ["whsec_current", "whsec_previous"], "rotatedAt": "2026-11-30T12:00:00Z"}
 *
 * `secrets` may be empty (not configured: the pup POST routes answer 503); two secrets need
 * `rotatedAt` (the previous one is accepted until 10 minutes after it).
 *
 * Unlike the API key (read once per cold start), these are re-read while warm, so a rotation takes
 * effect without a deploy: a value is served for `refreshMs` (2 minutes), then refreshed in the
 * background while the cached value keeps answering (a request never waits for Secrets Manager
 * once one value has loaded). Concurrent reads share one call. A failed or unusable read keeps the
 * last good value and is retried at most every 30 s; with no good value yet, the answer is
 * undefined (503).
 *
 * Deliberately not here: logging a value (only an AWS error code or a sentence that names no
 * secret; each secret is handed to `onLoaded` for log redaction), and verification (core/inbound.ts).
 */
import { callOptions, withinDeadline } from './deadline';
import { inboundSecretsProblem, parseRotationTime, type InboundSecrets } from '../core/inbound';
import type { Logger } from '../log';
import type { SecretsReader } from './secrets-manager';

export const PUP_SECRETS_REFRESH_MS = 2 * 60_000;
export const PUP_SECRETS_RETRY_INTERVAL_MS = 30_000;
/** The longest one read may take, retries included (a read at init or in the background has no request deadline). */
export const PUP_SECRETS_READ_CAP_MS = 2_500;

export interface PupSecretsLoaderOptions {
  client: SecretsReader;
  /** PUP_SECRET_ARN; undefined or empty: not configured (always undefined, 503). */
  secretArn: string | undefined;
  refreshMs?: number;
  retryIntervalMs?: number;
  now?: () => number;
  log?: Logger;
  /** Called with every secret loaded (register them for log redaction). */
  onLoaded?: (secret: string) => void;
}

export interface PupSecretsLoader {
  /** The secrets in force, or undefined when none could be loaded. Never rejects. */
  get(): Promise<InboundSecrets | undefined>;
}

/** Why a read gave no usable secrets: a fixed sentence, never the value. */
class UnusablePupSecret extends Error {
  override readonly name = 'UnusablePupSecret';
}

export function parsePupSecretString(text: string | undefined): InboundSecrets {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text ?? '');
  } catch {
    throw new UnusablePupSecret('the secret is not JSON like {"secrets":["whsec_…"],"rotatedAt":"…"}');
  }
  const record = parsed as { secrets?: unknown; rotatedAt?: unknown } | null;
  if (record === null || typeof record !== 'object' || !Array.isArray(record.secrets) || !record.secrets.every((s) => typeof s === 'string')) {
    throw new UnusablePupSecret('the secret has no "secrets" array of strings');
  }
  let rotatedAt: number | undefined;
  if (record.rotatedAt !== undefined && record.rotatedAt !== null) {
    rotatedAt = typeof record.rotatedAt === 'string' ? parseRotationTime(record.rotatedAt) : undefined;
    if (rotatedAt === undefined) throw new UnusablePupSecret('"rotatedAt" is not an ISO 8601 time with a zone');
  }
  const config: InboundSecrets = rotatedAt === undefined ? { secrets: record.secrets as string[] } : { secrets: record.secrets as string[], rotatedAt };
  const problem = inboundSecretsProblem(config);
  if (problem) throw new UnusablePupSecret(problem);
  return config;
}

export function createPupSecretsLoader(options: PupSecretsLoaderOptions): PupSecretsLoader {
  const now = options.now ?? Date.now;
  const refreshMs = options.refreshMs ?? PUP_SECRETS_REFRESH_MS;
  const retryIntervalMs = options.retryIntervalMs ?? PUP_SECRETS_RETRY_INTERVAL_MS;
  const secretArn = options.secretArn?.trim() || undefined;
  let value: InboundSecrets | undefined;
  let loadedAt: number | undefined;
  let failedAt: number | undefined;
  let inFlight: Promise<InboundSecrets | undefined> | undefined;
  let reportedMissing = false;

  async function read(arn: string): Promise<InboundSecrets | undefined> {
    try {
      const answer = await options.client.getSecretValue({ SecretId: arn }, callOptions(PUP_SECRETS_READ_CAP_MS));
      const text = answer.SecretString ?? (answer.SecretBinary ? Buffer.from(answer.SecretBinary).toString('utf8') : undefined);
      const loaded = parsePupSecretString(text);
      for (const secret of loaded.secrets) options.onLoaded?.(secret);
      value = loaded;
      loadedAt = now();
      failedAt = undefined;
      options.log?.info('pup_secrets_loaded', { count: loaded.secrets.length });
    } catch (error) {
      failedAt = now();
      // The error name (e.g. AccessDeniedException), or our own sentence: service messages may quote request data.
      const cause = error instanceof UnusablePupSecret ? `${error.name}: ${error.message}` : error instanceof Error ? error.name : 'unknown';
      options.log?.error('pup_secrets_unavailable', { cause, keepingPrevious: value !== undefined, retryInMs: retryIntervalMs });
    }
    return value;
  }

  function refresh(arn: string): Promise<InboundSecrets | undefined> {
    if (inFlight) return inFlight;
    const pending = read(arn).finally(() => {
      inFlight = undefined;
    });
    inFlight = pending;
    return pending;
  }

  return {
    async get() {
      if (!secretArn) {
        if (!reportedMissing) options.log?.warn('pup_secrets_not_configured');
        reportedMissing = true;
        return undefined;
      }
      const t = now();
      const due = loadedAt === undefined || t - loadedAt >= refreshMs;
      const backingOff = failedAt !== undefined && t - failedAt < retryIntervalMs;
      if (value !== undefined) {
        if (due && !backingOff) void refresh(secretArn);
        return value;
      }
      if (backingOff) return undefined;
      // A read started outside this request (init, a background refresh) must not hold the
      // request past its own deadline: it answers "not configured" (503) instead.
      return withinDeadline(refresh(secretArn), undefined);
    },
  };
}
