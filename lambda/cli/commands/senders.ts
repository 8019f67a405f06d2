/**
 * `dm-dot senders [add|list|revoke]`: the group of the sender keys' actions; alone it lists them
 * (senders-list.ts); `add` makes one (senders-add.ts), `revoke` stops one (senders-revoke.ts).
 */
import type { Command } from 'commander';
import type { Context } from '../context';
import { command as add } from './senders-add';
import { command as list } from './senders-list';
import { command as revoke } from './senders-revoke';

export function command(ctx: Context): Command {
  return list(ctx, 'senders').addCommand(add(ctx)).addCommand(list(ctx)).addCommand(revoke(ctx));
}
