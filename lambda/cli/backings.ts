/**
 * Picks the backing a command runs on: the running local server's admin routes or a stopped
 * server's database (local-server/local-operator.ts), or with `--aws` the stack's table and queue
 * (aws/stack-operator.ts). Each runs the shared actions of lambda/operator, so the three never
 * disagree on what a view holds.
 *
 * Deliberately not here: redrive on AWS (aws/redrive.ts), the connector key
 * (commands/key-rotate.ts) and any printing.
 */
import { EVENT_ID_PREFIX } from '../core/protocol';
import type { Operator } from '../operator/surface';
import { type AwsFlags, type AwsSession, withAws } from './aws/session';
import { awsOperator, storeOf } from './aws/stack-operator';
import type { Context } from './context';
import { type LocalOperator, senderOperationsOf, withLocalOperator } from './local-server/local-operator';
import { wantsAws } from './options';

/** An event id as the log keys it: `evt_` and 32 hex digits. */
export const EVENT_ID = new RegExp(`^${EVENT_ID_PREFIX}[0-9a-f]{32}$`);

/** Runs `aws` on the stack's session when `--aws` asks for it, else `local` on the local backing. */
export function onBacking<T>(ctx: Context, values: AwsFlags, local: (op: LocalOperator) => Promise<T>, aws: (session: AwsSession) => Promise<T>): Promise<T> {
  return wantsAws(values) ? withAws(ctx, values, aws) : withLocalOperator(ctx, local);
}

/** Runs `work` on the operator `--aws` asks for, or on the local one. */
export function withOperator<T>(ctx: Context, values: AwsFlags, work: (op: Operator) => Promise<T>): Promise<T> {
  return onBacking(ctx, values, work, async (session) => work(await awsOperator(session)));
}

export type SenderBacking = Pick<LocalOperator, 'where' | 'senders'>;

/** Runs `work` on the sender keys of the stack (`--aws`) or of the local server. */
export function withSenders<T>(ctx: Context, values: AwsFlags, work: (backing: SenderBacking) => Promise<T>): Promise<T> {
  return onBacking(ctx, values, work, async (session) => {
    const { access, table } = await storeOf(session);
    return work({ where: `table ${table}`, senders: senderOperationsOf(access) });
  });
}
