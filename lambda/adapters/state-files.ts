/**
 * The small files of a local state directory besides its database: `api-key` (the API key when
 * MCP_API_KEY is not set: generated on first start, mode 0600) and `admin-token` (a random token
 * the running server writes at every start, for the CLI's admin calls; mode 0600).
 *
 * Every write is a temporary file renamed into place, so a crash leaves the old file or the new
 * one, never half of one. A file this process did not write is never deleted by it: the admin
 * token is removed at stop only if it still holds this server's token.
 *
 * Deliberately not here: the database and its owner record (lambda/adapters/embedded), and
 * printing a key or token (callers print the file's path only).
 */
import { randomBytes } from 'node:crypto';
import { chmod, mkdir, open, readFile, rename, rm, stat } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { Limits } from '../core/protocol';

export const API_KEY_FILE = 'api-key';
export const ADMIN_TOKEN_FILE = 'admin-token';

/** A file of the state directory that cannot be used as it is: the sentence names it and what to do. */
export class StateFileError extends Error {
  override name = 'StateFileError';
}

export function newApiKey(): string {
  return randomBytes(32).toString('base64url');
}

/** Writes `text` to `file` (mode 0600) through a temporary file, flushed before the rename. */
export async function writeFileAtomic(file: string, text: string): Promise<void> {
  const tmp = `${file}.tmp-${process.pid}-${randomBytes(4).toString('hex')}`;
  try {
    const handle = await open(tmp, 'w', 0o600);
    await handle
      .writeFile(text, 'utf8')
      .then(() => handle.sync())
      .finally(() => handle.close());
    await rename(tmp, file);
  } catch (error) {
    // The temporary file may hold a new key: never leave it behind.
    await rm(tmp, { force: true }).catch(() => undefined);
    throw error;
  }
}

async function readIfPresent(file: string): Promise<string | undefined> {
  return readFile(file, 'utf8').catch(({ code }: NodeJS.ErrnoException) => {
    if (code === 'ENOENT') return undefined;
    throw new StateFileError(`${file} cannot be read (${code ?? 'error'}): fix its permissions, or remove it to have a new key generated`);
  });
}

/**
 * The API key: MCP_API_KEY when set, else `<state dir>/api-key`, generated on first start. An
 * empty key file (a crash while it was first written, or a user who emptied it) is treated as
 * absent and replaced by a new key; a key file that holds something unusable is named in the error.
 */
export async function loadOrCreateApiKey(
  stateDir: string,
  fromEnv: string | undefined,
  options: { deferWrite?: boolean } = {},
): Promise<{ key: string; file?: string; generated: boolean; tightenedFrom?: number; save?: () => Promise<void> }> {
  if (fromEnv !== undefined && fromEnv !== '') return { key: fromEnv, generated: false };
  const file = resolve(stateDir, API_KEY_FILE);
  const stored = (await readIfPresent(file))?.trim();
  if (stored) {
    // Printable ASCII only: binary garbage decoded as text is not a key anyone could type or send.
    if (stored.length < Limits.apiKeyMinChars || !/^[\x21-\x7e]+$/.test(stored)) {
      throw new StateFileError(
        `${file} does not hold a usable key (at least ${Limits.apiKeyMinChars} printable characters, no spaces): remove it to have a new key generated`,
      );
    }
    // A key others can read is fixed, not merely warned about: the caller logs that it was.
    const mode = (await stat(file)).mode & 0o777;
    if ((mode & 0o077) === 0) return { key: stored, file, generated: false };
    await chmod(file, 0o600);
    return { key: stored, file, generated: false, tightenedFrom: mode };
  }
  const key = newApiKey();
  const save = async () => {
    await mkdir(stateDir, { recursive: true, mode: 0o700 });
    await writeFileAtomic(file, `${key}\n`);
  };
  // Deferred: a server writes a new key only once it listens, so a start that fails leaves none.
  if (options.deferWrite) return { key, file, generated: true, save };
  await save();
  return { key, file, generated: true };
}

/** Writes a new key (`key` when the caller made it first: a rotation records its hash before the file changes) into `<state dir>/api-key`. */
export async function rotateApiKeyFile(stateDir: string, key: string = newApiKey()): Promise<{ key: string; file: string }> {
  const file = resolve(stateDir, API_KEY_FILE);
  await writeFileAtomic(file, `${key}\n`);
  return { key, file };
}

export async function publishAdminToken(stateDir: string): Promise<string> {
  const token = newApiKey();
  await writeFileAtomic(join(stateDir, ADMIN_TOKEN_FILE), `${token}\n`);
  return token;
}

export async function withdrawAdminToken(stateDir: string, token: string): Promise<void> {
  if ((await readAdminToken(stateDir)) === token) await rm(join(stateDir, ADMIN_TOKEN_FILE), { force: true });
}

export async function readAdminToken(stateDir: string): Promise<string | undefined> {
  return (await readIfPresent(join(stateDir, ADMIN_TOKEN_FILE)).catch(() => undefined))?.trim() || undefined;
}
