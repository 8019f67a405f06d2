/**
 * `dm-dot events`: the delivery log, and the group of its actions: `events list` (the same),
 * `events show` (one event and its own log) and `events resend` (an admin action, never reachable
 * with the shared API key alone).
 */
import { Argument, Option } from 'commander';
import { EVENT_ID_PATTERN } from '../../core/identity';
import type { ResendResult } from '../../operator/actions';
import { EVENT_STATUSES, type EventDetail, type EventView, type LogEntryView } from '../../operator/views';
import { withOperator } from '../backings';
import type { AwsFlags } from '../aws/session';
import type { Context } from '../context';
import { OperationError, UsageError } from '../errors';
import { awsTableOptions, choiceValue, define, integerValue, queueOption } from '../options';
import { fields, plural, shortTime, table } from '../output';

/** The fields of an event in the `--json` documents of `events` and `events show`. */
const EVENT_FIELDS =
  '"eventId", "status", "attempts", "lastError", "lastHttpStatus", "createdAt", "deliveredAt", ' +
  '"sender": "connector" | NAME | null, "acknowledgedAt": ISO | null';

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
    json: `{"events": [{${EVENT_FIELDS}}, ...]}, newest first.`,
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

const eventIdArgument = () => new Argument('<evt_…>', 'the event id, as send, the dot and dm-dot events print it (evt_ and 32 hex digits)');

function eventIdOf(word: string | undefined): string {
  if (!word || !EVENT_ID_PATTERN.test(word)) throw new UsageError(`the event id must be evt_ followed by 32 hex digits, got "${(word ?? '').slice(0, 80)}"`);
  return word;
}

const show = (ctx: Context) =>
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
      `{"event": {${EVENT_FIELDS}, "resendable", ` +
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

const WHY: Record<Extract<ResendResult, { resent: false }>['why'], (id: string) => string> = {
  not_found: (id) => `no event ${id} in the delivery log; events are kept 15 days`,
  not_settled: (id) => `${id} is still queued: its retries continue (dm-dot events show ${id})`,
  delivered: (id) => `${id} was delivered already; nothing to resend`,
  no_bytes: (id) => `${id} has no kept bytes to send again (it was recorded before resending existed)`,
  no_subscription: (id) => `there is no live subscription to send ${id} to: connect the dot first (dm-dot dot, or the dot in ChatGPT)`,
  changed: (id) => `${id} changed while it was being resent; look again with dm-dot events show ${id}`,
};

const resend = (ctx: Context) =>
  define({
    name: 'resend',
    summary: 'give one failed or dropped event another round',
    details:
      'A new round of the retry schedule, with the same event id and the same bytes, to the subscription that is live now. ' +
      'An admin action: locally through the running server (its admin token) or, when none runs, the database; with --aws the table and the ' +
      'delivery queue. Queued and delivered events are left alone.',
    argument: eventIdArgument(),
    options: [...awsTableOptions(), queueOption()],
    json:
      '{"resent": true, "eventId", "subscriptionId"} or {"resent": false, "eventId", "why": "not_found" | "not_settled" | "delivered" | "no_bytes" | ' +
      '"no_subscription" | "changed"} (exit 1).',
    async run(values, word) {
      const eventId = eventIdOf(word);
      await withOperator(ctx, values, async (op) => {
        const result = await ctx.progress(`resending ${eventId} through ${op.where}`, op.resendEvent(eventId));
        if (!result.resent) ctx.refuse(result, `not resent: ${WHY[result.why](eventId)}`, result.why);
        ctx.result(
          result,
          `Resent ${eventId} to subscription ${result.subscriptionId}: a new round of the retry schedule, same id and bytes (dm-dot events show ` +
            `${eventId} follows it).\n`,
        );
      });
    },
  });

export function command(ctx: Context) {
  return list(ctx, 'events').addCommand(list(ctx, 'list')).addCommand(show(ctx)).addCommand(resend(ctx));
}
