/** `dm-dot senders list`: never a key, nor its hash. */
import { withSenders } from '../backings';
import type { Context } from '../context';
import { awsTableOptions, define } from '../options';
import { shortTime, table } from '../output';

/** `senders list`, and `senders` alone (the same command under the group's name). */
export const command = (ctx: Context, name = 'list') =>
  define({
    name,
    summary: 'the sender keys: names, rates, creation, last use, revoked',
    details: 'Never a key: only its hash is stored. Last use is kept to the minute (a send rewrites it at most once a minute).',
    options: awsTableOptions(),
    json: '{"senders": [{"name", "rate": N | null, "createdAt", "lastUsedAt": ISO | null, "revokedAt": ISO | null, "revoked": bool}, ...]}, by name.',
    run: (values) =>
      withSenders(ctx, values, async ({ where, senders }) => {
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
      }),
  });
