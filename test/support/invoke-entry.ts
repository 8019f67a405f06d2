/**
 * Runs one Lambda entry file the way the Lambda runtime does, in a fresh process: imports the
 * module (its init code reads the environment and creates the AWS clients), then calls the
 * exported `handler(event, context)` for each event read from stdin (a JSON array) and prints
 * the results as one JSON array on stdout.
 *
 * Used by entries.test.ts through tsx, because the entries import @middy/core, which is ESM-only
 * and cannot be loaded by Jest's CommonJS runtime.
 *
 * Deliberately not here: timeouts (the parent kills the process), and any assertion.
 */
import { resolve } from 'node:path';

async function main(): Promise<void> {
  const entry = process.argv[2];
  if (!entry) throw new Error('usage: invoke-entry <entry file>');
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  const events = JSON.parse(Buffer.concat(chunks).toString('utf8')) as unknown[];
  const mod = (await import(resolve(entry))) as { handler: (event: unknown, context: unknown) => Promise<unknown> };
  const results: unknown[] = [];
  const timings: number[] = [];
  for (const [index, event] of events.entries()) {
    const deadline = Date.now() + 30_000;
    const context = {
      awsRequestId: `invoke-${index}`,
      functionName: 'dm-dot-test',
      getRemainingTimeInMillis: () => Math.max(0, deadline - Date.now()),
    };
    const started = Date.now();
    results.push(await mod.handler(event, context));
    timings.push(Date.now() - started);
  }
  // How long each handler call took (module init excluded), for tests that bound a stall.
  if (process.env.INVOKE_ENTRY_TIMINGS === '1') process.stderr.write(`invoke-entry timings: ${JSON.stringify(timings)}\n`);
  process.stdout.write(`${JSON.stringify(results)}\n`);
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    process.stderr.write(`invoke-entry failed: ${error instanceof Error ? error.stack : String(error)}\n`);
    process.exit(1);
  },
);
