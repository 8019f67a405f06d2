/**
 * What a command may touch of the outside world, as one object: stdout and stderr, the
 * environment, a question on a terminal, standard input, Ctrl-C as an abort signal, and the AWS
 * clients (a test passes its own). `processIo` is the real process's.
 *
 * Deliberately not here: reading the environment (main.ts does, once) and anything a command does.
 */
import { getEventListeners } from 'node:events';

/** An AWS SDK client as the CLI uses it: `send(command)`. Tests pass objects with `send`. */
export type SendsCommands = { send(command: any, options?: any): Promise<any> };

/** Clients a test injects instead of those the CLI builds from the environment (`--aws`). */
export type AwsClients = Partial<Record<'dynamodb' | 'sqs' | 'cloudformation' | 'cloudwatch' | 'lambda' | 'secretsManager', SendsCommands>>;

export interface CliIo {
  out(text: string): void;
  err(text: string): void;
  env: Readonly<Record<string, string | undefined>>;
  /** Asks on a terminal and resolves with the answer; absent when there is no terminal to ask on. */
  ask?(question: string): Promise<string | undefined>;
  /** Aborted by Ctrl-C (long-running commands listen: `dot` unsubscribes, `redrive --aws` stops waiting). */
  signal?: AbortSignal;
  /** The whole of standard input (`send -`). */
  readStdin?(): Promise<string>;
  /** The lines typed on standard input, until its end (`dot` sends each one). */
  stdinLines?(): AsyncIterable<string>;
  aws?: AwsClients;
  /** Where a relative DMDOT_STATE_DIR is taken from; default: the root of the dm-dot project the CLI belongs to. */
  projectRoot?: string;
}

/** The real process's io; `env` is the process's environment, handed in by the entry. */
export function processIo(env: CliIo['env']): CliIo {
  const controller = new AbortController();
  let interrupts = 0;
  const onSignal = () => {
    // A command listening for the abort gets the first Ctrl-C; anything else, or a second Ctrl-C, ends the process.
    if (++interrupts > 1 || getEventListeners(controller.signal, 'abort').length === 0) process.exit(130);
    controller.abort();
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  const io: CliIo = {
    out: (text) => void process.stdout.write(text),
    err: (text) => void process.stderr.write(text),
    env,
    signal: controller.signal,
    readStdin: async () => (await import('node:stream/consumers')).text(process.stdin),
    stdinLines: () => lines(controller.signal),
  };
  if (process.stdin.isTTY) {
    io.ask = async (question: string) => {
      const { createInterface } = await import('node:readline');
      const rl = createInterface({ input: process.stdin, output: process.stderr });
      return new Promise<string | undefined>((done) => {
        // Ctrl-C at the prompt is a "no", not a hang.
        rl.on('SIGINT', () => {
          process.stderr.write('\n');
          rl.close();
          done(undefined);
        });
        rl.question(question, (answer) => {
          rl.close();
          done(answer);
        });
      });
    };
  }
  return io;
}

/**
 * Standard input, line by line. Not in terminal mode: the terminal keeps its own line editing and
 * Ctrl-C stays a signal (readline in terminal mode would swallow it).
 */
async function* lines(signal: AbortSignal): AsyncIterable<string> {
  const { createInterface } = await import('node:readline');
  const rl = createInterface({ input: process.stdin, terminal: false, crlfDelay: Infinity });
  const stop = () => {
    rl.close();
    process.stdin.destroy();
  };
  signal.addEventListener('abort', stop, { once: true });
  try {
    for await (const line of rl) yield line;
  } finally {
    signal.removeEventListener('abort', stop);
    rl.close();
  }
}
