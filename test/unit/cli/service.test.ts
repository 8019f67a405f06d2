/**
 * `dm-dot service install|uninstall|status` through the built CLI (dist/cli/dm-dot.cjs), always
 * with `--dry-run` or on a HOME with nothing installed: no test ever writes a real unit or calls
 * systemctl or launchctl. What the units say is checked: the built server run by this Node on the
 * state directory, restart on failure, the logs where the platform keeps them, the tunnel client
 * as a second unit when a profile exists, and never a secret.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT } from '../../support/paths';
import { tempDir } from './support';

const BUNDLE = join(ROOT, 'dist', 'cli', 'dm-dot.cjs');
const SERVER = join(ROOT, 'dist', 'server', 'dm-dot-server.cjs');
const TUNNEL_ID = 'tunnel_0123456789abcdef0123456789abcdef';
const KEY = 'k3y-that-must-never-be-printed-0123456789';

let dir: Awaited<ReturnType<typeof tempDir>>;
beforeAll(async () => {
  const built = spawnSync(process.execPath, [join(ROOT, 'lambda', 'cli', 'build.mjs')], { cwd: ROOT, encoding: 'utf8', timeout: 60_000 });
  expect(built.status).toBe(0);
  dir = await tempDir('dmdot-service-');
}, 60_000);
afterAll(() => dir?.remove());

let n = 0;
function fresh() {
  n += 1;
  const home = join(dir.dir, `home-${n}`);
  const state = join(dir.dir, `state-${n}`);
  mkdirSync(home, { recursive: true });
  return { home, state };
}

function cli(args: string[], env: Record<string, string>) {
  const r = spawnSync(process.execPath, [BUNDLE, ...args], { cwd: ROOT, encoding: 'utf8', timeout: 30_000, env: { PATH: '/usr/bin:/bin', ...env } });
  return { code: r.status, out: r.stdout, err: r.stderr };
}

/** Every file under `dir`, relative. */
function filesUnder(dir: string): string[] {
  return existsSync(dir) ? readdirSync(dir, { recursive: true, encoding: 'utf8' }) : [];
}

describe('dm-dot service install --dry-run (CLI-SVC-1)', () => {
  it('CLI-SVC-1: Linux: a systemd user unit that runs the built server with this Node on the state directory, restarts on failure, logs to the journal', () => {
    const { home, state } = fresh();
    const r = cli(['service', 'install', '--dry-run', '--platform', 'linux', '--json'], {
      HOME: home,
      DMDOT_STATE_DIR: state,
      DMDOT_RETRY_DELAYS: '2,8',
      MCP_API_KEY: KEY,
    });
    expect(r.code).toBe(0);
    const doc = JSON.parse(r.out);
    expect(doc).toMatchObject({ platform: 'linux', dryRun: true });
    expect(doc.units).toHaveLength(1);
    const [unit] = doc.units;
    expect(unit.file).toBe(join(home, '.config', 'systemd', 'user', 'dm-dot.service'));
    expect(unit.text).toContain(`ExecStart=${process.execPath} ${SERVER}\n`);
    expect(unit.text).toContain(`Environment=DMDOT_STATE_DIR=${state}\n`);
    expect(unit.text).toContain('Environment=DMDOT_RETRY_DELAYS=2,8\n');
    expect(unit.text).toContain('Restart=on-failure\n');
    expect(unit.text).toContain('WantedBy=default.target');
    expect(doc.logs).toBe('journalctl --user -u dm-dot -f');
    expect(doc.commands).toEqual(['systemctl --user daemon-reload', 'systemctl --user enable --now dm-dot.service']);
    // The secret is left out, and the note says where it goes instead.
    expect(r.out + r.err).not.toContain(KEY);
    expect(doc.notes.join(' ')).toMatch(/MCP_API_KEY is not written into the unit .*service\.env/);
    // A dry run writes nothing.
    expect(filesUnder(home)).toEqual([]);
  });

  it('CLI-SVC-1: with a tunnel-client profile, a second unit runs tunnel-client on it after the server', () => {
    const { home, state } = fresh();
    expect(cli(['connect', '--tunnel', TUNNEL_ID], { HOME: home, DMDOT_STATE_DIR: state }).code).toBe(0);
    const bin = join(dir.dir, `bin-${n}`);
    mkdirSync(bin);
    writeFileSync(join(bin, 'tunnel-client'), '#!/bin/sh\n', { mode: 0o755 });
    const r = cli(['service', 'install', '--dry-run', '--platform', 'linux', '--json'], { HOME: home, DMDOT_STATE_DIR: state, PATH: `${bin}:/usr/bin:/bin` });
    expect(r.code).toBe(0);
    const doc = JSON.parse(r.out);
    expect(doc.units.map((u: { name: string }) => u.name)).toEqual(['dm-dot.service', 'dm-dot-tunnel.service']);
    const profile = join(home, '.config', 'tunnel-client', 'dm-dot.yaml');
    expect(doc.units[1].text).toContain(`ExecStart=${join(bin, 'tunnel-client')} run --profile-file ${profile}\n`);
    expect(doc.units[1].text).toContain('After=dm-dot.service');
    expect(doc.units[1].text).toContain('Restart=on-failure');
    expect(doc.commands).toEqual(['systemctl --user daemon-reload', 'systemctl --user enable --now dm-dot.service dm-dot-tunnel.service']);
  });

  it('CLI-SVC-1: macOS: a launchd agent kept alive unless it exits cleanly, logging to ~/Library/Logs/dm-dot (text form)', () => {
    const { home, state } = fresh();
    const r = cli(['service', 'install', '--dry-run', '--platform', 'macos'], { HOME: home, DMDOT_STATE_DIR: state });
    expect(r.code).toBe(0);
    expect(r.out).toContain(`Would write ${join(home, 'Library', 'LaunchAgents', 'com.dm-dot.server.plist')}:`);
    expect(r.out).toContain(`exec '${process.execPath}' '${SERVER}'`);
    expect(r.out).toContain(`<key>DMDOT_STATE_DIR</key><string>${state}</string>`);
    expect(r.out).toContain('<key>KeepAlive</key><dict><key>SuccessfulExit</key><false/></dict>');
    expect(r.out).toContain(`<key>StandardErrorPath</key><string>${join(home, 'Library', 'Logs', 'dm-dot', 'server.log')}</string>`);
    expect(r.out).toMatch(/Would run:\n {2}launchctl bootstrap gui\/\d+ .*com\.dm-dot\.server\.plist/);
    expect(filesUnder(home)).toEqual([]);
  });

  it('PORT=0 is refused with a sentence (exit 1); an unknown platform is bad usage (exit 2)', () => {
    const { home, state } = fresh();
    const zero = cli(['service', 'install', '--dry-run', '--platform', 'linux'], { HOME: home, DMDOT_STATE_DIR: state, PORT: '0' });
    expect(zero.code).toBe(1);
    expect(zero.err).toMatch(/PORT=0 picks another port at every start: give the service a fixed PORT/);
    const bad = cli(['service', 'install', '--dry-run', '--platform', 'windows'], { HOME: home, DMDOT_STATE_DIR: state });
    expect(bad.code).toBe(2);
    expect(bad.err).toContain('--platform must be one of linux, macos');
  });
});

describe('dm-dot service status and uninstall with nothing installed', () => {
  it('status says not installed, without asking the service manager', () => {
    const { home, state } = fresh();
    const r = cli(['service', 'status', '--platform', 'linux', '--json'], { HOME: home, DMDOT_STATE_DIR: state });
    expect(r.code).toBe(0);
    expect(JSON.parse(r.out).units).toEqual([
      { name: 'dm-dot.service', file: join(home, '.config', 'systemd', 'user', 'dm-dot.service'), installed: false, active: null, state: null },
      { name: 'dm-dot-tunnel.service', file: join(home, '.config', 'systemd', 'user', 'dm-dot-tunnel.service'), installed: false, active: null, state: null },
    ]);
  });

  it('uninstall --dry-run has nothing to remove', () => {
    const { home, state } = fresh();
    const r = cli(['service', 'uninstall', '--dry-run', '--platform', 'macos'], { HOME: home, DMDOT_STATE_DIR: state });
    expect(r.code).toBe(0);
    expect(r.out).toMatch(/^Nothing to remove: no unit of dm-dot service in .*LaunchAgents\.\n$/);
  });

  it('dm-dot service --help and dm-dot key --help say what the group is for', () => {
    expect(cli(['service', '--help'], {}).out).toMatch(/Keeps the local server [\s\S]*running under the user's service manager/);
    expect(cli(['key', '--help'], {}).out).toMatch(/The connector API key: key rotate/);
  });
});
