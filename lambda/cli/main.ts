/**
 * The `dm-dot` operator CLI (docs/contract/local-runtime.md): picks the command, reads the environment once into typed
 * settings (lambda/config/settings.ts; nothing else in the CLI reads it), runs the command, and
 * turns its outcome into the one contract of every command: exit 0 ok, 1 the operation failed,
 * 2 bad usage; a bad usage is `dm-dot <cmd>: <message>` plus `Run dm-dot <cmd> --help for
 * usage.` on stderr; a failure is one line on stderr and, with `--json`, the one JSON document
 * `{"error": {"code", "message"}}` when the command printed none. Unexpected error text is
 * scrubbed of secrets before it is printed.
 *
 * `main` takes its io as an argument so that tests run it in-process; entry.ts runs it for real.
 */
import type { CliAwsSettings, LocalSettings } from '../config/settings';
import { version } from '../version';
import { helpText, parse } from './args';
import type { Command } from './command';
import { COMMANDS, GROUPS } from './commands';
import { Context, type CliSettings } from './context';
import { describeError, ExitCode, OperationError, UsageError } from './errors';
import type { CliIo } from './io';
import { findProjectRoot } from './local/project';

type Config = typeof import('../config/settings');

/**
 * The settings of this run, each read from the environment on first use, once. (The settings
 * module is loaded only for a command that runs: `--version` and `--help` never need it.)
 */
function settingsOf(config: Config, io: CliIo, projectRoot: string): CliSettings {
  const { cliAwsSettings, localSettings, SettingsError } = config;
  let local: LocalSettings | undefined;
  let aws: CliAwsSettings | undefined;
  return {
    local() {
      if (!local) {
        try {
          local = localSettings(io.env, { projectRoot });
        } catch (error) {
          if (error instanceof SettingsError) throw new UsageError(error.message);
          throw error;
        }
      }
      return local;
    },
    aws: () => (aws ??= cliAwsSettings(io.env)),
  };
}

async function loadAll(): Promise<Command[]> {
  return Promise.all(Object.values(COMMANDS).map((load) => load()));
}

async function topHelp(): Promise<string> {
  const commands = await loadAll();
  const width = Math.max(...commands.map((c) => c.spec.name.length));
  
  return `Usage: dm-dot <command> [options]

The operator CLI of dm-dot: a stand-in dot, sending, the delivery log, the subscription,
dead letters, status, the connector URL and the API key.

Commands:
${commands.map((c) => `  ${c.spec.name.padEnd(width)}  ${c.spec.summary}`).join('\n')}

Every command takes -h/--help, -V/--version and --json (one JSON document on stdout).
Local by default: the state directory (DMDOT_STATE_DIR, default .dm-dot in the project),
HOST/PORT and MCP_API_KEY, found as npm start does, from any folder of the project.
--aws [--stack NAME] acts on the AWS stack with your AWS credentials instead.
Exit codes: 0 ok, 1 the operation failed, 2 bad usage.
`;
}

async function groupHelp(name: string): Promise<string> {
  const group = GROUPS[name]!;
  const actions = await Promise.all(group.actions.filter((a) => COMMANDS[`${name} ${a}`]).map(async (a) => (await COMMANDS[`${name} ${a}`]!()).spec));
  const width = Math.max(...actions.map((s) => s.name.length));
  return `Usage: dm-dot ${name} <${group.actions.join('|')}> [options]

Actions:
${actions.map((s) => `  ${s.name.padEnd(width)}  ${s.summary}`).join('\n')}

dm-dot ${name} <action> --help for the options of each.
`;
}

function usageFailure(io: CliIo, name: string | undefined, message: string): number {
  const who = name ? `dm-dot ${name}` : 'dm-dot';
  io.err(`${who}: ${message}\nRun ${who} --help for usage.\n`);
  return ExitCode.usage;
}

/** Which command the words name, and the arguments left for it. */
function resolve(argv: string[]): { name: string; args: string[] } | { group: string; args: string[] } | { unknown: string } {
  const [first = '', ...rest] = argv;
  const group = GROUPS[first];
  if (group) {
    const action = rest[0];
    if (action !== undefined && !action.startsWith('-')) {
      if (first === 'events' && action === 'list') return { name: 'events', args: rest.slice(1) };
      if (group.actions.includes(action) && COMMANDS[`${first} ${action}`]) return { name: `${first} ${action}`, args: rest.slice(1) };
      // `events` takes no word of its own: anything else is an unknown action.
      return { group: first, args: rest };
    }
    if (group.default) {
      // `dm-dot subscription --help` is the group's help, not the default action's.
      if (group.default !== first && rest.some((a) => a === '--help' || a === '-h')) return { group: first, args: ['--help'] };
      return { name: group.default, args: rest };
    }
    return { group: first, args: rest };
  }
  if (COMMANDS[first]) return { name: first, args: rest };
  return { unknown: first };
}

export async function main(argv: string[], io: CliIo): Promise<number> {
  const [first] = argv;
  if (first === undefined) {
    io.err(await topHelp());
    return ExitCode.usage;
  }
  if (first === '--help' || first === '-h' || first === 'help') {
    const topic = first === 'help' ? argv.slice(1) : [];
    if (topic.length === 0) {
      io.out(await topHelp());
      return ExitCode.ok;
    }
    return main([...topic, '--help'], io);
  }
  if (first === '--version' || first === '-V') {
    io.out(`${version}\n`);
    return ExitCode.ok;
  }
  if (first.startsWith('-')) return usageFailure(io, undefined, `unknown option ${first.replace(/=.*$/, '')}`);

  const resolved = resolve(argv);
  if ('unknown' in resolved) return usageFailure(io, undefined, `unknown command "${resolved.unknown.slice(0, 80)}"`);
  if ('group' in resolved) {
    const { group, args } = resolved;
    if (args.length > 0 && args.every((a) => a === '--help' || a === '-h')) {
      io.out(await groupHelp(group));
      return ExitCode.ok;
    }
    if (args.includes('--version') || args.includes('-V')) {
      io.out(`${version}\n`);
      return ExitCode.ok;
    }
    const word = args.find((a) => !a.startsWith('-'));
    if (word === undefined) return usageFailure(io, group, `missing the action: ${GROUPS[group]!.actions.join(' or ')}`);
    return usageFailure(io, group, `unknown action "${word.slice(0, 80)}": use ${GROUPS[group]!.actions.join(' or ')}`);
  }

  const { name, args } = resolved;
  const command = await COMMANDS[name]!();
  let parsed;
  try {
    parsed = parse(args, command.spec.options, command.spec.positionals);
  } catch (error) {
    if (error instanceof UsageError) return usageFailure(io, name, error.message);
    throw error;
  }
  if (parsed.values.help) {
    io.out(helpText(command.spec));
    return ExitCode.ok;
  }
  if (parsed.values.version) {
    io.out(`${version}\n`);
    return ExitCode.ok;
  }
  const projectRoot = io.projectRoot ?? findProjectRoot();
  const ctx = new Context(io, name, settingsOf(await import('../config/settings'), io, projectRoot), projectRoot);
  ctx.json = !!parsed.values.json;
  try {
    return await command.run(ctx, parsed);
  } catch (error) {
    return failure(ctx, error);
  }
}

/** The one way a command's failure is printed. */
function failure(ctx: Context, error: unknown): number {
  if (error instanceof UsageError) return usageFailure(ctx.io, ctx.command, ctx.scrub(error.message));
  const [code, message] = error instanceof OperationError ? [error.code, error.message] : ['internal', `failed: ${describeError(error)}`];
  const line = ctx.scrub(message);
  ctx.io.err(`dm-dot ${ctx.command}: ${line}\n`);
  if (ctx.json && !ctx.printedJson) ctx.printJson({ error: { code, message: line } });
  return ExitCode.failed;
}

