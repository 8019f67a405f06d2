/**
 * `redrive --aws`: an SQS message move task from the dead-letter queue to the delivery queue,
 * waited for until it ends. The destination is given explicitly: dm-dot's worker puts a failed
 * event into the DLQ itself (SendMessage with a `reason`), so SQS knows no "original source
 * queue" for it. The moved copies keep their attributes; `reason` marks them as redriven.
 * https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_StartMessageMoveTask.html
 * https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_ListMessageMoveTasksResultEntry.html
 *
 * Deliberately not here: choosing which events to redrive (all or nothing, as SQS does; one event
 * is `events resend`), and cancelling a move task (aws sqs cancel-message-move-task).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { ListMessageMoveTasksResultEntry } from '@aws-sdk/client-sqs';
import type { Context } from '../context';
import { OperationError } from '../errors';
import type { SendsCommands } from '../io';
import { type AwsSession, orFail } from './session';

/** How often the move task is polled; a test may shorten it. */
export const movePoll = { intervalMs: 2000 };

export async function queueAttributes(client: SendsCommands, queueUrl: string, names: string[]): Promise<Record<string, string>> {
  const { GetQueueAttributesCommand } = await import('@aws-sdk/client-sqs');
  const { Attributes } = await orFail(
    () => client.send(new GetQueueAttributesCommand({ QueueUrl: queueUrl, AttributeNames: names as never })),
    (why) => `could not read queue ${queueUrl}: ${why}`,
    'queue_unreadable',
  );
  return (Attributes ?? {}) as Record<string, string>;
}

export async function redriveAws(ctx: Context, session: AwsSession) {
  const [queueUrl, deadLetterQueueUrl] = [await session.queueUrl(), await session.deadLetterQueueUrl()];
  const client = await session.client('sqs');
  const { StartMessageMoveTaskCommand } = await import('@aws-sdk/client-sqs');
  const dlq = await queueAttributes(client, deadLetterQueueUrl, ['QueueArn', 'ApproximateNumberOfMessages']);
  const queue = await queueAttributes(client, queueUrl, ['QueueArn']);
  if (!dlq.QueueArn || !queue.QueueArn) throw new OperationError('the queues did not report their ARNs', 'queue_unreadable');
  const waiting = Number(dlq.ApproximateNumberOfMessages ?? '0');
  if (waiting === 0) return { moved: 0, toMove: 0, status: 'NOTHING_TO_MOVE', failureReason: null };
  // Refused, for example, while a move task runs on this queue (one at a time per queue).
  const { TaskHandle: taskHandle } = await orFail(
    () => client.send(new StartMessageMoveTaskCommand({ SourceArn: dlq.QueueArn, DestinationArn: queue.QueueArn })),
    (why) => `could not start the move task: ${why}`,
    'move_refused',
  );
  ctx.note(`moving about ${waiting} message(s) from the dead-letter queue to the delivery queue...`);
  const task = await waitForTask(ctx, client, dlq.QueueArn, taskHandle);
  return {
    moved: task.ApproximateNumberOfMessagesMoved ?? 0,
    toMove: task.ApproximateNumberOfMessagesToMove ?? null,
    status: task.Status ?? 'UNKNOWN',
    failureReason: task.FailureReason ?? null,
  };
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
      await sleep(movePoll.intervalMs, undefined, ctx.signal ? { signal: ctx.signal } : {});
    } catch {
      throw new OperationError(`stopped waiting; the move task goes on (${task.ApproximateNumberOfMessagesMoved ?? 0} moved so far)`, 'interrupted');
    }
  }
}
