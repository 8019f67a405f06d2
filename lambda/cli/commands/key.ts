/**
 * `dm-dot key rotate`: the group of the connector API key's actions. It has no action of its own:
 * `dm-dot key` alone is a usage error naming `rotate` (key-rotate.ts).
 */
import { Command } from 'commander';
import type { Context } from '../context';
import { command as rotate } from './key-rotate';

export function command(ctx: Context): Command {
  return new Command('key')
    .description('The connector API key: key rotate [--overlap DURATION] makes a new one (the previous one keeps working that long).')
    .addCommand(rotate(ctx));
}
