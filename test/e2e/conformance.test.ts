/**
 * MCP conformance: the official conformance suites against the local runtime, both eras.
 * - `@modelcontextprotocol/conformance@0.2.0-alpha.12` with every 2026-07-28 server scenario
 *   (pending ones included; extension scenarios such as tasks and skills left out: dm-dot neither
 *   implements nor declares them);
 * - the same suite with every 2025-11-25 (initialize handshake) server scenario, since the one
 *   endpoint serves both eras;
 * - `@modelcontextprotocol/conformance@0.1.16` with every legacy (initialize) server scenario.
 *
 * The suites cannot send credentials, so they talk to a loopback proxy that adds the API key as
 * `Authorization: Bearer` and forwards Host and Origin unchanged; the runtime is started with the
 * proxy's own address in DMDOT_ALLOWED_HOSTS (as a user lists a tunnel's host name, docs/contract/http.md) and no
 * allowed origin: the scenario's `Origin: http://<that host>` passes as the server's own origin,
 * so `dns-rebinding-protection` tests the runtime's own acceptance and refusal of Host/Origin.
 *
 * Every failing check must be listed in `conformance/expected-failures.<suite>.txt` with its
 * reason (almost all are the suites' fixture tools, resources and prompts, which dm-dot
 * deliberately does not have), and every listed check must still fail: a fix makes the entry
 * stale and the test fails until it is removed.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startServer, type RunningServer } from '../support/e2e';
import { startAuthProxy, type AuthProxy } from './conformance/proxy';
import { assertSuiteOutcome, formatTable, runSuite, SUITES, type SuiteOutcome } from './conformance/suites';

describe('CON-1: MCP conformance suites against the local runtime', { timeout: 280_000 }, () => {
  let proxy: AuthProxy;
  let server: RunningServer;
  let workDir: string;
  let outcomes: SuiteOutcome[] = [];
  let keep = false;

  before(
    async () => {
      workDir = mkdtempSync(join(tmpdir(), 'dmdot-conformance-'));
      const key = randomBytes(24).toString('base64url');
      proxy = await startAuthProxy(key);
      server = await startServer({ DMDOT_ALLOWED_HOSTS: `127.0.0.1:${proxy.port}` }, { key });
      proxy.setTarget(server.url);
      // All runs at once: the server is stateless and no scenario changes its state.
      outcomes = await Promise.all(SUITES.map((suite) => runSuite(suite, `${proxy.origin}/mcp`, workDir)));
      for (const o of outcomes) process.stdout.write(`\n${formatTable(`${o.suite.label} (${o.suite.name}, ${(o.ms / 1000).toFixed(1)} s)`, o.judgement)}\n`);
    },
    { timeout: 200_000 },
  );

  after(async () => {
    await server?.stop();
    await proxy?.close();
    if (workDir && !keep) rmSync(workDir, { recursive: true, force: true });
    else if (workDir) process.stdout.write(`conformance results kept in ${workDir}\n`);
  });

  for (const suite of SUITES) {
    it(`HTTP-13, MCP-2, MCP-3, MCP-6, MCP-8, MCP-9, MCP-10, MCP-11: ${suite.name}: every failing check is expected, and every expected failure still fails`, () => {
      try {
        assertSuiteOutcome(
          outcomes.find((o) => o.suite === suite),
          'the server',
        );
      } catch (error) {
        keep = true;
        throw error;
      }
    });
  }

  it('HTTP-13, HTTP-14, HTTP-15, LOCAL-13: the DNS rebinding refusal came from the runtime itself, behind the pass-through proxy', () => {
    const foreign = proxy.forwarded.filter((f) => f.host === 'evil.example.com');
    assert.ok(foreign.length >= SUITES.length, 'each suite sent a foreign Host through the proxy');
    assert.ok(
      foreign.every((f) => f.status === 403),
      `the runtime refused every foreign Host: ${JSON.stringify(foreign)}`,
    );
    const own = proxy.forwarded.filter((f) => f.host === `127.0.0.1:${proxy.port}` && f.origin === proxy.origin && f.method === 'POST');
    assert.ok(
      own.some((f) => f.status === 200),
      'the runtime accepted the allowed Host with its own origin, no DMDOT_ALLOWED_ORIGINS',
    );
  });

  it('HTTP-10: the API key the proxy added never appears in the runtime output', () => {
    assert.ok(proxy.forwarded.length > 100, 'the suites exercised the runtime through the proxy');
    assert.ok(![...server.stdout, ...server.stderr].some((line) => line.includes(server.key)));
  });
});
