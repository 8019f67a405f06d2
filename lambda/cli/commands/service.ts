/** `dm-dot service install|uninstall|status`: a group without an action of its own. */
import { Command } from 'commander';
import type { Context } from '../context';
import { command as install } from './service-install';
import { command as status } from './service-status';
import { command as uninstall } from './service-uninstall';

export const command = (ctx: Context) =>
  new Command('service')
    .description(
      "Keeps the local server (and OpenAI's tunnel-client, when a profile exists) running under the user's service manager: systemd on Linux, " +
        'launchd on macOS.',
    )
    .addCommand(install(ctx))
    .addCommand(uninstall(ctx))
    .addCommand(status(ctx));
