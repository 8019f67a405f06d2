/**
 * What a running command is handed: its name (for messages), the typed settings, the io, and one
 * printer that every line goes through. The printer scrubs the secrets the command has met from
 * whatever it prints, except what `--show-key` asks for; prints `--json` as exactly one document;
 * and keeps progress notes on stderr.
 *
 * Confirmation before an act that breaks the connected dot: `--yes` skips it; with no terminal to
 * ask on the command refuses with one line (exit 1) saying to pass `--yes`, and no prompt is
 * printed, so nothing is glued to the refusal.
 *
 * Deliberately not here: reading the environment (main.ts) or any command's logic.
 */
import type { CliAwsSettings, LocalSettings } from '../config/settings';
import { OperationError, scrub } from './errors';
import type { CliIo } from './io';
import { jsonText } from './output';

export interface CliSettings {
  local(): LocalSettings;
  aws(): CliAwsSettings;
}

export class Context {
  private readonly secrets = new Set<string>();
  /** Whether the one `--json` document of this run is printed. */
  printedJson = false;
  /** Set by main.ts once the command's flags are parsed. */
  json = false;
  /** The exit code of a command that ends without an error but not ok (`send` whose delivery failed, `dot`). */
  exitCode: number = 0;

  constructor(
    readonly io: CliIo,
    /** `events show`: what messages name (main.ts sets it). */
    public command: string,
    readonly settings: CliSettings,
    /** The project root, or how to find it the first time a command needs it. */
    private root: string | (() => string),
  ) {}

  get projectRoot(): string {
    if (typeof this.root === 'function') this.root = this.root();
    return this.root;
  }

  keepSecret(value: string | undefined): void {
    if (value) this.secrets.add(value);
  }

  scrub(text: string): string {
    return scrub(text, this.secrets);
  }

  print(text: string): void {
    this.io.out(this.scrub(text));
  }

  /** The one `--json` document of this run. */
  printJson(doc: unknown, scrubbed = true): void {
    if (this.printedJson) throw new Error('a command printed a second JSON document');
    this.printedJson = true;
    this.io.out(scrubbed ? this.scrub(jsonText(doc)) : jsonText(doc));
  }

  /** The JSON document, or the text: one of the two, as `--json` says. */
  result(doc: unknown, text: string | (() => string)): void {
    if (this.json) this.printJson(doc);
    else this.print(typeof text === 'string' ? text : text());
  }

  /** A failure (exit 1) whose `--json` document is `doc`. */
  refuse(doc: unknown, message: string, code: string): never {
    if (this.json) this.printJson(doc);
    throw new OperationError(message, code);
  }

  /** A secret asked for with --show-key: printed as is, after a notice on stderr. */
  reveal(text: string, doc?: unknown, what = '--show-key prints the API key'): void {
    this.io.err(`dm-dot ${this.command}: ${what}: a secret; keep this output out of logs, screenshots and shared terminals\n`);
    if (this.json) this.printJson(doc, false);
    else this.io.out(text);
  }

  /** A progress note or remark on stderr: `dm-dot <command>: <line>`. */
  note(line: string): void {
    this.io.err(this.scrub(`dm-dot ${this.command}: ${line}\n`));
  }

  async confirm(options: { yes: boolean | undefined; what: string; question: string; before?: string }): Promise<void> {
    if (options.yes) return;
    if (!this.io.ask) throw new OperationError(`not ${options.what}: there is no terminal to confirm on; pass --yes to do it without asking`, 'not_confirmed');
    if (options.before) this.io.err(this.scrub(options.before));
    const answer = await this.io.ask(`${options.question} [y/N] `);
    if (!/^y(es)?$/i.test((answer ?? '').trim())) throw new OperationError(`not ${options.what}`, 'not_confirmed');
  }

  /** Runs `work`; if it takes more than a second, says what it waits for on stderr. */
  async progress<T>(label: string, work: Promise<T>): Promise<T> {
    const timer = setTimeout(() => this.note(`${label}...`), 1000);
    try {
      return await work;
    } finally {
      clearTimeout(timer);
    }
  }
}
