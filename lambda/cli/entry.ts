/**
 * The bundle's entry (dist/cli/dm-dot.cjs, built by build.mjs): runs the CLI on the real process
 * and exits with its code once stdout is flushed (a pipe may still hold output), even if a handle
 * lingers. The one place the CLI touches process.env: it is handed to main, which reads it once.
 */
import { processIo } from './io';
import { main } from './main';

main(process.argv.slice(2), processIo(process.env)).then(
  (code) => process.stdout.write('', () => process.exit(code)),
  (error: unknown) => {
    // main turns every failure into an exit code; this is a bug in the CLI itself.
    process.stderr.write(`dm-dot: internal error: ${error instanceof Error ? error.name : 'error'}\n`);
    process.exit(1);
  },
);
