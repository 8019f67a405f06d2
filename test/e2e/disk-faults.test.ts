/**
 * Faults of the disk are answers, end to end on the local runtime as `npm start` runs it, on a
 * real full disk: a 4 MiB tmpfs mounted for the test (this needs root, as on CI; elsewhere the
 * test is skipped and says why).
 *
 * - Sends until the disk is full: every answer is 202 or `503 storage_unavailable`, the server
 *   stays up, no write error reaches the process as an unhandled rejection, and once space
 *   returns every accepted event is delivered.
 * - A start on a full disk exits 2 with a sentence naming the file and what to do.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { closeSync, mkdirSync, mkdtempSync, openSync, rmSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { echoing, newSecret, rpc, startReceiver, startServer, waitFor } from '../support/e2e';

const MOUNT = mkdtempSync(join(tmpdir(), 'dmdot-fulldisk-'));
let mounted = false;
let why = '';

before(() => {
  const result = spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=4m', 'tmpfs', MOUNT], { encoding: 'utf8' });
  mounted = result.status === 0;
  if (!mounted) why = `cannot mount a 4 MiB tmpfs here (${(result.stderr || result.error?.message || '').trim()}); run as root to exercise a full disk`;
});
after(() => {
  if (mounted) spawnSync('umount', ['-l', MOUNT]);
  rmSync(MOUNT, { recursive: true, force: true });
});

/** Fills what is left of the tmpfs with a ballast file; returns a function that frees it. */
function fill(dir: string): () => void {
  const ballast = join(dir, 'ballast');
  const chunk = Buffer.alloc(64 * 1024, 1);
  // Appends until ENOSPC.
  const fd = openSync(ballast, 'a');
  try {
    for (;;) writeSync(fd, chunk);
  } catch {
    // Full.
  } finally {
    closeSync(fd);
  }
  return () => rmSync(ballast, { force: true });
}

describe('a full disk', () => {
  it('LOCAL-FAULT-3: sends while the disk fills are answered 202 or 503 storage_unavailable, the server stays up, and every accepted event is delivered once space returns', {
    timeout: 120_000,
  }, async (t) => {
    if (!mounted) return t.skip(why);
    const stateDir = join(MOUNT, 'state');
    mkdirSync(stateDir);
    const receiver = await startReceiver(echoing());
    receiver.setResponder((r) => (r.json?.type === 'verification' ? { status: 200, body: JSON.stringify({ challenge: r.json.challenge }) } : { status: 503 }));
    const server = await startServer({ DMDOT_DELIVERY_WAIT_MS: '0', DMDOT_RETRY_DELAYS: '1,1,1,1,1' }, { stateDir });
    let free: (() => void) | undefined;
    try {
      await rpc(server, 'events/subscribe', {
        name: 'message.created',
        arguments: {},
        delivery: { mode: 'webhook', url: receiver.url(), secret: newSecret() },
      });
      free = fill(MOUNT);
      const accepted: string[] = [];
      const statuses = new Map<string, number>();
      for (let i = 0; i < 400; i++) {
        const response = await fetch(`${server.url}/v1/messages`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', authorization: `Bearer ${server.key}` },
          body: JSON.stringify({ message: `m${i} ${'x'.repeat(12_000)}` }),
        });
        const body = (await response.json()) as any;
        const label = `${response.status}${response.status >= 400 ? ` ${body?.error?.code}` : ''}`;
        statuses.set(label, (statuses.get(label) ?? 0) + 1);
        if (response.status === 202) accepted.push(body.eventId);
        else assert.equal(label, '503 storage_unavailable', `every refusal is storage_unavailable: ${JSON.stringify(body)}`);
      }
      assert.ok(statuses.has('503 storage_unavailable'), `the disk filled up: ${JSON.stringify([...statuses])}`);
      assert.equal(server.child.exitCode, null, `the server is still running: ${server.stderr.slice(-5).join('\n')}`);
      assert.ok(!server.stderr.some((l) => /unhandled|Commit failed/i.test(l) && !/storage/.test(l)), 'no unhandled rejection');

      // Space returns: the dot answers now, and every accepted event is delivered.
      free();
      free = undefined;
      receiver.setResponder(echoing());
      await waitFor(
        `all ${accepted.length} accepted events delivered`,
        () => {
          const got = new Set(
            receiver
              .events()
              .filter((e) => e.headers['webhook-id'])
              .map((e) => String(e.headers['webhook-id'])),
          );
          return accepted.every((id) => got.has(id));
        },
        60_000,
      );
      const after = await fetch(`${server.url}/v1/messages`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${server.key}` },
        body: JSON.stringify({ message: 'after space returned' }),
      });
      assert.equal(after.status, 202, 'it recovers without a restart');
      assert.equal(await server.stop(), 0);
    } finally {
      free?.();
      await receiver.close();
      await server.stop();
      rmSync(stateDir, { recursive: true, force: true });
    }
  });

  it('LOCAL-FAULT-4: a start on a full disk exits 2 with a sentence naming the file and what to do', { timeout: 60_000 }, async (t) => {
    if (!mounted) return t.skip(why);
    const stateDir = join(MOUNT, 'fresh');
    mkdirSync(stateDir);
    const free = fill(MOUNT);
    try {
      await assert.rejects(startServer({}, { stateDir }), (error: Error) => {
        assert.match(error.message, /exited with 2/);
        assert.match(error.message, /dm-dot\.lmdb/);
        assert.match(error.message, /no space|full/i);
        return true;
      });
    } finally {
      free();
      rmSync(stateDir, { recursive: true, force: true });
    }
  });
});
