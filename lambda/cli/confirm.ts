/**
 * Confirmation before an act that breaks the connected dot: `--yes` skips it; with no terminal to
 * ask on the command refuses with one line (exit 1) saying to pass `--yes`, and no prompt is
 * printed, so nothing is glued to the refusal.
 */
import type { Context } from './context';
import { OperationError } from './errors';

export async function confirm(ctx: Context, options: { yes: boolean | undefined; what: string; question: string; before?: string }): Promise<void> {
  if (options.yes) return;
  if (!ctx.io.ask) throw new OperationError(`not ${options.what}: there is no terminal to confirm on; pass --yes to do it without asking`, 'not_confirmed');
  if (options.before) ctx.io.err(ctx.scrub(options.before));
  const answer = await ctx.io.ask(`${options.question} [y/N] `);
  if (!/^y(es)?$/i.test((answer ?? '').trim())) throw new OperationError(`not ${options.what}`, 'not_confirmed');
}
