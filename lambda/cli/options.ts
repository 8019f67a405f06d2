/**
 * How a command file declares its command (`define`: its summary, description, argument, options,
 * `--json` shape and action, so that each file holds only what is particular to it); the options
 * several commands share, each declared once; and the checks of a value a command makes in its
 * action, each with one form that names the flag: `--last must be an integer from 1 to 10000`,
 * `--status must be one of …`, `--stack needs --aws`.
 *
 * Deliberately not here: parsing and the messages of commander's own complaints (program.ts), and
 * printing a UsageError (main.ts).
 */
import { type Argument, Command, Help, Option } from 'commander';
import type { AwsFlags } from './aws/session';
import { UsageError } from './errors';

export const HELP_WIDTH = 80;

/** A command as its file declares it. */
export interface Spec<V> {
  name: string;
  /** Its line in the list of commands; its `--help` starts with it as a sentence, then `details`. */
  summary: string;
  details: string;
  argument?: Argument;
  options?: Option[];
  /** The shape of its `--json` document. */
  json: string;
  /** `word`: its argument, when it declares one. */
  run(values: V & AwsFlags, word: string): Promise<void>;
}

export function define<V>(spec: Spec<V>): Command {
  const cmd = new Command(spec.name).summary(spec.summary).description(`${spec.summary[0]!.toUpperCase()}${spec.summary.slice(1)}.\n\n${spec.details}`);
  if (spec.argument) cmd.addArgument(spec.argument);
  for (const option of spec.options ?? []) cmd.addOption(option);
  // Every command that runs something takes --json (a group without an action of its own does
  // not), and its --help ends with the shape of that document and the exit codes.
  const shape = new Help().boxWrap(spec.json.trim(), HELP_WIDTH - 2).replace(/^/gm, '  ');
  return cmd
    .addOption(new Option('--json', 'print one JSON document (its shape is below) instead of text'))
    .addHelpText(
      'after',
      `\nWith --json:\n${shape}\n  A failure without a document of its own prints {"error": {"code", "message"}}.\n\n` +
        'Exit codes: 0 ok, 1 the operation failed, 2 bad usage.',
    )
    .action(() => spec.run(cmd.opts(), cmd.processedArgs[0]));
}

/** Where `send` and `dot` send: any deployment, not only the local server. */
export const targetOptions = () => [
  new Option('--url <URL>', 'the server (its MCP endpoint or origin); default: the local server, found as npm start runs it'),
  new Option('--key <KEY>', 'the API key; default: MCP_API_KEY, else <state dir>/api-key'),
];

/** `--aws` and the stack to read the outputs of. */
export const awsStackOptions = () => [
  new Option('--aws', "act on the AWS stack with the operator's AWS credentials instead of the local server"),
  new Option('--stack <NAME>', 'the stack whose outputs name the resources (default: DMDOT_STACK, else DmDot); needs --aws'),
  new Option('--stage <NAME>', 'the stack deployed with -c stage=NAME, i.e. --stack DmDot-NAME; not with --stack; needs --aws'),
  new Option('--region <REGION>', 'the AWS region (default: AWS_REGION); needs --aws'),
];

export const tableOption = () => new Option('--table <NAME>', "the stack's DynamoDB table (default: DMDOT_TABLE, else the TableName output); needs --aws");

/** The options of a command that reads or writes the table: `--aws [--stack NAME] [--region R] [--table NAME]`. */
export const awsTableOptions = () => [...awsStackOptions(), tableOption()];

export const queueOption = () =>
  new Option('--queue-url <URL>', 'the delivery queue (default: DMDOT_QUEUE_URL, else the DeliveryQueueUrl output); needs --aws');

export const dlqOption = () => new Option('--dlq-url <URL>', 'the dead-letter queue (default: DMDOT_DLQ_URL, else the DeadLetterQueueUrl output); needs --aws');

export const yesOption = () => new Option('-y, --yes', 'do it without asking (needed when there is no terminal to ask on)');

export const showKeyOption = () => new Option('--show-key', 'print the API key (a secret: a notice on stderr says so first)');

/** An integer option within bounds, or undefined when not given. */
export function integerValue(value: string | undefined, flag: string, min: number, max: number): number | undefined {
  if (value === undefined) return undefined;
  const t = value.trim();
  const n = Number(t);
  if (!/^-?\d+$/.test(t) || !Number.isSafeInteger(n) || n < min || n > max) throw new UsageError(`--${flag} must be an integer from ${min} to ${max}`);
  return n;
}

/** One of a fixed set of words, or undefined when not given. */
export function choiceValue<T extends string>(value: string | undefined, flag: string, choices: readonly T[]): T | undefined {
  if (value === undefined) return undefined;
  if (!(choices as readonly string[]).includes(value)) throw new UsageError(`--${flag} must be one of ${choices.join(', ')}`);
  return value as T;
}

/** The options that only mean something with `--aws`, by their declarations above. */
const awsOnly = () => [...awsStackOptions(), tableOption(), queueOption(), dlqOption()].filter((option) => option.long !== '--aws');

/** Refuses an AWS option without `--aws` (`--stack needs --aws`); true when `--aws` was given. */
export function wantsAws(values: object): boolean {
  const given = values as Record<string, unknown>;
  if (given.aws) return true;
  for (const option of awsOnly()) if (given[option.attributeName()] !== undefined) throw new UsageError(`${option.long} needs --aws`);
  return false;
}
