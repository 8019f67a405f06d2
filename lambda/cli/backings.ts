/**
 * Picks the backing a command runs on (the surface itself, `Operator`, is in
 * lambda/operator/surface.ts): the running local server's admin routes, a stopped server's
 * database opened as operator (local-server/local-operator.ts), or the stack's table and queue
 * with `--aws` (aws/stack-operator.ts). Each backing runs the shared actions of lambda/operator
 * over its ports (operator/access.ts for the senders), so the three never disagree on what a view
 * holds.
 *
 * Deliberately not here: redrive on AWS (an SQS move task, aws/redrive.ts), anything about the
 * connector key (commands/key-rotate.ts) and any printing.
 */
import { EVENT_ID_PREFIX } from '../core/protocol';
import { addSender, listSenders, revokeSender } from '../operator/access';
import type { Operator } from '../operator/surface';
import type { AccessStore } from '../ports';
import { wantsAws } from './options';
import type { AwsFlags } from './aws/session';
import { withAws } from './aws/session';
import { awsOperator, storeOf } from './aws/stack-operator';
import type { Context } from './context';
import { type SenderOperations, withLocalOperator } from './local-server/local-operator';

/** An event id as the log keys it: `evt_` and 32 hex digits. */
export const EVENT_ID = new RegExp(`^${EVENT_ID_PREFIX}[0-9a-f]{32}$`);

/** Runs `work` on the operator `--aws` asks for, or on the local one. */
export function withOperator<T>(ctx: Context, values: { aws?: boolean } & AwsFlags, work: (op: Operator) => Promise<T>): Promise<T> {
  if (wantsAws(values)) return withAws(ctx, values, async (session) => work(await awsOperator(session)));
  return withLocalOperator(ctx, work);
}

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

/** Runs `work` on the sender keys of the stack (`--aws`) or of the local server. */
export function withSenders<T>(ctx: Context, values: { aws?: boolean } & AwsFlags, work: (backing: SenderBacking) => Promise<T>): Promise<T> {
  if (wantsAws(values)) {
    return withAws(ctx, values, async (session) => {
      const { access, table } = await storeOf(session);
      return work({ where: `table ${table}`, senders: senderOperationsOf(access) });
    });
  }
  return withLocalOperator(ctx, (op) => work({ where: op.where, senders: op.senders }));
}
