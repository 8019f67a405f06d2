// One short line per finished test file, appended to the file named by DMDOT_PROGRESS_FILE, which
// test/tools/run-tests.mjs prints as it grows while it holds each step's full output for the end.
// Two reporters in one module: the default export is a Jest reporter (`--reporters`), and
// `nodeTest` a node:test reporter (`--test-reporter`, through progress-node.mjs).
//
// Deliberately not here: anything when DMDOT_PROGRESS_FILE is unset (Jest and node:test print
// their own progress to a terminal), and the details of a failure (those are in the step's output).
'use strict';
const { appendFileSync } = require('node:fs');
const { relative } = require('node:path');

const root = require('node:path').join(__dirname, '..', '..');

function write(line) {
  const file = process.env.DMDOT_PROGRESS_FILE;
  if (!file) return;
  try {
    appendFileSync(file, `${line}\n`);
  } catch {
    // Progress is a courtesy: a file that cannot be written changes no test's outcome.
  }
}

/** `PASS test/unit/x.test.ts: 12 passed in 3.4 s` */
function line(step, ok, file, counts, ms) {
  const parts = Object.entries(counts)
    .filter(([, n]) => n > 0)
    .map(([what, n]) => `${n} ${what}`);
  const seconds = ms === undefined ? '' : ` in ${(ms / 1000).toFixed(1)} s`;
  return `${step}: ${ok ? 'PASS' : 'FAIL'} ${relative(root, file)}: ${parts.join(', ') || 'no tests'}${seconds}`;
}

class JestProgress {
  onTestResult(_test, result) {
    const ms = result.perfStats ? result.perfStats.end - result.perfStats.start : undefined;
    const ok = !result.failureMessage && result.numFailingTests === 0 && !result.testExecError;
    const counts = { passed: result.numPassingTests, failed: result.numFailingTests, skipped: result.numPendingTests + result.numTodoTests };
    write(line('jest', ok, result.testFilePath, counts, ms));
  }
}

/** node:test: a `test:summary` with a file ends that file (one per file under process isolation). */
async function* nodeTest(source) {
  for await (const event of source) {
    if (event.type !== 'test:summary' || !event.data.file) continue;
    const { counts, duration_ms: ms, success } = event.data;
    const shown = { passed: counts.passed, failed: counts.failed + counts.cancelled, skipped: counts.skipped + counts.todo };
    write(line('e2e', success, event.data.file, shown, ms));
  }
}

module.exports = JestProgress;
module.exports.nodeTest = nodeTest;
