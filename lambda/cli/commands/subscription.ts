/** `dm-dot subscription [show|clear]`: alone it shows the live subscription. */
import type { Context } from '../context';
import { command as clear } from './subscription-clear';
import { command as show } from './subscription-show';

export const command = (ctx: Context) => show(ctx, 'subscription').addCommand(show(ctx)).addCommand(clear(ctx));
