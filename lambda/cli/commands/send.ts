/** `dm-dot send "text"`: one message to the dot, on the local server or any deployment (`--url`, `--key`). */
import type { Context } from '../context';
import { OperationError, UsageError } from '../errors';
import { target } from '../local-server/target';
import { define, targetOptions } from '../options';
import { outcomeLine, sendMessage } from '../send-message';
import { Argument } from 'commander';

export const command = (ctx: Context) =>
  define({
    name: 'send',
    summary: 'send one message to the dot and print its outcome',
    details:
      'POST /v1/messages, then the outcome with the event id: delivered, queued (not acknowledged yet; retries continue), kept (the inbox is on ' +
      'and no dot is subscribed) or failed with its category. ' +
      'The message carries an Idempotency-Key, so an answer lost on the way back is asked for again without making a second event. ' +
      'Exit 1 when the message was not accepted (no dot subscribed, a refused key, an invalid message) or its delivery failed.',
    argument: new Argument('<MESSAGE>', 'the message, quoted; - reads it from standard input'),
    options: targetOptions(),
    json:
      '{"status": "delivered" | "queued" | "kept" | "failed" | "not_accepted", "eventId": "evt_…" | null, "reason": category or error code | null, ' +
      '"httpStatus": N | null, "message": sentence}.',
    async run(values: { url?: string; key?: string }, given) {
      let message = given;
      if (message === '-') {
        if (!ctx.io.readStdin) throw new UsageError('cannot read the message from standard input here');
        message = await ctx.io.readStdin();
      }
      if (message.trim() === '') throw new UsageError('the message is empty');
      const to = await target(ctx, values);
      const outcome = await ctx.progress('waiting for the dot to answer', sendMessage(ctx, to, message));
      if (ctx.json) ctx.printJson(outcome);
      // Not accepted: no event to speak of, a refusal on stderr. Otherwise the outcome is the result.
      if (outcome.status === 'not_accepted') throw new OperationError(outcomeLine(outcome), outcome.reason ?? 'not_accepted');
      if (!ctx.json) ctx.print(`${outcomeLine(outcome)}\n`);
      if (outcome.status === 'failed') ctx.exitCode = 1;
    },
  });
