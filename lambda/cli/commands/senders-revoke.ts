/**
 * `dm-dot senders revoke NAME`: the sender's key answers 401 from the next request on (every
 * request reads its SENDER# item). The name stays taken, so the log's sender names stay unique.
 */
import { YES_OPTION } from '../args';
import { confirm } from '../confirm';
import { defineCommand } from '../command';
import { OperationError } from '../errors';
import { AWS_TABLE_OPTIONS } from '../operator';
import { withSenders } from '../senders';
import { SENDER_NAME_ARGUMENT, senderNameOf } from './senders-add';

export const command = defineCommand({
  spec: {
    name: 'senders revoke',
    summary: "stop a sender's key at once",
    description:
      'Its next request gets 401. Events it already sent are not touched. The name stays taken (and listed as revoked). ' +
      'Asks for confirmation on a terminal; without one, pass --yes. Exit 1 when there is no such sender or it is revoked already.',
    positionals: [SENDER_NAME_ARGUMENT],
    options: { ...YES_OPTION, ...AWS_TABLE_OPTIONS },
    json: '{"revoked": true | false, "name", "why"?: "not_found" | "already_revoked"} (revoked false: exit 1).',
  },
  async run(ctx, { values, positionals }) {
    const name = senderNameOf(positionals[0]);
    return withSenders(ctx, values, async ({ where, senders }) => {
      await confirm(ctx, { yes: values.yes, what: 'revoked', question: `Revoke sender ${name} in ${where}? Its key stops working at once.` });
      const result = await ctx.progress(`revoking sender ${name}`, senders.revoke(name));
      if (!result.revoked) {
        if (ctx.json) ctx.printJson(result);
        throw new OperationError(
          result.why === 'already_revoked' ? `sender ${name} is revoked already` : `no sender named ${name} (${where})`,
          result.why ?? 'not_found',
        );
      }
      ctx.result(result, `Revoked sender ${name}: its key gets 401 from now on.\n`);
      return 0;
    });
  },
});
