/**
 * `dm-dot events resend evt_…`: gives one failed or dropped event another round of the retry
 * schedule, with the same id and the same bytes, to the subscription live now. An admin action:
 * locally through the running server's admin routes (admin token) or the database as operator;
 * with `--aws` the table and the delivery queue with the operator's credentials. Never with the
 * shared API key alone.
 */
import { Command } from 'commander';
import type { ResendResult } from '../../operator/actions';
import type { AwsFlags } from '../aws/session';
import { withOperator } from '../backings';
import type { Context } from '../context';
import { OperationError } from '../errors';
import { awsTableOptions, queueOption, withJson, withOptions } from '../options';
import { eventIdArgument, eventIdOf } from './events-show';

const WHY: Record<Extract<ResendResult, { resent: false }>['why'], (id: string) => string> = {
  not_found: (id) => `no event ${id} in the delivery log; events are kept 15 days`,
  not_settled: (id) => `${id} is still queued: its retries continue (dm-dot events show ${id})`,
  delivered: (id) => `${id} was delivered already; nothing to resend`,
  no_bytes: (id) => `${id} has no kept bytes to send again (it was recorded before resending existed)`,
  no_subscription: (id) => `there is no live subscription to send ${id} to: connect the dot first (dm-dot dot, or the dot in ChatGPT)`,
  changed: (id) => `${id} changed while it was being resent; look again with dm-dot events show ${id}`,
};

export function command(ctx: Context): Command {
  const cmd = new Command('resend')
    .summary('give one failed or dropped event another round')
    .description(
      'Give one failed or dropped event another round.\n\n' +
        'A new round of the retry schedule, with the same event id and the same bytes, to the subscription that is live now. ' +
        'An admin action: locally through the running server (its admin token) or, when none runs, the database; with --aws the table and the ' +
        'delivery queue. Queued and delivered events are left alone.',
    )
    .addArgument(eventIdArgument());
  withOptions(cmd, ...awsTableOptions(), queueOption());
  withJson(
    cmd,
    '{"resent": true, "eventId", "subscriptionId"} or {"resent": false, "eventId", "why": "not_found" | "not_settled" | "delivered" | "no_bytes" | ' +
      '"no_subscription" | "changed"} (exit 1).',
  );
  return cmd.action(async (word: string, options: { aws?: boolean } & AwsFlags) => {
    const eventId = eventIdOf(word);
    await withOperator(ctx, options, async (op) => {
      const result = await ctx.progress(`resending ${eventId} through ${op.where}`, op.resendEvent(eventId));
      if (!result.resent) {
        if (ctx.json) ctx.printJson(result);
        throw new OperationError(`not resent: ${WHY[result.why](eventId)}`, result.why);
      }
      ctx.result(
        result,
        `Resent ${eventId} to subscription ${result.subscriptionId}: a new round of the retry schedule, same id and bytes (dm-dot events show ` +
          `${eventId} follows it).\n`,
      );
    });
  });
}
