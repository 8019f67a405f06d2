/**
 * `dm-dot subscription clear`: ends the live subscription now, the way out of the single-subscriber
 * lock-out (a dot removed and added again in ChatGPT subscribes with a new callback URL and is
 * refused with -32000 until the old subscription expires, up to 7 days). Asks first (`--yes` to
 * skip). Only the subscription shown is cleared: one that replaced it meanwhile is left alone.
 * An admin action: the admin token locally, the operator's IAM credentials with `--aws`.
 */
import { Command } from 'commander';
import type { AwsFlags } from '../aws/session';
import { withOperator } from '../backings';
import { confirm } from '../confirm';
import type { Context } from '../context';
import { OperationError } from '../errors';
import { awsTableOptions, withJson, withOptions, yesOption } from '../options';
import { describeSubscription } from './subscription-show';

export function command(ctx: Context): Command {
  const cmd = new Command('clear')
    .summary('end the live subscription now (the way out of a stuck one)')
    .description(
      'End the live subscription now (the way out of a stuck one).\n\n' +
        'Another callback (a dot added again in ChatGPT) can then subscribe at once; the queued deliveries of the cleared one are dropped. ' +
        'Asks for confirmation on a terminal; without one, pass --yes. Exit 1 when nothing is subscribed, when not confirmed, or when the ' +
        'subscription changed meanwhile.',
    );
  withOptions(cmd, yesOption(), ...awsTableOptions());
  withJson(cmd, '{"cleared": true | false, "id": "sub_…" | null} (cleared false: exit 1).');
  return cmd.action(async (values: { yes?: boolean; aws?: boolean } & AwsFlags) => {
    await withOperator(ctx, values, async (op) => {
      const current = await ctx.progress(`reading the subscription from ${op.where}`, op.showSubscription());
      if (!current) {
        if (ctx.json) ctx.printJson({ cleared: false, id: null });
        throw new OperationError(`nothing to clear: no live subscription (${op.where})`, 'nothing_to_clear');
      }
      await confirm(ctx, {
        yes: values.yes,
        what: 'cleared',
        before: describeSubscription(current),
        question: `End subscription ${current.id} (callback host ${current.callbackHost})? Its queued deliveries are dropped.`,
      });
      const result = await ctx.progress('clearing the subscription', op.clearSubscription(current.id));
      if (!result.cleared) {
        if (ctx.json) ctx.printJson(result);
        // Between the read and the conditional delete, it expired or another callback took over.
        throw new OperationError('not cleared: the subscription changed meanwhile (expired or replaced); look again with dm-dot subscription show', 'changed');
      }
      ctx.result(result, `Cleared subscription ${result.id}. A dot can subscribe now; the cleared one's queued deliveries are dropped.\n`);
    });
  });
}
