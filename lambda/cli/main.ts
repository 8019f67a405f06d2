/**
 * The `dm-dot` operator CLI (SPEC 9.1): picks the command, runs it, and turns its outcome into the
 * exit-code contract: 0 ok, 1 the operation failed, 2 bad usage. `main` takes its input and output
 * as arguments so tests run it in-process; `lambda/cli/dm-dot.mjs` is the executable.
 *
 * Deliberately not here: any command's logic (one file each), and unexpected error text that
 * could hold a secret (it is scrubbed before it is printed).
 */
import { getEventListeners } from 'node:events';
import { createInterface } from 'node:readline/promises';
import { version } from '../version';
import { ExitCode, OperationError, redactor, UsageError, type CliIo, type Command } from './common';
import { dotCommand } from './dot';
import { eventsCommand } from './events';
import { redriveCommand } from './redrive';
import { sendCommand } from './send';
import { subscriptionCommand } from './subscription';

export const COMMANDS: readonly Command[] = [dotCommand, sendCommand, eventsCommand, subscriptionCommand, redriveCommand];

function help(): string {
  const width = Math.max(...COMMANDS.map((c) => c.name.length));
  return `Usage: dm-dot <command> [options]      (dm-dot <command> --help for its options)

Commands:
${COMMANDS.map((c) => `  ${c.name.padEnd(width)}  ${c.summary}`).join('\n')}

Local by default: the server and key are found as npm start does (DMDOT_STATE_DIR,
HOST/PORT, MCP_API_KEY). --url and --key point send and dot at any deployment;
--aws points events, subscription and redrive at the AWS stack.
Exit codes: 0 ok, 1 the operation failed, 2 bad usage.
`;
}

export async function main(argv: string[], io: CliIo): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined || name === '--help' || name === '-h' || name === 'help') {
    (name === undefined ? io.err : io.out)(help());
    return name === undefined ? ExitCode.usage : ExitCode.ok;
  }
  if (name === '--version') {
    io.out(`${version}\n`);
    return ExitCode.ok;
  }
  const command = COMMANDS.find((c) => c.name === name);
  if (!command) {
    io.err(`dm-dot: unknown command "${name}"\n\n${help()}`);
    return ExitCode.usage;
  }
  const redact = redactor(io.env.MCP_API_KEY);
  try {
    return await command.run(rest, io);
  } catch (error) {
    if (error instanceof UsageError) {
      io.err(`dm-dot ${name}: ${redact(error.message)}\nRun dm-dot ${name} --help for usage.\n`);
      return ExitCode.usage;
    }
    if (error instanceof OperationError) {
      io.err(`dm-dot ${name}: ${redact(error.message)}\n`);
      return ExitCode.failed;
    }
    const e = error as { name?: string; message?: string };
    io.err(`dm-dot ${name}: failed: ${redact(`${e.name ?? 'Error'}: ${e.message ?? String(error)}`)}\n`);
    return ExitCode.failed;
  }
}

/** The real process's io: stdout/stderr, a readline prompt on a terminal, Ctrl-C as the abort signal. */
export function processIo(): CliIo & { stdin(): Promise<string> } {
  const controller = new AbortController();
  let interrupts = 0;
  const onSignal = () => {
    // A command that listens for the abort (dot unsubscribes, redrive --aws stops waiting) gets
    // the first Ctrl-C; any other command, or a second Ctrl-C, ends the process at once.
    if (++interrupts > 1 || getEventListeners(controller.signal, 'abort').length === 0) process.exit(130);
    controller.abort();
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  return {
    out: (text) => process.stdout.write(text),
    err: (text) => process.stderr.write(text),
    env: process.env,
    signal: controller.signal,
    ...(process.stdin.isTTY
      ? {
          ask: async (question: string) => {
            const rl = createInterface({ input: process.stdin, output: process.stderr });
            try {
              return await rl.question(question);
            } finally {
              rl.close();
            }
          },
        }
      : {}),
    stdin: async () => {
      const chunks: Buffer[] = [];
      for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
      return Buffer.concat(chunks).toString('utf8');
    },
  };
}
