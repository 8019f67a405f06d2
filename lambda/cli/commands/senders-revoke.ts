/**
 * `dm-dot senders revoke NAME`: the sender's key answers 401 from the next request on (every
 * request reads its SENDER# item). The name stays taken, so the log's sender names stay unique.
 */
import { Command } from 'commander';
import type { AwsFlags } from '../aws/session';
import { withSenders } from '../backings';
import { confirm } from '../confirm';
import type { Context } from '../context';
import { OperationError } from '../errors';
import { awsTableOptions, withJson, withOptions, yesOption } from '../options';
import { senderNameArgument, senderNameOf } from './senders-add';

export function command(ctx: Context): Command {
  const cmd = new Command('revoke')
    .summary("stop a sender's key at once")
    .description(
      "Stop a sender's key at once.\n\n" +
        'Its next request gets 401. Events it already sent are not touched. The name stays taken (and listed as revoked). ' +
        'Asks for confirmation on a terminal; without one, pass --yes. Exit 1 when there is no such sender or it is revoked already.',
    )
    .addArgument(senderNameArgument());
  withOptions(cmd, yesOption(), ...awsTableOptions());
  withJson(cmd, '{"revoked": true | false, "name", "why"?: "not_found" | "already_revoked"} (revoked false: exit 1).');
  return cmd.action(async (word: string, options: { yes?: boolean; aws?: boolean } & AwsFlags) => {
    const name = senderNameOf(word);
    await withSenders(ctx, options, async ({ where, senders }) => {
      await confirm(ctx, { yes: options.yes, what: 'revoked', question: `Revoke sender ${name} in ${where}? Its key stops working at once.` });
      const result = await ctx.progress(`revoking sender ${name}`, senders.revoke(name));
      if (!result.revoked) {
        if (ctx.json) ctx.printJson(result);
        throw new OperationError(
          result.why === 'already_revoked' ? `sender ${name} is revoked already` : `no sender named ${name} (${where})`,
          result.why ?? 'not_found',
        );
      }
      ctx.result(result, `Revoked sender ${name}: its key gets 401 from now on.\n`);
    });
  });
}
