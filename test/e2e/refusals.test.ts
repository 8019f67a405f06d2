/**
 * A refusal is a refusal, end to end on the local runtime as `npm start` runs it: with its
 * connection cap full, a real POST to `/v1/messages` and a real `send_to_dot` past the cap are
 * answered `503 busy`, and the real receiver never gets what they carried, neither at once nor
 * from the worker afterwards.
 */
import { it } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { echoing, newSecret, queueOf, rpc, startReceiver, startServer, until, waitFor } from '../support/e2e';

/** The runtime's cap (lambda/local/runtime.ts MAX_CONNECTIONS). */
const CAP = 256;

/** Sends one raw HTTP request on a new connection; resolves with all the server wrote until it closed. */
function rawRequest(port: number, request: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1');
    let text = '';
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => (text += chunk));
    socket.on('error', (error) => (text ? resolve(text) : reject(error)));
    socket.on('close', () => resolve(text));
    socket.on('connect', () => socket.write(request));
  });
}

function post(port: number, path: string, key: string, body: string, extra: Record<string, string> = {}): string {
  const headers = {
    host: `127.0.0.1:${port}`,
    'content-type': 'application/json',
    authorization: `Bearer ${key}`,
    'content-length': String(Buffer.byteLength(body)),
    ...extra,
  };
  return `POST ${path} HTTP/1.1\r\n${Object.entries(headers)
    .map(([k, v]) => `${k}: ${v}`)
    .join('\r\n')}\r\n\r\n${body}`;
}

it('LOCAL-FAULT-1, LOCAL-FAULT-2: past a full connection cap, /v1/messages and send_to_dot are answered 503 busy and never delivered', {
  timeout: 60_000,
}, async () => {
  const receiver = await startReceiver(echoing());
  const server = await startServer({ DMDOT_DELIVERY_WAIT_MS: '0', DMDOT_RETRY_DELAYS: '1' });
  const held: net.Socket[] = [];
  try {
    const port = Number(new URL(server.url).port);
    await rpc(server, 'events/subscribe', { name: 'message.created', arguments: {}, delivery: { mode: 'webhook', url: receiver.url(), secret: newSecret() } });
    // Fill the cap with connections that hold a descriptor and send nothing.
    for (let i = 0; i < CAP; i++) {
      const socket = net.connect(port, '127.0.0.1');
      socket.on('error', () => undefined);
      held.push(socket);
    }
    await Promise.all(held.map((socket) => new Promise((r) => (socket.connecting ? socket.once('connect', r) : r(undefined)))));
    // The server takes connections in the order they were made, so once a later one is answered
    // busy it has counted every held one: the fact a fixed pause here only hoped for.
    const probe = await rawRequest(port, `GET /healthz HTTP/1.1\r\nhost: 127.0.0.1:${port}\r\nconnection: close\r\n\r\n`);
    assert.match(probe, /^HTTP\/1\.1 503 /, 'the cap is full');

    const rest = rawRequest(port, post(port, '/v1/messages', server.key, JSON.stringify({ message: 'refused over rest' })));
    const mcpBody = JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'tools/call',
      params: {
        name: 'send_to_dot',
        arguments: { message: 'refused over mcp' },
        _meta: { 'io.modelcontextprotocol/protocolVersion': '2026-07-28', 'io.modelcontextprotocol/clientCapabilities': {} },
      },
    });
    const mcp = rawRequest(
      port,
      post(port, '/mcp', server.key, mcpBody, {
        accept: 'application/json, text/event-stream',
        'mcp-protocol-version': '2026-07-28',
        'mcp-method': 'tools/call',
        'mcp-name': 'send_to_dot',
      }),
    );
    for (const answer of await Promise.all([rest, mcp])) {
      assert.match(answer, /^HTTP\/1\.1 503 /);
      assert.match(answer, /"code":"busy"/);
      const [head, body] = answer.split('\r\n\r\n');
      const length = Number(/content-length: (\d+)/i.exec(head!)?.[1]);
      assert.equal(length, Buffer.byteLength(body!), 'Content-Length is the body’s byte length');
    }

    // Free the cap; a send now is accepted and delivered, and it is the only message the dot ever gets.
    for (const socket of held) socket.destroy();
    held.length = 0;
    // Until the server has seen the held connections close, a send is still refused busy.
    const accepted = await until('a send accepted once the cap is free', async () => {
      const answer = await fetch(`${server.url}/v1/messages`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${server.key}` },
        body: JSON.stringify({ message: 'accepted after the cap freed' }),
      });
      const body = (await answer.json()) as { error?: { code?: string } };
      return answer.status === 503 && body.error?.code === 'busy' ? undefined : answer;
    });
    assert.equal(accepted.status, 202);
    await waitFor('the accepted message delivered', () => receiver.events().some((e) => e.raw.includes('accepted after the cap freed')));
    // Nothing is left for the worker to deliver: a refused send was never queued.
    await until('an empty queue', async () => {
      const queue = await queueOf(server);
      return (queue.queued === 0 && queue.deadLetters === 0) || undefined;
    });
    const texts = receiver.events().map((e) => e.raw.toString('utf8'));
    assert.ok(!texts.some((t) => t.includes('refused over')), `a refused message reached the dot: ${texts.join(' | ')}`);
    assert.equal(receiver.events().length, 1);
    assert.equal(await server.stop(), 0);
  } finally {
    for (const socket of held) socket.destroy();
    await receiver.close();
    await server.stop();
  }
});

it('LOCAL-9: a start that fails on a port in use writes no new API key', { timeout: 30_000 }, async () => {
  const holder = net.createServer();
  await new Promise<void>((done) => holder.listen(0, '127.0.0.1', done));
  const port = (holder.address() as net.AddressInfo).port;
  const stateDir = mkdtempSync(join(tmpdir(), 'dmdot-busyport-'));
  try {
    await assert.rejects(startServer({ MCP_API_KEY: '', PORT: String(port) }, { stateDir }), /exited with 1.*in use/s);
    assert.ok(!existsSync(join(stateDir, 'api-key')), 'no key file was written');
  } finally {
    holder.close();
    rmSync(stateDir, { recursive: true, force: true });
  }
});
