/**
 * What every command's arguments are declared with: each option once, with its description (the
 * options every command takes, and the groups several share), from which program.ts makes both
 * commander's parser and the `--help` text; and the checks of a value a command makes in its
 * `run`, each with one form that names the flag: `--last must be an integer from 1 to 10000`,
 * `--status must be one of …`, `--stack needs --aws`.
 *
 * Deliberately not here: parsing and printing (program.ts; main.ts prints a UsageError as
 * `dm-dot <cmd>: <message>` plus `Run dm-dot <cmd> --help for usage.`, exit 2).
 */
import { UsageError } from './errors';

export interface OptionSpec {
  type: 'boolean' | 'string';
  short?: string;
  /** The placeholder of a string option's value in the help: N, MS, URL, NAME. */
  value?: string;
  description: string;
}

export type OptionSpecs = Record<string, OptionSpec>;

export type Values<O extends OptionSpecs> = { [K in keyof O]?: O[K]['type'] extends 'boolean' ? boolean : string };

export interface PositionalSpec {
  name: string;
  description: string;
  /** Default: required. */
  optional?: boolean;
}

/** What every command accepts, declared once here (help and version are commander's own options, with these flags and texts). */
export const COMMON_OPTIONS = {
  json: { type: 'boolean', description: 'print one JSON document (its shape is below) instead of text' },
  help: { type: 'boolean', short: 'h', description: 'show this help' },
  version: { type: 'boolean', short: 'V', description: 'print the version of dm-dot' },
} as const satisfies OptionSpecs;

/** Where `send` and `dot` send: any deployment, not only the local server. */
export const TARGET_OPTIONS = {
  url: { type: 'string', value: 'URL', description: 'the server (its MCP endpoint or origin); default: the local server, found as npm start runs it' },
  key: { type: 'string', value: 'KEY', description: 'the API key; default: MCP_API_KEY, else <state dir>/api-key' },
} as const satisfies OptionSpecs;

/** `--aws` and the stack to read the outputs of. */
export const AWS_STACK_OPTIONS = {
  aws: { type: 'boolean', description: "act on the AWS stack with the operator's AWS credentials instead of the local server" },
  stack: { type: 'string', value: 'NAME', description: 'the stack whose outputs name the resources (default: DMDOT_STACK, else DmDot); needs --aws' },
  stage: { type: 'string', value: 'NAME', description: 'the stack deployed with -c stage=NAME, i.e. --stack DmDot-NAME; not with --stack; needs --aws' },
  region: { type: 'string', value: 'REGION', description: 'the AWS region (default: AWS_REGION); needs --aws' },
} as const satisfies OptionSpecs;

export const TABLE_OPTION = {
  table: { type: 'string', value: 'NAME', description: "the stack's DynamoDB table (default: DMDOT_TABLE, else the TableName output); needs --aws" },
} as const satisfies OptionSpecs;

export const QUEUE_OPTIONS = {
  'queue-url': { type: 'string', value: 'URL', description: 'the delivery queue (default: DMDOT_QUEUE_URL, else the DeliveryQueueUrl output); needs --aws' },
} as const satisfies OptionSpecs;

export const DLQ_OPTIONS = {
  'dlq-url': { type: 'string', value: 'URL', description: 'the dead-letter queue (default: DMDOT_DLQ_URL, else the DeadLetterQueueUrl output); needs --aws' },
} as const satisfies OptionSpecs;

export const YES_OPTION = {
  yes: { type: 'boolean', short: 'y', description: 'do it without asking (needed when there is no terminal to ask on)' },
} as const satisfies OptionSpecs;

export const SHOW_KEY_OPTION = {
  'show-key': { type: 'boolean', description: 'print the API key (a secret: a notice on stderr says so first)' },
} as const satisfies OptionSpecs;

export interface Parsed<O extends OptionSpecs> {
  values: Values<O & typeof COMMON_OPTIONS>;
  positionals: string[];
}

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

/** The options that only mean something with `--aws`, from their declarations above. */
const AWS_ONLY: readonly string[] = Object.keys({ ...AWS_STACK_OPTIONS, ...TABLE_OPTION, ...QUEUE_OPTIONS, ...DLQ_OPTIONS }).filter((name) => name !== 'aws');

/** Refuses an AWS option without `--aws` (`--stack needs --aws`); true when `--aws` was given. */
export function wantsAws(values: object): boolean {
  const given = values as Record<string, unknown>;
  if (given.aws) return true;
  for (const flag of AWS_ONLY) if (given[flag] !== undefined) throw new UsageError(`--${flag} needs --aws`);
  return false;
}

export interface HelpSpec {
  /** `events show`. */
  name: string;
  summary: string;
  positionals?: readonly PositionalSpec[];
  options: OptionSpecs;
  /** Paragraphs after the summary. */
  description?: string;
  /** The shape of the `--json` document. */
  json: string;
}
