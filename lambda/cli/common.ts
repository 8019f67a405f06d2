/**
 * What every `dm-dot` command shares: argument parsing with `--help` and `--json`, the exit-code
 * contract (0 ok, 1 the operation failed, 2 bad usage), aligned tables, the progress line, and
 * finding the target (the local server and its key the way `npm start` does, `--url`/`--key`,
 * or `--aws`).
 *
 * Deliberately not here: any command's own logic, and printing a secret: nothing here ever writes
 * the API key, the admin token or a `whsec_` secret; `redactor` scrubs them from error text too.
 */
import { readFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { loadSettings, SettingsError, type Settings } from '../config';
import { readRuntimeInfo } from '../local/admin';

export const ExitCode = { ok: 0, failed: 1, usage: 2 } as const;

/** Bad usage: unknown flag, missing argument, bad value. Exit code 2. */
export class UsageError extends Error {}
/** The operation was tried and failed (server refused, not found, unreachable). Exit code 1. */
export class OperationError extends Error {}

export interface CliIo {
  out(text: string): void;
  err(text: string): void;
  env: NodeJS.ProcessEnv;
  /** Asks a question and resolves with the answer (readline on a terminal); undefined when no one can answer. */
  ask?(question: string): Promise<string | undefined>;
  /** Aborts long-running commands (`dot`): Ctrl-C in the launcher, or a test. */
  signal?: AbortSignal;
  /** Test seams for `--aws`: clients built by the caller instead of from the environment. */
  aws?: AwsClients;
}

export interface AwsClients {
  dynamodb?: import('@aws-sdk/client-dynamodb').DynamoDBClient;
  sqs?: import('@aws-sdk/client-sqs').SQSClient;
  /** Reads the stack's outputs for `--stack` (DescribeStacks). */
  cloudformation?: Pick<import('@aws-sdk/client-cloudformation').CloudFormationClient, 'send'>;
}

export interface Command {
  name: string;
  summary: string;
  run(argv: string[], io: CliIo): Promise<number>;
}

type Options = NonNullable<ParseArgsConfig['options']>;

export const COMMON_OPTIONS = {
  help: { type: 'boolean', short: 'h' },
  json: { type: 'boolean' },
} as const satisfies Options;

/** Where local commands look; `--url`/`--key` for send and dot. */
export const TARGET_OPTIONS = {
  url: { type: 'string' },
  key: { type: 'string' },
} as const satisfies Options;

/** `--aws` and the resources it needs (flags or DMDOT_TABLE / DMDOT_QUEUE_URL / DMDOT_DLQ_URL). */
export const AWS_OPTIONS = {
  aws: { type: 'boolean' },
  stack: { type: 'string' },
  region: { type: 'string' },
  table: { type: 'string' },
  'queue-url': { type: 'string' },
  'dlq-url': { type: 'string' },
} as const satisfies Options;

/** util.parseArgs in strict mode; its complaints become UsageError (exit 2). */
export function parse<O extends Options>(argv: string[], options: O, allowPositionals = false) {
  try {
    return parseArgs({ args: argv, options: { ...COMMON_OPTIONS, ...options }, strict: true, allowPositionals });
  } catch (error) {
    // Read .message without instanceof: parseArgs' errors may come from another realm (a test VM).
    throw new UsageError((error as { message?: string } | null)?.message ?? String(error));
  }
}

export function integerOption(value: string | undefined, name: string, min: number, max: number): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (!/^\d+$/.test(value.trim()) || !Number.isSafeInteger(n) || n < min || n > max) {
    throw new UsageError(`--${name} must be an integer from ${min} to ${max}`);
  }
  return n;
}

/** Local settings as `npm start` reads them; a bad setting is bad usage. */
export function settingsOf(io: CliIo): Settings {
  try {
    return loadSettings(io.env);
  } catch (error) {
    if (error instanceof SettingsError) throw new UsageError(error.message);
    throw error;
  }
}

/** True when a process with this id exists (signal 0 checks without sending anything). */
export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** The running local server recorded in the state directory, if its process is alive. */
export async function runningServer(stateDir: string): Promise<{ url: string } | undefined> {
  const info = await readRuntimeInfo(stateDir);
  return info && processAlive(info.pid) ? { url: info.url } : undefined;
}

/**
 * The server and API key for `send` and `dot`: `--url` / `--key` first; else the server that runs
 * on this state directory (its runtime.json), else http://HOST:PORT; the key from MCP_API_KEY or
 * `<state dir>/api-key`, as `npm start` does.
 */
export async function serverTarget(values: { url?: string; key?: string }, io: CliIo): Promise<{ url: string; key: string }> {
  let url = values.url;
  if (url !== undefined) {
    let parsed: URL;
    try {
      parsed = new URL(url);
    } catch {
      throw new UsageError('--url must be an absolute http(s) URL, e.g. https://abc.execute-api.eu-west-1.amazonaws.com');
    }
    if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') throw new UsageError('--url must be an http: or https: URL');
    if (parsed.username || parsed.password || parsed.search || parsed.hash) {
      throw new UsageError('--url must not carry user info, a query or a fragment (pass the key with --key or MCP_API_KEY)');
    }
    // Accept the MCP endpoint as printed by `npm start` or the stack output, or the bare origin.
    url = `${parsed.origin}${parsed.pathname.replace(/\/mcp\/?$/, '').replace(/\/$/, '')}`;
  }
  const needsSettings = url === undefined || (values.key ?? io.env.MCP_API_KEY) === undefined || (values.key ?? io.env.MCP_API_KEY) === '';
  const settings = needsSettings ? settingsOf(io) : undefined;
  if (url === undefined) {
    const running = await runningServer(settings!.stateDir);
    const host = settings!.host === '0.0.0.0' ? '127.0.0.1' : settings!.host.includes(':') ? `[${settings!.host}]` : settings!.host;
    url = running?.url ?? `http://${host}:${settings!.port}`;
  }
  let key = values.key ?? io.env.MCP_API_KEY;
  if (key === undefined || key === '') {
    const file = resolve(settings!.stateDir, 'api-key');
    try {
      key = (await readFile(file, 'utf8')).trim();
    } catch {
      key = '';
    }
    if (!key) throw new OperationError(`no API key: pass --key, set MCP_API_KEY, or start the local server once (it writes ${file})`);
  }
  return { url, key };
}

/** Whether `--aws` was asked for, and refuses the local-only flags with it. */
export function wantsAws(values: { aws?: boolean; stack?: string; region?: string; table?: string; 'queue-url'?: string; 'dlq-url'?: string }): boolean {
  if (values.aws) return true;
  for (const flag of ['stack', 'region', 'table', 'queue-url', 'dlq-url'] as const) {
    if (values[flag] !== undefined) throw new UsageError(`--${flag} needs --aws`);
  }
  return false;
}

/** Pads columns to the widest cell. */
export function table(headers: string[], rows: string[][]): string {
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]) => cells.map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i]!))).join('  ').trimEnd();
  return [line(headers), ...rows.map(line)].join('\n') + '\n';
}

/** ISO time without milliseconds, or '-' for none. */
export function shortTime(iso: string | null | undefined): string {
  return iso ? iso.replace(/\.\d{3}Z$/, 'Z') : '-';
}

/**
 * Runs `work`; if it takes more than a second, says so on stderr (one line, never on stdout, so
 * `--json` output stays clean).
 */
export async function withProgress<T>(io: CliIo, label: string, work: Promise<T>): Promise<T> {
  const timer = setTimeout(() => io.err(`dm-dot: ${label}...\n`), 1000);
  try {
    return await work;
  } finally {
    clearTimeout(timer);
  }
}

/** Text of an unexpected error, with any of the given secrets replaced. */
export function redactor(...secrets: (string | undefined)[]): (text: string) => string {
  return (text) => {
    let out = text.replace(/whsec_[A-Za-z0-9+/=]*/g, 'whsec_[redacted]');
    for (const secret of secrets) if (secret && secret.length >= 8) out = out.split(secret).join('[redacted]');
    return out;
  };
}

/** A fetch that turns "nobody listens" into an OperationError that says what to do. */
export async function reach(url: string, init: RequestInit, what: string): Promise<Response> {
  try {
    return await fetch(url, { ...init, signal: init.signal ?? AbortSignal.timeout(30_000) });
  } catch (error) {
    const code = (error as { cause?: { code?: string } }).cause?.code;
    const origin = new URL(url).origin;
    if (code === 'ECONNREFUSED') throw new OperationError(`no server at ${origin} (${what}); start it with npm start, or pass --url`);
    if ((error as Error).name === 'TimeoutError') throw new OperationError(`${origin} did not answer in time (${what})`);
    throw new OperationError(`could not reach ${origin} (${what}): ${code ?? (error as Error).message}`);
  }
}
