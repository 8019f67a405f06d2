/**
 * `dm-dot subscription [show]`: never the secret, never the callback's path or query (they may
 * carry the dot's own tokens): the host is enough to recognise a dot.
 */
import type { SubscriptionView } from '../../operator/views';
import { withOperator } from '../backings';
import type { Context } from '../context';
import { awsTableOptions, define } from '../options';
import { fields, relative, shortTime } from '../output';

export const SUBSCRIPTION_JSON = '{"id", "callbackHost", "createdAt", "refreshedAt", "expiresAt", "lastDeliveryAt", "lastError"}';

export function describeSubscription(s: SubscriptionView): string {
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
export const command = (ctx: Context, name = 'show') =>
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
