/**
 * `npm start`: reads the settings once from the environment, starts the local runtime, and exits
 * cleanly on SIGINT/SIGTERM. Prints the listening line and the start-up lines (runtime.ts); never
 * the key. Logs are readable lines on a terminal and JSON lines otherwise.
 *
 * Exit codes: 2 when it cannot start as configured (a bad setting, a state directory another
 * server owns, a state file it cannot use: the sentence names it and what to do), 1 for anything
 * else, 0 after a clean stop.
 *
 * Deliberately not here: anything a test needs to inject (runtime.ts takes settings and adapters).
 */
import { resolve } from 'node:path';
import { StateDirInUse, StateUnreadable } from '../adapters/embedded';
import { localSettings, SettingsError } from '../config/settings';
import { batchedSink, createLogger } from '../log';
import { startLocal } from './runtime';
import { StateFileError } from '../adapters/state-files';

/** The project root: a relative DMDOT_STATE_DIR is taken from here, wherever the command runs. */
const PROJECT_ROOT = resolve(__dirname, '..', '..');

function refuse(message: string): never {
  process.stderr.write(`dm-dot: ${message}\n`);
  process.exit(2);
}

async function main(): Promise<void> {
  let settings;
  try {
    settings = localSettings(process.env, { projectRoot: PROJECT_ROOT });
  } catch (error) {
    if (error instanceof SettingsError) refuse(error.message);
    throw error;
  }
  const log = createLogger({ format: process.stderr.isTTY ? 'text' : 'json', sink: batchedSink() });
  let runtime;
  try {
    runtime = await startLocal({ settings, log });
  } catch (error) {
    if (error instanceof StateDirInUse || error instanceof StateUnreadable || error instanceof StateFileError) refuse(error.message);
    if ((error as NodeJS.ErrnoException).code === 'EADDRINUSE') {
      process.stderr.write(
        `dm-dot: port ${settings.port} on ${settings.host} is in use; stop what holds it, or choose another with PORT (PORT=0 picks a free one)\n`,
      );
      process.exit(1);
    }
    throw error;
  }
  const shutdown = (signal: string) => {
    process.stderr.write(`dm-dot: ${signal} received, stopping\n`);
    runtime.stop().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.once('SIGINT', () => shutdown('SIGINT'));
  process.once('SIGTERM', () => shutdown('SIGTERM'));
}

main().catch((error: unknown) => {
  process.stderr.write(`dm-dot: failed to start: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
