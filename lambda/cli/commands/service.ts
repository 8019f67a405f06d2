/**
 * `dm-dot service install|uninstall|status`: the group of the service's actions
 * (service-install.ts, service-uninstall.ts, service-status.ts). It has no action of its own.
 */
import { Command } from 'commander';
import type { Context } from '../context';
import { command as install } from './service-install';
import { command as status } from './service-status';
import { command as uninstall } from './service-uninstall';

export function command(ctx: Context): Command {
  return new Command('service')
    .description(
      "Keeps the local server (and OpenAI's tunnel-client, when a profile exists) running under the user's service manager: systemd on Linux, " +
        'launchd on macOS.',
    )
    .addCommand(install(ctx))
    .addCommand(uninstall(ctx))
    .addCommand(status(ctx));
}
