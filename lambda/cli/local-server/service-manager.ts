/**
 * How `dm-dot service` talks to the user's service manager: which one (systemd, launchd, or
 * `--platform`), the user's home and PATH, and running `systemctl` or `launchctl` with a time limit.
 *
 * Deliberately not here: the units themselves (service.ts) and what each command decides.
 */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { homedir } from 'node:os';
import { delimiter, join } from 'node:path';
import { Option } from 'commander';
import type { Context } from '../context';
import { UsageError } from '../errors';
import { choiceValue } from '../options';
import type { Platform } from './service';

const PLATFORMS = ['linux', 'macos'] as const;

export const platformOption = () => new Option('--platform <NAME>', 'linux (systemd user unit) or macos (launchd agent); default: this machine');

export function platformOf(value: string | undefined): Platform {
  const chosen = choiceValue(value, 'platform', PLATFORMS);
  if (chosen) return chosen;
  if (process.platform === 'linux') return 'linux';
  if (process.platform === 'darwin') return 'macos';
  throw new UsageError(`dm-dot service knows systemd (Linux) and launchd (macOS), not ${process.platform}: run npm start under your own service manager`);
}

export function homeOf(ctx: Context): string {
  return ctx.io.env.HOME?.trim() || homedir();
}

export function onPath(ctx: Context, name: string): string | undefined {
  for (const dir of (ctx.io.env.PATH ?? '').split(delimiter)) {
    if (dir && existsSync(join(dir, name))) return join(dir, name);
  }
  return undefined;
}

export function run(argv: readonly string[]): Promise<{ code: number; out: string }> {
  return new Promise((done) => {
    execFile(argv[0]!, argv.slice(1), { timeout: 30_000 }, (error, stdout, stderr) => {
      // A number: the program's exit code; anything else (ENOENT: no such program) counts as 127.
      const code = error ? (typeof error.code === 'number' ? error.code : 127) : 0;
      done({ code, out: `${stdout}${stderr}`.trim() });
    });
  });
}

export const uid = () => (typeof process.getuid === 'function' ? process.getuid() : 0);
