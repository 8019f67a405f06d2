/**
 * `dm-dot senders list`: every sender with its rate, creation, last use (kept to the minute: a send
 * rewrites it at most once a minute) and whether it is revoked. Never a key, nor its hash.
 */
import { Command } from 'commander';
import type { AwsFlags } from '../aws/session';
import { withSenders } from '../backings';
import type { Context } from '../context';
import { awsTableOptions, withJson, withOptions } from '../options';
import { shortTime, table } from '../output';

/** `senders list`, and `senders` alone (the same command under the group's name). */
export function command(ctx: Context, name = 'list'): Command {
  const cmd = new Command(name)
    .summary('the sender keys: names, rates, creation, last use, revoked')
    .description(
      'The sender keys: names, rates, creation, last use, revoked.\n\n' +
        'Never a key: only its hash is stored. Last use is kept to the minute (a send rewrites it at most once a minute).',
    );
  withOptions(cmd, ...awsTableOptions());
  withJson(cmd, '{"senders": [{"name", "rate": N | null, "createdAt", "lastUsedAt": ISO | null, "revokedAt": ISO | null, "revoked": bool}, ...]}, by name.');
  return cmd.action(async (options: { aws?: boolean } & AwsFlags) => {
    await withSenders(ctx, options, async ({ where, senders }) => {
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
    });
  });
}
