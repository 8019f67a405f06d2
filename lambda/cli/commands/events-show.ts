/**
 * `dm-dot events show evt_…`: one event of the delivery log and its own log: every POST (time,
 * outcome, HTTP status class, duration, counted against the schedule or not) and every operator
 * or task action (resent, redriven, cancelled), or failure no attempt made (stranded, receive_limit).
 * Never the message or a header: the log keeps none.
 */
import { defineCommand } from '../command';
import { OperationError, UsageError } from '../errors';
import { AWS_TABLE_OPTIONS, EVENT_ID, withOperator } from '../operator';
import { fields, shortTime, table } from '../output';
import type { EventDetail, LogEntryView } from '../../operator/views';

export const EVENT_ID_ARGUMENT = {
  name: 'evt_…',
  description: 'the event id, as send, the dot and dm-dot events print it (evt_ and 32 hex digits)',
} as const;

export function eventIdOf(word: string | undefined): string {
  if (!word || !EVENT_ID.test(word)) throw new UsageError(`the event id must be evt_ followed by 32 hex digits, got "${(word ?? '').slice(0, 80)}"`);
  return word;
}

export const command = defineCommand({
  spec: {
    name: 'events show',
    summary: 'one event and its attempts',
    description:
      'Every attempt with its time, outcome, HTTP status class, duration and whether it counted against the retry schedule (an inline attempt cut ' +
      'short by the wait window does not), and the notes: resent, redriven, cancelled, and stranded or receive_limit for a failure no attempt ' +
      'made. Never the message or a header.',
    positionals: [EVENT_ID_ARGUMENT],
    options: { ...AWS_TABLE_OPTIONS },
    json:
      '{"event": {"eventId", "status", "attempts", "lastError", "lastHttpStatus", "createdAt", "deliveredAt", "sender": "connector" | NAME | null, ' +
      '"acknowledgedAt": ISO | null, "resendable", ' +
      '"log": [{"at", "kind": "attempt", "outcome", "statusClass", "durationMs", "counted"} | {"at", "kind": "note", "note"}]}}',
  },
  async run(ctx, { values, positionals }) {
    const eventId = eventIdOf(positionals[0]);
    return withOperator(ctx, values, async (op) => {
      const event = await ctx.progress(`reading ${eventId} from ${op.where}`, op.showEvent(eventId));
      if (!event) throw new OperationError(`no event ${eventId} in the delivery log (${op.where}); events are kept 15 days`, 'not_found');
      ctx.result({ event }, () => describe(event));
      return 0;
    });
  },
});

function entryRow(entry: LogEntryView): string[] {
  if (entry.kind === 'note') return [shortTime(entry.at), entry.note, '-', '-', '-'];
  return [shortTime(entry.at), entry.outcome, entry.statusClass ?? '-', `${entry.durationMs} ms`, entry.counted ? 'yes' : 'no (cut short by the wait window)'];
}

export function describe(event: EventDetail): string {
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
