/**
 * `dm-dot subscription [show|clear]`: the group of the subscription's actions; alone it shows the
 * live subscription (subscription-show.ts), and `clear` ends it (subscription-clear.ts).
 */
import type { Command } from 'commander';
import type { Context } from '../context';
import { command as clear } from './subscription-clear';
import { command as show } from './subscription-show';

export function command(ctx: Context): Command {
  return show(ctx, 'subscription').addCommand(show(ctx)).addCommand(clear(ctx));
}
