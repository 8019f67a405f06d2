/**
 * The MCP Lambda's secret loader, configured twice: for the API key (read once per cold start) and
 * for pup's signing secrets (re-read every 2 minutes while warm: a rotation needs no deploy). A
 * loaded value is served from memory; `get()` never rejects and answers undefined while none has
 * loaded (the app answers 503). Concurrent requests share one read, each waiting only until its own
 * deadline. A due refresh runs in the background; a failed one keeps the last good value.
 *
 * When it backs off (30 s) and when a request reads a second time: docs/decisions.md, "One secret
 * loader".
 *
 * Deliberately not here: logging a value (only an AWS error code or a sentence of ours; loaded
 * values go to `onLoaded` for log redaction), and parsing beyond each secret's `parse`.
 */
import type { Logger } from '../ports';
import { Budgets } from '../core/budgets';
import { inboundSecretsOf, type InboundSecrets } from '../core/inbound';
import { callOptions, deadlineLeftMs, withinDeadline } from './deadline';
import type { SecretsReader, SecretValue } from './secrets-manager';

/** Why a value could not be used: a fixed sentence of ours, never the value. */
export class UnusableSecret extends Error {
  override readonly name = 'UnusableSecret';
}

export interface SecretLoaderOptions<T> {
  client: SecretsReader;
  /** Undefined or empty: not configured (always undefined, 503). */
  secretArn: string | undefined;
  /** Log event prefix: `<name>_loaded`, `<name>_unavailable`, `<name>_not_configured`. */
  name: string;
  parse(value: SecretValue): T;
  /** Every secret inside a loaded value, handed to `onLoaded` (for log redaction). */
  secretsOf(value: T): readonly string[];
  /** Safe fields for the `<name>_loaded` line (counts, never values). */
  describe?(value: T): Record<string, unknown>;
  /** Re-read while warm this often; undefined: read once and keep it. */
  refreshMs?: number;
  now?: () => number;
  log?: Logger;
  onLoaded?: (secret: string) => void;
  missingLevel?: 'warn' | 'error';
}

type ReadOutcome<T> = { ok: true; value: T } | { ok: false; backOff: boolean };

const TIMED_OUT = Symbol('timed out');

export function createSecretLoader<T>(options: SecretLoaderOptions<T>) {
  const now = options.now ?? Date.now;
  const secretArn = options.secretArn?.trim() || undefined;
  const retryIntervalMs = Budgets.secretRetryIntervalMs;
  let value: T | undefined;
  let loadedAt: number | undefined;
  let failedAt: number | undefined;
  let inFlight: Promise<ReadOutcome<T>> | undefined;
  let reportedMissing = false;

  async function read(arn: string): Promise<ReadOutcome<T>> {
    const inRequest = deadlineLeftMs() !== undefined;
    try {
      const answer = await options.client.getSecretValue({ SecretId: arn }, callOptions(Budgets.secretReadCapMs));
      const loaded = options.parse(answer);
      for (const secret of options.secretsOf(loaded)) options.onLoaded?.(secret);
      value = loaded;
      loadedAt = now();
      failedAt = undefined;
      options.log?.info(`${options.name}_loaded`, options.describe?.(loaded) ?? {});
      return { ok: true, value: loaded };
    } catch (error) {
      const name = (error as { name?: unknown } | null)?.name;
      const backOff = inRequest && name !== 'TimeoutError' && name !== 'AbortError';
      if (backOff) failedAt = now();
      // The error name (e.g. AccessDeniedException), or our own sentence: service messages may quote request data.
      const cause = error instanceof UnusableSecret ? `${error.name}: ${error.message}` : error instanceof Error ? error.name : 'unknown';
      options.log?.error(`${options.name}_unavailable`, { cause, keepingPrevious: value !== undefined, retryInMs: backOff ? retryIntervalMs : 0 });
      return { ok: false, backOff };
    }
  }

  function start(arn: string): Promise<ReadOutcome<T>> {
    // Cleared in a later microtask, so even a synchronous failure cannot leave a stale promise.
    inFlight ??= Promise.resolve()
      .then(() => read(arn))
      .finally(() => {
        inFlight = undefined;
      });
    return inFlight;
  }

  const backingOff = () => failedAt !== undefined && now() - failedAt < retryIntervalMs;
  const due = () => options.refreshMs !== undefined && (loadedAt === undefined || now() - loadedAt >= options.refreshMs);

  return {
    /** The value in force, or undefined when none could be loaded. Never rejects. */
    async get(): Promise<T | undefined> {
      if (!secretArn) {
        if (!reportedMissing) options.log?.[options.missingLevel ?? 'error'](`${options.name}_not_configured`);
        reportedMissing = true;
        return undefined;
      }
      if (value !== undefined) {
        if (due() && !backingOff()) void start(secretArn);
        return value;
      }
      // Two rounds at most: the shared read, then (see the header) one of this request's own.
      for (let round = 0; round < 2; round++) {
        if (backingOff()) return undefined;
        const outcome = await withinDeadline(start(secretArn), TIMED_OUT);
        if (outcome === TIMED_OUT) return undefined;
        if (outcome.ok) return outcome.value;
        if (outcome.backOff) return undefined;
        // Only a request reads again at once; a read outside one (init) just ends.
        const left = deadlineLeftMs();
        if (left === undefined || left < Budgets.minPostMs) return undefined;
      }
      return value;
    },
    /** The value if it is already loaded; never starts or waits for a read. */
    peek: () => value,
  };
}

function textOf(answer: SecretValue): string | undefined {
  return answer.SecretString ?? (answer.SecretBinary ? Buffer.from(answer.SecretBinary).toString('utf8') : undefined);
}

function jsonOf(text: string, unusable: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    throw new UnusableSecret(unusable);
  }
}

/**
 * The API key's secret: the plain key (what a generated CDK secret holds), or a JSON object with a
 * string `apiKey` field. Surrounding whitespace is ignored.
 */
export function parseApiKeySecret(answer: SecretValue): string {
  const raw = (textOf(answer) ?? '').trim();
  if (raw.startsWith('{')) {
    const apiKey = (jsonOf(raw, 'secret is neither a plain key nor JSON') as { apiKey?: unknown } | null)?.apiKey;
    if (typeof apiKey !== 'string' || apiKey.trim() === '') throw new UnusableSecret('JSON secret has no string apiKey');
    return apiKey.trim();
  }
  if (raw === '') throw new UnusableSecret('secret is empty');
  return raw;
}

/**
 * pup's secret: `{"secrets": ["whsec_current", "whsec_previous"], "rotatedAt": "2026-11-30T12:00:00Z"}`.
 * `secrets` may be empty (not configured: the pup POST routes answer 503); two secrets need
 * `rotatedAt` (the previous one is accepted until 10 minutes after it).
 */
export function parsePupSecretString(text: string | undefined): InboundSecrets {
  const record = jsonOf(text ?? '', 'the secret is not JSON like {"secrets":["whsec_…"],"rotatedAt":"…"}') as { secrets?: unknown; rotatedAt?: unknown } | null;
  if (record === null || typeof record !== 'object' || !Array.isArray(record.secrets) || !record.secrets.every((s) => typeof s === 'string')) {
    throw new UnusableSecret('the secret has no "secrets" array of strings');
  }
  // A rotatedAt that is not a string fails as an unparsable one does ('' never parses).
  const rotatedAt = record.rotatedAt == null ? undefined : typeof record.rotatedAt === 'string' ? record.rotatedAt : '';
  return inboundSecretsOf(record.secrets as string[], rotatedAt, (problem) => new UnusableSecret(problem ?? '"rotatedAt" is not an ISO 8601 time with a zone'));
}

export type ApiKeyLoader = ReturnType<typeof createApiKeyLoader>;
type LoaderOptions = Pick<SecretLoaderOptions<unknown>, 'client' | 'secretArn' | 'now' | 'log' | 'onLoaded'>;

/** The API key: read once per cold start (a rotated key takes effect when the environments are recycled). */
export function createApiKeyLoader(options: LoaderOptions) {
  return createSecretLoader({ ...options, name: 'api_key', parse: parseApiKeySecret, secretsOf: (key) => [key] });
}

export function createPupSecretsLoader(options: LoaderOptions) {
  return createSecretLoader({
    ...options,
    name: 'pup_secrets',
    parse: (answer) => parsePupSecretString(textOf(answer)),
    secretsOf: (value) => value.secrets,
    describe: (value) => ({ count: value.secrets.length }),
    refreshMs: Budgets.pupSecretsRefreshMs,
    missingLevel: 'warn',
  });
}
