/** `dm-dot events show evt_…`: one event of the delivery log and its own log. */
import { Argument } from 'commander';
import type { EventDetail, LogEntryView } from '../../operator/views';
import { EVENT_ID, withOperator } from '../backings';
import type { Context } from '../context';
import { OperationError, UsageError } from '../errors';
import { awsTableOptions, define } from '../options';
import { fields, shortTime, table } from '../output';

export const eventIdArgument = () => new Argument('<evt_…>', 'the event id, as send, the dot and dm-dot events print it (evt_ and 32 hex digits)');

export function eventIdOf(word: string | undefined): string {
  if (!word || !EVENT_ID.test(word)) throw new UsageError(`the event id must be evt_ followed by 32 hex digits, got "${(word ?? '').slice(0, 80)}"`);
  return word;
}

export const command = (ctx: Context) =>
  define({
    name: 'show',
    summary: 'one event and its attempts',
    details:
      'Every attempt (one POST to the dot) with its time, outcome, HTTP status class, duration and whether it counted against the retry ' +
      'schedule, and the notes: resent, redriven (each starts a new round at attempt 1), cancelled, and stranded or receive_limit for a failure ' +
      'no attempt made. The attempts are numbered as the server log and dm-dot dot number them. Never the message or a header.',
    argument: eventIdArgument(),
    options: awsTableOptions(),
    json:
      '{"event": {"eventId", "status", "attempts", "lastError", "lastHttpStatus", "createdAt", "deliveredAt", "sender": "connector" | NAME | null, ' +
      '"acknowledgedAt": ISO | null, "resendable", ' +
      '"log": [{"at", "kind": "attempt", "outcome", "statusClass", "durationMs", "counted"} | {"at", "kind": "note", "note"}]}}',
    async run(values, word) {
      const eventId = eventIdOf(word);
      await withOperator(ctx, values, async (op) => {
        const event = await ctx.progress(`reading ${eventId} from ${op.where}`, op.showEvent(eventId));
        if (!event) throw new OperationError(`no event ${eventId} in the delivery log (${op.where}); events are kept 15 days`, 'not_found');
        ctx.result({ event }, () => describe(event));
      });
    },
  });

function entryRow(entry: LogEntryView): string[] {
  if (entry.kind === 'note') return [shortTime(entry.at), entry.note, '-', '-', '-'];
  return [shortTime(entry.at), entry.outcome, entry.statusClass ?? '-', `${entry.durationMs} ms`, entry.counted ? 'yes' : 'no (cut short by the wait window)'];
}

function describe(event: EventDetail): string {
  const summary = fields([
    ['event', event.eventId],
    ['status', event.status],
    ['sender', event.sender ?? '-'],
    // A resend or redrive starts a new round of the schedule: the count is this round's, the log holds every round.
    [
      'attempts',
      event.log.some((e) => e.kind === 'note' && (e.note === 'resent' || e.note === 'redriven'))
        ? `${event.attempts} in this round (the log below lists every round)`
        : String(event.attempts),
    ],
    ['last error', event.lastError ?? '-'],
    ['last HTTP status', event.lastHttpStatus === null ? '-' : String(event.lastHttpStatus)],
    ['created', shortTime(event.createdAt)],
    ['delivered', shortTime(event.deliveredAt)],
    ['read', event.acknowledgedAt ? `${shortTime(event.acknowledgedAt)} (acknowledged by the dot)` : '-'],
    ['resendable', event.resendable ? `yes (dm-dot events resend ${event.eventId})` : 'no'],
  ]);
  const log = event.log.length === 0 ? 'No attempts yet.\n' : table(['AT', 'OUTCOME', 'STATUS', 'DURATION', 'COUNTED'], event.log.map(entryRow));
  return `${summary}\n${log}`;
}
