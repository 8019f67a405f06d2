/**
 * docs/contract/outbound-guard.md, transport rules of the outbound guard, against real node:http servers on 127.0.0.1
 * (ephemeral ports) with the default nodeConnector and the loopback switch on: no redirects,
 * Accept-Encoding: identity and compressed responses refused, the 1 MiB response cap, the
 * deadline, refused connections, Retry-After passed through. Also nodeConnector's pinning: it
 * connects to the checked address, never looks the host name up again, and keeps the name in the
 * Host header.
 *
 * Only loopback servers started here are contacted; the resolver is a canary that must stay unused.
 */
import dns from 'node:dns';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { gzipSync } from 'node:zlib';
import { Limits } from '../../../../lambda/core/protocol';
import { createGuardedWebhookClient, nodeConnector, type GuardOptions } from '../../../../lambda/adapters/guarded-https';
import { forbiddenResolver, REFUSED, startHttpServer, startRawServer, webhookRequest, type TestServer } from '../../../support/guard';

const servers: TestServer[] = [];
async function serve(...args: Parameters<typeof startHttpServer>): Promise<TestServer> {
  const server = await startHttpServer(...args);
  servers.push(server);
  return server;
}
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

function loopbackClient(extra: Partial<GuardOptions> = {}) {
  const resolver = forbiddenResolver();
  const client = createGuardedWebhookClient({ allowLoopback: true, resolver: resolver.resolver, ...extra });
  return { client, resolver };
}

describe('2xx response', () => {
  it('returns the status and body of a 2xx response', async () => {
    const server = await serve((_req, res, body) => {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.end(`echo:${body.toString()}`);
    });
    const { client, resolver } = loopbackClient();

    const result = await client.post(webhookRequest(`${server.origin}/hook`, Buffer.from('challenge-123')));

    expect(result).toEqual({ kind: 'response', status: 200, body: Buffer.from('echo:challenge-123') });
    expect(resolver.calls).toHaveLength(0);
    expect(server.requests).toHaveLength(1);
    expect(server.requests[0]).toMatchObject({ method: 'POST', url: '/hook', body: Buffer.from('challenge-123') });
  });

  it('returns a non-2xx status as a response, not a failure', async () => {
    const server = await serve((_req, res) => {
      res.writeHead(500);
      res.end('boom');
    });
    const { client } = loopbackClient();

    expect(await client.post(webhookRequest(`${server.origin}/hook`))).toEqual({ kind: 'response', status: 500, body: Buffer.from('boom') });
  });

  it('sends the caller headers with content-length of the body', async () => {
    const server = await serve((_req, res) => res.end());
    const { client } = loopbackClient();

    await client.post(webhookRequest(`${server.origin}/hook`, Buffer.from('12345'), { 'webhook-id': 'msg_1' }));

    expect(server.requests[0]!.headers).toMatchObject({ 'webhook-id': 'msg_1', 'content-type': 'application/json', 'content-length': '5' });
  });
});

describe('GUARD-7: never follow redirects', () => {
  it.each([301, 302, 307, 308])('returns %i as is and the Location target gets zero requests', async (status) => {
    const target = await serve((_req, res) => res.end('target'));
    const redirector = await serve((_req, res) => {
      res.writeHead(status, { location: `${target.origin}/elsewhere` });
      res.end();
    });
    const { client } = loopbackClient();

    const result = await client.post(webhookRequest(`${redirector.origin}/hook`));

    expect(result).toMatchObject({ kind: 'response', status });
    expect(redirector.requests).toHaveLength(1);
    expect(target.requests).toHaveLength(0);
  });
});

describe('GUARD-8: Accept-Encoding: identity; a compressed response is a failure', () => {
  it('sends Accept-Encoding: identity', async () => {
    const server = await serve((_req, res) => res.end());
    const { client } = loopbackClient();

    await client.post(webhookRequest(`${server.origin}/hook`));

    expect(server.requests[0]!.headers['accept-encoding']).toBe('identity');
  });

  it('sends Accept-Encoding: identity even when the caller asked for gzip', async () => {
    const server = await serve((_req, res) => res.end());
    const { client } = loopbackClient();

    await client.post(webhookRequest(`${server.origin}/hook`, Buffer.from('x'), { 'accept-encoding': 'gzip' }));

    expect(server.requests[0]!.headers['accept-encoding']).toBe('identity');
  });

  it('reports a Content-Encoding: gzip response as bad_response', async () => {
    const server = await serve((_req, res) => {
      res.writeHead(200, { 'content-encoding': 'gzip' });
      res.end(gzipSync('challenge-123'));
    });
    const { client } = loopbackClient();

    expect(await client.post(webhookRequest(`${server.origin}/hook`))).toEqual({ kind: 'failure', reason: 'bad_response' });
  });

  it('reports a Content-Encoding: br response as bad_response', async () => {
    const server = await serve((_req, res) => {
      res.writeHead(200, { 'content-encoding': 'br' });
      res.end('whatever');
    });
    const { client } = loopbackClient();

    expect(await client.post(webhookRequest(`${server.origin}/hook`))).toEqual({ kind: 'failure', reason: 'bad_response' });
  });

  it('reports a Transfer-Encoding: gzip, chunked response as bad_response', async () => {
    const zipped = gzipSync('challenge-123');
    const raw = await startRawServer(
      Buffer.concat([
        Buffer.from(`HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\nConnection: close\r\n\r\n${zipped.length.toString(16)}\r\n`),
        zipped,
        Buffer.from('\r\n0\r\n\r\n'),
      ]),
    );
    try {
      const { client } = loopbackClient();
      expect(await client.post(webhookRequest(`http://127.0.0.1:${raw.port}/hook`))).toEqual({ kind: 'failure', reason: 'bad_response' });
    } finally {
      await raw.close();
    }
  });

  it('accepts a plain chunked response', async () => {
    const server = await serve((_req, res) => {
      res.write('chunk-1;');
      res.end('chunk-2');
    });
    const { client } = loopbackClient();

    expect(await client.post(webhookRequest(`${server.origin}/hook`))).toEqual({ kind: 'response', status: 200, body: Buffer.from('chunk-1;chunk-2') });
  });

  it('accepts an explicit Content-Encoding: identity', async () => {
    const server = await serve((_req, res) => {
      res.writeHead(200, { 'content-encoding': 'identity' });
      res.end('plain');
    });
    const { client } = loopbackClient();

    expect(await client.post(webhookRequest(`${server.origin}/hook`))).toEqual({ kind: 'response', status: 200, body: Buffer.from('plain') });
  });
});

describe('GUARD-10: response cap', () => {
  it('aborts with bad_response when the body exceeds maxResponseBytes', async () => {
    const server = await serve((_req, res) => res.end(Buffer.alloc(65, 'a')));
    const { client } = loopbackClient({ maxResponseBytes: 64 });

    expect(await client.post(webhookRequest(`${server.origin}/hook`))).toEqual({ kind: 'failure', reason: 'bad_response' });
  });

  it('returns a body of exactly maxResponseBytes', async () => {
    const server = await serve((_req, res) => res.end(Buffer.alloc(64, 'a')));
    const { client } = loopbackClient({ maxResponseBytes: 64 });

    expect(await client.post(webhookRequest(`${server.origin}/hook`))).toEqual({ kind: 'response', status: 200, body: Buffer.alloc(64, 'a') });
  });

  it('aborts with bad_response on an endless chunked body over the cap', async () => {
    let stop = false;
    const server = await serve((_req, res) => {
      res.writeHead(200);
      const pump = () => {
        while (!stop && res.write(Buffer.alloc(16 * 1024, 'a')));
        if (!stop) res.once('drain', pump);
      };
      res.on('close', () => {
        stop = true;
      });
      pump();
    });
    const { client } = loopbackClient({ maxResponseBytes: 100 * 1024 });

    expect(await client.post(webhookRequest(`${server.origin}/hook`))).toEqual({ kind: 'failure', reason: 'bad_response' });
    stop = true;
  });

  it('GUARD-10, LIM-4: aborts with bad_response at the default cap: 1 MiB + 1 byte', async () => {
    expect(Limits.outboundResponseMaxBytes).toBe(1024 * 1024);
    const server = await serve((_req, res) => res.end(Buffer.alloc(1024 * 1024 + 1, 'a')));
    const { client } = loopbackClient();

    expect(await client.post(webhookRequest(`${server.origin}/hook`))).toEqual({ kind: 'failure', reason: 'bad_response' });
  });

  it('returns a body of exactly the default cap, 1 MiB', async () => {
    const server = await serve((_req, res) => res.end(Buffer.alloc(1024 * 1024, 'a')));
    const { client } = loopbackClient();

    const result = await client.post(webhookRequest(`${server.origin}/hook`));

    expect(result.kind).toBe('response');
    expect(result.kind === 'response' && result.body.byteLength).toBe(1024 * 1024);
  });
});

describe('GUARD-9: deadline', () => {
  it('yields timeout when the server never answers', async () => {
    const server = await serve(() => {
      /* accept the request, never respond */
    });
    const { client } = loopbackClient({ deadlineMs: 200 });

    expect(await client.post(webhookRequest(`${server.origin}/hook`))).toEqual({ kind: 'failure', reason: 'timeout' });
    expect(server.requests).toHaveLength(1);
  });

  it('yields timeout when the server sends headers and stalls the body', async () => {
    const server = await serve((_req, res) => {
      res.writeHead(200, { 'content-length': '100' });
      res.write('partial');
      /* never finish */
    });
    const { client } = loopbackClient({ deadlineMs: 200 });

    expect(await client.post(webhookRequest(`${server.origin}/hook`))).toEqual({ kind: 'failure', reason: 'timeout' });
  });

  it('yields timeout when the TLS handshake never completes', async () => {
    const silent = await startRawServer(undefined);
    try {
      const { client } = loopbackClient({ deadlineMs: 200 });
      expect(await client.post(webhookRequest(`https://127.0.0.1:${silent.port}/hook`))).toEqual({ kind: 'failure', reason: 'timeout' });
      expect(silent.connections()).toBe(1);
    } finally {
      await silent.close();
    }
  });

  it('yields timeout when a chunked body stalls after the first chunk', async () => {
    const server = await serve((_req, res) => {
      res.writeHead(200);
      res.write('first chunk');
    });
    const { client } = loopbackClient({ deadlineMs: 200 });

    expect(await client.post(webhookRequest(`${server.origin}/hook`))).toEqual({ kind: 'failure', reason: 'timeout' });
  });
});

describe('connection failures', () => {
  it('yields connection_refused on a closed port', async () => {
    const probe = http.createServer();
    await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', () => resolve()));
    const port = (probe.address() as AddressInfo).port;
    await new Promise<void>((resolve) => probe.close(() => resolve()));
    const { client } = loopbackClient();

    expect(await client.post(webhookRequest(`http://127.0.0.1:${port}/hook`))).toEqual(REFUSED);
  });

  it('yields connection_refused when the server drops the connection before answering', async () => {
    const server = await serve((req) => req.socket.destroy());
    const { client } = loopbackClient();

    expect(await client.post(webhookRequest(`${server.origin}/hook`))).toEqual(REFUSED);
  });
});

describe('DEL-PIPE-17: Retry-After', () => {
  it('passes Retry-After through', async () => {
    const server = await serve((_req, res) => {
      res.writeHead(503, { 'retry-after': '120' });
      res.end();
    });
    const { client } = loopbackClient();

    expect(await client.post(webhookRequest(`${server.origin}/hook`))).toEqual({ kind: 'response', status: 503, retryAfter: '120', body: Buffer.alloc(0) });
  });

  it('passes an HTTP-date Retry-After through unchanged', async () => {
    const date = 'Wed, 21 Oct 2037 07:28:00 GMT';
    const server = await serve((_req, res) => {
      res.writeHead(429, { 'retry-after': date });
      res.end();
    });
    const { client } = loopbackClient();

    expect(await client.post(webhookRequest(`${server.origin}/hook`))).toMatchObject({ status: 429, retryAfter: date });
  });

  it('omits retryAfter when the header is absent', async () => {
    const server = await serve((_req, res) => res.end());
    const { client } = loopbackClient();

    const result = await client.post(webhookRequest(`${server.origin}/hook`));

    expect(result).not.toHaveProperty('retryAfter');
  });
});

describe('GUARD-11, LIM-3: outgoing body cap with a real server', () => {
  it('throws for an outgoing body over 256 KiB and the server gets nothing', async () => {
    const server = await serve((_req, res) => res.end());
    const { client } = loopbackClient();

    await expect(client.post(webhookRequest(`${server.origin}/hook`, new Uint8Array(Limits.outboundBodyMaxBytes + 1)))).rejects.toThrow(/256 KiB/);
    expect(server.requests).toHaveLength(0);
  });
});

describe('GUARD-3: nodeConnector pins the connection to the checked address', () => {
  afterEach(() => jest.restoreAllMocks());

  it('connects to the given address without looking the host name up, keeping the name in Host', async () => {
    const server = await serve((_req, res) => res.end('pinned'));
    const lookups = jest.spyOn(dns, 'lookup').mockImplementation(((host: string) => {
      throw new Error(`unexpected DNS lookup of ${host}`);
    }) as unknown as typeof dns.lookup);
    const url = new URL(`http://pinned.invalid:${server.port}/hook`);

    const response = await nodeConnector({
      url,
      address: { address: '127.0.0.1', family: 4 },
      headers: { 'accept-encoding': 'identity' },
      body: Buffer.from('x'),
      signal: new AbortController().signal,
    });
    const chunks: Uint8Array[] = [];
    for await (const chunk of response.body) chunks.push(chunk);
    response.destroy();

    expect(response.status).toBe(200);
    expect(Buffer.concat(chunks).toString()).toBe('pinned');
    expect(server.requests[0]!.headers.host).toBe(`pinned.invalid:${server.port}`);
    expect(lookups).not.toHaveBeenCalled();
  });
});
