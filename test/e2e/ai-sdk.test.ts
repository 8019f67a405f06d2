/**
 * The AI SDK's MCP Events client (@ai-sdk/mcp 2.0.99, Node 22) against the local runtime: it
 * subscribes its own webhook receiver (createMCPEventWebhook on node:http, verifying signatures
 * itself), then send_to_dot is answered "delivered" and the receiver's onEvent got exactly that
 * event, whose raw bytes also verify with the standardwebhooks library.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  experimental_createMCPClient as createMCPClient,
  experimental_createMCPEventWebhook as createMCPEventWebhook,
  type Experimental_MCPEventStore as MCPEventStore,
  type Experimental_MCPEventSubscription as MCPEventSubscription,
  type Experimental_MCPEvent as MCPEvent,
} from '@ai-sdk/mcp';
import { Webhook } from 'standardwebhooks';
import { startServer, waitFor, type RunningServer } from '../support/e2e';

function memoryStore(): MCPEventStore {
  const byKey = new Map<string, MCPEventSubscription>();
  return {
    get: async (key) => structuredClone(byKey.get(key)),
    getById: async (id) => structuredClone([...byKey.values()].find((s) => s.id === id)),
    set: async (s) => void byKey.set(s.key, structuredClone(s)),
    update: async (key, patch) => {
      const current = byKey.get(key);
      if (current) byKey.set(key, { ...current, ...structuredClone(patch) });
    },
    delete: async (key) => void byKey.delete(key),
  };
}

async function startAiSdkReceiver(store: MCPEventStore) {
  const events: { event: MCPEvent; subscriptionId: string; raw: Buffer; headers: http.IncomingHttpHeaders }[] = [];
  let lastRaw: { raw: Buffer; headers: http.IncomingHttpHeaders } | undefined;
  const handle = createMCPEventWebhook({
    store,
    onEvent: async ({ event, subscription }) => {
      events.push({ event, subscriptionId: subscription.id, raw: lastRaw!.raw, headers: lastRaw!.headers });
    },
  });
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', async () => {
      const raw = Buffer.concat(chunks);
      lastRaw = { raw, headers: req.headers };
      const headers = new Headers();
      for (const [k, v] of Object.entries(req.headers)) if (typeof v === 'string') headers.set(k, v);
      const response = await handle(new Request(`http://${req.headers.host}${req.url}`, { method: 'POST', headers, body: raw }));
      res.writeHead(response.status, Object.fromEntries(response.headers));
      res.end(Buffer.from(await response.arrayBuffer()));
    });
  });
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/events`,
    events,
    close: () => new Promise<void>((done) => server.close(() => done())),
  };
}

describe('AI SDK MCP Events client', () => {
  let server: RunningServer;
  before(async () => {
    server = await startServer();
  });
  after(async () => {
    assert.equal(await server.stop(), 0);
  });

  it('ARCH-1, EV-SUB-13: subscribes its receiver, send_to_dot is delivered, onEvent gets exactly that event', async () => {
    const store = memoryStore();
    const receiver = await startAiSdkReceiver(store);
    const client = await createMCPClient({
      transport: { type: 'http', url: `${server.mcpUrl}?key=${encodeURIComponent(server.key)}` },
      experimental_events: { store },
    });

    const listed = await client.experimental_events.list();
    assert.deepEqual(
      listed.events.map((e) => e.name),
      ['message.created'],
    );

    const subscribed = await client.experimental_events.subscribe({
      name: 'message.created',
      delivery: { mode: 'webhook', url: receiver.url, allowInsecureLocalhost: true },
    });
    assert.match(subscribed.id, /^sub_[0-9a-f]{32}$/);
    assert.equal(subscribed.truncated, false);

    const result = await client.callTool({ name: 'send_to_dot', arguments: { message: 'hello dot' } });
    assert.equal(result.isError, false);
    const { eventId, status } = result.structuredContent as { eventId: string; status: string };
    assert.equal(status, 'delivered');

    await waitFor('onEvent', () => receiver.events.length === 1);
    const got = receiver.events[0]!;
    assert.equal(got.event.eventId, eventId);
    assert.equal(got.headers['webhook-id'], eventId);
    assert.equal(got.headers['x-mcp-subscription-id'], subscribed.id);
    assert.equal(got.subscriptionId, subscribed.id);
    assert.deepEqual(got.event.data, { message: 'hello dot' });

    // Independent check of the same raw bytes with the reference library.
    const saved = [...(await Promise.all([store.getById(subscribed.id)]))][0]!;
    new Webhook(saved.delivery.secret).verify(got.raw.toString('utf8'), {
      'webhook-id': String(got.headers['webhook-id']),
      'webhook-timestamp': String(got.headers['webhook-timestamp']),
      'webhook-signature': String(got.headers['webhook-signature']),
    });

    await client.experimental_events.unsubscribe({ id: subscribed.id });
    const after = await client.callTool({ name: 'send_to_dot', arguments: { message: 'nobody listens' } });
    assert.equal(after.isError, true);
    assert.equal(receiver.events.length, 1, 'nothing is sent after unsubscribe');
    await client.close();
    await receiver.close();
  });
});
