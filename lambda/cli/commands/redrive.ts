/**
 * `dm-dot redrive`: an admin action, never reachable with the shared API key alone. Locally it says
 * which dead letters will be dropped instead, and `events resend` for each: docs/decisions.md,
 * "`redrive` names the dead letters of an ended subscription" (and the case it misjudges, which is
 * why the text says "were queued for", not "will never arrive").
 *
 * With `--aws`: an SQS message move task from the dead-letter queue to the delivery queue, waited
 * for until it ends. The destination is given explicitly: dm-dot's worker puts a failed event into
 * the DLQ itself (SendMessage with a `reason`), so SQS knows no "original source queue" for it. The
 * moved copies keep their attributes; `reason` marks them as redriven.
 * https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_StartMessageMoveTask.html
 * https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_ListMessageMoveTasksResultEntry.html
 *
 * Deliberately not here: choosing which events to redrive on AWS (all or nothing, as SQS does; one
 * event is `events resend`), and cancelling a move task (aws sqs cancel-message-move-task).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { ListMessageMoveTasksResultEntry } from '@aws-sdk/client-sqs';
import { EventStatus } from '../../core/protocol';
import type { EventView, SubscriptionView } from '../../operator/views';
import { type AwsSession, orFail } from '../aws/session';
import { onBacking } from '../backings';
import type { Context } from '../context';
import { OperationError } from '../errors';
import type { SendsCommands } from '../io';
import type { LocalOperator } from '../local-server/local-operator';
import { awsStackOptions, define, dlqOption, queueOption } from '../options';
import { plural, shortTime } from '../output';

/** How often the move task is polled; a test may shorten it. */
export const movePoll = { intervalMs: 2000 };

/** How many resend lines the text lists. */
const SHOWN = 10;

/** The failed events queued for a subscription that has ended: all of them with none live, else those created before the live one began. */
export function endedSubscription(failed: readonly EventView[], subscription: SubscriptionView | null): string[] {
  const since = subscription ? Date.parse(subscription.createdAt) : Infinity;
  return failed.filter((e) => Date.parse(e.createdAt) < since).map((e) => e.eventId);
}

export const command = (ctx: Context) =>
  define({
    name: 'redrive',
    summary: 'move the dead letters back for another round',
    details:
      'Every dead-lettered event gets another round of the retry schedule; events whose subscription has ended are then dropped, not sent. ' +
      'Locally: through the running server, which delivers them at once; with no server running, in the database itself, and the next npm start ' +
      'delivers them. ' +
      'With --aws: an SQS message move task from the dead-letter queue to the delivery queue, waited for until it ends (Ctrl-C stops waiting; the ' +
      'task goes on). ' +
      'One event alone: dm-dot events resend evt_….',
    options: [...awsStackOptions(), queueOption(), dlqOption()],
    json:
      'locally {"moved": N, "via": "server" | "database", "subscriptionId": "sub_…" | null, "endedSubscription": [evt_…, ...] (queued for a ' +
      'subscription that has ended: dropped, not sent)}; with --aws {"moved": N, "toMove": N | null, "status": "COMPLETED" | "FAILED" | "CANCELLED" ' +
      '| "NOTHING_TO_MOVE", "failureReason": string | null}.',
    run: (values) =>
      onBacking(
        ctx,
        values,
        (op) => redriveLocal(ctx, op),
        (session) => redriveOnAws(ctx, session),
      ),
  });

async function redriveOnAws(ctx: Context, session: AwsSession): Promise<void> {
  const [queueUrl, deadLetterQueueUrl] = [await session.queueUrl(), await session.deadLetterQueueUrl()];
  const client = await session.client('sqs');
  const { StartMessageMoveTaskCommand } = await import('@aws-sdk/client-sqs');
  const dlq = await session.queueAttributes(deadLetterQueueUrl, ['QueueArn', 'ApproximateNumberOfMessages']);
  const queue = await session.queueAttributes(queueUrl, ['QueueArn']);
  if (!dlq.QueueArn || !queue.QueueArn) throw new OperationError('the queues did not report their ARNs', 'queue_unreadable');
  const waiting = Number(dlq.ApproximateNumberOfMessages ?? '0');
  if (waiting === 0) {
    return ctx.result({ moved: 0, toMove: 0, status: 'NOTHING_TO_MOVE', failureReason: null }, 'The dead-letter queue is empty: nothing to redrive.\n');
  }
  // Refused, for example, while a move task runs on this queue (one at a time per queue).
  const { TaskHandle: taskHandle } = await orFail(
    () => client.send(new StartMessageMoveTaskCommand({ SourceArn: dlq.QueueArn, DestinationArn: queue.QueueArn })),
    (why) => `could not start the move task: ${why}`,
    'move_refused',
  );
  ctx.note(`moving about ${waiting} message(s) from the dead-letter queue to the delivery queue...`);
  const task = await waitForTask(ctx, client, dlq.QueueArn, taskHandle);
  const result = {
    moved: task.ApproximateNumberOfMessagesMoved ?? 0,
    toMove: task.ApproximateNumberOfMessagesToMove ?? null,
    status: task.Status ?? 'UNKNOWN',
    failureReason: task.FailureReason ?? null,
  };
  if (result.status !== 'COMPLETED') {
    const reason = result.failureReason ? `: ${result.failureReason}` : '';
    ctx.refuse(result, `the move task ended ${result.status}${reason} after moving ${plural(result.moved, 'message')}`, 'move_failed');
  }
  ctx.result(result, `Moved ${plural(result.moved, 'message')} from the dead-letter queue back to the delivery queue.\n`);
}

async function redriveLocal(ctx: Context, op: LocalOperator): Promise<void> {
  const [failed, subscription] = await ctx.progress(
    `reading the dead letters' events from ${op.where}`,
    Promise.all([op.listEvents(EventStatus.failed), op.showSubscription()]),
  );
  const moved = await ctx.progress(`redriving through ${op.where}`, op.redrive());
  const ended = moved === 0 ? [] : endedSubscription(failed, subscription);
  ctx.result({ moved, via: op.via, subscriptionId: subscription?.id ?? null, endedSubscription: ended }, () => {
    if (moved === 0) return `No dead letters: nothing to redrive (${op.where}).\n`;
    const live = moved - Math.min(ended.length, moved);
    const them = live === moved ? 'them' : `${live} of them`;
    const head =
      op.via === 'server'
        ? live > 0
          ? `Moved ${moved} dead letter(s) back; the running server at ${op.server!.url} is delivering ${them} now (dm-dot events follows them).`
          : `Moved ${moved} dead letter(s) back to the running server at ${op.server!.url}.`
        : live > 0
          ? `Moved ${moved} dead letter(s) back in ${op.where}; the next npm start delivers ${them}.`
          : `Moved ${moved} dead letter(s) back in ${op.where}.`;
    const lines = [head];
    if (ended.length > 0) {
      const they = ended.length === 1 ? 'it is' : 'they are';
      lines.push(
        subscription
          ? `${plural(ended.length, 'of them was', 'of them were')} queued for an earlier subscription, which has ended (the dot was restarted, ` +
              `cleared or replaced; the live one began at ${shortTime(subscription.createdAt)}): ${they} dropped, not sent.`
          : `No dot is subscribed now, so ${they} dropped, not sent (${ended.length === 1 ? 'its' : 'their'} subscription ended).`,
        `To give one to the ${subscription ? 'live' : 'next'} subscription, resend it${subscription ? '' : ' once a dot has subscribed'}:`,
        ...ended.slice(0, SHOWN).map((id) => `  dm-dot events resend ${id}`),
        ...(ended.length > SHOWN ? [`  (and ${ended.length - SHOWN} more: dm-dot events --status dropped lists them)`] : []),
      );
    }
    return `${lines.join('\n')}\n`;
  });
}

async function waitForTask(ctx: Context, client: SendsCommands, sourceArn: string, taskHandle: string | undefined): Promise<ListMessageMoveTasksResultEntry> {
  const { ListMessageMoveTasksCommand } = await import('@aws-sdk/client-sqs');
  for (;;) {
    const { Results: results = [] }: { Results?: ListMessageMoveTasksResultEntry[] } = await orFail(
      () => client.send(new ListMessageMoveTasksCommand({ SourceArn: sourceArn, MaxResults: 10 })),
      (why) => `could not read the move task: ${why}`,
      'aws_error',
    );
    const task = results.find((t) => taskHandle === undefined || t.TaskHandle === taskHandle) ?? results[0];
    if (!task) throw new OperationError('the move task is not listed', 'aws_error');
    if (task.Status !== 'RUNNING' && task.Status !== 'CANCELLING') return task;
    try {
      await sleep(movePoll.intervalMs, undefined, ctx.io.signal ? { signal: ctx.io.signal } : {});
    } catch {
      throw new OperationError(`stopped waiting; the move task goes on (${task.ApproximateNumberOfMessagesMoved ?? 0} moved so far)`, 'interrupted');
    }
  }
}
