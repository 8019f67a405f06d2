/**
 * `dm-dot redrive`: an admin action, never reachable with the shared API key alone. Locally it says
 * which dead letters will be dropped instead: the failed events created before the live
 * subscription began were queued for an earlier one (a dot restarted, cleared or replaced since),
 * and `events resend` is what gives one of them to the live subscription. (An earlier
 * subscription of the same callback that merely expired keeps its generation: those would be sent
 * after all; the text says "were queued for", not "will never arrive", for that reason.)
 */
import { EventStatus } from '../../core/protocol';
import type { EventView, SubscriptionView } from '../../operator/views';
import { redriveAws } from '../aws/redrive';
import type { AwsSession } from '../aws/session';
import { onBacking } from '../backings';
import type { Context } from '../context';
import type { LocalOperator } from '../local-server/local-operator';
import { awsStackOptions, define, dlqOption, queueOption } from '../options';
import { plural, shortTime } from '../output';

/** How many resend lines the text lists. */
const SHOWN = 10;

/** The failed events queued for a subscription that has ended: all of them with none live, else those created before the live one began. */
export function endedSubscription(failed: readonly EventView[], subscription: SubscriptionView | null): string[] {
  const since = subscription ? Date.parse(subscription.createdAt) : Infinity;
  return failed.filter((e) => Date.parse(e.createdAt) < since).map((e) => e.eventId);
}

export const command = (ctx: Context) =>
  define({
    name: 'redrive',
    summary: 'move the dead letters back for another round',
    details:
      'Every dead-lettered event gets another round of the retry schedule; events whose subscription has ended are then dropped, not sent. ' +
      'Locally: through the running server, which delivers them at once; with no server running, in the database itself, and the next npm start ' +
      'delivers them. ' +
      'With --aws: an SQS message move task from the dead-letter queue to the delivery queue, waited for until it ends (Ctrl-C stops waiting; the ' +
      'task goes on). ' +
      'One event alone: dm-dot events resend evt_….',
    options: [...awsStackOptions(), queueOption(), dlqOption()],
    json:
      'locally {"moved": N, "via": "server" | "database", "subscriptionId": "sub_…" | null, "endedSubscription": [evt_…, ...] (queued for a ' +
      'subscription that has ended: dropped, not sent)}; with --aws {"moved": N, "toMove": N | null, "status": "COMPLETED" | "FAILED" | "CANCELLED" ' +
      '| "NOTHING_TO_MOVE", "failureReason": string | null}.',
    run: (values) =>
      onBacking(
        ctx,
        values,
        (op) => redriveLocal(ctx, op),
        (session) => redriveOnAws(ctx, session),
      ),
  });

async function redriveOnAws(ctx: Context, session: AwsSession): Promise<void> {
  const result = await redriveAws(ctx, session);
  if (result.status === 'NOTHING_TO_MOVE') return ctx.result(result, 'The dead-letter queue is empty: nothing to redrive.\n');
  if (result.status !== 'COMPLETED') {
    const reason = result.failureReason ? `: ${result.failureReason}` : '';
    ctx.refuse(result, `the move task ended ${result.status}${reason} after moving ${plural(result.moved, 'message')}`, 'move_failed');
  }
  ctx.result(result, `Moved ${plural(result.moved, 'message')} from the dead-letter queue back to the delivery queue.\n`);
}

async function redriveLocal(ctx: Context, op: LocalOperator): Promise<void> {
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
}
