/**
 * Where `send`, `dot` and `connect` point, and with which API key, found as `npm start` runs:
 * `--url` / `--key` first; else the server that owns the state directory, else `http://HOST:PORT`;
 * the key from MCP_API_KEY, else `<state dir>/api-key` (read, never created here). The key is a
 * secret of the context the moment it is found.
 *
 * Deliberately not here: the admin token (server.ts), which these commands never use.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { LocalSettings } from '../../config/settings';
import type { Context } from '../context';
import { OperationError, UsageError } from '../errors';
import { LOOPBACK_HOSTNAMES } from '../../core/loopback';
import { findServer, reachable } from './server';

export interface Target {
  /** The server's base URL, without `/mcp`. */
  base: string;
  key: string;
  /** True when the target is this machine's server (its key file may be used). */
  local: boolean;
}

/** `--url` as given: the MCP endpoint as printed by npm start or the stack, or the bare origin. */
export function baseOfUrl(url: string): string {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new UsageError('--url must be an absolute http(s) URL, e.g. https://abc.execute-api.eu-west-1.amazonaws.com/mcp');
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') throw new UsageError('--url must be an http: or https: URL');
  if (parsed.username || parsed.password || parsed.search || parsed.hash) {
    throw new UsageError('--url must not carry user info, a query or a fragment (pass the key with --key or MCP_API_KEY)');
  }
  return `${parsed.origin}${parsed.pathname.replace(/\/mcp\/?$/, '').replace(/\/$/, '')}`;
}

/** http://HOST:PORT as a client reaches it: 0.0.0.0 and :: are reached on loopback. */
export function configuredBase(settings: LocalSettings): string {
  const host = settings.host.includes(':') ? `[${settings.host}]` : settings.host;
  return reachable(`http://${host}:${settings.port}`).connectUrl;
}

/** Where a state directory keeps its API key (loaded on use: `--version` and `--help` load nothing). */
export async function keyFileOf(stateDir: string): Promise<string> {
  const { API_KEY_FILE } = await import('../../adapters/state-files');
  return join(stateDir, API_KEY_FILE);
}

export async function readKeyFile(stateDir: string): Promise<{ key?: string; file: string }> {
  const file = await keyFileOf(stateDir);
  try {
    const key = (await readFile(file, 'utf8')).trim();
    return key ? { key, file } : { file };
  } catch {
    return { file };
  }
}

export async function target(ctx: Context, values: { url?: string; key?: string }): Promise<Target> {
  const settings = () => ctx.settings.local();
  const base = values.url !== undefined ? baseOfUrl(values.url) : ((await findServer(settings().stateDir))?.connectUrl ?? configuredBase(settings()));
  const local = values.url === undefined || LOOPBACK_HOSTNAMES.has(new URL(base).hostname.toLowerCase());
  let key = values.key || settings().apiKey;
  if (!key) {
    const found = local ? await readKeyFile(settings().stateDir) : undefined;
    key = found?.key;
    if (!key) {
      throw new OperationError(
        local
          ? `no API key: pass --key, set MCP_API_KEY, or start the local server once (it writes ${found!.file})`
          : 'no API key for that server: pass --key or set MCP_API_KEY',
        'no_key',
      );
    }
  }
  ctx.keepSecret(key);
  return { base, key, local };
}
