#!/usr/bin/env node
// The `dm-dot` executable (package.json "bin"): runs the built CLI, dist/cli/dm-dot.cjs, made by
// `npm run build` (and by `npm ci` through the prepare script). When it is missing it is built
// once here; without esbuild, one line says to run `npm run build`.
import { existsSync } from 'node:fs';
import module, { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

// Node's compile cache, from Node 22.1 on (docs/performance.md, "Operator CLI start-up").
module.enableCompileCache?.();

const bundle = fileURLToPath(new URL('../../dist/cli/dm-dot.cjs', import.meta.url));
if (!existsSync(bundle) && !(await import('./build.mjs')).buildOnce()) process.exit(1);
createRequire(import.meta.url)(bundle);
