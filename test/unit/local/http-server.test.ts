/**
 * The local runtime's node:http server (lambda/local/http-server.ts) against slow and greedy
 * clients: a request still unanswered at its route's deadline gets 408 and a closed connection
 * (a trickling body included), a connection past the cap gets 503 at once, a refused request whose
 * body was never read closes its connection, and each request runs under its own deadline.
 */
import net from 'node:net';
import { deadlineLeftMs } from '../../../lambda/adapters/deadline';
import { requestBudgetMs, startLocalServer, type LocalServer } from '../../../lambda/local/http-server';
import type { App } from '../../../lambda/http/app';

const ok: App = { handle: async () => new Response('{"ok":true}', { headers: { 'content-type': 'application/json' } }), close: async () => undefined };

/** An app that reads the whole body before answering (as every POST route does). */
const reader: App = {
  handle: async (request) => {
    await request.arrayBuffer();
    return new Response('{}', { headers: { 'content-type': 'application/json' } });
  },
  close: async () => undefined,
};

async function withServer<T>(app: App, options: { maxConnections?: number; budgetMs?: number }, run: (server: LocalServer) => Promise<T>): Promise<T> {
  const server = await startLocalServer(() => app, {
    host: '127.0.0.1',
    port: 0,
    maxConnections: options.maxConnections ?? 16,
    ...(options.budgetMs !== undefined ? { budgetOf: () => options.budgetMs! } : {}),
  });
  try {
    return await run(server);
  } finally {
    await server.close();
  }
}

/** Writes raw bytes and resolves with everything the server sent once it closes the connection. */
function raw(port: number, chunks: string[], gapMs: number): Promise<{ text: string; closedAfterMs: number }> {
  return new Promise((resolve, reject) => {
    const started = Date.now();
    const socket = net.connect(port, '127.0.0.1');
    let text = '';
    socket.setEncoding('utf8');
    socket.on('data', (data: string) => (text += data));
    socket.on('error', () => undefined);
    socket.on('close', () => resolve({ text, closedAfterMs: Date.now() - started }));
    socket.on('connect', async () => {
      for (const chunk of chunks) {
        if (socket.destroyed) return;
        socket.write(chunk);
        await new Promise((r) => setTimeout(r, gapMs));
      }
    });
    setTimeout(() => reject(new Error('the connection was never closed')), 10_000).unref();
  });
}

test('the deadlines: 5 s for a pup request, 15 s for any other, from the first byte to the answer', () => {
  expect(requestBudgetMs('/pup/mcp')).toBe(5_000);
  expect(requestBudgetMs('/pup/events')).toBe(5_000);
  expect(requestBudgetMs('/mcp')).toBe(15_000);
  expect(requestBudgetMs('/v1/messages')).toBe(15_000);
});

test('a body trickling in past the deadline gets 408 and its connection is closed', async () => {
  await withServer(reader, { budgetMs: 300 }, async ({ port }) => {
    const head = `POST /pup/events HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n`;
    const { text, closedAfterMs } = await raw(port, [head, ...Array.from({ length: 40 }, () => 'x')], 100);
    expect(text).toMatch(/^HTTP\/1\.1 408 /);
    expect(text).toContain('request_timeout');
    expect(closedAfterMs).toBeLessThan(3_000);
  });
});

test('a body cut off by the deadline ends its reader too: nothing it counted stays held', async () => {
  // As the pup door counts the bodies it is reading: a reader that never returns would hold its slot for ever.
  let reading = 0;
  let settled = 0;
  const counting: App = {
    handle: async (request) => {
      reading++;
      try {
        await request.arrayBuffer();
      } catch {
        // the body ended early: expected here
      } finally {
        reading--;
        settled++;
      }
      return new Response('{}', { headers: { 'content-type': 'application/json' } });
    },
    close: async () => undefined,
  };
  await withServer(counting, { budgetMs: 300 }, async ({ port }) => {
    const head = `POST /pup/events HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n`;
    const answers = await Promise.all(Array.from({ length: 5 }, () => raw(port, [head, ...Array.from({ length: 12 }, () => 'x')], 100)));
    for (const { text } of answers) expect(text).toMatch(/^HTTP\/1\.1 408 /);
    for (let i = 0; i < 50 && settled < 5; i++) await new Promise((r) => setTimeout(r, 20));
    expect(settled).toBe(5);
    expect(reading).toBe(0);
  });
});

test('headers trickling in never reach the app and the connection is closed', async () => {
  let reached = 0;
  const counting: App = { handle: async () => (reached++, new Response('{}')), close: async () => undefined };
  await withServer(counting, { budgetMs: 300 }, async ({ server, port }) => {
    // node:http's own header timeout, checked every second here rather than every 30.
    server.headersTimeout = 500;
    const { closedAfterMs } = await raw(port, ['POST /mcp HTTP/1.1\r\n', ...Array.from({ length: 40 }, (_, i) => `X-Slow-${i}: 1\r\n`)], 200);
    expect(reached).toBe(0);
    expect(closedAfterMs).toBeLessThan(4_000);
  });
});

test('past the connection cap a new connection is answered 503 with Retry-After, at once', async () => {
  await withServer(ok, { maxConnections: 2 }, async ({ port }) => {
    const held = [net.connect(port, '127.0.0.1'), net.connect(port, '127.0.0.1')];
    await Promise.all(held.map((socket) => new Promise((r) => socket.once('connect', r))));
    await new Promise((r) => setTimeout(r, 50));
    const { text } = await raw(port, [], 0);
    expect(text).toMatch(/^HTTP\/1\.1 503 /);
    expect(text).toMatch(/Retry-After: 1/i);
    expect(text).toContain('"code":"busy"');
    for (const socket of held) socket.destroy();
  });
});

test('a request answered without its body being read closes its connection', async () => {
  const refuser: App = { handle: async () => new Response('{"error":{}}', { status: 401, headers: { 'content-type': 'application/json' } }), close: async () => undefined };
  await withServer(refuser, {}, async ({ port }) => {
    const head = `POST /pup/mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n`;
    const { text } = await raw(port, [head, 'x'.repeat(100)], 10);
    expect(text).toMatch(/^HTTP\/1\.1 401 /);
    expect(text).toMatch(/Connection: close/i);
  });
});

test('each request runs under a deadline within the MCP budget', async () => {
  let left: number | undefined;
  const probe: App = { handle: async () => ((left = deadlineLeftMs()), new Response('{}')), close: async () => undefined };
  await withServer(probe, {}, async ({ port }) => {
    await fetch(`http://127.0.0.1:${port}/mcp`);
    expect(left).toBeGreaterThan(3_000);
    expect(left).toBeLessThanOrEqual(4_200);
  });
});
