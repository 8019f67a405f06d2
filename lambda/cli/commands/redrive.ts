/**
 * `dm-dot redrive`: every dead-lettered event back for another round of the retry schedule (an
 * event whose subscription has ended is then dropped, not sent). Locally through the running
 * server (which delivers them at once) or, with none running, the database itself (the next
 * start delivers them); with `--aws` an SQS move task from the dead-letter queue. An admin
 * action: never reachable with the shared API key alone.
 *
 * Locally it says which of them will be dropped instead: the failed events created before the
 * live subscription began were queued for an earlier one (a dot restarted, cleared or replaced
 * since), and `events resend` is what gives one of them to the live subscription. (An earlier
 * subscription of the same callback that merely expired keeps its generation: those would be sent
 * after all; the text says "were queued for", not "will never arrive", for that reason.)
 */
import { Command } from 'commander';
import { EventStatus } from '../../core/protocol';
import type { EventView, SubscriptionView } from '../../operator/views';
import { redriveAws } from '../aws/redrive';
import { type AwsFlags, withAws } from '../aws/session';
import type { Context } from '../context';
import { OperationError } from '../errors';
import { withLocalOperator } from '../local-server/local-operator';
import { awsStackOptions, dlqOption, queueOption, wantsAws, withJson, withOptions } from '../options';
import { plural, shortTime } from '../output';

/** How many resend lines the text lists. */
const SHOWN = 10;

/** The failed events queued for a subscription that has ended: all of them with none live, else those created before the live one began. */
export function endedSubscription(failed: readonly EventView[], subscription: SubscriptionView | null): string[] {
  const since = subscription ? Date.parse(subscription.createdAt) : Infinity;
  return failed.filter((e) => Date.parse(e.createdAt) < since).map((e) => e.eventId);
}

export function command(ctx: Context): Command {
  const cmd = new Command('redrive')
    .summary('move the dead letters back for another round')
    .description(
      'Move the dead letters back for another round.\n\n' +
        'Every dead-lettered event gets another round of the retry schedule; events whose subscription has ended are then dropped, not sent. ' +
        'Locally: through the running server, which delivers them at once; with no server running, in the database itself, and the next npm start ' +
        'delivers them. ' +
        'With --aws: an SQS message move task from the dead-letter queue to the delivery queue, waited for until it ends (Ctrl-C stops waiting; the ' +
        'task goes on). ' +
        'One event alone: dm-dot events resend evt_….',
    );
  withOptions(cmd, ...awsStackOptions(), queueOption(), dlqOption());
  withJson(
    cmd,
    'locally {"moved": N, "via": "server" | "database", "subscriptionId": "sub_…" | null, "endedSubscription": [evt_…, ...] (queued for a ' +
      'subscription that has ended: dropped, not sent)}; with --aws {"moved": N, "toMove": N | null, "status": "COMPLETED" | "FAILED" | "CANCELLED" ' +
      '| "NOTHING_TO_MOVE", "failureReason": string | null}.',
  );
  return cmd.action(async (values: { aws?: boolean } & AwsFlags) => {
    if (wantsAws(values)) {
      await withAws(ctx, values, async (session) => {
        const result = await redriveAws(ctx, session);
        if (result.status === 'NOTHING_TO_MOVE') {
          ctx.result(result, 'The dead-letter queue is empty: nothing to redrive.\n');
          return;
        }
        if (result.status !== 'COMPLETED') {
          if (ctx.json) ctx.printJson(result);
          throw new OperationError(
            `the move task ended ${result.status}${result.failureReason ? `: ${result.failureReason}` : ''} after moving ${plural(result.moved, 'message')}`,
            'move_failed',
          );
        }
        ctx.result(result, `Moved ${plural(result.moved, 'message')} from the dead-letter queue back to the delivery queue.\n`);
      });
      return;
    }
    await withLocalOperator(ctx, async (op) => {
      const [failed, subscription] = await ctx.progress(
        `reading the dead letters' events from ${op.where}`,
        Promise.all([op.listEvents(EventStatus.failed), op.showSubscription()]),
      );
      const moved = await ctx.progress(`redriving through ${op.where}`, op.redrive());
      const ended = moved === 0 ? [] : endedSubscription(failed, subscription);
      ctx.result({ moved, via: op.via, subscriptionId: subscription?.id ?? null, endedSubscription: ended }, () => {
        if (moved === 0) return `No dead letters: nothing to redrive (${op.where}).\n`;
        const live = moved - Math.min(ended.length, moved);
        const them = live === moved ? 'them' : `${live} of them`;
        const head =
          op.via === 'server'
            ? live > 0
              ? `Moved ${moved} dead letter(s) back; the running server at ${op.server!.url} is delivering ${them} now (dm-dot events follows them).`
              : `Moved ${moved} dead letter(s) back to the running server at ${op.server!.url}.`
            : live > 0
              ? `Moved ${moved} dead letter(s) back in ${op.where}; the next npm start delivers ${them}.`
              : `Moved ${moved} dead letter(s) back in ${op.where}.`;
        const lines = [head];
        if (ended.length > 0) {
          const they = ended.length === 1 ? 'it is' : 'they are';
          lines.push(
            subscription
              ? `${plural(ended.length, 'of them was', 'of them were')} queued for an earlier subscription, which has ended (the dot was restarted, ` +
                  `cleared or replaced; the live one began at ${shortTime(subscription.createdAt)}): ${they} dropped, not sent.`
              : `No dot is subscribed now, so ${they} dropped, not sent (${ended.length === 1 ? 'its' : 'their'} subscription ended).`,
            `To give one to the ${subscription ? 'live' : 'next'} subscription, resend it${subscription ? '' : ' once a dot has subscribed'}:`,
            ...ended.slice(0, SHOWN).map((id) => `  dm-dot events resend ${id}`),
            ...(ended.length > SHOWN ? [`  (and ${ended.length - SHOWN} more: dm-dot events --status dropped lists them)`] : []),
          );
        }
        return `${lines.join('\n')}\n`;
      });
    });
  });
}
