/**
 * The MCP API key loader of the MCP Lambda (SPEC 1, 2): one `GetSecretValue` by ARN per cold
 * start, the value cached for the life of the execution environment. When the secret cannot be
 * read (not configured, Secrets Manager unreachable, access denied, empty value) the loader answers
 * `undefined`, which the HTTP app turns into `503`; it tries again on a later request, but at most
 * once per `retryIntervalMs` (30 s), so an outage does not become one Secrets Manager call per
 * request. Concurrent first requests share one call.
 *
 * Secret format: the plain key as the secret string (what a generated CDK secret holds), or a
 * JSON object with a string `apiKey` field. Surrounding whitespace is ignored.
 *
 * Deadlines (issue 9 item 2): one read takes at most API_KEY_READ_CAP_MS (and no longer than the
 * current request deadline, adapters/deadline.ts), and a request that finds a read in flight waits
 * for it only until its own deadline, then answers without a key (503). `peek()` never waits: the
 * health check uses it, so `/healthz` does not depend on Secrets Manager at all.
 *
 * Deliberately not here: logging the value (only the failure's error name is logged, and the
 * value is handed to `onLoaded` so the caller can register it for log redaction), rotation while
 * warm (a rotated key takes effect on the next cold start), and any HTTP status (the app decides).
 */
import type { Logger } from '../log';
import type { SecretsReader } from './secrets-manager';
import { callOptions, withinDeadline } from './deadline';

export interface ApiKeyLoaderOptions {
  client: SecretsReader;
  /** API_KEY_SECRET_ARN; undefined or empty means "not configured" (always undefined, 503). */
  secretArn: string | undefined;
  /** Minimum time between two reads after a failure; default 30 s. */
  retryIntervalMs?: number;
  now?: () => number;
  log?: Logger;
  /** Called once with the loaded key (register it for log redaction). */
  onLoaded?: (key: string) => void;
}

export interface ApiKeyLoader {
  /** The key, or undefined when it is not (yet) available. Never rejects. */
  get(): Promise<string | undefined>;
  /** The key if it is already loaded; never starts or waits for a read. */
  peek(): string | undefined;
}

export const API_KEY_RETRY_INTERVAL_MS = 30_000;
/** The longest one GetSecretValue may take, retries included (the init-phase read has no request deadline). */
export const API_KEY_READ_CAP_MS = 2_500;

/** Why a read produced no key: an AWS error code or a fixed word, never the value or its text. */
class UnusableSecret extends Error {
  override readonly name = 'UnusableSecret';
}

function keyOf(secretString: string | undefined, secretBinary: Uint8Array | undefined): string {
  const raw = (secretString ?? (secretBinary ? Buffer.from(secretBinary).toString('utf8') : '')).trim();
  if (raw.startsWith('{')) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(raw);
    } catch {
      throw new UnusableSecret('secret is neither a plain key nor JSON');
    }
    const apiKey = (parsed as { apiKey?: unknown } | null)?.apiKey;
    if (typeof apiKey !== 'string' || apiKey.trim() === '') throw new UnusableSecret('JSON secret has no string apiKey');
    return apiKey.trim();
  }
  if (raw === '') throw new UnusableSecret('secret is empty');
  return raw;
}

export function createApiKeyLoader(options: ApiKeyLoaderOptions): ApiKeyLoader {
  const now = options.now ?? Date.now;
  const retryIntervalMs = options.retryIntervalMs ?? API_KEY_RETRY_INTERVAL_MS;
  const secretArn = options.secretArn?.trim() || undefined;
  let key: string | undefined;
  let inFlight: Promise<string | undefined> | undefined;
  let failedAt: number | undefined;
  let reportedMissing = false;

  async function read(arn: string): Promise<string | undefined> {
    try {
      const answer = await options.client.getSecretValue({ SecretId: arn }, callOptions(API_KEY_READ_CAP_MS));
      key = keyOf(answer.SecretString, answer.SecretBinary);
      failedAt = undefined;
      options.onLoaded?.(key);
      options.log?.info('api_key_loaded');
      return key;
    } catch (error) {
      failedAt = now();
      // The error name only (e.g. AccessDeniedException): service messages may quote request data.
      const cause = error instanceof Error ? error.name : 'unknown';
      options.log?.error('api_key_unavailable', { cause, retryInMs: retryIntervalMs });
      return undefined;
    }
  }

  return {
    async get() {
      if (key !== undefined) return key;
      if (!secretArn) {
        if (!reportedMissing) options.log?.error('api_key_not_configured');
        reportedMissing = true;
        return undefined;
      }
      if (inFlight) return withinDeadline(inFlight, undefined);
      if (failedAt !== undefined && now() - failedAt < retryIntervalMs) return undefined;
      // Cleared in a later microtask, so even a synchronous failure cannot leave a stale promise.
      const pending = read(secretArn).finally(() => {
        inFlight = undefined;
      });
      inFlight = pending;
      return withinDeadline(pending, undefined);
    },
    peek: () => key,
  };
}
