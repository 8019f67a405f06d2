/**
 * What a command is: its declarations (name, summary, arguments, options, the shape of its JSON),
 * from which both its parser and its `--help` are made, and the function that runs it. One file
 * per command under commands/; main.ts loads only the one that runs.
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
