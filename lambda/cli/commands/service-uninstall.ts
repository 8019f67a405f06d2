/**
 * `dm-dot service uninstall`: stops the units `service install` wrote and removes their files.
 *
 * Deliberately not here: the state directory, which is left as it is.
 */
import { existsSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { dirname } from 'node:path';
import { Option } from 'commander';
import type { Context } from '../context';
import { commandText, stopCommands, unitFiles } from '../local-server/service';
import { homeOf, platformOf, platformOption, run, uid } from '../local-server/service-manager';
import { define } from '../options';

export const command = (ctx: Context) =>
  define({
    name: 'uninstall',
    summary: 'stop the service and remove its units',
    details:
      'Stops the server unit (and the tunnel-client unit) and removes what service install wrote. The state directory is left as it is. ' +
      '--dry-run prints what it would do.',
    options: [platformOption(), new Option('--dry-run', 'print the commands and the files; stop and remove nothing')],
    json: '{"platform", "dryRun": bool, "removed": [files], "commands": [..]}; nothing installed: removed is [].',
    async run(values: { platform?: string; dryRun?: boolean }) {
      const platform = platformOf(values.platform);
      const dryRun = !!values.dryRun;
      const files = unitFiles(platform, homeOf(ctx));
      const present = [files.server, files.tunnel].filter((u) => existsSync(u.file));
      const commands = present.length ? stopCommands(platform, present, uid()) : [];
      if (!dryRun) {
        // A unit that is not loaded fails to stop: that is no reason to keep its file.
        for (const argv of commands) await run(argv);
        for (const unit of present) await rm(unit.file, { force: true });
        if (platform === 'linux' && present.length) await run(['systemctl', '--user', 'daemon-reload']);
      }
      const doc = { platform, dryRun, removed: present.map((u) => u.file), commands: commands.map(commandText) };
      ctx.result(doc, () =>
        present.length === 0
          ? `Nothing to remove: no unit of dm-dot service in ${dirname(files.server.file)}.\n`
          : `${[
              `${dryRun ? 'Would run' : 'Ran'}:`,
              ...doc.commands.map((c) => `  ${c}`),
              `${dryRun ? 'Would remove' : 'Removed'}:`,
              ...doc.removed.map((f) => `  ${f}`),
            ].join('\n')}\n`,
      );
    },
  });
