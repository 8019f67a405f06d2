/**
 * The pup door on `npm start` (docs/contract: pup, local-runtime): the settings PUP_SIGNING_SECRETS, PUP_ROTATED_AT and
 * PUP_MANIFEST_FILE (a bad one stops the server with exit code 2 and a sentence naming it), and
 * signed requests over real HTTP: the raw bytes reach the verifier unchanged through node:http.
 * Requests are signed here with node:crypto, independently of the production code.
 */
import assert from 'node:assert/strict';
import { createHmac, randomBytes } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { newSecret, startServer, type RunningServer } from '../support/e2e';
import { modernBody, modernHeaders } from '../support/rpc';

function sign(secret: string, id: string, ts: number, body: Buffer): string {
  const key = Buffer.from(secret.slice('whsec_'.length), 'base64');
  return `v1,${createHmac('sha256', key)
    .update(Buffer.concat([Buffer.from(`${id}.${ts}.`), body]))
    .digest('base64')}`;
}

async function signedPost(
  server: RunningServer,
  path: string,
  body: string,
  secret: string,
  id = `msg_${randomBytes(8).toString('hex')}`,
  extra: Record<string, string> = {},
) {
  const bytes = Buffer.from(body, 'utf8');
  const ts = Math.floor(Date.now() / 1000);
  const response = await fetch(`${server.url}${path}`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      'webhook-id': id,
      'webhook-timestamp': String(ts),
      'webhook-signature': sign(secret, id, ts, bytes),
      ...extra,
    },
    body: bytes,
  });
  return { status: response.status, text: await response.text() };
}

describe('PUP-1: pup door on the local runtime', () => {
  it('PUP-5: a manifest file that is not JSON stops the server with exit code 2, naming PUP_MANIFEST_FILE', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'dmdot-pup-'));
    const file = join(dir, 'manifest.json');
    writeFileSync(file, '{"name": "dm-dot",');
    await assert.rejects(
      startServer({ PUP_MANIFEST_FILE: file }),
      (error: Error) => /exited with 2/.test(error.message) && /PUP_MANIFEST_FILE/.test(error.message),
    );
    await assert.rejects(
      startServer({ PUP_MANIFEST_FILE: join(dir, 'missing.json') }),
      (error: Error) => /exited with 2/.test(error.message) && /PUP_MANIFEST_FILE/.test(error.message),
    );
  });

  it('PUP-4: a malformed signing secret stops the server with exit code 2, naming the setting and not the secret', async () => {
    const bad = 'whsec_c2hvcnQ=';
    await assert.rejects(startServer({ PUP_SIGNING_SECRETS: `${newSecret()},${bad}`, PUP_ROTATED_AT: '2026-11-30T12:00:00Z' }), (error: Error) => {
      assert.match(error.message, /exited with 2/);
      assert.match(error.message, /PUP_SIGNING_SECRETS/);
      assert.ok(!error.message.includes('c2hvcnQ'), 'the secret is not quoted');
      return true;
    });
    await assert.rejects(startServer({ PUP_SIGNING_SECRETS: `${newSecret()},${newSecret()}` }), /PUP_ROTATED_AT/);
    await assert.rejects(startServer({ PUP_SIGNING_SECRETS: newSecret(), PUP_ROTATED_AT: 'yesterday' }), /PUP_ROTATED_AT/);
  });

  it('PUP-5, PUP-7, PUP-15, PUP-16, PUP-17: serves the manifest file as is, and signed MCP, challenge and event requests over real HTTP', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'dmdot-pup-'));
    const file = join(dir, 'manifest.json');
    const manifest = '{\n  "name": "my dot",\n  "endpoint": "https://example.test/pup/mcp"\n}\n';
    writeFileSync(file, manifest);
    const current = newSecret();
    const previous = newSecret();
    const server = await startServer({ PUP_MANIFEST_FILE: file, PUP_SIGNING_SECRETS: `${current},${previous}`, PUP_ROTATED_AT: new Date().toISOString() });
    try {
      const served = await fetch(`${server.url}/pup/manifest.json`);
      assert.equal(served.status, 200);
      assert.equal(await served.text(), manifest);

      const call = modernBody('tools/call', { name: 'send_to_dot', arguments: { message: 'héllo from pup' } }, 1, {
        'io.puphq/context': { installationId: 'inst_1', askerId: 'u_1', channelId: 'c_1' },
      });
      const mcpHeaders = modernHeaders('tools/call', { 'mcp-name': 'send_to_dot' });
      const answer = await signedPost(server, '/pup/mcp', call, previous, undefined, mcpHeaders);
      assert.equal(answer.status, 200, answer.text);
      assert.match(answer.text, /isError/);

      const refused = await signedPost(server, '/pup/mcp', call, newSecret(), undefined, mcpHeaders);
      assert.equal(refused.status, 401);
      assert.deepEqual(Object.keys(JSON.parse(refused.text)), ['error']);
      assert.deepEqual(Object.keys(JSON.parse(refused.text).error).sort(), ['code', 'message']);
      assert.equal(JSON.parse(refused.text).error.code, 'invalid_signature');

      const challenge = await signedPost(server, '/pup/challenge', '"nonce-1"', current);
      assert.deepEqual(challenge, { status: 200, text: '"nonce-1"' });

      const id = `msg_${randomBytes(8).toString('hex')}`;
      const event = JSON.stringify({
        version: '1',
        id,
        eventId: 'e_1',
        occurredAt: new Date().toISOString(),
        event: { type: 'member.joined', memberId: 'm_1' },
        context: { installationId: 'inst_1' },
      });
      const first = await signedPost(server, '/pup/events', event, current, id);
      const second = await signedPost(server, '/pup/events', event, current, id);
      assert.deepEqual(first, { status: 200, text: '{}' });
      assert.deepEqual(second, first);
    } finally {
      await server.stop();
    }
    const logs = server.stderr.join('\n');
    assert.equal(logs.split('\n').filter((line) => line.includes('"pup_member_event"')).length, 1, 'one effect for two deliveries');
    const everything = [...server.stdout, ...server.stderr].join('\n');
    for (const secret of [current, previous]) {
      const bytes = Buffer.from(secret.slice(6), 'base64');
      for (const form of [secret.slice(6), bytes.toString('base64url'), bytes.toString('hex'), encodeURIComponent(secret)]) {
        assert.ok(!everything.includes(form), 'no signing secret, in any encoding, in what the server wrote');
      }
    }
  });

  it('PUP-10, PUP-21: over real HTTP a processed MCP call or challenge sent again is refused as replayed, a failure is processed again', async () => {
    const secret = newSecret();
    const server = await startServer({ PUP_SIGNING_SECRETS: secret });
    let first: { status: number; text: string };
    let challenged: { status: number; text: string };
    try {
      const call = modernBody('tools/call', { name: 'send_to_dot', arguments: { message: 'only once' } }, 7);
      const mcpHeaders = modernHeaders('tools/call', { 'mcp-name': 'send_to_dot' });
      const id = `msg_${randomBytes(8).toString('hex')}`;
      first = await signedPost(server, '/pup/mcp', call, secret, id, mcpHeaders);
      assert.equal(first.status, 200, first.text);
      const replayed = await signedPost(server, '/pup/mcp', call, secret, id, mcpHeaders);
      assert.equal(replayed.status, 401, replayed.text);
      assert.equal(JSON.parse(replayed.text).error.code, 'replayed');

      const nonce = `nonce-${randomBytes(8).toString('hex')}`;
      const challengeId = `msg_${randomBytes(8).toString('hex')}`;
      challenged = await signedPost(server, '/pup/challenge', JSON.stringify(nonce), secret, challengeId);
      assert.deepEqual(challenged, { status: 200, text: JSON.stringify(nonce) });
      const again = await signedPost(server, '/pup/challenge', JSON.stringify(nonce), secret, challengeId);
      assert.equal(again.status, 401);
      assert.equal(JSON.parse(again.text).error.code, 'replayed');
      assert.ok(!again.text.includes(nonce), 'the refusal carries nothing of the first answer');

      const bad = `msg_${randomBytes(8).toString('hex')}`;
      assert.equal((await signedPost(server, '/pup/challenge', '{"challenge":null}', secret, bad)).status, 400);
      assert.equal((await signedPost(server, '/pup/challenge', '{"challenge":null}', secret, bad)).status, 400, 'processed again, not refused as replayed');
      assert.equal(
        JSON.parse((await signedPost(server, '/pup/challenge', '"other"', secret, id)).text).error.code,
        'replayed',
        'the id reused for another request',
      );
    } finally {
      await server.stop();
    }
    const logs = server.stderr.join('\n').split('\n');
    assert.equal(logs.filter((line) => line.includes('"pup_request"')).length, 1, 'the MCP call ran once');
    assert.equal(logs.filter((line) => line.includes('"pup_request_replayed"')).length, 3);
    assert.equal(logs.filter((line) => line.includes('"pup_request_repeated"')).length, 0, 'no answer was repeated');
  });
});
