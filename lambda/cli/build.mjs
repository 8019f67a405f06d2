// Bundles the operator CLI (lambda/cli/entry.ts) into dist/cli/dm-dot.cjs with esbuild: one
// CommonJS file, with the small pure-JavaScript packages it needs inside (zod/mini and
// standardwebhooks: one file parses faster than their many). The heavy ones stay outside and are
// required from node_modules only when a command needs them: the AWS SDK (--aws) and lmdb (a
// native addon: the local database). `dm-dot --version` loads no package at all, and every command
// module is initialised only when that command runs, so `dm-dot events --json` starts fast. Run by `npm run build` and by the
// prepare script (`npm ci`, `npm install`); the launcher (dm-dot.mjs) runs it once when the
// bundle is missing.
import { mkdirSync, renameSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = fileURLToPath(import.meta.url);
const root = join(dirname(here), '..', '..');
export const OUTFILE = join(root, 'dist', 'cli', 'dm-dot.cjs');

/** Required at run time from node_modules, never bundled. */
export const EXTERNAL = ['@aws-sdk/*', '@smithy/*', 'lmdb', 'esbuild'];

/** The esbuild options; a test may add its own (metafile, another outfile). */
export function options(extra = {}) {
  return {
    entryPoints: [join(root, 'lambda', 'cli', 'entry.ts')],
    outfile: OUTFILE,
    bundle: true,
    platform: 'node',
    target: 'node20',
    format: 'cjs',
    external: EXTERNAL,
    banner: { js: '#!/usr/bin/env node' },
    legalComments: 'none',
    logLevel: 'warning',
    ...extra,
  };
}

/** Writes the bundle through a temporary file and a rename: a CLI starting meanwhile reads the old file or the new one, never half of one. */
function writeOutputs(result) {
  for (const file of result.outputFiles ?? []) {
    mkdirSync(dirname(file.path), { recursive: true });
    const tmp = `${file.path}.tmp-${process.pid}`;
    writeFileSync(tmp, file.contents);
    renameSync(tmp, file.path);
  }
  return result;
}

export async function build(extra = {}) {
  const esbuild = await import('esbuild');
  return writeOutputs(await esbuild.build(options({ ...extra, write: false })));
}

/** For the launcher: builds synchronously; false, with one line on stderr, when it cannot. */
export function buildOnce() {
  const missing = `dm-dot: the CLI is not built (${relative(process.cwd(), OUTFILE) || OUTFILE} is missing): run npm run build`;
  try {
    const esbuild = createRequire(import.meta.url)('esbuild');
    process.stderr.write('dm-dot: building the CLI once (npm run build)...\n');
    writeOutputs(esbuild.buildSync(options({ logLevel: 'silent', write: false })));
    return true;
  } catch {
    process.stderr.write(`${missing}\n`);
    return false;
  }
}

if (process.argv[1] === here) {
  // `--if-possible` (the prepare script): an install without devDependencies has no esbuild; the
  // launcher then says to run npm run build instead of the install failing.
  const ifPossible = process.argv.includes('--if-possible');
  let esbuildFound = true;
  try {
    createRequire(import.meta.url).resolve('esbuild');
  } catch {
    esbuildFound = false;
  }
  if (esbuildFound || !ifPossible) await build();
  else process.stderr.write('dm-dot: esbuild is not installed, so the CLI was not built (npm run build builds it)\n');
}
