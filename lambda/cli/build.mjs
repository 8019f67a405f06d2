// Bundles the two programs dm-dot runs as built JavaScript, with esbuild, each one CommonJS file:
// - the operator CLI (lambda/cli/entry.ts) into dist/cli/dm-dot.cjs, with the small pure-JavaScript
//   packages it needs inside (zod/mini and standardwebhooks: one file parses faster than their
//   many). The heavy ones stay outside and are required from node_modules only when a command
//   needs them: the AWS SDK (--aws) and lmdb (a native addon: the local database). `dm-dot
//   --version` loads no package at all, and every command module is initialised only when that
//   command runs, so `dm-dot events --json` starts fast;
// - the local server (lambda/local/main.ts, what `npm start` and `dm-dot service` run) into
//   dist/server/dm-dot-server.cjs, with the MCP SDK and zod inside and lmdb outside, and the SDK's
//   JSON Schema shim aliased as for the Lambda bundles (lib/bundling.ts says why). A TypeScript
//   loader took 1.3 to 1.6 s to start it; the bundle about a quarter of that (docs/performance.md).
// Run by `npm run build` and by the prepare script (`npm ci`, `npm install`); the CLI's launcher
// (dm-dot.mjs) builds the CLI once when it is missing, and `npm start`'s (lambda/local/start.mjs)
// runs this script when the server's bundle is missing or older than the sources.
// Deliberately not here: minifying (a stack trace of the server stays readable) and source maps.
import { mkdirSync, renameSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = fileURLToPath(import.meta.url);
const root = join(dirname(here), '..', '..');
export const OUTFILE = join(root, 'dist', 'cli', 'dm-dot.cjs');
export const SERVER_OUTFILE = join(root, 'dist', 'server', 'dm-dot-server.cjs');

/** Required at run time from node_modules, never bundled. */
export const EXTERNAL = ['@aws-sdk/*', '@smithy/*', 'lmdb', 'esbuild'];

const COMMON = {
  bundle: true,
  platform: 'node',
  target: 'node20',
  format: 'cjs',
  external: EXTERNAL,
  banner: { js: '#!/usr/bin/env node' },
  legalComments: 'none',
  logLevel: 'warning',
};

/** The CLI's esbuild options; a test may add its own (metafile, another outfile). */
export function options(extra = {}) {
  return { ...COMMON, entryPoints: [join(root, 'lambda', 'cli', 'entry.ts')], outfile: OUTFILE, ...extra };
}

/** The local server's esbuild options. */
export function serverOptions(extra = {}) {
  return {
    ...COMMON,
    entryPoints: [join(root, 'lambda', 'local', 'main.ts')],
    outfile: SERVER_OUTFILE,
    // The ES builds let esbuild leave out what the server never imports.
    mainFields: ['module', 'main'],
    alias: { '@modelcontextprotocol/server/_shims': join(root, 'lambda', 'mcp', 'sdk-shims.ts') },
    ...extra,
  };
}

const TARGETS = { cli: { options, outfile: OUTFILE, what: 'the CLI' }, server: { options: serverOptions, outfile: SERVER_OUTFILE, what: 'the server' } };

/** Writes a bundle through a temporary file and a rename: a program starting meanwhile reads the old file or the new one, never half of one. */
function writeOutputs(result) {
  for (const file of result.outputFiles ?? []) {
    mkdirSync(dirname(file.path), { recursive: true });
    const tmp = `${file.path}.tmp-${process.pid}`;
    writeFileSync(tmp, file.contents);
    renameSync(tmp, file.path);
  }
  return result;
}

/** Builds the CLI (with `extra` options) and the server. */
export async function build(extra = {}) {
  const esbuild = await import('esbuild');
  const [cli] = await Promise.all(
    [esbuild.build(options({ ...extra, write: false })), esbuild.build(serverOptions({ write: false }))].map(async (p) => writeOutputs(await p)),
  );
  return cli;
}

/** For a launcher: builds one bundle (`cli` or `server`) synchronously; false, with one line on stderr, when it cannot. */
export function buildOnce(target = 'cli', why = 'once') {
  const { options: optionsOf, outfile, what } = TARGETS[target];
  const missing = `dm-dot: ${what} is not built (${relative(process.cwd(), outfile) || outfile} is missing): run npm run build`;
  try {
    const esbuild = createRequire(import.meta.url)('esbuild');
    process.stderr.write(`dm-dot: building ${what} ${why} (npm run build)...\n`);
    writeOutputs(esbuild.buildSync(optionsOf({ logLevel: 'silent', write: false })));
    return true;
  } catch {
    process.stderr.write(`${missing}\n`);
    return false;
  }
}

if (process.argv[1] === here) {
  // `--if-possible` (the prepare script): an install without devDependencies has no esbuild; the
  // launchers then say to run npm run build instead of the install failing.
  const ifPossible = process.argv.includes('--if-possible');
  let esbuildFound = true;
  try {
    createRequire(import.meta.url).resolve('esbuild');
  } catch {
    esbuildFound = false;
  }
  if (esbuildFound || !ifPossible) {
    await build();
    // One line per bundle: what was built, and where.
    for (const { outfile, what } of Object.values(TARGETS)) process.stderr.write(`dm-dot: built ${what} into ${relative(process.cwd(), outfile) || outfile}\n`);
  } else process.stderr.write('dm-dot: esbuild is not installed, so the CLI and the server were not built (npm run build builds them)\n');
}
