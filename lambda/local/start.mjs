#!/usr/bin/env node
// `npm start`: runs the built local server, dist/server/dm-dot-server.cjs (lambda/cli/build.mjs,
// run by `npm ci` through the prepare script and by `npm run build`), with no TypeScript loader.
// When the bundle is missing, or older than a source file under lambda/ (a clone pulled or edited
// since the last build), it is built first, once, with one line on stderr saying so; without
// esbuild one line says to run `npm run build` and the exit code is 1.
//
// Deliberately not here: anything the server does (lambda/local/main.ts), and a check of
// node_modules (a changed dependency needs `npm ci`, which builds again).
import { existsSync, readdirSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const bundle = fileURLToPath(new URL('../../dist/server/dm-dot-server.cjs', import.meta.url));
const sources = fileURLToPath(new URL('..', import.meta.url));

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
if ((built === undefined || stale) && !(await import('../cli/build.mjs')).buildOnce('server', stale ? 'again (a source file changed since the last build)' : 'once')) {
  process.exit(1);
}
createRequire(import.meta.url)(bundle);
