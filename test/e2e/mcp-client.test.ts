/**
 * The official MCP TypeScript client (v2) against the local runtime, on the 2026-07-28 era and on
 * legacy `initialize`: discover, list tools, call send_to_dot, list events, then a full
 * subscribe -> send -> signed delivery round trip through a real receiver.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import * as z from 'zod';
import { echoing, newSecret, rpc, startReceiver, startServer, verifies, waitFor, type RunningServer } from '../support/e2e';

const ListEvents = z.looseObject({ events: z.array(z.looseObject({ name: z.string() })), nextCursor: z.null() });
const Subscribed = z.looseObject({ id: z.string(), refreshBefore: z.string(), cursor: z.null(), truncated: z.boolean() });

async function connect(server: RunningServer, mode: 'modern' | 'legacy') {
  const client = new Client({ name: 'e2e', version: '1.0.0' }, { versionNegotiation: { mode: mode === 'modern' ? { pin: '2026-07-28' } : 'legacy' } });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${server.mcpUrl}?key=${encodeURIComponent(server.key)}`)));
  return client;
}

async function legacyInitialize(server: RunningServer) {
  const res = await fetch(`${server.mcpUrl}?key=${encodeURIComponent(server.key)}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
    }),
  });
  assert.equal(res.headers.get('mcp-session-id'), null, 'stateless: no session id is minted');
  const text = await res.text();
  const data = text.startsWith('{')
    ? text
    : text
        .split('\n')
        .find((l) => l.startsWith('data: '))!
        .slice(6);
  return JSON.parse(data).result;
}

for (const mode of ['modern', 'legacy'] as const) {
  describe(`EV-1, HTTP-1, LOCAL-18, MCP-1: official MCP client, ${mode} era`, () => {
    let server: RunningServer;
    before(async () => {
      server = await startServer();
    });
    after(async () => {
      assert.equal(await server.stop(), 0, 'the runtime exits cleanly on SIGTERM');
    });

    it('MCP-2, MCP-8, MCP-10, MCP-12, MCP-13, MCP-14: negotiates, sees the capabilities of docs/contract/mcp.md and the server info', async () => {
      const client = await connect(server, mode);
      const caps = client.getServerCapabilities() as Record<string, unknown>;
      assert.deepEqual(caps.tools, { listChanged: false });
      assert.equal(client.getServerVersion()?.name, 'dm-dot');
      await client.close();
      // The client's schema drops capability keys it does not know (events), so read the wire.
      const wire = mode === 'modern' ? (await rpc(server, 'server/discover')).body.result : await legacyInitialize(server);
      // The 2026-07-28 era also advertises the MCP Tasks extension (docs/http-and-errors.md, MCP Tasks); legacy cannot offer it.
      const extensions =
        mode === 'modern' ? { 'io.modelcontextprotocol/events': {}, 'io.modelcontextprotocol/tasks': {} } : { 'io.modelcontextprotocol/events': {} };
      assert.deepEqual(wire.capabilities, { tools: { listChanged: false }, events: {}, extensions });
      assert.equal(wire.serverInfo?.name ?? wire._meta['io.modelcontextprotocol/serverInfo'].name, 'dm-dot');
    });

    it('TOOL-1, TOOL-2, TOOL-3, TOOL-4, TOOL-5: lists exactly one tool, send_to_dot, with its annotations and schemas', async () => {
      const client = await connect(server, mode);
      const { tools } = await client.listTools();
      assert.equal(tools.length, 1);
      const tool = tools[0]!;
      assert.equal(tool.name, 'send_to_dot');
      assert.deepEqual(tool.inputSchema.required, ['message']);
      assert.equal(tool.inputSchema.additionalProperties, false);
      assert.equal(tool.annotations?.readOnlyHint, true);
      assert.equal(tool.annotations?.openWorldHint, true);
      assert.match(tool.description ?? '', /transmits/);
      await client.close();
    });

    it('DEL-PIPE-1, TOOL-8: send_to_dot without a subscription is a tool error, not a protocol error', async () => {
      const client = await connect(server, mode);
      const result = await client.callTool({ name: 'send_to_dot', arguments: { message: 'hello' } });
      assert.equal(result.isError, true);
      assert.match((result.content as { text: string }[])[0]!.text, /No dot is subscribed/);
      await client.close();
    });

    it('TOOL-8: invalid input is a tool error naming the problem', async () => {
      const client = await connect(server, mode);
      const result = await client.callTool({ name: 'send_to_dot', arguments: { message: '   ' } });
      assert.equal(result.isError, true);
      assert.match((result.content as { text: string }[])[0]!.text, /empty after trimming/);
      await client.close();
    });

    it('EV-LIST-1, EV-LIST-2: events/list returns message.created with webhook delivery and no cursor', async () => {
      const client = await connect(server, mode);
      const listed = await client.request({ method: 'events/list', params: {} }, ListEvents);
      assert.deepEqual(
        listed.events.map((e) => e.name),
        ['message.created'],
      );
      assert.equal(listed.nextCursor, null);
      await client.close();
    });

    it('ARCH-1, DEL-PIPE-14, EV-CHAL-1, EV-SUB-6, EV-SUB-10, EV-SUB-13, TOOL-9, TOOL-10: subscribe, send_to_dot delivered, receiver verifies the signature over the raw bytes', async () => {
      const receiver = await startReceiver(echoing());
      const client = await connect(server, mode);
      const secret = newSecret();
      const url = receiver.url(`/dot?route=${mode}&x=%2F`);
      const sub = await client.request(
        { method: 'events/subscribe', params: { name: 'message.created', arguments: {}, delivery: { mode: 'webhook', url, secret } } },
        Subscribed,
      );
      assert.match(sub.id, /^sub_[0-9a-f]{32}$/);
      assert.match(sub.refreshBefore, /Z$/);
      assert.equal(receiver.challenges().length, 1);
      assert.equal(receiver.challenges()[0]!.url, `/dot?route=${mode}&x=%2F`, 'the callback URL is used byte-exact');

      const result = await client.callTool({ name: 'send_to_dot', arguments: { message: `  hi from ${mode}  ` } });
      assert.equal(result.isError, false);
      const structured = result.structuredContent as { eventId: string; status: string };
      assert.equal(structured.status, 'delivered');
      assert.equal((result.content as { text: string }[])[0]!.text, `ChatGPT accepted event ${structured.eventId} for asynchronous processing by your dot.`);
      const [event] = await waitFor('the event', () => receiver.events().length === 1 && receiver.events());
      assert.equal(event!.headers['webhook-id'], structured.eventId);
      assert.equal(event!.headers['x-mcp-subscription-id'], sub.id);
      assert.equal(event!.json.data.message, `hi from ${mode}`);
      assert.equal(event!.json.name, 'message.created');
      assert.ok(verifies(secret, event!));

      await client.request(
        { method: 'events/unsubscribe', params: { name: 'message.created', arguments: {}, delivery: { mode: 'webhook', url } } },
        z.looseObject({}),
      );
      await client.close();
      await receiver.close();
    });
  });
}

describe('HTTP surface of docs/contract/http.md against the running server', () => {
  let server: RunningServer;
  before(async () => {
    server = await startServer();
  });
  after(async () => {
    await server.stop();
  });

  it('HTTP-4: GET /healthz answers {"ok":true} without a key', async () => {
    const res = await fetch(`${server.url}/healthz`);
    assert.equal(res.status, 200);
    assert.deepEqual(await res.json(), { ok: true });
  });

  it('HTTP-5, HTTP-9: a missing key is 401 with WWW-Authenticate: Bearer; a Bearer key is accepted', async () => {
    const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' });
    const denied = await fetch(server.mcpUrl, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
    assert.equal(denied.status, 401);
    assert.equal(denied.headers.get('www-authenticate'), 'Bearer');
    const wrong = await fetch(`${server.mcpUrl}?key=nope`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
    assert.equal(wrong.status, 401);
    const ok = await rpc(server, 'tools/list', {}, {});
    assert.equal(ok.status, 200);
  });

  it('HTTP-2: GET and DELETE /mcp are 405 with Allow: POST', async () => {
    for (const method of ['GET', 'DELETE']) {
      const res = await fetch(`${server.mcpUrl}?key=${server.key}`, { method });
      assert.equal(res.status, 405);
      assert.equal(res.headers.get('allow'), 'POST');
    }
  });

  it('HTTP-11, HTTP-14, LOCAL-13: a foreign Origin is 403 and a foreign Host is 403 (DNS rebinding protection)', async () => {
    const origin = await fetch(`${server.mcpUrl}?key=${server.key}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', origin: 'https://evil.example' },
      body: '{}',
    });
    assert.equal(origin.status, 403);
    const { request } = await import('node:http');
    const status = await new Promise<number>((done, fail) => {
      const u = new URL(server.mcpUrl);
      const req = request(
        {
          host: u.hostname,
          port: u.port,
          path: `/mcp?key=${server.key}`,
          method: 'POST',
          headers: { host: 'evil.example', 'content-type': 'application/json' },
        },
        (res) => {
          res.resume();
          done(res.statusCode ?? 0);
        },
      );
      req.on('error', fail);
      req.end('{}');
    });
    assert.equal(status, 403);
  });

  it('DEL-PIPE-1: POST /v1/messages without a subscription is 409 with an error object', async () => {
    const res = await fetch(`${server.url}/v1/messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${server.key}` },
      body: JSON.stringify({ message: 'hi' }),
    });
    assert.equal(res.status, 409);
    assert.equal(((await res.json()) as any).error.code, 'no_subscription');
  });
});
