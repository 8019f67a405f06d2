/**
 * The units `dm-dot service` writes (`service install --help` says what they run and where they
 * log): a systemd user unit on Linux, a launchd agent on macOS, never with a secret in it.
 *
 * Deliberately not here: running the service manager (commands/service.ts does, never in a test)
 * and deciding whether to install (the command checks that no other server owns the directory).
 */
import { join } from 'node:path';

export type Platform = 'linux' | 'macos';

export const SERVER_UNIT = 'dm-dot';
export const TUNNEL_UNIT = 'dm-dot-tunnel';
/** launchd labels. */
export const SERVER_LABEL = 'com.dm-dot.server';
export const TUNNEL_LABEL = 'com.dm-dot.tunnel';
/** Read by both units when present: where secret settings go, since units are never written with one. */
export const SERVICE_ENV_FILE = 'service.env';
export const SECRET_SETTINGS = ['MCP_API_KEY', 'PUP_SIGNING_SECRETS'] as const;

type Env = Readonly<Record<string, string | undefined>>;

/** The server's settings from `env` that a unit carries: HOST, PORT, DMDOT_*, PUP_* except the secrets. */
export function carriedSettings(env: Env): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(env)) {
    if (value === undefined || value === '') continue;
    if ((SECRET_SETTINGS as readonly string[]).includes(name)) continue;
    if (name === 'HOST' || name === 'PORT' || name.startsWith('DMDOT_') || name.startsWith('PUP_')) out[name] = value;
  }
  return Object.fromEntries(Object.entries(out).sort(([a], [b]) => a.localeCompare(b)));
}

export interface ServicePlan {
  platform: Platform;
  home: string;
  node: string;
  projectRoot: string;
  stateDir: string;
  /** The settings the server unit carries (DMDOT_STATE_DIR always, absolute). */
  settings: Record<string, string>;
  /** The tunnel-client unit, when a profile exists. */
  tunnel?: { binary: string; profile: string; tunnelId: string };
}

export type Unit = { name: string; file: string; text: string };

export function serverBundle(projectRoot: string): string {
  return join(projectRoot, 'dist', 'server', 'dm-dot-server.cjs');
}

export function logDir(home: string): string {
  return join(home, 'Library', 'Logs', 'dm-dot');
}

type UnitFile = Omit<Unit, 'text'>;

/** The unit files for this platform, with the names the service manager knows them by. */
export function unitFiles(platform: Platform, home: string): { server: UnitFile; tunnel: UnitFile } {
  const dir = platform === 'linux' ? join(home, '.config', 'systemd', 'user') : join(home, 'Library', 'LaunchAgents');
  const unit = (name: string, file: string) => ({ name, file: join(dir, file) });
  return platform === 'linux'
    ? { server: unit(`${SERVER_UNIT}.service`, `${SERVER_UNIT}.service`), tunnel: unit(`${TUNNEL_UNIT}.service`, `${TUNNEL_UNIT}.service`) }
    : { server: unit(SERVER_LABEL, `${SERVER_LABEL}.plist`), tunnel: unit(TUNNEL_LABEL, `${TUNNEL_LABEL}.plist`) };
}

/** A value in a systemd unit line: quoted when it holds a space, a quote or a backslash. */
function sd(value: string): string {
  return /[\s"\\]/.test(value) ? `"${value.replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"` : value;
}

/** A systemd unit: its header comment, the lines of its [Unit] and of its [Service] after Type=simple. */
function systemdUnit(header: string, unit: string[], service: string[]): string {
  return [header, '[Unit]', ...unit, '', '[Service]', 'Type=simple', ...service, '', '[Install]', 'WantedBy=default.target', ''].join('\n');
}

/** The unit texts: the tunnel-client's only with a tunnel, started after the server unit `serverName`. */
function systemdTexts(plan: ServicePlan, serverName: string, envFile: string): { server: string; tunnel?: string } {
  const server = systemdUnit(
    '# Written by `dm-dot service install`; `dm-dot service uninstall` removes it.',
    [`Description=dm-dot local server (state directory ${plan.stateDir})`, 'After=network-online.target'],
    [
      `WorkingDirectory=${sd(plan.projectRoot)}`,
      `ExecStart=${sd(plan.node)} ${sd(serverBundle(plan.projectRoot))}`,
      ...Object.entries(plan.settings).map(([name, value]) => `Environment=${sd(`${name}=${value}`)}`),
      `# Secret settings (MCP_API_KEY, PUP_SIGNING_SECRETS) are never written here: put them in this file, mode 0600.`,
      `EnvironmentFile=-${envFile}`,
      // A clean stop (SIGTERM: the server drains and exits 0) stays stopped; a crash restarts.
      'Restart=on-failure',
      'RestartSec=5',
      'TimeoutStopSec=30',
      '# Logs: journalctl --user -u dm-dot',
    ],
  );
  if (!plan.tunnel) return { server };
  const tunnel = systemdUnit(
    '# Written by `dm-dot service install` because a tunnel-client profile exists (dm-dot connect --tunnel).',
    [`Description=OpenAI tunnel-client for dm-dot (${plan.tunnel.tunnelId})`, `After=${serverName} network-online.target`, `Wants=${serverName}`],
    [
      `ExecStart=${sd(plan.tunnel.binary)} run --profile-file ${sd(plan.tunnel.profile)}`,
      // The profile may name MCP_API_KEY (env:) when the server takes its key from there.
      `EnvironmentFile=-${envFile}`,
      'Restart=on-failure',
      'RestartSec=10',
      '# Logs: journalctl --user -u dm-dot-tunnel',
    ],
  );
  return { server, tunnel };
}

const xml = (value: string) => value.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');

/** A shell word, single-quoted. */
const sh = (value: string) => `'${value.replace(/'/g, `'\\''`)}'`;

function plist(label: string, args: string[], env: Record<string, string>, workingDirectory: string, log: string): string {
  return [
    '<?xml version="1.0" encoding="UTF-8"?>',
    '<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">',
    '<!-- Written by `dm-dot service install`; `dm-dot service uninstall` removes it. -->',
    '<plist version="1.0">',
    '<dict>',
    `  <key>Label</key><string>${xml(label)}</string>`,
    '  <key>ProgramArguments</key>',
    '  <array>',
    ...args.map((a) => `    <string>${xml(a)}</string>`),
    '  </array>',
    `  <key>WorkingDirectory</key><string>${xml(workingDirectory)}</string>`,
    ...(Object.keys(env).length
      ? [
          '  <key>EnvironmentVariables</key>',
          '  <dict>',
          ...Object.entries(env).map(([k, v]) => `    <key>${xml(k)}</key><string>${xml(v)}</string>`),
          '  </dict>',
        ]
      : []),
    '  <key>RunAtLoad</key><true/>',
    // Restarted unless it exited 0 (a clean stop), at most every 5 s.
    '  <key>KeepAlive</key><dict><key>SuccessfulExit</key><false/></dict>',
    '  <key>ThrottleInterval</key><integer>5</integer>',
    `  <key>StandardOutPath</key><string>${xml(log)}</string>`,
    `  <key>StandardErrorPath</key><string>${xml(log)}</string>`,
    '</dict>',
    '</plist>',
    '',
  ].join('\n');
}

function launchdTexts(plan: ServicePlan, envFile: string): { server: string; tunnel?: string } {
  // launchd has no environment file: a shell reads service.env (secret settings), then becomes the program.
  const withEnvFile = (command: string[]) => ['/bin/sh', '-c', `set -a; [ -f ${sh(envFile)} ] && . ${sh(envFile)}; set +a; exec ${command.map(sh).join(' ')}`];
  const server = plist(
    SERVER_LABEL,
    withEnvFile([plan.node, serverBundle(plan.projectRoot)]),
    plan.settings,
    plan.projectRoot,
    join(logDir(plan.home), 'server.log'),
  );
  if (!plan.tunnel) return { server };
  const args = withEnvFile([plan.tunnel.binary, 'run', '--profile-file', plan.tunnel.profile]);
  return { server, tunnel: plist(TUNNEL_LABEL, args, {}, plan.home, join(logDir(plan.home), 'tunnel-client.log')) };
}

export function unitsOf(plan: ServicePlan): Unit[] {
  const files = unitFiles(plan.platform, plan.home);
  const envFile = join(plan.stateDir, SERVICE_ENV_FILE);
  const texts = plan.platform === 'linux' ? systemdTexts(plan, files.server.name, envFile) : launchdTexts(plan, envFile);
  return [{ ...files.server, text: texts.server }, ...(texts.tunnel ? [{ ...files.tunnel, text: texts.tunnel }] : [])];
}

/** The service manager's commands that start (or stop) the units, as argv lists. */
export function startCommands(platform: Platform, units: readonly Unit[], uid: number): string[][] {
  if (platform === 'linux')
    return [
      ['systemctl', '--user', 'daemon-reload'],
      ['systemctl', '--user', 'enable', '--now', ...units.map((u) => u.name)],
    ];
  return units.map((u) => ['launchctl', 'bootstrap', `gui/${uid}`, u.file]);
}

export function stopCommands(platform: Platform, names: readonly { name: string; file: string }[], uid: number): string[][] {
  if (platform === 'linux') return [['systemctl', '--user', 'disable', '--now', ...names.map((u) => u.name)]];
  return names.map((u) => ['launchctl', 'bootout', `gui/${uid}`, u.file]);
}

/** Where the platform keeps the logs, as a person reads them. */
export function logHint(platform: Platform, home: string, tunnel: boolean): string {
  if (platform === 'linux') return `journalctl --user -u ${SERVER_UNIT}${tunnel ? ` -u ${TUNNEL_UNIT}` : ''} -f`;
  return `tail -f ${join(logDir(home), 'server.log')}${tunnel ? ` ${join(logDir(home), 'tunnel-client.log')}` : ''}`;
}

export function commandText(argv: readonly string[]): string {
  return argv.map((a) => (/^[\w@%+=:,./-]+$/.test(a) ? a : sh(a))).join(' ');
}
