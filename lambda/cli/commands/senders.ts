/** `dm-dot senders [add|list|revoke]`: alone it lists them. */
import type { Context } from '../context';
import { command as add } from './senders-add';
import { command as list } from './senders-list';
import { command as revoke } from './senders-revoke';

export const command = (ctx: Context) => list(ctx, 'senders').addCommand(add(ctx)).addCommand(list(ctx)).addCommand(revoke(ctx));
