/**
 * `dm-dot subscription [show]`: the live subscription (id, callback host, created, refreshed,
 * expires, last delivery, last error). Never the secret, never the callback's path or query (they
 * may carry the dot's own tokens): the host is enough to recognise a dot.
 */
import { defineCommand } from '../command';
import { AWS_TABLE_OPTIONS, withOperator } from '../operator';
import { fields, relative, shortTime } from '../output';
import type { SubscriptionView } from '../../operator/views';

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

export const command = defineCommand({
  spec: {
    name: 'subscription show',
    summary: 'the live subscription (the default action)',
    description: 'Id, callback host, created, refreshed, expires, last delivery and last error. Never the secret, never the callback path or query.',
    options: { ...AWS_TABLE_OPTIONS },
    json: `{"subscription": ${SUBSCRIPTION_JSON} | null}`,
  },
  async run(ctx, { values }) {
    return withOperator(ctx, values, async (op) => {
      const subscription = await ctx.progress(`reading the subscription from ${op.where}`, op.showSubscription());
      ctx.result({ subscription }, () => (subscription ? describeSubscription(subscription) : `No live subscription (${op.where}).\n`));
      return 0;
    });
  },
});
