/** `dm-dot events resend evt_…`: an admin action, never reachable with the shared API key alone. */
import type { ResendResult } from '../../operator/actions';
import { withOperator } from '../backings';
import type { Context } from '../context';
import { OperationError } from '../errors';
import { awsTableOptions, define, queueOption } from '../options';
import { eventIdArgument, eventIdOf } from './events-show';

const WHY: Record<Extract<ResendResult, { resent: false }>['why'], (id: string) => string> = {
  not_found: (id) => `no event ${id} in the delivery log; events are kept 15 days`,
  not_settled: (id) => `${id} is still queued: its retries continue (dm-dot events show ${id})`,
  delivered: (id) => `${id} was delivered already; nothing to resend`,
  no_bytes: (id) => `${id} has no kept bytes to send again (it was recorded before resending existed)`,
  no_subscription: (id) => `there is no live subscription to send ${id} to: connect the dot first (dm-dot dot, or the dot in ChatGPT)`,
  changed: (id) => `${id} changed while it was being resent; look again with dm-dot events show ${id}`,
};

export const command = (ctx: Context) =>
  define({
    name: 'resend',
    summary: 'give one failed or dropped event another round',
    details:
      'A new round of the retry schedule, with the same event id and the same bytes, to the subscription that is live now. ' +
      'An admin action: locally through the running server (its admin token) or, when none runs, the database; with --aws the table and the ' +
      'delivery queue. Queued and delivered events are left alone.',
    argument: eventIdArgument(),
    options: [...awsTableOptions(), queueOption()],
    json:
      '{"resent": true, "eventId", "subscriptionId"} or {"resent": false, "eventId", "why": "not_found" | "not_settled" | "delivered" | "no_bytes" | ' +
      '"no_subscription" | "changed"} (exit 1).',
    async run(values, word) {
      const eventId = eventIdOf(word);
      await withOperator(ctx, values, async (op) => {
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
    },
  });
