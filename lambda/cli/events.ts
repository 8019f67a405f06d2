/**
 * `dm-dot events [--last N] [--status S]`: the delivery log, newest first (id, status, attempts,
 * last error category, created, delivered). Read-only: from the running local server, a stopped
 * one's state directory, or with `--aws` the stack's table (a paged Scan, operator-only).
 *
 * Deliberately not here: event bodies (the store keeps none: messages are not stored), or any
 * write.
 */
import { EVENT_STATUSES, isEventStatus, type EventView } from '../local/admin';
import { AWS_OPTIONS, integerOption, parse, shortTime, table, UsageError, wantsAws, withProgress, type CliIo, type Command } from './common';
import { awsOperator, localOperator } from './operator';

const HELP = `Usage: dm-dot events [--last N] [--status S] [--json] [--aws ...]

The delivery log, newest first: event id, status, attempts, last error category,
created and delivered times.

Options:
  --last N        show the N newest events (default 20, 1..10000)
  --status S      only events in status S: ${EVENT_STATUSES.join(', ')}
  --json          print a JSON array instead of a table
  --aws           read the AWS stack's table (read-only; a paged Scan)
  --stack NAME    the stack whose outputs name the table (default DmDot)
  --region R      AWS region (default: AWS_REGION)
  --table NAME    the table name (or DMDOT_TABLE), instead of the stack outputs
  -h, --help      this help

Locally it asks the running server (npm start) or, when none runs, reads the
state directory (DMDOT_STATE_DIR, default .dm-dot).
`;

export const eventsCommand: Command = {
  name: 'events',
  summary: 'the delivery log (local, or --aws)',
  async run(argv: string[], io: CliIo): Promise<number> {
    const { values } = parse(argv, { last: { type: 'string' }, status: { type: 'string' }, ...AWS_OPTIONS });
    if (values.help) {
      io.out(HELP);
      return 0;
    }
    const last = integerOption(values.last, 'last', 1, 10_000) ?? 20;
    const status = values.status;
    if (status !== undefined && !isEventStatus(status)) throw new UsageError(`--status must be one of ${EVENT_STATUSES.join(', ')}`);
    const operator = wantsAws(values) ? await awsOperator(values, io) : await localOperator(io);
    const events = (await withProgress(io, `reading events from ${operator.where}`, operator.events(status))).slice(0, last);
    if (values.json) {
      io.out(`${JSON.stringify(events, null, 2)}\n`);
      return 0;
    }
    if (events.length === 0) {
      io.out(`No events${status ? ` with status ${status}` : ''} (${operator.where}).\n`);
      return 0;
    }
    io.out(table(['EVENT', 'STATUS', 'ATTEMPTS', 'LAST ERROR', 'CREATED', 'DELIVERED'], events.map(row)));
    return 0;
  },
};

function row(e: EventView): string[] {
  return [e.eventId, e.status, String(e.attempts), e.lastError ?? '-', shortTime(e.createdAt), shortTime(e.deliveredAt)];
}
