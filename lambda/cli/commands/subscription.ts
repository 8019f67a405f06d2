/**
 * `dm-dot subscription [show|clear]`: alone it shows the live subscription, never the secret nor the
 * callback's path or query; `clear` is the way out of the single-subscriber lock-out
 * (docs/operating.md, "`subscription`, the lock-out, and the two ways out").
 */
import type { SubscriptionView } from '../../operator/views';
import { withOperator } from '../backings';
import type { AwsFlags } from '../aws/session';
import type { Context } from '../context';
import { awsTableOptions, define, yesOption } from '../options';
import { fields, relative, shortTime } from '../output';

export const SUBSCRIPTION_JSON = '{"id", "callbackHost", "createdAt", "refreshedAt", "expiresAt", "lastDeliveryAt", "lastError"}';

function describeSubscription(s: SubscriptionView): string {
  return fields([
    ['id', s.id],
    ['callback host', s.callbackHost],
    ['created', shortTime(s.createdAt)],
    ['refreshed', shortTime(s.refreshedAt)],
    ['expires', `${shortTime(s.expiresAt)} (${relative(s.expiresAt)}, unless the dot refreshes it)`],
    ['last delivery', shortTime(s.lastDeliveryAt)],
    ['last error', s.lastError ?? '-'],
  ]);
}

/** `subscription show`, and `subscription` alone (the same command under the group's name). */
const show = (ctx: Context, name = 'show') =>
  define({
    name,
    summary: 'the live subscription',
    details: 'Id, callback host, created, refreshed, expires, last delivery and last error. Never the secret, never the callback path or query.',
    options: awsTableOptions(),
    json: `{"subscription": ${SUBSCRIPTION_JSON} | null}`,
    run: (values) =>
      withOperator(ctx, values, async (op) => {
        const subscription = await ctx.progress(`reading the subscription from ${op.where}`, op.showSubscription());
        ctx.result({ subscription }, () => (subscription ? describeSubscription(subscription) : `No live subscription (${op.where}).\n`));
      }),
  });

const clear = (ctx: Context) =>
  define({
    name: 'clear',
    summary: 'end the live subscription now (the way out of a stuck one)',
    details:
      'Another callback (a dot added again in ChatGPT) can then subscribe at once; the queued deliveries of the cleared one are dropped. ' +
      'Asks for confirmation on a terminal; without one, pass --yes. Exit 1 when nothing is subscribed, when not confirmed, or when the ' +
      'subscription changed meanwhile.',
    options: [yesOption(), ...awsTableOptions()],
    json: '{"cleared": true | false, "id": "sub_…" | null} (cleared false: exit 1).',
    run: (values: { yes?: boolean } & AwsFlags) =>
      withOperator(ctx, values, async (op) => {
        const current = await ctx.progress(`reading the subscription from ${op.where}`, op.showSubscription());
        if (!current) ctx.refuse({ cleared: false, id: null }, `nothing to clear: no live subscription (${op.where})`, 'nothing_to_clear');
        await ctx.confirm({
          yes: values.yes,
          what: 'cleared',
          before: describeSubscription(current),
          question: `End subscription ${current.id} (callback host ${current.callbackHost})? Its queued deliveries are dropped.`,
        });
        const result = await ctx.progress('clearing the subscription', op.clearSubscription(current.id));
        // Between the read and the conditional delete, it expired or another callback took over.
        if (!result.cleared)
          ctx.refuse(result, 'not cleared: the subscription changed meanwhile (expired or replaced); look again with dm-dot subscription show', 'changed');
        ctx.result(result, `Cleared subscription ${result.id}. A dot can subscribe now; the cleared one's queued deliveries are dropped.\n`);
      }),
  });

export const command = (ctx: Context) => show(ctx, 'subscription').addCommand(show(ctx)).addCommand(clear(ctx));
