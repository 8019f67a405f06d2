/**
 * Arguments and help for every command: each option is declared once, with its description, and
 * both the parser and the `--help` text are made from those declarations. Parsing is
 * `util.parseArgs` (tokens, non-strict) with our own checks over its tokens, so every complaint
 * has one form that names the flag: `unknown option --bogus`, `--last needs a value`,
 * `--json takes no value`, `--last must be an integer from 1 to 10000`.
 *
 * Deliberately not here: what a command does with its values, and printing (main.ts prints a
 * UsageError as `dm-dot <cmd>: <message>` plus `Run dm-dot <cmd> --help for usage.`, exit 2).
 */
import { parseArgs } from 'node:util';
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

/** What every command accepts, declared once here. */
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

/** Parses `argv` against the command's options plus the common ones; every complaint is a UsageError naming the flag. */
export function parse<O extends OptionSpecs>(argv: string[], options: O, positionals: readonly PositionalSpec[] = []): Parsed<O> {
  const all: OptionSpecs = { ...options, ...COMMON_OPTIONS };
  const config = Object.fromEntries(Object.entries(all).map(([name, spec]) => [name, { type: spec.type, ...(spec.short ? { short: spec.short } : {}) }]));
  const { tokens } = parseArgs({ args: argv, options: config, strict: false, allowPositionals: true, tokens: true });
  const values: Record<string, string | boolean> = {};
  const words: string[] = [];
  for (const token of tokens) {
    if (token.kind === 'positional') {
      words.push(token.value);
      continue;
    }
    if (token.kind !== 'option') continue;
    const spec = all[token.name];
    if (!spec || (token.rawName.startsWith('--') ? token.rawName !== `--${token.name}` : spec.short !== token.rawName.slice(1))) {
      throw new UsageError(`unknown option ${token.rawName}`);
    }
    const flag = `--${token.name}`;
    if (spec.type === 'boolean') {
      if (token.value !== undefined) throw new UsageError(`${flag} takes no value`);
      values[token.name] = true;
    } else {
      // `--last --json` would take "--json" as the value: a value never starts with "--".
      if (token.value === undefined || (!token.inlineValue && token.value.startsWith('--'))) throw new UsageError(`${flag} needs a value (${flag} ${spec.value ?? 'VALUE'})`);
      values[token.name] = token.value;
    }
  }
  // Help and version win over positional complaints: `dm-dot events show --help` needs no id.
  if (!values.help && !values.version) {
    const max = positionals.length;
    const min = positionals.filter((p) => !p.optional).length;
    if (words.length > max) {
      throw new UsageError(max === 0 ? `unexpected argument "${words[max]!.slice(0, 80)}"` : `unexpected argument "${words[max]!.slice(0, 80)}" (expected ${positionals.map((p) => p.name).join(' ')})`);
    }
    if (words.length < min) throw new UsageError(`missing ${positionals[words.length]!.name}`);
  }
  return { values: values as Values<O & typeof COMMON_OPTIONS>, positionals: words };
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
  /** Actions of a command group, listed in its help. */
  actions?: readonly { name: string; summary: string }[];
}

function flagColumn(name: string, spec: OptionSpec): string {
  const long = `--${name}${spec.type === 'string' ? ` ${spec.value ?? 'VALUE'}` : ''}`;
  return spec.short ? `-${spec.short}, ${long}` : `    ${long}`;
}

/** Wraps `text` to `width` columns, every line after the first indented by `indent`. */
function wrap(text: string, width: number, indent: number): string {
  const lines: string[] = [];
  let line = '';
  for (const word of text.split(/\s+/).filter(Boolean)) {
    if (line && line.length + 1 + word.length > width) {
      lines.push(line);
      line = word;
    } else line = line ? `${line} ${word}` : word;
  }
  if (line) lines.push(line);
  return lines.join(`\n${' '.repeat(indent)}`);
}

/** The `--help` text, made from the declarations only. */
export function helpText(spec: HelpSpec): string {
  const all: OptionSpecs = { ...spec.options, ...COMMON_OPTIONS };
  const positional = (spec.positionals ?? []).map((p) => (p.optional ? `[${p.name}]` : p.name)).join(' ');
  const parts = [`Usage: dm-dot ${spec.name}${positional ? ` ${positional}` : ''} [options]`, '', `${spec.summary.charAt(0).toUpperCase()}${spec.summary.slice(1)}.`];
  if (spec.description) parts.push('', wrap(spec.description.trimEnd(), 78, 0));
  if (spec.actions?.length) {
    const width = Math.max(...spec.actions.map((a) => a.name.length));
    parts.push('', 'Actions:', ...spec.actions.map((a) => `  ${a.name.padEnd(width)}  ${a.summary}`));
  }
  if (spec.positionals?.length) {
    const width = Math.max(...spec.positionals.map((p) => p.name.length));
    parts.push('', 'Arguments:', ...spec.positionals.map((p) => `  ${p.name.padEnd(width)}  ${wrap(p.description, 76 - width, width + 4)}`));
  }
  const columns = Object.entries(all).map(([name, option]) => [flagColumn(name, option), option.description] as const);
  const width = Math.max(...columns.map(([flag]) => flag.length));
  parts.push('', 'Options:', ...columns.map(([flag, description]) => `  ${flag.padEnd(width)}  ${wrap(description, Math.max(30, 76 - width), width + 4)}`));
  parts.push('', 'With --json:', `  ${wrap(spec.json.trim(), 76, 2)}`);
  parts.push('  A failure without a document of its own prints {"error": {"code", "message"}}.');
  parts.push('', 'Exit codes: 0 ok, 1 the operation failed, 2 bad usage.');
  return `${parts.join('\n')}\n`;
}
