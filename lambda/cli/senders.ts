/**
 * Where the sender commands act: the local server (its admin routes), a stopped server's database,
 * or with `--aws` the stack's table. Every backing runs operator/access.ts, so all three agree.
 *
 * Deliberately not here: printing, and anything about the connector key (commands/key-rotate.ts).
 */
import type { AccessStore } from '../ports';
import { addSender, listSenders, revokeSender } from '../operator/access';
import { wantsAws } from './args';
import { storeOf } from './aws/operator';
import { withAws, type AwsFlags } from './aws/session';
import type { Context } from './context';
import { withLocalOperator, type SenderOperations } from './local/operator';

export interface SenderBacking {
  where: string;
  senders: SenderOperations;
}

export function senderOperationsOf(access: AccessStore, now: () => number = Date.now): SenderOperations {
  return {
    add: (name, rate) => addSender(access, name, rate, now()),
    list: () => listSenders(access),
    revoke: (name) => revokeSender(access, name, now()),
  };
}

export function withSenders<T>(ctx: Context, values: { aws?: boolean } & AwsFlags, work: (backing: SenderBacking) => Promise<T>): Promise<T> {
  if (wantsAws(values)) {
    return withAws(ctx, values, async (session) => {
      const { access, table } = await storeOf(session);
      return work({ where: `table ${table}`, senders: senderOperationsOf(access) });
    });
  }
  return withLocalOperator(ctx, (op) => work({ where: op.where, senders: op.senders }));
}
