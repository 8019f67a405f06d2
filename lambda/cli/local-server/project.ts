/**
 * The root of the dm-dot project the CLI belongs to, found upward from where this code lives. A
 * relative DMDOT_STATE_DIR is taken from there, as `npm start` does, so `dm-dot` finds the same
 * state directory from any folder of the project.
 *
 * Deliberately not here: the current directory, which never decides where the state is.
 */
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';

export function findProjectRoot(from: string = __dirname): string {
  for (let dir = from; ; dir = dirname(dir)) {
    try {
      const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { name?: unknown };
      if (pkg.name === 'dm-dot') return dir;
    } catch {
      // no package.json here, or not JSON: look further up
    }
    if (dirname(dir) === dir) throw new Error(`dm-dot: cannot find the dm-dot project (package.json) above ${from}`);
  }
}
