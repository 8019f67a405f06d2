/**
 * The local runtime as `npm start` runs it (lambda/local/main.ts: the settings from the
 * environment, JSON log lines, the listening line, a clean stop on SIGINT/SIGTERM), on a clock the
 * test that started it moves ahead over IPC (`{ clockAheadMs }`, answered `{ clockAheadMs }` once
 * in force): a check of a time window takes the window's start as a fact instead of waiting for
 * the wall clock to reach it. Started by startServer's `movableClock` option (test/support/e2e.ts).
 *
 * Deliberately not here: moving the clock back (a step back is a fault of its own), and anything
 * else main.ts does not do (exit codes of a failed start are main.ts's; this one exits 1).
 */
import { resolve } from 'node:path';
import { localSettings } from '../../lambda/config/settings';
import { startLocal } from '../../lambda/local/runtime';
import { createLogger } from '../../lambda/log';
import { systemClock, type Clock } from '../../lambda/ports';

let aheadMs = 0;
const clock: Clock = { now: () => systemClock.now() + aheadMs, sleep: systemClock.sleep };

process.on('message', (message: { clockAheadMs?: unknown }) => {
  const ahead = message?.clockAheadMs;
  if (typeof ahead !== 'number' || !Number.isFinite(ahead) || ahead < aheadMs) return;
  aheadMs = ahead;
  process.send?.({ clockAheadMs: aheadMs });
});

async function main(): Promise<void> {
  const settings = localSettings(process.env, { projectRoot: resolve(__dirname, '..', '..') });
  const runtime = await startLocal({ settings, log: createLogger({ format: 'json' }), clock });
  const shutdown = () =>
    runtime.stop().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  process.once('SIGINT', shutdown);
  process.once('SIGTERM', shutdown);
}

main().catch((error: unknown) => {
  process.stderr.write(`dm-dot (clocked test server): failed to start: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
