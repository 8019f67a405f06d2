/**
 * Running the CLI in-process for the tests of test/unit/cli and test/integration/cli-aws.test.ts:
 * `main` with an io that captures stdout and stderr, a controllable Ctrl-C, scripted answers to a
 * confirmation, typed standard-input lines, injected AWS clients, and (for the local tests) a real
 * local server started in-process with `startLocal` over its own state directory.
 */
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Command } from 'commander';
import { Context } from '../../../lambda/cli/context';
import type { AwsClients, CliIo } from '../../../lambda/cli/io';
import { main } from '../../../lambda/cli/main';
import { buildProgram, pathOf, runs } from '../../../lambda/cli/program';
import { localSettings } from '../../../lambda/config/settings';
import { startLocal, type LocalRuntime } from '../../../lambda/local/runtime';
import type { Logger } from '../../../lambda/ports';
import { ROOT } from '../../support/paths';
import { modernBody, modernHeaders } from '../../support/rpc';
import { newSecret } from '../../support/webhook-secret';

export interface RunOptions {
  env?: Record<string, string | undefined>;
  aws?: AwsClients;
  /** An answer to a confirmation: the io then has a terminal to ask on. */
  answer?: string;
  /** Lines "typed" on standard input; the iterator ends (EOF) after them unless `keepOpen`. */
  stdin?: StdinScript;
  readStdin?: string;
  projectRoot?: string;
}

export interface Running {
  code: Promise<number>;
  out(): string;
  err(): string;
  /** Ctrl-C. */
  interrupt(): void;
  asked: string[];
}

/** Standard input a test types into. */
export class StdinScript {
  private readonly queue: string[] = [];
  private waiting: ((value: IteratorResult<string>) => void) | undefined;
  private ended = false;
  type(line: string): void {
    if (this.waiting) {
      const w = this.waiting;
      this.waiting = undefined;
      w({ value: line, done: false });
    } else this.queue.push(line);
  }
  end(): void {
    this.ended = true;
    if (this.waiting) {
      const w = this.waiting;
      this.waiting = undefined;
      w({ value: undefined, done: true });
    }
  }
  [Symbol.asyncIterator](): AsyncIterator<string> {
    return {
      next: () => {
        if (this.queue.length) return Promise.resolve({ value: this.queue.shift()!, done: false });
        if (this.ended) return Promise.resolve({ value: undefined, done: true });
        return new Promise((done) => (this.waiting = done));
      },
    };
  }
}

export function start(argv: string[], options: RunOptions = {}): Running {
  let out = '';
  let err = '';
  const asked: string[] = [];
  const controller = new AbortController();
  const io: CliIo = {
    out: (t) => void (out += t),
    err: (t) => void (err += t),
    env: options.env ?? {},
    signal: controller.signal,
    projectRoot: options.projectRoot ?? ROOT,
    ...(options.aws ? { aws: options.aws } : {}),
    ...(options.answer !== undefined
      ? {
          ask: async (question: string) => {
            asked.push(question);
            return options.answer;
          },
        }
      : {}),
    ...(options.stdin ? { stdinLines: () => options.stdin! } : {}),
    ...(options.readStdin !== undefined ? { readStdin: async () => options.readStdin! } : {}),
  };
  return { code: main(argv, io), out: () => out, err: () => err, interrupt: () => controller.abort(), asked };
}

export async function run(argv: string[], options: RunOptions = {}) {
  const running = start(argv, options);
  const code = await running.code;
  return { code, out: running.out(), err: running.err(), asked: running.asked };
}

export async function until<T>(what: string, probe: () => T | undefined | false | Promise<T | undefined | false>, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

export const silentLog: Logger = { info() {}, warn() {}, error() {} };

export async function tempDir(prefix = 'dmdot-cli-'): Promise<{ dir: string; remove(): Promise<void> }> {
  const dir = await mkdtemp(join(tmpdir(), prefix));
  return { dir, remove: () => rm(dir, { recursive: true, force: true }) };
}

export interface LocalServer {
  runtime: LocalRuntime;
  stateDir: string;
  /** The environment the CLI sees for this server: its state directory only (the key is in the key file). */
  env: Record<string, string>;
  /** The base URL (no /mcp). */
  base: string;
  stop(): Promise<void>;
}

/** A real local server, in-process, on an ephemeral loopback port, as `npm start` runs it. */
export async function startLocalServer(stateDir: string, env: Record<string, string> = {}, log: Logger = silentLog): Promise<LocalServer> {
  const serverEnv = { HOST: '127.0.0.1', PORT: '0', DMDOT_STATE_DIR: stateDir, DMDOT_ALLOW_LOOPBACK_CALLBACKS: '1', ...env };
  const settings = localSettings(serverEnv, { projectRoot: ROOT });
  const runtime = await startLocal({ settings, log, announce: () => undefined });
  return {
    runtime,
    stateDir,
    env: { DMDOT_STATE_DIR: stateDir },
    base: runtime.url.replace(/\/mcp$/, ''),
    stop: () => runtime.stop(),
  };
}

/** The local server's API key, from its key file. */
export async function keyOf(server: LocalServer): Promise<string> {
  return (await readFile(join(server.stateDir, 'api-key'), 'utf8')).trim();
}

/** One JSON-RPC call on the 2026-07-28 era, as a ChatGPT-like client sends it. */
export async function rpcCall(server: LocalServer, key: string, method: string, params: Record<string, unknown>): Promise<{ status: number; body: any }> {
  const headers = modernHeaders(method, { authorization: `Bearer ${key}` });
  const response = await fetch(`${server.base}/mcp`, { method: 'POST', headers, body: modernBody(method, params) });
  return { status: response.status, body: response.status === 401 ? undefined : await response.json() };
}

export async function subscribe(server: LocalServer, key: string, url: string, secret = newSecret()) {
  return rpcCall(server, key, 'events/subscribe', { name: 'message.created', arguments: {}, delivery: { mode: 'webhook', url, secret } });
}

export async function postMessage(server: LocalServer, key: string, message: string): Promise<{ status: number; body: any }> {
  const response = await fetch(`${server.base}/v1/messages`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ message }),
  });
  return { status: response.status, body: await response.json() };
}

/** Everything printed must hold none of these. */
export function expectNoSecrets(text: string, secrets: (string | undefined)[]): void {
  for (const secret of secrets) if (secret) expect(text).not.toContain(secret);
  expect(text).not.toMatch(/whsec_/);
}

/** Every command of the program as commander holds it, by its words (`events show`), and whether it runs something itself. */
export async function commandTree(): Promise<{ path: string; command: Command; runs: boolean }[]> {
  const unused = () => {
    throw new Error('a command was built, not run');
  };
  const ctx = new Context({ out: unused, err: unused, env: {} }, '', { local: unused, aws: unused }, ROOT);
  const all = (cmd: Command): Command[] => [cmd, ...cmd.commands.flatMap(all)];
  return all(await buildProgram(ctx, ['--help']))
    .slice(1)
    .map((command) => ({ path: pathOf(command), command, runs: runs(command) }));
}
