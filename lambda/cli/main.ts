/**
 * The `dm-dot` operator CLI (docs/contract/local-runtime.md): lets commander run the command the
 * command line names, reads the environment once into typed settings (lambda/config/settings.ts;
 * nothing else in the CLI reads it), and turns the command's outcome into the exit code (0 ok, 1
 * the operation failed, 2 bad usage): a failure is one line on stderr, scrubbed of secrets, and
 * with `--json` the document `{"error": {"code", "message"}}` when the command printed none.
 *
 * `main` takes its io as an argument so that tests run it in-process; entry.ts runs it for real.
 * The project root is found upward from where this code lives, never from the current directory
 * (docs/decisions.md, "Which server").
 */
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { CliAwsSettings, LocalSettings } from '../config/settings';
import { Context, type CliSettings } from './context';
import { describeCause } from '../core/answers';
import { ExitCode, OperationError, UsageError } from './errors';
import type { CliIo } from './io';
import { asksJson, buildProgram, pathOf, Stop, usageFailure } from './program';

export async function main(argv: string[], io: CliIo): Promise<number> {
  // `dm-dot help events show` is `dm-dot events show --help`.
  const words = argv[0] === 'help' ? [...argv.slice(1), '--help'] : [...argv];
  // The settings of this run, each read from the environment on first use, once. (The settings
  // module is loaded only for a command that runs: `--version` and `--help` never need it.)
  let config: typeof import('../config/settings') | undefined;
  let local: LocalSettings | undefined;
  let aws: CliAwsSettings | undefined;
  const settings: CliSettings = {
    local() {
      try {
        return (local ??= config!.localSettings(io.env, { projectRoot: ctx.projectRoot }));
      } catch (error) {
        throw error instanceof config!.SettingsError ? new UsageError(error.message) : error;
      }
    },
    aws: () => (aws ??= config!.cliAwsSettings(io.env)),
  };
  const ctx = new Context(io, '', settings, () => io.projectRoot ?? findProjectRoot());
  const program = await buildProgram(ctx, words);
  program.hook('preAction', async (_program, chosen) => {
    ctx.command = pathOf(chosen);
    ctx.json = !!chosen.opts().json;
    config = await import('../config/settings');
  });
  try {
    await program.parseAsync(words, { from: 'user' });
    return ctx.exitCode;
  } catch (error) {
    if (!(error instanceof Stop)) return failure(ctx, error);
    if ('code' in error.outcome) return error.outcome.code;
    return usageFailure(io, error.path || undefined, error.outcome.usage, asksJson(words));
  }
}

/** The one way a command's failure is printed. */
function failure(ctx: Context, error: unknown): number {
  if (error instanceof UsageError) return usageFailure(ctx.io, ctx.command, ctx.scrub(error.message), ctx.json && !ctx.printedJson);
  const [code, message] = error instanceof OperationError ? [error.code, error.message] : ['internal', `failed: ${describeCause(error)}`];
  const line = ctx.scrub(message);
  ctx.io.err(`dm-dot ${ctx.command}: ${line}\n`);
  if (ctx.json && !ctx.printedJson) ctx.printJson({ error: { code, message: line } });
  return ExitCode.failed;
}

function findProjectRoot(from: string = __dirname): string {
  for (let dir = from; ; dir = dirname(dir)) {
    try {
      const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { name?: unknown };
      if (pkg.name === 'dm-dot') return dir;
    } catch {
      // no package.json here, or not JSON: look further up
    }
    if (dirname(dir) === dir) throw new Error(`dm-dot: cannot find the dm-dot project (package.json) above ${from}`);
  }
}
