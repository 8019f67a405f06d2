/**
 * Idempotency keys, read receipts and the inbox end to end (docs/contract/http.md IDEM-*, RCPT-*;
 * docs/contract/mcp.md INBOX-*), against the local runtime (`npm start`) with its embedded store,
 * through the real clients: the official MCP client (`@modelcontextprotocol/client`) pinned to
 * 2026-07-28 and on legacy `initialize` at 2025-03-26 (ChatGPT serves events over both), the AI
 * SDK's MCP client, and a receiver that verifies every signature over the raw bytes.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { experimental_createMCPClient as createMCPClient } from '@ai-sdk/mcp';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import * as z from 'zod';
import { echoing, newSecret, startReceiver, startServer, until, verifies, waitFor, type RunningServer } from '../support/e2e';

const Subscribed = z.looseObject({ id: z.string() });
const LEGACY_VERSION = '2025-03-26';
const MODERN_VERSION = '2026-07-28';

type Era = 'modern' | 'legacy';

/** The official client on one era; `versions` records the MCP-Protocol-Version of every request it sent. */
async function connect(server: RunningServer, era: Era) {
  const versions: (string | null)[] = [];
  const recording: typeof fetch = async (input, init) => {
    versions.push(new Headers(init?.headers).get('mcp-protocol-version'));
    return fetch(input, init);
  };
  const client = new Client(
    { name: 'e2e-inbox', version: '1.0.0' },
    era === 'modern'
      ? { versionNegotiation: { mode: { pin: MODERN_VERSION } } }
      : { versionNegotiation: { mode: 'legacy' }, supportedProtocolVersions: [LEGACY_VERSION] },
  );
  await client.connect(new StreamableHTTPClientTransport(new URL(`${server.mcpUrl}?key=${encodeURIComponent(server.key)}`), { fetch: recording }));
  return { client, versions };
}

async function post(server: RunningServer, message: string, idempotencyKey?: string) {
  const response = await fetch(`${server.url}/v1/messages`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${server.key}`, ...(idempotencyKey ? { 'idempotency-key': idempotencyKey } : {}) },
    body: JSON.stringify({ message }),
  });
  return { status: response.status, headers: response.headers, body: (await response.json()) as any };
}

async function receipt(server: RunningServer, eventId: string) {
  const response = await fetch(`${server.url}/v1/messages/${eventId}`, { headers: { authorization: `Bearer ${server.key}` } });
  return { status: response.status, body: (await response.json()) as any };
}

const textOf = (result: { content?: unknown }) => (result.content as { text: string }[])[0]!.text;

describe('INBOX-1: the inbox off (the default)', () => {
  let server: RunningServer;
  before(async () => {
    server = await startServer();
  });
  after(async () => {
    assert.equal(await server.stop(), 0);
  });

  for (const era of ['modern', 'legacy'] as const) {
    it(`INBOX-1: tools/list is exactly send_to_dot (${era})`, async () => {
      const { client } = await connect(server, era);
      assert.deepEqual(
        (await client.listTools()).tools.map((t) => t.name),
        ['send_to_dot'],
      );
      await client.close();
    });
  }

  it('RCPT-1, RCPT-2: the receipt route exists with the inbox off; unknown and malformed ids are the same 404', async () => {
    const unknown = await receipt(server, `evt_${'0'.repeat(32)}`);
    const malformed = await receipt(server, 'nope');
    assert.equal(unknown.status, 404);
    assert.deepEqual(malformed, unknown);
  });
});

describe('IDEM-*: Idempotency-Key against the embedded store', () => {
  let server: RunningServer;
  before(async () => {
    server = await startServer();
  });
  after(async () => {
    assert.equal(await server.stop(), 0);
  });

  it('IDEM-3, IDEM-4, IDEM-5: a repeated key makes no second event or POST; another message under it is 422', async () => {
    const receiver = await startReceiver(echoing());
    const { client } = await connect(server, 'modern');
    const secret = newSecret();
    await client.request(
      { method: 'events/subscribe', params: { name: 'message.created', delivery: { mode: 'webhook', url: receiver.url('/idem'), secret } } },
      Subscribed,
    );
    const first = await post(server, 'exactly once', 'e2e-key-1');
    assert.equal(first.status, 200);
    // The answer "delivered" may come before its record says so (the write finishes after the
    // answer, locally); a repeat reports the record, so wait until it says delivered.
    await until('the record says delivered', async () => (await receipt(server, first.body.eventId)).body.status === 'delivered');
    const again = await post(server, 'exactly once', 'e2e-key-1');
    assert.deepEqual([again.status, again.body], [200, { eventId: first.body.eventId, status: 'delivered' }]);
    const reused = await post(server, 'something else', 'e2e-key-1');
    assert.equal(reused.status, 422);
    assert.equal(reused.body.error.code, 'idempotency_key_reused');
    const bad = await post(server, 'hi', 'x'.repeat(256));
    assert.equal(bad.status, 400);
    assert.equal(bad.body.error.code, 'invalid_idempotency_key');
    // Give a second POST every chance to show before counting.
    await waitFor('the event', () => receiver.events().length >= 1);
    assert.equal(receiver.events().length, 1);
    assert.ok(verifies(secret, receiver.events()[0]!));
    await client.close();
    await receiver.close();
  });
});

for (const era of ['modern', 'legacy'] as const) {
  describe(`INBOX-10: ChatGPT's two eras, the inbox on (${era === 'modern' ? MODERN_VERSION : `legacy initialize ${LEGACY_VERSION}`})`, () => {
    let server: RunningServer;
    before(async () => {
      server = await startServer({ DMDOT_INBOX: '1' });
    });
    after(async () => {
      assert.equal(await server.stop(), 0);
    });

    it('INBOX-5, INBOX-7, INBOX-2, INBOX-3, INBOX-4, RCPT-1: kept while no dot listens, announced at subscribe, received, read, acknowledged, seen in the receipt', async () => {
      const { client, versions } = await connect(server, era);
      const tools = (await client.listTools()).tools.map((t) => t.name).sort();
      assert.deepEqual(tools, ['acknowledge_messages', 'get_pending_messages', 'send_to_dot']);

      // No dot yet: the message is kept, on REST and on MCP.
      const kept = await post(server, 'sent while you were away', `kept-${era}`);
      assert.deepEqual([kept.status, kept.body.status], [202, 'kept']);
      const keptTool = await client.callTool({ name: 'send_to_dot', arguments: { message: 'also while away' } });
      assert.equal(keptTool.isError, false);
      assert.equal((keptTool.structuredContent as { status: string }).status, 'kept');
      assert.match(textOf(keptTool), /No dot is subscribed now/);

      // A dot subscribes: it is told that two messages wait.
      const receiver = await startReceiver(echoing());
      const secret = newSecret();
      await client.request(
        { method: 'events/subscribe', params: { name: 'message.created', delivery: { mode: 'webhook', url: receiver.url(`/dot-${era}`), secret } } },
        Subscribed,
      );
      const [announcement] = await waitFor('the announcement', () => receiver.events().length >= 1 && receiver.events());
      assert.match(announcement!.json.data.message, /^2 messages wait .*get_pending_messages/);
      assert.ok(verifies(secret, announcement!));

      // An ordinary send is delivered, and is in the inbox too until acknowledged.
      const sent = await client.callTool({ name: 'send_to_dot', arguments: { message: 'line one\nline two' } });
      const sentId = (sent.structuredContent as { eventId: string; status: string }).eventId;
      assert.equal((sent.structuredContent as { status: string }).status, 'delivered');
      await waitFor('the delivery', () => receiver.events().some((e) => e.json.eventId === sentId));

      // Paged reading, oldest first, the announcement not among them.
      const firstPage = await client.callTool({ name: 'get_pending_messages', arguments: { limit: 2 } });
      const page1 = firstPage.structuredContent as { messages: { eventId: string; sender: string; message: string }[]; nextCursor: string | null };
      assert.deepEqual(
        page1.messages.map((m) => m.message),
        ['sent while you were away', 'also while away'],
      );
      assert.deepEqual(
        page1.messages.map((m) => m.sender),
        ['connector', 'connector'],
      );
      assert.equal(page1.messages[0]!.eventId, kept.body.eventId);
      assert.ok(page1.nextCursor);
      const secondPage = await client.callTool({ name: 'get_pending_messages', arguments: { cursor: page1.nextCursor } });
      const page2 = secondPage.structuredContent as { messages: { eventId: string }[]; nextCursor: string | null };
      assert.deepEqual(
        page2.messages.map((m) => m.eventId),
        [sentId],
      );
      assert.equal(page2.nextCursor, null);
      assert.match(textOf(secondPage), /> line one\n> line two/);

      // Acknowledged: the sender's receipt shows it, and the inbox is empty.
      const ids = [...page1.messages, ...page2.messages].map((m) => m.eventId);
      const ack = await client.callTool({ name: 'acknowledge_messages', arguments: { eventIds: ids } });
      assert.deepEqual(ack.structuredContent, { acknowledged: ids, alreadyAcknowledged: [], unknown: [] });
      const read = await receipt(server, sentId);
      assert.equal(read.status, 200);
      assert.equal(read.body.status, 'delivered');
      assert.match(read.body.acknowledgedAt, /Z$/);
      const empty = await client.callTool({ name: 'get_pending_messages', arguments: {} });
      assert.deepEqual(empty.structuredContent, { messages: [], nextCursor: null });

      // Bad input is a tool error that changes nothing.
      const badCursor = await client.callTool({ name: 'get_pending_messages', arguments: { cursor: 'not-a-cursor' } });
      assert.equal(badCursor.isError, true);
      const tooMany = await client.callTool({ name: 'acknowledge_messages', arguments: { eventIds: Array.from({ length: 51 }, () => sentId) } });
      assert.equal(tooMany.isError, true);

      // Every request of this client spoke its era.
      const spoken = new Set(versions.filter((v) => v !== null));
      assert.deepEqual([...spoken], [era === 'modern' ? MODERN_VERSION : LEGACY_VERSION]);
      await client.close();
      await receiver.close();
    });
  });
}

describe('INBOX-10: the AI SDK client reads the inbox on both of its eras', () => {
  let server: RunningServer;
  before(async () => {
    server = await startServer({ DMDOT_INBOX: '1' });
  });
  after(async () => {
    assert.equal(await server.stop(), 0);
  });

  for (const discovery of [true, false]) {
    it(`INBOX-2, INBOX-4: ${discovery ? 'server/discover' : 'legacy initialize'}: lists the inbox tools, reads a kept message and acknowledges it`, async () => {
      const client = await createMCPClient({
        transport: { type: 'http', url: `${server.mcpUrl}?key=${encodeURIComponent(server.key)}` },
        protocolVersionDiscovery: discovery,
      });
      const kept = await post(server, `kept for the AI SDK (${discovery})`);
      assert.equal(kept.body.status, 'kept');
      const tools = await client.listTools();
      assert.deepEqual(tools.tools.map((t) => t.name).sort(), ['acknowledge_messages', 'get_pending_messages', 'send_to_dot']);
      const pending = await client.callTool({ name: 'get_pending_messages', arguments: {} });
      const messages = (pending.structuredContent as { messages: { eventId: string; message: string }[] }).messages;
      assert.deepEqual(
        messages.map((m) => m.eventId),
        [kept.body.eventId],
      );
      const ack = await client.callTool({ name: 'acknowledge_messages', arguments: { eventIds: [kept.body.eventId] } });
      assert.deepEqual((ack.structuredContent as { acknowledged: string[] }).acknowledged, [kept.body.eventId]);
      await client.close();
    });
  }
});
