/**
 * The exit codes of every `dm-dot` command and the errors that carry them, and the scrubber that
 * keeps secrets (the API key, the admin token, any `whsec_` secret) out of anything printed.
 *
 * Deliberately not here: how the errors are printed (main.ts, one form for every command).
 */
import { scrubWebhookSecrets } from '../log';

export const ExitCode = { ok: 0, failed: 1, usage: 2 } as const;

/** Bad usage: an unknown option, a missing argument, a bad value or setting. Exit code 2. */
export class UsageError extends Error {
  override name = 'UsageError';
}

/**
 * The operation was tried and failed: refused, not found, unreachable, nothing to clear. Exit
 * code 1. `code` names the failure in `--json` output (`{"error":{"code","message"}}`).
 */
export class OperationError extends Error {
  override name = 'OperationError';
  constructor(
    message: string,
    readonly code = 'failed',
  ) {
    super(message);
  }
}

/** The recorded local server did not answer at all (nothing was done): the caller may fall back. */
export class ServerGone extends Error {
  override name = 'ServerGone';
  constructor(readonly url: string) {
    super(`the local server at ${url} does not answer`);
  }
}

/** Replaces every registered secret (8 characters or more) and every `whsec_` secret in `text`. */
export function scrub(text: string, secrets: Iterable<string>): string {
  let out = scrubWebhookSecrets(text);
  for (const secret of secrets) {
    if (secret.length >= 8) {
      out = out.split(secret).join('[redacted]');
      // A key may also travel URL-encoded (the connector URL's `key=`).
      const encoded = encodeURIComponent(secret);
      if (encoded !== secret) out = out.split(encoded).join('[redacted]');
    }
  }
  return out;
}
