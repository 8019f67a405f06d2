/**
 * What a command is: its declarations (name, summary, arguments, options, the shape of its JSON),
 * from which program.ts makes both its commander parser and its `--help`, and the function that
 * runs it. One file per command under commands/; only the modules the command line needs load.
 */
import type { HelpSpec, OptionSpecs, Parsed } from './args';
import type { Context } from './context';

export interface CommandSpec<O extends OptionSpecs> extends HelpSpec {
  options: O;
}

export interface Command<O extends OptionSpecs = OptionSpecs> {
  spec: CommandSpec<O>;
  /** Resolves with the exit code; throws UsageError (2) or OperationError (1). */
  run(ctx: Context, args: Parsed<O>): Promise<number>;
}

/** Keeps the option types of a command's declaration for its `run`. */
export function defineCommand<O extends OptionSpecs>(command: Command<O>): Command<O> {
  return command;
}
