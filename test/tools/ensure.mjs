// Installs the test-only tools (the MCP conformance suites and, where this machine's Node is older
// than 22, a Node of the Lambda runtime's major: see test-node.mjs) from test/tools/package-lock.json
// when they are missing, so `npm ci && npm test` is the whole set-up. Does nothing when present.
// Kept out of the root package because a node-<platform>-<arch> package links a `node` binary into
// .bin, which would silently move every npm script of the project onto that Node.
import { existsSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { machineNodeIsNewEnough, noTestNode, testNode } from './test-node.cjs';

const here = dirname(fileURLToPath(import.meta.url));
const suites = ['conformance-legacy', 'conformance-next'].map((name) => join(here, 'node_modules', name, 'package.json'));
if (!suites.every((file) => existsSync(file)) || !testNode()) {
  // With a new enough Node here, the optional Node packages are not downloaded at all.
  const omit = machineNodeIsNewEnough ? ['--omit=optional'] : [];
  console.log(`test tools: installing the conformance suites${machineNodeIsNewEnough ? '' : ' and a Node for the end-to-end tests'} into test/tools (once)`);
  execFileSync('npm', ['ci', '--no-audit', '--no-fund', '--loglevel=error', ...omit], { cwd: here, stdio: 'inherit' });
}
if (!testNode()) {
  console.error(`test tools: ${noTestNode()}`);
  process.exit(1);
}
