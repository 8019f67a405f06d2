/**
 * `dm-dot redrive`: gives dead-lettered events another round of the retry schedule.
 *
 * - Local, server running: asks the server (admin route), which moves `<state dir>/dead-letter/*`
 *   back into its queue and delivers them at once. Safe while it runs: the server does the move.
 * - Local, no server: moves the files itself; the next `npm start` delivers them.
 * - `--aws`: starts an SQS message move task from the dead-letter queue to the delivery queue and
 *   waits for it, reporting how many moved. The destination is given explicitly: dm-dot's worker
 *   puts a failed event into the DLQ itself (SendMessage with a `reason`), so SQS knows no
 *   "original source queue" for it. The moved copies keep their attributes; `reason` marks them
 *   as redriven for the worker.
 *   https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_StartMessageMoveTask.html
 *   https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_ListMessageMoveTasksResultEntry.html
 *
 * Deliberately not here: choosing which events to redrive (all or nothing, as SQS does), and
 * cancelling a move task (aws sqs cancel-message-move-task).
 */
import { resolve } from 'node:path';
import {
  GetQueueAttributesCommand,
  ListMessageMoveTasksCommand,
  StartMessageMoveTaskCommand,
  type ListMessageMoveTasksResultEntry,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import { redriveDeadLetters } from '../adapters/file-queue';
import { AWS_OPTIONS, OperationError, parse, wantsAws, withProgress, type CliIo, type Command } from './common';
import { awsResources, describeAwsError, localAccess, openStateDir, ServerGone, sqsClient } from './operator';

const HELP = `Usage: dm-dot redrive [--json] [--aws ...]

Moves every dead-lettered event back for another round of the retry schedule
(events whose subscription has ended are then dropped, not sent).

Locally: asks the running server to redrive and deliver at once; with no server
running, moves the files in <state dir>/dead-letter back into <state dir>/queue
for the next npm start.

With --aws: starts an SQS message move task from the dead-letter queue to the
delivery queue and waits until it ends, reporting how many messages moved.
Ctrl-C stops waiting; the task goes on.

Options:
  --json            print JSON
  --aws             redrive the AWS stack's dead-letter queue
  --stack NAME      the stack whose outputs name the queues (default DmDot)
  --region R        AWS region (default: AWS_REGION)
  --queue-url URL   the delivery queue (or DMDOT_QUEUE_URL)
  --dlq-url URL     the dead-letter queue (or DMDOT_DLQ_URL)
  -h, --help        this help
`;

/** How often the move task is polled; a test may shorten it. */
export const movePoll = { intervalMs: 2000 };

export const redriveCommand: Command = {
  name: 'redrive',
  summary: 'move dead letters back for another round (local, or --aws)',
  async run(argv: string[], io: CliIo): Promise<number> {
    const { values } = parse(argv, AWS_OPTIONS);
    if (values.help) {
      io.out(HELP);
      return 0;
    }
    if (wantsAws(values)) return redriveAws(values, io, !!values.json);
    const access = await localAccess(io);
    let moved: number | undefined;
    if (access.server) {
      try {
        moved = (await withProgress(io, 'redriving', access.server.call<{ moved: number }>('POST', '/admin/redrive'))).moved;
      } catch (error) {
        if (!(error instanceof ServerGone)) throw error;
      }
    }
    if (moved !== undefined) {
      if (values.json) io.out(`${JSON.stringify({ moved, deliveredBy: 'running server' })}\n`);
      else io.out(`Moved ${moved} dead letter(s) back; the running server at ${access.server!.url} is delivering them now.\n`);
      return 0;
    }
    await openStateDir(access.stateDir);
    moved = await redriveDeadLetters(access.stateDir);
    if (values.json) io.out(`${JSON.stringify({ moved, deliveredBy: 'next start' })}\n`);
    else io.out(`Moved ${moved} dead letter(s) from ${resolve(access.stateDir, 'dead-letter')} back to the queue; the next npm start delivers them.\n`);
    return 0;
  },
};

async function queueAttributes(client: SQSClient, queueUrl: string, names: ('QueueArn' | 'ApproximateNumberOfMessages')[]) {
  try {
    const { Attributes } = await client.send(new GetQueueAttributesCommand({ QueueUrl: queueUrl, AttributeNames: names }));
    return Attributes ?? {};
  } catch (error) {
    throw new OperationError(`could not read queue ${queueUrl}: ${describeAwsError(error)}`);
  }
}

async function redriveAws(values: Parameters<typeof awsResources>[0], io: CliIo, json: boolean): Promise<number> {
  const { region, queueUrl, deadLetterQueueUrl } = await awsResources(values, io, ['queueUrl', 'deadLetterQueueUrl']);
  const client = sqsClient(io, region);
  const dlq = await queueAttributes(client, deadLetterQueueUrl!, ['QueueArn', 'ApproximateNumberOfMessages']);
  const queue = await queueAttributes(client, queueUrl!, ['QueueArn']);
  if (!dlq.QueueArn || !queue.QueueArn) throw new OperationError('the queues did not report their ARNs');
  const waiting = Number(dlq.ApproximateNumberOfMessages ?? '0');
  if (waiting === 0) {
    if (json) io.out(`${JSON.stringify({ moved: 0, status: 'NOTHING_TO_MOVE' })}\n`);
    else io.out('The dead-letter queue is empty: nothing to redrive.\n');
    return 0;
  }
  let taskHandle: string | undefined;
  try {
    ({ TaskHandle: taskHandle } = await client.send(new StartMessageMoveTaskCommand({ SourceArn: dlq.QueueArn, DestinationArn: queue.QueueArn })));
  } catch (error) {
    // For example a move task already running on this queue (one at a time per queue).
    throw new OperationError(`could not start the move task: ${describeAwsError(error)}`);
  }
  if (!json) io.err(`dm-dot: moving about ${waiting} message(s) from the dead-letter queue to the delivery queue...\n`);
  const task = await withProgress(io, 'waiting for the move task', waitForTask(client, dlq.QueueArn, taskHandle, io));
  const moved = task.ApproximateNumberOfMessagesMoved ?? 0;
  if (json) {
    io.out(`${JSON.stringify({ moved, toMove: task.ApproximateNumberOfMessagesToMove ?? null, status: task.Status, failureReason: task.FailureReason ?? null })}\n`);
  }
  if (task.Status !== 'COMPLETED') {
    throw new OperationError(`the move task ended ${task.Status}${task.FailureReason ? `: ${task.FailureReason}` : ''} after moving ${moved} message(s)`);
  }
  if (!json) io.out(`Moved ${moved} message(s) from the dead-letter queue back to the delivery queue.\n`);
  return 0;
}

async function waitForTask(client: SQSClient, sourceArn: string, taskHandle: string | undefined, io: CliIo): Promise<ListMessageMoveTasksResultEntry> {
  for (;;) {
    let results: ListMessageMoveTasksResultEntry[];
    try {
      ({ Results: results = [] } = await client.send(new ListMessageMoveTasksCommand({ SourceArn: sourceArn, MaxResults: 10 })));
    } catch (error) {
      throw new OperationError(`could not read the move task: ${describeAwsError(error)}`);
    }
    const task = results.find((t) => taskHandle === undefined || t.TaskHandle === taskHandle) ?? results[0];
    if (!task) throw new OperationError('the move task is not listed');
    if (task.Status !== 'RUNNING' && task.Status !== 'CANCELLING') return task;
    await new Promise<void>((done, fail) => {
      const timer = setTimeout(done, movePoll.intervalMs);
      io.signal?.addEventListener('abort', () => {
        clearTimeout(timer);
        fail(new OperationError(`stopped waiting; the move task goes on (${task.ApproximateNumberOfMessagesMoved ?? 0} moved so far)`));
      }, { once: true });
    });
  }
}
