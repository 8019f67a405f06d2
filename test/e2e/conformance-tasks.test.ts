/**
 * MCP conformance, Tasks extension: every `tasks-*` scenario of
 * `@modelcontextprotocol/conformance@0.2.0-alpha.12` (the `io.modelcontextprotocol/tasks`
 * extension, SEP-2663) against the local runtime, with a real dot.
 *
 * The scenarios drive fixture tools of the suite's reference server (`greet`, `slow_compute`,
 * `failing_job`, ...), which dm-dot does not have: it has exactly one tool, `send_to_dot`. A
 * loopback proxy (conformance/fixture-proxy.ts) adds the API key and turns a call to `greet`,
 * `slow_compute` or `failing_job` into a `send_to_dot` call whose message names the fixture, and
 * the dot behaves as the fixture would: it answers `slow_compute seconds=N` with 200 after N
 * seconds, `failing_job` with 400 after a second (a permanent failure: the task completes with
 * `isError: true`), and `greet` at once. With an 800 ms wait window a slow delivery becomes a task,
 * and what the suite checks is dm-dot's own task over a real delivery; the 60-second
 * `slow_compute` the suite cancels is a real slow dot (any attempt is cut off by dm-dot's 5 s
 * deadline, DEL-PIPE-9, and the event stays queued), so `tasks/cancel` meets an unsettled event
 * (TASK-8). Other fixtures (`protocol_error_job`,
 * `confirm_delete`, `multi_input`, `test_tool_with_task`) pass through and get dm-dot's
 * unknown-tool answer.
 *
 * Every failing check must be listed in `conformance/expected-failures.tasks.txt` with its reason,
 * and every listed check must still fail.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { newSecret, rpc, startReceiver, startServer, type ReceivedRequest, type Responder, type RunningServer } from '../support/e2e';
import { startFixtureProxy, type FixtureProxy } from './conformance/fixture-proxy';
import { assertSuiteOutcome, formatTable, readResults, runEachScenario, TASKS_SUITE, type Check, type SuiteOutcome } from './conformance/suites';

/** dm-dot's deadline for one outbound request (docs/contract/delivery.md). */
const OUTBOUND_DEADLINE_MS = 5_000;

/**
 * The dot: echoes the challenge, and answers each message as the fixture it stands for would. A
 * `slow_compute` slower than dm-dot's outbound deadline is cut off at that deadline whatever it
 * would answer later, so it never answers (rather than keep a 60-second timer alive past the run).
 */
function fixtureDot(r: ReceivedRequest): ReturnType<Responder> {
  if (r.json?.type === 'verification') return { status: 200, body: JSON.stringify({ challenge: r.json.challenge }) };
  const message = String(r.json?.data?.message ?? '');
  const slow = /^slow_compute seconds=(\d+(?:\.\d+)?)/.exec(message);
  if (slow) return Number(slow[1]) * 1000 >= OUTBOUND_DEADLINE_MS ? 'hang' : { status: 200, delayMs: Number(slow[1]) * 1000 };
  if (message === 'failing_job') return { status: 400, body: '{"error":"failing_job always fails"}', delayMs: 1000 };
  return { status: 200 };
}

/** One check of a scenario as the suite wrote it, details included. */
function checkOf(outcome: SuiteOutcome, workDir: string, scenario: string, id: string): Check & { details?: Record<string, unknown> } {
  const checks = readResults(join(workDir, outcome.suite.name, 'results')).get(scenario) ?? [];
  const found = checks.filter((c) => c.id === id);
  assert.equal(found.length, 1, `${scenario}/${id} reported once: ${JSON.stringify(found)}`);
  return found[0]!;
}

describe('MCP conformance, Tasks extension scenarios, against the local runtime', { timeout: 200_000 }, () => {
  let proxy: FixtureProxy;
  let server: RunningServer;
  let dot: Awaited<ReturnType<typeof startReceiver>>;
  let workDir: string;
  let outcome: SuiteOutcome | undefined;
  let keep = false;

  before(
    async () => {
      workDir = mkdtempSync(join(tmpdir(), 'dmdot-conformance-tasks-'));
      const key = randomBytes(24).toString('base64url');
      proxy = await startFixtureProxy(key);
      // The wait window sits under the suite's shortest slow call (slow_compute seconds=1, and the
      // 1 s failing_job), which therefore always becomes a task, and leaves an immediate call room
      // to be answered synchronously on a loaded machine (300 ms was missed with the suite's
      // files running side by side).
      server = await startServer({ DMDOT_ALLOWED_HOSTS: `127.0.0.1:${proxy.port}`, DMDOT_DELIVERY_WAIT_MS: '800', DMDOT_RETRY_DELAYS: '2,2,2' }, { key });
      proxy.setTarget(server.url);
      dot = await startReceiver(fixtureDot);
      const subscribed = await rpc(server, 'events/subscribe', {
        name: 'message.created',
        arguments: {},
        delivery: { mode: 'webhook', url: dot.url('/dot'), secret: newSecret() },
      });
      assert.equal(subscribed.status, 200, JSON.stringify(subscribed.body));
      assert.ok(subscribed.body.result, `subscribed: ${JSON.stringify(subscribed.body)}`);
      outcome = await runEachScenario(TASKS_SUITE, `${proxy.origin}/mcp`, workDir);
      process.stdout.write(`\n${formatTable(`${outcome.suite.label} (${outcome.suite.name}, ${(outcome.ms / 1000).toFixed(1)} s)`, outcome.judgement)}\n`);
    },
    { timeout: 180_000 },
  );

  after(async () => {
    await dot?.close();
    await server?.stop();
    await proxy?.close();
    if (workDir && !keep) rmSync(workDir, { recursive: true, force: true });
    else if (workDir) process.stdout.write(`conformance results kept in ${workDir}\n`);
  });

  const keeping = (check: () => void) => () => {
    try {
      check();
    } catch (error) {
      keep = true;
      throw error;
    }
  };

  it(
    'TASK-1, TASK-3, TASK-7: tasks: every failing check is expected, and every expected failure still fails',
    keeping(() => assertSuiteOutcome(outcome, 'the server (or the fixture stand-in)')),
  );

  it(
    'TASK-8: tasks/cancel of a running slow_compute is acknowledged and the task then reads cancelled',
    keeping(() => {
      assert.ok(outcome);
      const cancel = checkOf(outcome, workDir, 'tasks-lifecycle', 'sep-2663-cancel-ack-empty-result');
      assert.equal(cancel.status, 'SUCCESS', cancel.errorMessage);
      assert.equal(cancel.details?.statusAfterCancel, 'cancelled', JSON.stringify(cancel.details));
      // The cancel was real: the dot got the inline attempt and nothing after it.
      const copies = dot.events().filter((e) => e.json?.data?.message === 'slow_compute seconds=60 label=lifecycle-cancel');
      assert.equal(copies.length, 1, 'one attempt reached the dot, none after the cancel');
    }),
  );

  it(
    'TASK-4: a task is created, completes with the inlined result, and a tool error completes with isError',
    keeping(() => {
      assert.ok(outcome);
      for (const id of ['sep-2663-result-type-task-on-create', 'sep-2663-tasks-get-status-completed', 'sep-2663-tool-error-uses-completed-status']) {
        const check = checkOf(outcome, workDir, 'tasks-lifecycle', id);
        assert.equal(check.status, 'SUCCESS', `tasks-lifecycle/${id}: ${check.errorMessage}`);
      }
    }),
  );

  it(
    'the fixture stand-in was used: each fixture call became a send_to_dot call the runtime answered, and reached the dot',
    keeping(() => {
      const tools = new Set(proxy.rewrites.map((r) => r.tool));
      assert.deepEqual([...tools].sort(), ['failing_job', 'greet', 'slow_compute']);
      // The runtime answered each one: 200, except the call the suite sent with a mismatched
      // Mcp-Method, which it refused (400, -32020) with the body rewritten.
      const refused = proxy.rewrites.filter((r) => r.status !== 200);
      assert.deepEqual(
        refused.map((r) => [r.message, r.status]),
        [['greet header-mismatch', 400]],
        JSON.stringify(refused),
      );
      assert.ok(
        proxy.rewrites.every((r) => r.headerRewritten),
        'every fixture call named its tool in Mcp-Name, rewritten with the body',
      );
      assert.ok(proxy.passedThrough.includes('protocol_error_job'), `protocol_error_job went through unchanged: ${proxy.passedThrough.join(', ')}`);
      const messages = new Set(dot.events().map((e) => e.json?.data?.message));
      for (const r of proxy.rewrites) {
        if (r.status === 200) assert.ok(messages.has(r.message), `the dot received "${r.message}"`);
        else assert.ok(!messages.has(r.message), `the refused "${r.message}" was not sent to the dot`);
      }
    }),
  );

  it('the API key the proxy added never appears in the runtime output', () => {
    assert.ok(![...server.stdout, ...server.stderr].some((line) => line.includes(server.key)));
  });
});
