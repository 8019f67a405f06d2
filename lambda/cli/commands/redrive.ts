/**
 * `dm-dot redrive`: every dead-lettered event back for another round of the retry schedule (an
 * event whose subscription has ended is then dropped, not sent). Locally through the running
 * server (which delivers them at once) or, with none running, the database itself (the next
 * start delivers them); with `--aws` an SQS move task from the dead-letter queue. An admin
 * action: never reachable with the shared API key alone.
 */
import { AWS_STACK_OPTIONS, DLQ_OPTIONS, QUEUE_OPTIONS, wantsAws } from '../args';
import { redriveAws } from '../aws/redrive';
import { withAws } from '../aws/session';
import { defineCommand } from '../command';
import { OperationError } from '../errors';
import { withLocalOperator } from '../local/operator';
import { plural } from '../output';

export const command = defineCommand({
  spec: {
    name: 'redrive',
    summary: 'move the dead letters back for another round',
    description:
      'Every dead-lettered event gets another round of the retry schedule; events whose subscription has ended are then dropped, not sent. ' +
      'Locally: through the running server, which delivers them at once; with no server running, in the database itself, and the next npm start delivers them. ' +
      'With --aws: an SQS message move task from the dead-letter queue to the delivery queue, waited for until it ends (Ctrl-C stops waiting; the task goes on). ' +
      'One event alone: dm-dot events resend evt_….',
    options: { ...AWS_STACK_OPTIONS, ...QUEUE_OPTIONS, ...DLQ_OPTIONS },
    json: 'locally {"moved": N, "via": "server" | "database"}; with --aws {"moved": N, "toMove": N | null, "status": "COMPLETED" | "FAILED" | "CANCELLED" | "NOTHING_TO_MOVE", "failureReason": string | null}.',
  },
  async run(ctx, { values }) {
    if (wantsAws(values)) {
      return withAws(ctx, values, async (session) => {
        const result = await redriveAws(ctx, session);
        if (result.status === 'NOTHING_TO_MOVE') {
          ctx.result(result, 'The dead-letter queue is empty: nothing to redrive.\n');
          return 0;
        }
        if (result.status !== 'COMPLETED') {
          if (ctx.json) ctx.printJson(result);
          throw new OperationError(`the move task ended ${result.status}${result.failureReason ? `: ${result.failureReason}` : ''} after moving ${plural(result.moved, 'message')}`, 'move_failed');
        }
        ctx.result(result, `Moved ${plural(result.moved, 'message')} from the dead-letter queue back to the delivery queue.\n`);
        return 0;
      });
    }
    return withLocalOperator(ctx, async (op) => {
      const moved = await ctx.progress(`redriving through ${op.where}`, op.redrive());
      ctx.result({ moved, via: op.via }, () => {
        if (moved === 0) return `No dead letters: nothing to redrive (${op.where}).\n`;
        return op.via === 'server'
          ? `Moved ${moved} dead letter(s) back; the running server at ${op.server!.url} is delivering them now (dm-dot events follows them).\n`
          : `Moved ${moved} dead letter(s) back in ${op.where}; the next npm start delivers them.\n`;
      });
      return 0;
    });
  },
});
