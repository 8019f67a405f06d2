/**
 * `dm-dot events [--last N] [--status S]`: the delivery log, newest first. Read-only: through the
 * running local server, a stopped one's database, or with `--aws` the stack's table (a paged Scan).
 */
import { choiceValue, integerValue } from '../args';
import { defineCommand } from '../command';
import { AWS_TABLE_OPTIONS, withOperator } from '../operator';
import { plural, shortTime, table } from '../output';
import { EVENT_STATUSES, type EventView } from '../../operator/views';

export const command = defineCommand({
  spec: {
    name: 'events',
    summary: 'the delivery log, newest first',
    description:
      'Event id, status, attempts, last error category, created and delivered times, sender, and READ: when the dot acknowledged it (the inbox). ' +
      'Locally it asks the running server (npm start) or, when none runs, reads its database in the state directory ' +
      "(DMDOT_STATE_DIR, default .dm-dot in the project). With --aws it reads the stack's table (a paged Scan).",
    options: {
      last: { type: 'string', value: 'N', description: 'show the N newest events (default 20, 1..10000)' },
      status: { type: 'string', value: 'S', description: `only events in status S: ${EVENT_STATUSES.join(', ')}` },
      ...AWS_TABLE_OPTIONS,
    },
    json:
      '{"events": [{"eventId", "status", "attempts", "lastError", "lastHttpStatus", "createdAt", "deliveredAt", "sender": "connector" | NAME | null, ' +
      '"acknowledgedAt": ISO | null}, ...]}, newest first.',
  },
  async run(ctx, { values }) {
    const last = integerValue(values.last, 'last', 1, 10_000) ?? 20;
    const status = choiceValue(values.status, 'status', EVENT_STATUSES);
    return withOperator(ctx, values, async (op) => {
      const all = await ctx.progress(`reading the delivery log from ${op.where}`, op.listEvents(status));
      const events = all.slice(0, last);
      ctx.result({ events }, () => {
        if (events.length === 0) return `No events${status ? ` with status ${status}` : ''} (${op.where}).\n`;
        const more = all.length > last ? `(the ${plural(last, 'newest event')} of ${all.length}; --last N for more)\n` : '';
        return table(['EVENT', 'STATUS', 'ATTEMPTS', 'LAST ERROR', 'CREATED', 'DELIVERED', 'SENDER', 'READ'], events.map(row)) + more;
      });
      return 0;
    });
  },
});

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
