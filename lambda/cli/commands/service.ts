/**
 * `dm-dot service install|uninstall|status`, a group without an action of its own, and how it
 * talks to the user's service manager: which one (systemd, launchd, or `--platform`), the user's
 * home and PATH, and running `systemctl` or `launchctl` with a time limit. The units themselves are
 * local-server/service.ts's. `install` refuses while another server owns the state directory (the
 * unit's server would refuse to start), with a fixed PORT missing, or without the built server.
 *
 * Deliberately not here: the AWS stack (it runs on its own); any key (units never hold one); the
 * state directory, which uninstall leaves as it is; and the server's own status (dm-dot status).
 */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { delimiter, dirname, join } from 'node:path';
import { Command, Option } from 'commander';
import type { Context } from '../context';
import { OperationError, UsageError } from '../errors';
import { findServer } from '../local-server/server';
import {
  carriedSettings,
  commandText,
  logDir,
  logHint,
  type Platform,
  SECRET_SETTINGS,
  serverBundle,
  SERVICE_ENV_FILE,
  startCommands,
  stopCommands,
  type Unit,
  unitFiles,
  unitsOf,
} from '../local-server/service';
import { homeOf, readProfile, tunnelFiles } from '../local-server/tunnel';
import { choiceValue, define } from '../options';

const PLATFORMS = ['linux', 'macos'] as const;

const platformOption = () => new Option('--platform <NAME>', 'linux (systemd user unit) or macos (launchd agent); default: this machine');

function platformOf(value: string | undefined): Platform {
  const chosen = choiceValue(value, 'platform', PLATFORMS);
  if (chosen) return chosen;
  if (process.platform === 'linux') return 'linux';
  if (process.platform === 'darwin') return 'macos';
  throw new UsageError(`dm-dot service knows systemd (Linux) and launchd (macOS), not ${process.platform}: run npm start under your own service manager`);
}

function onPath(ctx: Context, name: string): string | undefined {
  for (const dir of (ctx.io.env.PATH ?? '').split(delimiter)) {
    if (dir && existsSync(join(dir, name))) return join(dir, name);
  }
  return undefined;
}

function run(argv: readonly string[]): Promise<{ code: number; out: string }> {
  return new Promise((done) => {
    execFile(argv[0]!, argv.slice(1), { timeout: 30_000 }, (error, stdout, stderr) => {
      // A number: the program's exit code; anything else (ENOENT: no such program) counts as 127.
      const code = error ? (typeof error.code === 'number' ? error.code : 127) : 0;
      done({ code, out: `${stdout}${stderr}`.trim() });
    });
  });
}

const uid = () => (typeof process.getuid === 'function' ? process.getuid() : 0);

const install = (ctx: Context) =>
  define({
    name: 'install',
    summary: "keep the local server running under the user's service manager",
    details:
      'Writes a systemd user unit (Linux) or a launchd agent (macOS) that runs the built server (dist/server/) with this Node on the state directory and ' +
      'the settings of this environment (HOST, PORT, DMDOT_*, PUP_*; never MCP_API_KEY or PUP_SIGNING_SECRETS: secret settings go into ' +
      '<state dir>/service.env, mode 0600), ' +
      'restarts it when it fails, and logs to the journal (Linux) or ~/Library/Logs/dm-dot (macOS). ' +
      'When a tunnel-client profile exists (dm-dot connect --tunnel), a second unit runs tunnel-client on it. Then it starts them. ' +
      '--dry-run prints the units and the commands and changes nothing. Stop a server started with npm start first: one server owns a state directory.',
    options: [
      platformOption(),
      new Option('--dry-run', 'print the units and the commands; write and start nothing'),
      new Option('--tunnel-client <PATH>', 'the tunnel-client program (default: the one on PATH)'),
    ],
    json:
      '{"platform": "linux" | "macos", "dryRun": bool, "units": [{"name", "file", "text"}], "commands": ["systemctl …" | "launchctl …"], ' +
      '"logs": how to read them, "notes": [..]}.',
    run: (values: { platform?: string; dryRun?: boolean; tunnelClient?: string }) => installUnits(ctx, values),
  });

async function installUnits(ctx: Context, values: { platform?: string; dryRun?: boolean; tunnelClient?: string }): Promise<void> {
  const platform = platformOf(values.platform);
  const dryRun = !!values.dryRun;
  const settings = ctx.settings.local();
  if (settings.port === 0)
    throw new OperationError('PORT=0 picks another port at every start: give the service a fixed PORT (the default is 8787)', 'no_fixed_port');
  const home = homeOf(ctx.io.env);
  const notes: string[] = [];
  const bundle = serverBundle(ctx.projectRoot);
  if (!existsSync(bundle)) {
    if (!dryRun) throw new OperationError(`the built server ${bundle} is missing: run npm run build first`, 'not_built');
    notes.push(`The built server ${bundle} is missing: npm run build makes it.`);
  }
  const secrets = SECRET_SETTINGS.filter((name) => ctx.io.env[name]);
  if (secrets.length) {
    notes.push(
      `${secrets.join(' and ')} ${secrets.length > 1 ? 'are' : 'is'} not written into the unit (a secret): put ` +
        `${secrets.length > 1 ? 'them' : 'it'} in ${join(settings.stateDir, SERVICE_ENV_FILE)} (NAME=value lines, mode 0600) if the service needs ` +
        `${secrets.length > 1 ? 'them' : 'it'}.`,
    );
  }
  const files = tunnelFiles(ctx.io.env);
  const tunnelId = readProfile(files.profile);
  let tunnel: { binary: string; profile: string; tunnelId: string } | undefined;
  if (tunnelId) {
    const binary = values.tunnelClient ?? onPath(ctx, 'tunnel-client');
    if (!binary) {
      if (!dryRun)
        throw new OperationError(
          `tunnel-client is not on PATH: install it (docs/chatgpt.md) or pass --tunnel-client PATH; the profile ${files.profile} waits for it`,
          'no_tunnel_client',
        );
      notes.push('tunnel-client is not on PATH: install it (docs/chatgpt.md) or pass --tunnel-client PATH.');
    }
    tunnel = { binary: binary ?? 'tunnel-client', profile: files.profile, tunnelId };
  } else {
    notes.push(`No tunnel-client profile at ${files.profile}: only the server runs (dm-dot connect --tunnel TUNNEL_ID writes one; install again after).`);
  }
  const plan = {
    platform,
    home,
    node: process.execPath,
    projectRoot: ctx.projectRoot,
    stateDir: settings.stateDir,
    settings: { ...carriedSettings(ctx.io.env), DMDOT_STATE_DIR: settings.stateDir },
    ...(tunnel ? { tunnel } : {}),
  };
  const units = unitsOf(plan);
  const commands = startCommands(platform, units, uid());
  if (platform === 'linux') notes.push('A user unit stops when you log out unless lingering is on: loginctl enable-linger');
  const doc = { platform, dryRun, units, commands: commands.map(commandText), logs: logHint(platform, home, !!tunnel), notes };

  if (!dryRun) {
    const running = await findServer(settings.stateDir);
    if (running)
      throw new OperationError(
        `a server (pid ${running.pid}) already owns ${settings.stateDir}: stop it (Ctrl-C where npm start runs), then install`,
        'state_dir_in_use',
      );
    if (platform === 'macos') await mkdir(logDir(home), { recursive: true });
    for (const unit of units) {
      await mkdir(dirname(unit.file), { recursive: true });
      await writeFile(unit.file, unit.text, { mode: 0o644 });
    }
    for (const argv of commands) {
      const result = await run(argv);
      if (result.code !== 0)
        throw new OperationError(
          `${commandText(argv)} failed (exit ${result.code}): ${result.out.split('\n')[0] ?? ''}; the units are written, dm-dot service ` +
            'uninstall removes them',
          'service_manager_failed',
        );
    }
  }
  ctx.result(doc, () => text(doc, dryRun));
}

function text(doc: { units: Unit[]; commands: string[]; logs: string; notes: string[] }, dryRun: boolean): string {
  const lines: string[] = [];
  for (const unit of doc.units) lines.push(`${dryRun ? 'Would write' : 'Wrote'} ${unit.file}:`, unit.text.trimEnd().replace(/^/gm, '  '), '');
  lines.push(
    `${dryRun ? 'Would run' : 'Ran'}:`,
    ...doc.commands.map((c) => `  ${c}`),
    `Logs: ${doc.logs}`,
    'dm-dot service status shows whether it runs; dm-dot status shows the server itself.',
    ...doc.notes,
  );
  return `${lines.join('\n')}\n`;
}

const uninstall = (ctx: Context) =>
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
      const files = unitFiles(platform, homeOf(ctx.io.env));
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

const status = (ctx: Context) =>
  define({
    name: 'status',
    summary: 'whether the service is installed and running',
    details: 'For each unit service install writes: whether its file exists and, if it does, what the service manager says of it.',
    options: [platformOption()],
    json: '{"platform", "units": [{"name", "file", "installed": bool, "active": bool | null, "state": what the service manager said | null}]}.',
    async run(values: { platform?: string }) {
      const platform = platformOf(values.platform);
      const home = homeOf(ctx.io.env);
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

export const command = (ctx: Context) =>
  new Command('service')
    .description(
      "Keeps the local server (and OpenAI's tunnel-client, when a profile exists) running under the user's service manager: systemd on Linux, " +
        'launchd on macOS.',
    )
    .addCommand(install(ctx))
    .addCommand(uninstall(ctx))
    .addCommand(status(ctx));
