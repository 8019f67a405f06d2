/**
 * `dm-dot events`: the delivery log, and the group of its actions: `events list` (the same),
 * `events show` (events-show.ts) and `events resend` (events-resend.ts).
 */
import { Option } from 'commander';
import { EVENT_STATUSES, type EventView } from '../../operator/views';
import { withOperator } from '../backings';
import type { AwsFlags } from '../aws/session';
import type { Context } from '../context';
import { awsTableOptions, choiceValue, define, integerValue } from '../options';
import { plural, shortTime, table } from '../output';
import { command as show } from './events-show';
import { command as resend } from './events-resend';

/** `events`, or `events list` under it: the same command under two names. */
const list = (ctx: Context, name: string) =>
  define({
    name,
    summary: 'the delivery log, newest first',
    details:
      'Columns: EVENT (its id), STATUS, ATTEMPTS (in this round of the retry schedule), LAST ERROR (its category), CREATED, DELIVERED, ' +
      'SENDER (connector, or the name of the sender key that sent it) and READ (when the dot acknowledged it, with the inbox on). ' +
      'Locally it asks the running server (npm start) or, when none runs, reads its database in the state directory ' +
      "(DMDOT_STATE_DIR, default .dm-dot in the project). With --aws it reads the stack's table (a paged Scan).",
    options: [
      new Option('--last <N>', 'show the N newest events (default 20, 1..10000)'),
      new Option('--status <S>', `only events in status S: ${EVENT_STATUSES.join(', ')}`),
      ...awsTableOptions(),
    ],
    json:
      '{"events": [{"eventId", "status", "attempts", "lastError", "lastHttpStatus", "createdAt", "deliveredAt", "sender": "connector" | NAME | null, ' +
      '"acknowledgedAt": ISO | null}, ...]}, newest first.',
    async run(values: { last?: string; status?: string } & AwsFlags) {
      const last = integerValue(values.last, 'last', 1, 10_000) ?? 20;
      const status = choiceValue(values.status, 'status', EVENT_STATUSES);
      await withOperator(ctx, values, async (op) => {
        const all = await ctx.progress(`reading the delivery log from ${op.where}`, op.listEvents(status));
        const events = all.slice(0, last);
        ctx.result({ events }, () => {
          if (events.length === 0) return `No events${status ? ` with status ${status}` : ''} (${op.where}).\n`;
          const more = all.length > last ? `(the ${plural(last, 'newest event')} of ${all.length}; --last N for more)\n` : '';
          return table(['EVENT', 'STATUS', 'ATTEMPTS', 'LAST ERROR', 'CREATED', 'DELIVERED', 'SENDER', 'READ'], events.map(row)) + more;
        });
      });
    },
  });

export function command(ctx: Context) {
  return list(ctx, 'events').addCommand(list(ctx, 'list')).addCommand(show(ctx)).addCommand(resend(ctx));
}

function row(e: EventView): string[] {
  return [
    e.eventId,
    e.status,
    String(e.attempts),
    e.lastError ?? '-',
    shortTime(e.createdAt),
    shortTime(e.deliveredAt),
    e.sender ?? '-',
    shortTime(e.acknowledgedAt),
  ];
}
