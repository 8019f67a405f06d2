/**
 * The `dm-dot` program on commander (docs/decisions.md, "The command line is commander's, used
 * directly"): the command modules the command line needs (all of them for the top-level help, only
 * the first word's otherwise), the settings every command shares, and the one form of a bad usage.
 *
 * Deliberately not here: what a command declares or does (its own file), what a value means
 * (options.ts), and running one (main.ts).
 */
import { Command, type CommanderError, type Option } from 'commander';
import { version } from '../version';
import type { Context } from './context';
import { ExitCode } from './errors';
import type { CliIo } from './io';
import { HELP_WIDTH } from './options';
import { jsonText } from './output';

/** Every top-level word and the module that builds its command (`export const command`), loaded only when needed. */
const COMMANDS: Readonly<Record<string, () => Promise<(ctx: Context) => Command>>> = {
  dot: async () => (await import('./commands/dot')).command,
  send: async () => (await import('./commands/send')).command,
  events: async () => (await import('./commands/events')).command,
  subscription: async () => (await import('./commands/subscription')).command,
  redrive: async () => (await import('./commands/redrive')).command,
  status: async () => (await import('./commands/status')).command,
  connect: async () => (await import('./commands/connect')).command,
  key: async () => (await import('./commands/key')).command,
  senders: async () => (await import('./commands/senders')).command,
  service: async () => (await import('./commands/service')).command,
};

const TOP_DESCRIPTION =
  'The operator CLI of dm-dot: a stand-in dot, sending, the delivery log, the subscription, dead letters, status, the connector URL and the API key.';

const TOP_NOTES = `
Every command takes -h/--help, -V/--version and --json (one JSON document on stdout).
Local by default: the state directory (DMDOT_STATE_DIR, default .dm-dot in the project),
HOST/PORT and MCP_API_KEY, found as npm start does, from any folder of the project.
--aws [--stack NAME] acts on the AWS stack with your AWS credentials instead.
Exit codes: 0 ok, 1 the operation failed, 2 bad usage.`;

/** `events show` for the command `show` under `events`; '' for the program. */
export function pathOf(cmd: Command): string {
  const words: string[] = [];
  for (let c: Command | null = cmd; c?.parent; c = c.parent) words.unshift(c.name());
  return words.join(' ');
}

/** Whether a command runs something itself: every such command declares --json (options.ts define). */
export const runs = (cmd: Command) => cmd.options.some((o) => o.long === '--json');

/** The one form of a bad usage, for commander's complaints and the commands' own; with `json`, also the error document (CLI-15). */
export function usageFailure(io: CliIo, name: string | undefined, message: string, json = false): number {
  const who = name ? `dm-dot ${name}` : 'dm-dot';
  io.err(`${who}: ${message}\nRun ${who} --help for usage.\n`);
  if (json) io.out(jsonText({ error: { code: 'usage', message } }));
  return ExitCode.usage;
}

/** Whether a command line asks for --json (before any `--`, after which words are arguments). */
export function asksJson(argv: readonly string[]): boolean {
  const end = argv.indexOf('--');
  return (end === -1 ? argv : argv.slice(0, end)).includes('--json');
}

/** A complaint or a help/version exit, raised from inside commander's parse. */
export class Stop extends Error {
  constructor(
    readonly path: string,
    readonly outcome: { code: number } | { usage: string },
  ) {
    super('stop');
  }
}

/** The word `"…"` as a message quotes it: the first 80 characters. */
const quoted = (word: string | undefined) => `"${(word ?? '').slice(0, 80)}"`;

const needsValue = (option: Option) => `${option.long} needs a value (${option.long} ${/<(.*)>/.exec(option.flags)?.[1] ?? 'VALUE'})`;

/** The actions of a group, as its complaints name them: `list or show or resend`. */
const actionsOf = (cmd: Command) => cmd.commands.map((c) => c.name()).join(' or ');

/** commander's complaint as our sentence (or the exit of a help or version it printed). */
function complaint(cmd: Command, error: CommanderError, io: CliIo, errText: string): Stop['outcome'] {
  const flag = /'([^']*)'/.exec(error.message)?.[1] ?? '';
  switch (error.code) {
    case 'commander.helpDisplayed':
    case 'commander.version':
      return { code: ExitCode.ok };
    case 'commander.help':
      // Nothing to run: the program's help on stderr, or the action a group needs.
      if (!cmd.parent) {
        io.err(errText);
        return { code: ExitCode.usage };
      }
      return { usage: `missing the action: ${actionsOf(cmd)}` };
    case 'commander.unknownOption': {
      const [name, value] = flag.split(/=(.*)/s);
      const known = cmd.options.find((o) => o.long === name);
      if (value !== undefined && known && !known.required) return { usage: `${name} takes no value` };
      return { usage: `unknown option ${name}` };
    }
    case 'commander.optionMissingArgument': {
      const option = cmd.options.find((o) => o.flags === flag);
      return { usage: option ? needsValue(option) : error.message.replace(/^error: /, '') };
    }
    case 'commander.missingArgument':
      return { usage: `missing ${flag}` };
    case 'commander.unknownCommand':
      return cmd.parent ? { usage: `unknown action ${quoted(cmd.args[0])}: use ${actionsOf(cmd)}` } : { usage: `unknown command ${quoted(cmd.args[0])}` };
    case 'commander.excessArguments': {
      const expected = cmd.registeredArguments.map((a) => a.name());
      const word = quoted(cmd.args[expected.length]);
      if (cmd.commands.length > 0) return { usage: `unknown action ${word}: use ${actionsOf(cmd)}` };
      return { usage: `unexpected argument ${word}${expected.length ? ` (expected ${expected.join(' ')})` : ''}` };
    }
    default:
      return { usage: error.message.replace(/^error: /, '') };
  }
}

/** The program with the commands `argv` needs, as the header says; none for an option other than `--help` (`--version`). */
export async function buildProgram(ctx: Context, argv: readonly string[]): Promise<Command> {
  const first = argv[0];
  const named = Object.keys(COMMANDS).filter((word) => word === first);
  const words = named.length > 0 ? named : first?.startsWith('-') && first !== '-h' && first !== '--help' ? [] : Object.keys(COMMANDS);
  const factories = await Promise.all(words.map((word) => COMMANDS[word]!()));
  const io = ctx.io;
  let errText = '';

  const program = new Command('dm-dot').description(TOP_DESCRIPTION).addHelpText('after', TOP_NOTES);
  for (const factory of factories) program.addCommand(factory(ctx));

  const all = (cmd: Command): Command[] => [cmd, ...cmd.commands.flatMap(all)];
  for (const cmd of all(program)) {
    const path = pathOf(cmd);
    cmd
      .configureOutput({
        writeOut: (text) => io.out(text),
        // Only the help asked for without a command reaches stderr as is; complaints are ours.
        writeErr: (text) => void (errText += text),
        outputError: () => undefined,
      })
      .configureHelp({
        helpWidth: HELP_WIDTH,
        subcommandTerm: (sub) => {
          const args = sub.registeredArguments.map((a) => (a.required ? `<${a.name()}>` : `[${a.name()}]`)).join(' ');
          return `${pathOf(sub)}${args ? ` ${args}` : ''}`;
        },
        // The top-level list names every runnable command, `events show` included; a group's
        // default action under its own name (`events list`, the same summary) is listed once.
        visibleCommands: (shown) =>
          shown.parent
            ? [...shown.commands]
            : shown.commands.flatMap((top) => [...(runs(top) ? [top] : []), ...top.commands.filter((sub) => !runs(top) || sub.summary() !== top.summary())]),
      })
      .showSuggestionAfterError(false)
      .helpCommand(false)
      .enablePositionalOptions()
      .version(version, '-V, --version', 'print the version of dm-dot')
      .helpOption('-h, --help', 'show this help')
      .exitOverride((error: CommanderError) => {
        throw new Stop(path, complaint(cmd, error, io, errText));
      });
    for (const option of cmd.options) {
      // `--last --json` would take "--json" as the value: a value never starts with "--".
      if (option.required && !option.parseArg) {
        option.argParser((value: string) => {
          if (value.startsWith('--')) throw new Stop(path, { usage: needsValue(option) });
          return value;
        });
      }
    }
    // A group without an action of its own says where the options are.
    if (cmd.parent && !runs(cmd)) cmd.addHelpText('after', `\ndm-dot ${path} <action> --help for the options of each.`);
  }
  return program;
}
