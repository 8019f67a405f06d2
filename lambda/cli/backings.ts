/**
 * Picks the backing a command runs on: the running local server's admin routes or a stopped
 * server's database (local-server/local-operator.ts), or with `--aws` the stack's table and queue
 * (aws/stack-operator.ts). Each runs the shared actions of lambda/operator, so the three never
 * disagree on what a view holds.
 *
 * Deliberately not here: redrive on AWS (commands/redrive.ts), the connector key
 * (commands/key.ts) and any printing.
 */
import { type AwsFlags, type AwsSession, withAws } from './aws/session';
import { awsOperator } from './aws/stack-operator';
import type { Context } from './context';
import { type CliOperator, type LocalOperator, withLocalOperator } from './local-server/local-operator';
import { wantsAws } from './options';

/** Runs `aws` on the stack's session when `--aws` asks for it, else `local` on the local backing. */
export function onBacking<T>(ctx: Context, values: AwsFlags, local: (op: LocalOperator) => Promise<T>, aws: (session: AwsSession) => Promise<T>): Promise<T> {
  return wantsAws(values) ? withAws(ctx, values, aws) : withLocalOperator(ctx, local);
}

/** Runs `work` on the operator `--aws` asks for, or on the local one. */
export function withOperator<T>(ctx: Context, values: AwsFlags, work: (op: CliOperator) => Promise<T>): Promise<T> {
  return onBacking(ctx, values, work, async (session) => work(await awsOperator(session)));
}
