/**
 * The `dm-dot` executable as shipped: built JavaScript (dist/cli/dm-dot.cjs, bundled by
 * lambda/cli/build.mjs from `npm run build` and the prepare script), started by the bin launcher,
 * with nothing heavy on its start-up path, finding the project's state directory from any folder
 * of the project. No timing is asserted: what is loaded at start-up is.
 */
import { spawnSync } from 'node:child_process';
import { copyFileSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { isBuiltin } from 'node:module';
import { join } from 'node:path';
import { version } from '../../../lambda/version';
import { ROOT } from '../../support/paths';
import { tempDir } from './support';

const BUNDLE = join(ROOT, 'dist', 'cli', 'dm-dot.cjs');
const LAUNCHER = join(ROOT, 'lambda', 'cli', 'dm-dot.mjs');

let dir: Awaited<ReturnType<typeof tempDir>>;
let trace: string;
beforeAll(async () => {
  // What npm run build (and the prepare script) runs.
  const built = spawnSync(process.execPath, [join(ROOT, 'lambda', 'cli', 'build.mjs')], { cwd: ROOT, encoding: 'utf8', timeout: 60_000 });
  expect(built.status).toBe(0);
  dir = await tempDir('dmdot-bundle-');
  // Records every package (not a Node built-in, not a relative file) required while the CLI runs.
  trace = join(dir.dir, 'trace.cjs');
  writeFileSync(
    trace,
    `const Module = require('module'); const load = Module._load; const seen = new Set();
     Module._load = function (request) { if (!Module.isBuiltin(request) && !/^[./]/.test(request)) seen.add(request); return load.apply(this, arguments); };
     process.on('exit', () => require('fs').writeFileSync(process.env.TRACE_OUT, JSON.stringify([...seen])));`,
  );
}, 60_000);
afterAll(() => dir?.remove());

function node(args: string[], options: { cwd?: string; env?: Record<string, string> } = {}) {
  const result = spawnSync(process.execPath, args, {
    cwd: options.cwd ?? ROOT,
    encoding: 'utf8',
    timeout: 30_000,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...options.env },
  });
  return { code: result.status, out: result.stdout, err: result.stderr };
}

function packagesLoaded(args: string[], env: Record<string, string> = {}): string[] {
  const out = join(dir.dir, `loaded-${Math.random().toString(16).slice(2)}.json`);
  const r = node(['-r', trace, BUNDLE, ...args], { env: { TRACE_OUT: out, ...env } });
  expect(r.err).not.toMatch(/internal error/);
  return JSON.parse(readFileSync(out, 'utf8')) as string[];
}

describe('the built CLI', () => {
  it('npm run build says what it produced: one line per bundle', () => {
    const r = spawnSync(process.execPath, [join(ROOT, 'lambda', 'cli', 'build.mjs')], { cwd: ROOT, encoding: 'utf8', timeout: 60_000 });
    expect(r.status).toBe(0);
    expect(r.stdout).toBe('');
    expect(r.stderr).toBe('dm-dot: built the CLI into dist/cli/dm-dot.cjs\ndm-dot: built the server into dist/server/dm-dot-server.cjs\n');
  }, 60_000);

  it('CLI-1: runs as plain JavaScript from dist/cli/dm-dot.cjs, without tsx', () => {
    const r = node([BUNDLE, '--version']);
    expect(r).toEqual({ code: 0, out: `${version}\n`, err: '' });
    expect(readFileSync(BUNDLE, 'utf8')).not.toMatch(/require\("tsx/);
  });

  it('dm-dot --version and --help load no package at all', () => {
    expect(packagesLoaded(['--version'])).toEqual([]);
    expect(packagesLoaded(['events', '--help'])).toEqual([]);
  });

  it('dm-dot events --json loads no AWS SDK (only the local database)', () => {
    const loaded = packagesLoaded(['events', '--json'], { DMDOT_STATE_DIR: join(dir.dir, 'state') });
    expect(loaded.filter((p) => /^@aws-sdk\/|^@smithy\//.test(p))).toEqual([]);
    expect(loaded).toContain('lmdb');
  });

  it('LOCAL-10: a relative DMDOT_STATE_DIR is taken from the project root, from any folder of the project', () => {
    const name = `.dm-dot-test-${process.pid}`;
    for (const cwd of [ROOT, join(ROOT, 'lambda', 'cli'), join(ROOT, 'test', 'unit')]) {
      const r = node([BUNDLE, 'status', '--json'], { cwd, env: { DMDOT_STATE_DIR: name } });
      expect(r.code).toBe(0);
      expect(JSON.parse(r.out).stateDir).toBe(join(ROOT, name));
    }
  });

  it('CLI-1: the bin launcher runs the bundle', () => {
    expect(node([LAUNCHER, '--version'])).toEqual({ code: 0, out: `${version}\n`, err: '' });
  });

  it('with the bundle missing and no way to build it, the launcher says in one line to run npm run build (exit 1)', () => {
    const copy = join(dir.dir, 'project', 'lambda', 'cli');
    mkdirSync(copy, { recursive: true });
    copyFileSync(LAUNCHER, join(copy, 'dm-dot.mjs'));
    copyFileSync(join(ROOT, 'lambda', 'cli', 'build.mjs'), join(copy, 'build.mjs'));
    const r = node([join(copy, 'dm-dot.mjs'), '--version'], { cwd: join(dir.dir, 'project') });
    expect(r.code).toBe(1);
    expect(r.out).toBe('');
    expect(r.err).toBe('dm-dot: the CLI is not built (dist/cli/dm-dot.cjs is missing): run npm run build\n');
  });

  it("CLI-1: the README's alias line runs this clone's CLI from a folder outside the clone, with no registry involved", () => {
    const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
    const alias = /^alias dm-dot="([^"]+)"/m.exec(readme)?.[1];
    expect(alias).toBeDefined();
    // $PWD is expanded where the README says to run it: the clone's root.
    const [command, ...args] = alias!.replace(/\$PWD\b/g, ROOT).split(/\s+/);
    expect(command).toBe('node');
    const outside = join(dir.dir, 'elsewhere');
    mkdirSync(outside, { recursive: true });
    // No npm on PATH: nothing but node and the clone's file can answer.
    const r = spawnSync(process.execPath, [...args, '--version'], { cwd: outside, encoding: 'utf8', timeout: 30_000, env: { PATH: '', HOME: outside } });
    expect({ code: r.status, out: r.stdout, err: r.stderr }).toEqual({ code: 0, out: `${version}\n`, err: '' });
  });

  it('CLI-1: nothing in README.md or docs/ runs the CLI through npx (outside the clone npx asks the public registry)', () => {
    const files = [
      'README.md',
      ...readdirSync(join(ROOT, 'docs'), { recursive: true, encoding: 'utf8' })
        .filter((f) => f.endsWith('.md'))
        .map((f) => join('docs', f)),
    ];
    const found = files.filter((file) => /npx\s+dm-dot/.test(readFileSync(join(ROOT, file), 'utf8')));
    expect(found).toEqual([]);
  });

  it('the bin runs through npx from the project root (npm link and package managers use it too)', () => {
    const r = spawnSync('npx', ['--no-install', 'dm-dot', '--version'], { cwd: ROOT, encoding: 'utf8', timeout: 60_000 });
    expect(r.stdout).toBe(`${version}\n`);
    expect(r.status).toBe(0);
  }, 60_000);
});

describe('package.json', () => {
  const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { bin: Record<string, string>; scripts: Record<string, string> };

  it('the bin is the launcher; build and prepare bundle the CLI', () => {
    expect(pkg.bin).toEqual({ 'dm-dot': 'lambda/cli/dm-dot.mjs' });
    expect(pkg.scripts.build).toContain('node lambda/cli/build.mjs');
    expect(pkg.scripts.prepare).toContain('node lambda/cli/build.mjs');
  });

  it('LOCAL-19: npm start runs the built server through its launcher, with no TypeScript loader', () => {
    expect(pkg.scripts.start).toBe('node lambda/local/start.mjs');
    expect(readFileSync(join(ROOT, 'lambda', 'local', 'start.mjs'), 'utf8')).not.toMatch(/tsx|ts-node|--import|--loader/);
    const server = readFileSync(join(ROOT, 'dist', 'server', 'dm-dot-server.cjs'), 'utf8');
    expect(server).not.toMatch(/require\("tsx/);
    // Only lmdb (a native addon) is required from node_modules; the rest is inside the bundle.
    const packages = [...server.matchAll(/require\("([^"]+)"\)/g)].map((m) => m[1]!).filter((p) => !isBuiltin(p) && !p.startsWith('.'));
    expect([...new Set(packages)]).toEqual(['lmdb']);
  });

  it('LOCAL-19: with the server bundle missing and no way to build it, npm start says in one line to run npm run build (exit 1)', () => {
    const project = join(dir.dir, 'start-project');
    mkdirSync(join(project, 'lambda', 'local'), { recursive: true });
    mkdirSync(join(project, 'lambda', 'cli'), { recursive: true });
    copyFileSync(join(ROOT, 'lambda', 'local', 'start.mjs'), join(project, 'lambda', 'local', 'start.mjs'));
    copyFileSync(join(ROOT, 'lambda', 'cli', 'build.mjs'), join(project, 'lambda', 'cli', 'build.mjs'));
    const r = node([join(project, 'lambda', 'local', 'start.mjs')], { cwd: project });
    expect(r.code).toBe(1);
    expect(r.out).toBe('');
    expect(r.err).toBe('dm-dot: the server is not built (dist/server/dm-dot-server.cjs is missing): run npm run build\n');
  });

  it('has no npm script in front of the CLI (npm prints a banner on stdout, which breaks --json)', () => {
    expect(Object.values(pkg.scripts).filter((s) => /lambda\/cli\/dm-dot|dist\/cli/.test(s))).toEqual([]);
    expect(pkg.scripts['dm-dot']).toBeUndefined();
    expect(pkg.scripts.redrive).toBeUndefined();
  });
});
