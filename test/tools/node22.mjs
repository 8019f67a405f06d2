// Runs its arguments with the Node the end-to-end tests run on (test-node.mjs: 22 or later; the
// AI SDK and the conformance suites declare Node 22). Exits with the child's code.
import { spawnSync } from 'node:child_process';
import { noTestNode, testNode } from './test-node.cjs';

const node = testNode();
if (!node) {
  console.error(noTestNode());
  process.exit(1);
}
const result = spawnSync(node.path, process.argv.slice(2), { stdio: 'inherit' });
if (result.error) {
  console.error(`cannot run ${node.source}'s Node (${node.path}): ${result.error.message}`);
  process.exit(1);
}
process.exit(result.status ?? 1);
