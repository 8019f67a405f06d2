/**
 * `dm-dot send "text"`: one message to the dot (POST /v1/messages) on the local server, found as
 * `npm start` runs it, or on any deployment (`--url`, `--key`). Prints delivered, queued or failed
 * with its category, and the event id. Exit 1 when the message was not accepted or its delivery
 * failed.
 */
import { Command } from 'commander';
import type { Context } from '../context';
import { OperationError, UsageError } from '../errors';
import { target } from '../local-server/target';
import { targetOptions, withJson, withOptions } from '../options';
import { outcomeLine, sendMessage } from '../send-message';

export function command(ctx: Context): Command {
  const cmd = new Command('send')
    .summary('send one message to the dot and print its outcome')
    .description(
      'Send one message to the dot and print its outcome.\n\n' +
        'POST /v1/messages, then the outcome with the event id: delivered, queued (not acknowledged yet; retries continue), kept (the inbox is on ' +
        'and no dot is subscribed) or failed with its category. ' +
        'The message carries an Idempotency-Key, so an answer lost on the way back is asked for again without making a second event. ' +
        'Exit 1 when the message was not accepted (no dot subscribed, a refused key, an invalid message) or its delivery failed.',
    )
    .argument('<MESSAGE>', 'the message, quoted; - reads it from standard input');
  withOptions(cmd, ...targetOptions());
  withJson(
    cmd,
    '{"status": "delivered" | "queued" | "kept" | "failed" | "not_accepted", "eventId": "evt_…" | null, "reason": category or error code | null, ' +
      '"httpStatus": N | null, "message": sentence}.',
  );
  return cmd.action(async (given: string, options: { url?: string; key?: string }) => {
    let message = given;
    if (message === '-') {
      if (!ctx.io.readStdin) throw new UsageError('cannot read the message from standard input here');
      message = await ctx.io.readStdin();
    }
    if (message.trim() === '') throw new UsageError('the message is empty');
    const to = await target(ctx, options);
    const outcome = await ctx.progress('waiting for the dot to answer', sendMessage(ctx, to, message));
    if (ctx.json) ctx.printJson(outcome);
    // Not accepted: no event to speak of, a refusal on stderr. Otherwise the outcome is the result.
    if (outcome.status === 'not_accepted') throw new OperationError(outcomeLine(outcome), outcome.reason ?? 'not_accepted');
    if (!ctx.json) ctx.print(`${outcomeLine(outcome)}\n`);
    if (outcome.status === 'failed') ctx.exitCode = 1;
  });
}
