/**
 * The bundle's entry (dist/cli/dm-dot.cjs): runs the CLI on the real process and exits with its
 * code once stdout is flushed, even if a handle lingers. The one place the CLI touches process.env.
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
