/**
 * `npm start`: loads settings, starts the local runtime, exits cleanly on SIGINT/SIGTERM.
 * Prints the listening line and, when it generated the key, the file that holds it; never the key.
 */
import { loadSettings, SettingsError } from '../config';
import { startLocal } from './runtime';

async function main(): Promise<void> {
  let settings;
  try {
    settings = loadSettings();
  } catch (error) {
    if (error instanceof SettingsError) {
      process.stderr.write(`dm-dot: ${error.message}\n`);
      process.exit(2);
    }
    throw error;
  }
  const runtime = await startLocal({ settings, apiKey: process.env.MCP_API_KEY });
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
