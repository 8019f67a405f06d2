/** `dm-dot senders revoke NAME`: the name stays taken, so the log's sender names stay unique. */
import { withSenders } from '../backings';
import { confirm } from '../confirm';
import type { AwsFlags } from '../aws/session';
import type { Context } from '../context';
import { awsTableOptions, define, yesOption } from '../options';
import { senderNameArgument, senderNameOf } from './senders-add';

export const command = (ctx: Context) =>
  define({
    name: 'revoke',
    summary: "stop a sender's key at once",
    details:
      'Its next request gets 401. Events it already sent are not touched. The name stays taken (and listed as revoked). ' +
      'Asks for confirmation on a terminal; without one, pass --yes. Exit 1 when there is no such sender or it is revoked already.',
    argument: senderNameArgument(),
    options: [yesOption(), ...awsTableOptions()],
    json: '{"revoked": true | false, "name", "why"?: "not_found" | "already_revoked"} (revoked false: exit 1).',
    async run(values: { yes?: boolean } & AwsFlags, word) {
      const name = senderNameOf(word);
      await withSenders(ctx, values, async ({ where, senders }) => {
        await confirm(ctx, { yes: values.yes, what: 'revoked', question: `Revoke sender ${name} in ${where}? Its key stops working at once.` });
        const result = await ctx.progress(`revoking sender ${name}`, senders.revoke(name));
        if (!result.revoked) {
          const why = result.why === 'already_revoked' ? `sender ${name} is revoked already` : `no sender named ${name} (${where})`;
          ctx.refuse(result, why, result.why ?? 'not_found');
        }
        ctx.result(result, `Revoked sender ${name}: its key gets 401 from now on.\n`);
      });
    },
  });
