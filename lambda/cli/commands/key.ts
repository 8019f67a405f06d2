/** `dm-dot key rotate`: a group without an action of its own (key-rotate.ts). */
import { Command } from 'commander';
import type { Context } from '../context';
import { command as rotate } from './key-rotate';

export const command = (ctx: Context) =>
  new Command('key')
    .description('The connector API key: key rotate [--overlap DURATION] makes a new one (the previous one keeps working that long).')
    .addCommand(rotate(ctx));
