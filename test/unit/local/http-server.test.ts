/**
 * The local runtime's node:http server (lambda/local/http-server.ts) against slow and greedy
 * clients: a request still unanswered at its route's deadline gets 408 and a closed connection
 * (a trickling body included), a connection past the cap gets 503 at once, a refused request whose
 * body was never read closes its connection, and each request runs under its own deadline.
 */
import net from 'node:net';
import { deadlineLeftMs } from '../../../lambda/adapters/deadline';
import { BUSY, REFUSED_LINGER_MS, requestBudgetMs, startLocalServer, type LocalServer } from '../../../lambda/local/http-server';
import type { App } from '../../../lambda/http/app';
import type { HttpRequest } from '../../../lambda/http/json';
import { API_KEY, buildApp } from '../../support/app';
import { pollUntil } from '../../support/cpu-wait';

/** Reads the whole body, as every POST route does; rejects when it ends early. */
async function readBody(request: HttpRequest): Promise<string> {
  const chunks: Uint8Array[] = [];
  for await (const chunk of request.body ?? []) chunks.push(chunk);
  return Buffer.concat(chunks).toString('utf8');
}

const ok: App = { handle: async () => new Response('{"ok":true}', { headers: { 'content-type': 'application/json' } }), close: async () => undefined };

/** An app that reads the whole body before answering (as every POST route does). */
const reader: App = {
  handle: async (request) => {
    await readBody(request);
    return new Response('{}', { headers: { 'content-type': 'application/json' } });
  },
  close: async () => undefined,
};

/** Waits until the server holds `count` connections (it has seen the clients' connects or closes). */
async function untilConnections(server: LocalServer, count: number): Promise<void> {
  const held = () => new Promise<number>((done) => server.server.getConnections((_error, n) => done(n)));
  const deadline = Date.now() + 10_000;
  while ((await held()) !== count) {
    if (Date.now() > deadline) throw new Error(`the server never held ${count} connections (it holds ${await held()})`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

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

test('PUP-18: the deadlines: 5 s for a pup request, 15 s for any other, from the first byte to the answer', () => {
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
        await readBody(request);
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
    await pollUntil(() => settled >= 5, { limitMs: 1_000 });
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
  await withServer(ok, { maxConnections: 2 }, async (server) => {
    const { port } = server;
    const held = [net.connect(port, '127.0.0.1'), net.connect(port, '127.0.0.1')];
    await Promise.all(held.map((socket) => new Promise((r) => socket.once('connect', r))));
    await untilConnections(server, 2);
    const { text } = await raw(port, [], 0);
    expect(text).toMatch(/^HTTP\/1\.1 503 /);
    expect(text).toMatch(/Retry-After: 1/i);
    expect(text).toContain('"code":"busy"');
    for (const socket of held) socket.destroy();
  });
});

test('LOCAL-FAULT-1: a request sent on a connection answered 503 busy never reaches the app, and the refused connection is closed even if the client never closes its side', async () => {
  let reached = 0;
  const counting: App = { handle: async (request) => (reached++, await readBody(request), new Response('{}')), close: async () => undefined };
  await withServer(counting, { maxConnections: 2 }, async (local) => {
    const { server, port } = local;
    const held = [net.connect(port, '127.0.0.1'), net.connect(port, '127.0.0.1')];
    await Promise.all(held.map((socket) => new Promise((r) => socket.once('connect', r))));
    await untilConnections(local, 2);
    const started = Date.now();
    // allowHalfOpen: this client never ends its side, as a half-open client does.
    const refused = net.connect({ port, host: '127.0.0.1', allowHalfOpen: true });
    let text = '';
    refused.setEncoding('utf8').on('data', (chunk: string) => (text += chunk));
    refused.on('error', () => undefined);
    refused.once('connect', () =>
      refused.write('POST /v1/messages HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}'),
    );
    // The server's side ends: the client reads its end of stream (it keeps its own side open).
    await new Promise((r) => refused.once('end', r));
    expect(Date.now() - started).toBeLessThan(REFUSED_LINGER_MS);
    expect(text).toMatch(/^HTTP\/1\.1 503 /);
    expect(reached).toBe(0);
    const connections = () => new Promise<number>((r) => server.getConnections((_e, n) => r(n)));
    // While it lingers it still counts: a descriptor the server holds.
    expect(await connections()).toBe(3);
    // Then it is closed once the linger ends.
    await untilConnections(local, 2);
    expect(await connections()).toBe(2);
    refused.destroy();
    for (const socket of held) socket.destroy();
  });
});

test('LOCAL-FAULT-2: the Content-Length of the busy answer is the byte length of its body', () => {
  const [head, body] = BUSY.split('\r\n\r\n');
  expect(Number(/Content-Length: (\d+)/.exec(head!)![1])).toBe(Buffer.byteLength(body!));
});

test('a request answered without its body being read closes its connection', async () => {
  const refuser: App = {
    handle: async () => new Response('{"error":{}}', { status: 401, headers: { 'content-type': 'application/json' } }),
    close: async () => undefined,
  };
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

test('LOCAL-FAULT-8: a client that leaves mid-body is logged at info as client_aborted, never as an error-level internal_error', async () => {
  const { app, logs } = buildApp();
  const server = await startLocalServer(() => app, { host: '127.0.0.1', port: 0, maxConnections: 16 });
  try {
    for (const path of ['/v1/messages', '/mcp']) {
      const socket = net.connect(server.port, '127.0.0.1');
      await new Promise((r) => socket.once('connect', r));
      socket.write(
        `POST ${path}?key=${API_KEY} HTTP/1.1\r\nHost: 127.0.0.1:${server.port}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: 1000\r\n\r\n{"message":`,
      );
      await new Promise((r) => setTimeout(r, 100));
      socket.destroy();
    }
    const deadline = Date.now() + 3_000;
    while (logs.filter((l) => l.event === 'client_aborted').length < 2 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 25));
    expect(logs.filter((l) => l.level === 'error')).toEqual([]);
    expect(logs.filter((l) => l.event === 'client_aborted').map((l) => l.level)).toEqual(['info', 'info']);
  } finally {
    await server.close();
  }
});

test('LOCAL-FAULT-9: Connection: close is honoured on an SSE answer, whatever connection header the app set', async () => {
  const sse: App = {
    handle: async (request) => {
      await readBody(request);
      return new Response('event: message\ndata: {}\n\n', { headers: { 'content-type': 'text/event-stream', connection: 'keep-alive' } });
    },
    close: async () => undefined,
  };
  await withServer(sse, {}, async ({ port }) => {
    const { text, closedAfterMs } = await raw(
      port,
      ['POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}'],
      0,
    );
    expect(text).toMatch(/^HTTP\/1\.1 200 /);
    expect(text).toMatch(/Connection: close/i);
    expect(closedAfterMs).toBeLessThan(1_000);
  });
});
