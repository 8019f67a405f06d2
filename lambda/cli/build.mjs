// Bundles the two programs dm-dot runs as built JavaScript, with esbuild, each one CommonJS file:
// - the operator CLI (lambda/cli/entry.ts) into dist/cli/dm-dot.cjs, with the small pure-JavaScript
//   packages it needs inside (zod/mini: one file parses faster than its many). The heavy ones stay
//   outside and are required from node_modules only when a command needs them: the AWS SDK (--aws)
//   and lmdb (a native addon: the local database);
// - the local server (lambda/local/main.ts, what `npm start` and `dm-dot service` run) into
//   dist/server/dm-dot-server.cjs, with the MCP SDK and zod inside and lmdb outside, and the SDK's
//   JSON Schema shim aliased as for the Lambda bundles (lib/bundling.ts says why). What either
//   saves at start-up: docs/performance.md.
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

/** Required at run time from node_modules, never bundled. */
const EXTERNAL = ['@aws-sdk/*', '@smithy/*', 'lmdb', 'esbuild'];

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

/** The two bundles, the CLI first: what each is, as the messages name it, and its esbuild options. */
const BUNDLES = [
  { what: 'the CLI', options: { ...COMMON, entryPoints: [join(root, 'lambda', 'cli', 'entry.ts')], outfile: join(root, 'dist', 'cli', 'dm-dot.cjs') } },
  {
    what: 'the server',
    options: {
      ...COMMON,
      entryPoints: [join(root, 'lambda', 'local', 'main.ts')],
      outfile: join(root, 'dist', 'server', 'dm-dot-server.cjs'),
      // The ES builds let esbuild leave out what the server never imports.
      mainFields: ['module', 'main'],
      alias: { '@modelcontextprotocol/server/_shims': join(root, 'lambda', 'mcp', 'sdk-shims.ts') },
    },
  },
];

/** A bundle's file as the messages name it: relative to the current directory. */
const shown = (outfile) => relative(process.cwd(), outfile) || outfile;

/** Writes a bundle through a temporary file and a rename: a program starting meanwhile reads the old file or the new one, never half of one. */
function writeOutputs(result) {
  for (const file of result.outputFiles ?? []) {
    mkdirSync(dirname(file.path), { recursive: true });
    const tmp = `${file.path}.tmp-${process.pid}`;
    writeFileSync(tmp, file.contents);
    renameSync(tmp, file.path);
  }
}

/** For the CLI's launcher: builds the CLI synchronously; false, with one line on stderr, when it cannot. */
export function buildOnce() {
  const [{ what, options }] = BUNDLES;
  try {
    const esbuild = createRequire(import.meta.url)('esbuild');
    process.stderr.write(`dm-dot: building ${what} once (npm run build)...\n`);
    writeOutputs(esbuild.buildSync({ ...options, logLevel: 'silent', write: false }));
    return true;
  } catch {
    process.stderr.write(`dm-dot: ${what} is not built (${shown(options.outfile)} is missing): run npm run build\n`);
    return false;
  }
}

if (process.argv[1] === here) {
  // `--if-possible` (the prepare script): an install without devDependencies has no esbuild; the
  // launchers then say to run npm run build instead of the install failing.
  const ifPossible = process.argv.includes('--if-possible');
  const esbuild = await import('esbuild').catch((error) => {
    // Only its absence: an esbuild that is there but cannot load (a missing platform binary) says
    // why, and the install fails as it should.
    if (!ifPossible || error?.code !== 'ERR_MODULE_NOT_FOUND') throw error;
  });
  if (esbuild) {
    await Promise.all(BUNDLES.map(async ({ options }) => writeOutputs(await esbuild.build({ ...options, write: false }))));
    // One line per bundle: what was built, and where.
    for (const { what, options } of BUNDLES) process.stderr.write(`dm-dot: built ${what} into ${shown(options.outfile)}\n`);
  } else process.stderr.write('dm-dot: esbuild is not installed, so the CLI and the server were not built (npm run build builds them)\n');
}
