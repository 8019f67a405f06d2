#!/usr/bin/env node
// `npm start` (LOCAL-19; docs/decisions.md, "`npm start` runs a bundle"): runs the built local
// server, built first when it is missing or older than a source file under lambda/; without
// esbuild one line says to run `npm run build` and the exit code is 1.
//
// Deliberately not here: anything the server does (lambda/local/main.ts), and a check of
// node_modules (a changed dependency needs `npm ci`, which builds again).
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const bundle = fileURLToPath(new URL('../../dist/server/dm-dot-server.cjs', import.meta.url));
const sources = fileURLToPath(new URL('..', import.meta.url));
// Run, not imported: the local runtime does not import the CLI's layer (test/build/boundary.test.ts).
const buildScript = fileURLToPath(new URL('../cli/build.mjs', import.meta.url));
const require = createRequire(import.meta.url);

/** Builds both bundles in a child process; false, with one line on stderr, when it cannot. */
function buildOnce(why) {
  const missing = `dm-dot: the server is not built (${relative(process.cwd(), bundle) || bundle} is missing): run npm run build`;
  try {
    require.resolve('esbuild');
  } catch {
    process.stderr.write(`${missing}\n`);
    return false;
  }
  process.stderr.write(`dm-dot: building the server ${why} (npm run build)...\n`);
  const built = spawnSync(process.execPath, [buildScript], { stdio: ['ignore', 'ignore', 'inherit'] });
  if (built.status === 0 && existsSync(bundle)) return true;
  process.stderr.write(`${missing}\n`);
  return false;
}

/** The newest modification time of a .ts file under `dir` (a few hundred stat calls: milliseconds). */
function newestSource(dir) {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) newest = Math.max(newest, newestSource(path));
    else if (entry.name.endsWith('.ts')) newest = Math.max(newest, statSync(path).mtimeMs);
  }
  return newest;
}

const built = existsSync(bundle) ? statSync(bundle).mtimeMs : undefined;
const stale = built !== undefined && newestSource(sources) > built;
if ((built === undefined || stale) && !buildOnce(stale ? 'again (a source file changed since the last build)' : 'once')) process.exit(1);
require(bundle);
