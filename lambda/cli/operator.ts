/**
 * Picks the operator backing a command runs on (the surface itself, `Operator`, is in
 * lambda/operator/operator.ts): the running local server's admin routes, a stopped server's
 * database opened as operator (local/operator.ts), or the stack's table and queue with `--aws`
 * (aws/operator.ts). Each backing runs the shared actions of lambda/operator over its ports, so
 * the three never disagree on what a view holds.
 *
 * Deliberately not here: redrive on AWS (an SQS move task, aws/redrive.ts) and any printing.
 */
import { EVENT_ID_PREFIX } from '../core/protocol';
import type { Operator } from '../operator/operator';
import { AWS_STACK_OPTIONS, TABLE_OPTION, wantsAws } from './args';
import { awsOperator } from './aws/operator';
import { withAws, type AwsFlags } from './aws/session';
import type { Context } from './context';
import { withLocalOperator } from './local/operator';

/** An event id as the log keys it: `evt_` and 32 hex digits. */
export const EVENT_ID = new RegExp(`^${EVENT_ID_PREFIX}[0-9a-f]{32}$`);

/** The options of a command that reads or writes the table: `--aws [--stack NAME] [--region R] [--table NAME]`. */
export const AWS_TABLE_OPTIONS = { ...AWS_STACK_OPTIONS, ...TABLE_OPTION } as const;

/** Runs `work` on the operator `--aws` asks for, or on the local one. */
export function withOperator<T>(ctx: Context, values: { aws?: boolean } & AwsFlags, work: (op: Operator) => Promise<T>): Promise<T> {
  if (wantsAws(values)) return withAws(ctx, values, async (session) => work(await awsOperator(session)));
  return withLocalOperator(ctx, work);
}
