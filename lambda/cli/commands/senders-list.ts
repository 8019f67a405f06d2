/**
 * `dm-dot senders list`: every sender with its rate, creation, last use (kept to the minute: a send
 * rewrites it at most once a minute) and whether it is revoked. Never a key, nor its hash.
 */
import { defineCommand } from '../command';
import { AWS_TABLE_OPTIONS } from '../operator';
import { shortTime, table } from '../output';
import { withSenders } from '../senders';

export const command = defineCommand({
  spec: {
    name: 'senders list',
    summary: 'the sender keys: names, rates, creation, last use, revoked',
    description: 'Never a key: only its hash is stored. Last use is kept to the minute (a send rewrites it at most once a minute).',
    options: { ...AWS_TABLE_OPTIONS },
    json: '{"senders": [{"name", "rate": N | null, "createdAt", "lastUsedAt": ISO | null, "revokedAt": ISO | null, "revoked": bool}, ...]}, by name.',
  },
  async run(ctx, { values }) {
    return withSenders(ctx, values, async ({ where, senders }) => {
      const list = await ctx.progress(`reading the senders from ${where}`, senders.list());
      ctx.result({ senders: list }, () =>
        list.length === 0
          ? `No senders (${where}); dm-dot senders add NAME makes one.\n`
          : table(
              ['NAME', 'RATE', 'CREATED', 'LAST USED', 'REVOKED'],
              list.map((s) => [
                s.name,
                s.rate === null ? '-' : `${s.rate}/min`,
                shortTime(s.createdAt),
                shortTime(s.lastUsedAt),
                s.revokedAt ? shortTime(s.revokedAt) : 'no',
              ]),
            ),
      );
      return 0;
    });
  },
});
