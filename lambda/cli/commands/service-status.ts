/**
 * `dm-dot service status`: for each unit `service install` writes, whether its file exists and
 * what the service manager says of it.
 *
 * Deliberately not here: the server's own status (dm-dot status).
 */
import { existsSync } from 'node:fs';
import type { Context } from '../context';
import { logHint, unitFiles } from '../local-server/service';
import { homeOf, platformOf, platformOption, run, uid } from '../local-server/service-manager';
import { define } from '../options';

export const command = (ctx: Context) =>
  define({
    name: 'status',
    summary: 'whether the service is installed and running',
    details: 'For each unit service install writes: whether its file exists and, if it does, what the service manager says of it.',
    options: [platformOption()],
    json: '{"platform", "units": [{"name", "file", "installed": bool, "active": bool | null, "state": what the service manager said | null}]}.',
    async run(values: { platform?: string }) {
      const platform = platformOf(values.platform);
      const home = homeOf(ctx);
      const files = unitFiles(platform, home);
      const units: { name: string; file: string; installed: boolean; active: boolean | null; state: string | null }[] = [];
      for (const { name, file } of [files.server, files.tunnel]) {
        const installed = existsSync(file);
        let active: boolean | null = null;
        let state: string | null = null;
        if (installed) {
          const result = await run(platform === 'linux' ? ['systemctl', '--user', 'is-active', name] : ['launchctl', 'print', `gui/${uid()}/${name}`]);
          active = result.code === 0;
          state = platform === 'linux' ? result.out.split('\n')[0] || null : (/^\s*state = (.+)$/m.exec(result.out)?.[1] ?? (active ? 'loaded' : 'not loaded'));
        }
        units.push({ name, file, installed, active, state });
      }
      ctx.result({ platform, units }, () => {
        const lines = units.map(
          (u) =>
            `${u.name}: ${u.installed ? `installed (${u.file}), ${u.active ? 'running' : 'not running'}${u.state ? ` [${u.state}]` : ''}` : 'not installed'}`,
        );
        return `${lines.join('\n')}\nLogs: ${logHint(platform, home, units[1]!.installed)}\n`;
      });
    },
  });
