/**
 * `npm run redrive`: moves the local runtime's dead letters back into its queue, so the next
 * `npm start` tries them again with a new round of the retry schedule (events whose subscription
 * ended are dropped then). Run it while the runtime is stopped.
 */
import { redriveDeadLetters } from '../adapters/file-queue';

const stateDir = process.env.DMDOT_STATE_DIR || '.dm-dot';
redriveDeadLetters(stateDir).then(
  (moved) => process.stdout.write(`dm-dot: moved ${moved} dead letter(s) from ${stateDir}/dead-letter back to the queue\n`),
  (error: unknown) => {
    process.stderr.write(`dm-dot: redrive failed: ${error instanceof Error ? error.message : String(error)}\n`);
    process.exit(1);
  },
);
