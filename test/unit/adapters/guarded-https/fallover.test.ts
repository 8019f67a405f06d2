/**
 * docs/contract/outbound-guard.md: the outbound guard tries the other checked DNS answers when a
 * connection to one is never made (refused, unreachable, no answer within its share of the
 * deadline), all within one deadline, IPv4 first when the machine has no IPv6 route; and a request
 * may ask for a shorter deadline than 5 s (`timeoutMs`), never a longer one.
 *
 * Fallover is only safe because nothing was sent on a connection that was never made: one test
 * pins that a failure after the connection was made is final (no second POST). Injected resolver
 * and connector; the real node connector is checked against loopback servers this file starts.
 */
import {
  createGuardedWebhookClient,
  hasGlobalIpv6,
  nodeConnector,
  orderAnswers,
  type ConnectRequest,
  type ConnectResponse,
  type Connector,
  type Timers,
} from '../../../../lambda/adapters/guarded-https';
import { Limits } from '../../../../lambda/core/protocol';
import { fixedResolver, REFUSED, selfSignedCertificate, startHttpServer, startHttpsServer, startRawServer, webhookRequest } from '../../../support/guard';

const V4_A = '93.184.216.34';
const V4_B = '93.184.216.35';
const V6_A = '2606:2800:220:1:248:1893:25c8:1946';

function ok(): ConnectResponse {
  return {
    status: 200,
    headers: {},
    body: (async function* () {
      yield Buffer.from('ok');
    })(),
    destroy: () => {},
  };
}

function fail(code: string): Error {
  return Object.assign(new Error(code), { code });
}

/** Never connects, never answers: rejects only when its signal aborts (a blackholed address). */
function blackhole(request: ConnectRequest): Promise<never> {
  return new Promise((_, reject) =>
    request.signal.addEventListener('abort', () => reject(Object.assign(new Error('aborted'), { name: 'AbortError', code: 'ABORT_ERR' })), { once: true }),
  );
}

/** A connector that behaves per address and records the order of attempts. */
function scripted(behaviour: Record<string, (request: ConnectRequest) => Promise<ConnectResponse>>) {
  const tried: string[] = [];
  const connector: Connector = (request) => {
    tried.push(request.address.address);
    const act = behaviour[request.address.address];
    if (!act) throw new Error(`unexpected address ${request.address.address}`);
    return act(request);
  };
  return { connector, tried };
}

const connected =
  (response: () => ConnectResponse = ok) =>
  async (request: ConnectRequest) => {
    request.onConnected?.();
    return response();
  };

describe('fallover to the next checked answer', () => {
  test('a refused first address falls over to the second, which answers', async () => {
    const script = scripted({ [V4_A]: async () => Promise.reject(fail('ECONNREFUSED')), [V4_B]: connected() });
    const client = createGuardedWebhookClient({
      allowLoopback: false,
      preferIpv4: true,
      resolver: fixedResolver(V4_A, V4_B).resolver,
      connector: script.connector,
    });
    const result = await client.post(webhookRequest('https://dot.example/hook'));
    expect(result).toMatchObject({ kind: 'response', status: 200 });
    expect(script.tried).toEqual([V4_A, V4_B]);
  });

  test.each(['EHOSTUNREACH', 'ENETUNREACH', 'EADDRNOTAVAIL', 'EAFNOSUPPORT', 'ETIMEDOUT'])('%s before connecting falls over', async (code) => {
    const script = scripted({ [V6_A]: async () => Promise.reject(fail(code)), [V4_A]: connected() });
    const client = createGuardedWebhookClient({
      allowLoopback: false,
      preferIpv4: false,
      resolver: fixedResolver(V6_A, V4_A).resolver,
      connector: script.connector,
    });
    expect(await client.post(webhookRequest('https://dot.example/hook'))).toMatchObject({ kind: 'response', status: 200 });
    expect(script.tried).toEqual([V6_A, V4_A]);
  });

  test('a blackholed first address gives up after its share of the deadline and the second answers in time', async () => {
    const script = scripted({ [V4_A]: blackhole, [V4_B]: connected() });
    const client = createGuardedWebhookClient({
      allowLoopback: false,
      preferIpv4: true,
      connectAttemptMs: 100,
      deadlineMs: 3_000,
      resolver: fixedResolver(V4_A, V4_B).resolver,
      connector: script.connector,
    });
    const started = Date.now();
    expect(await client.post(webhookRequest('https://dot.example/hook'))).toMatchObject({ kind: 'response', status: 200 });
    expect(script.tried).toEqual([V4_A, V4_B]);
    // Bounded by the deadline, not by the blackhole.
    expect(Date.now() - started).toBeLessThan(3_000);
  });

  test('every address refused: connection_refused, each tried once', async () => {
    const script = scripted({ [V4_A]: async () => Promise.reject(fail('ECONNREFUSED')), [V4_B]: async () => Promise.reject(fail('ECONNREFUSED')) });
    const client = createGuardedWebhookClient({
      allowLoopback: false,
      preferIpv4: true,
      resolver: fixedResolver(V4_A, V4_B).resolver,
      connector: script.connector,
    });
    expect(await client.post(webhookRequest('https://dot.example/hook'))).toEqual(REFUSED);
    expect(script.tried).toEqual([V4_A, V4_B]);
  });

  test('GUARD-9: every address blackholed: timeout at the one deadline, not one deadline per address', async () => {
    const script = scripted({ [V4_A]: blackhole, [V4_B]: blackhole });
    const client = createGuardedWebhookClient({
      allowLoopback: false,
      preferIpv4: true,
      deadlineMs: 400,
      resolver: fixedResolver(V4_A, V4_B).resolver,
      connector: script.connector,
    });
    const started = Date.now();
    expect(await client.post(webhookRequest('https://dot.example/hook'))).toEqual({ kind: 'failure', reason: 'timeout' });
    expect(script.tried).toEqual([V4_A, V4_B]);
    expect(Date.now() - started).toBeLessThan(2_000);
  });

  test('a failure after the connection was made is final: the next address is not tried (no second POST)', async () => {
    const script = scripted({
      [V4_A]: async (request) => {
        request.onConnected?.();
        throw fail('ECONNRESET');
      },
      [V4_B]: connected(),
    });
    const client = createGuardedWebhookClient({
      allowLoopback: false,
      preferIpv4: true,
      resolver: fixedResolver(V4_A, V4_B).resolver,
      connector: script.connector,
    });
    expect(await client.post(webhookRequest('https://dot.example/hook'))).toEqual(REFUSED);
    expect(script.tried).toEqual([V4_A]);
  });

  test('even a connection-level code after the connection was made is final', async () => {
    const script = scripted({
      [V4_A]: async (request) => {
        request.onConnected?.();
        throw fail('ETIMEDOUT');
      },
      [V4_B]: connected(),
    });
    const client = createGuardedWebhookClient({
      allowLoopback: false,
      preferIpv4: true,
      resolver: fixedResolver(V4_A, V4_B).resolver,
      connector: script.connector,
    });
    expect(await client.post(webhookRequest('https://dot.example/hook'))).toEqual({ kind: 'failure', reason: 'timeout' });
    expect(script.tried).toEqual([V4_A]);
  });

  test('a TLS failure is not a connection failure: no fallover', async () => {
    const script = scripted({ [V4_A]: async () => Promise.reject(fail('ERR_TLS_CERT_ALTNAME_INVALID')), [V4_B]: connected() });
    const client = createGuardedWebhookClient({
      allowLoopback: false,
      preferIpv4: true,
      resolver: fixedResolver(V4_A, V4_B).resolver,
      connector: script.connector,
    });
    expect(await client.post(webhookRequest('https://dot.example/hook'))).toEqual({ kind: 'failure', reason: 'tls_error' });
    expect(script.tried).toEqual([V4_A]);
  });

  test('fallover never reaches an address that failed the check: one forbidden answer still refuses all', async () => {
    const script = scripted({ [V4_A]: connected() });
    const client = createGuardedWebhookClient({
      allowLoopback: false,
      preferIpv4: true,
      resolver: fixedResolver(V4_A, '10.0.0.1').resolver,
      connector: script.connector,
    });
    expect(await client.post(webhookRequest('https://dot.example/hook'))).toEqual(REFUSED);
    expect(script.tried).toEqual([]);
  });
});

describe('address order', () => {
  test('IPv4 first when preferred, keeping the resolver order within each family', () => {
    const answers = [
      { address: V6_A, family: 6 as const },
      { address: V4_B, family: 4 as const },
      { address: V4_A, family: 4 as const },
    ];
    expect(orderAnswers(answers, true).map((a) => a.address)).toEqual([V4_B, V4_A, V6_A]);
    expect(orderAnswers(answers, false).map((a) => a.address)).toEqual([V6_A, V4_B, V4_A]);
  });

  test('the client connects to IPv4 first when preferIpv4, even if DNS answered IPv6 first', async () => {
    const script = scripted({ [V4_A]: connected(), [V6_A]: connected() });
    const client = createGuardedWebhookClient({
      allowLoopback: false,
      preferIpv4: true,
      resolver: fixedResolver(V6_A, V4_A).resolver,
      connector: script.connector,
    });
    await client.post(webhookRequest('https://dot.example/hook'));
    expect(script.tried).toEqual([V4_A]);
  });

  test('hasGlobalIpv6: only a global, external IPv6 address counts as an IPv6 route', () => {
    const iface = (address: string, family: 'IPv4' | 'IPv6', internal = false) => ({
      address,
      family,
      internal,
      netmask: '',
      mac: '',
      cidr: null,
      ...(family === 'IPv6' ? { scopeid: 0 } : {}),
    });
    expect(hasGlobalIpv6({ lo: [iface('127.0.0.1', 'IPv4', true), iface('::1', 'IPv6', true)], eth0: [iface('169.254.76.1', 'IPv4')] } as never)).toBe(false);
    expect(hasGlobalIpv6({ eth0: [iface('10.0.0.5', 'IPv4'), iface('fe80::1', 'IPv6')] } as never)).toBe(false);
    expect(hasGlobalIpv6({ eth0: [iface('10.0.0.5', 'IPv4'), iface('2600:1f18::5', 'IPv6')] } as never)).toBe(true);
  });
});

describe('timeoutMs: a shorter deadline for one request', () => {
  function recordingTimers(): Timers & { delays: number[] } {
    const delays: number[] = [];
    return {
      delays,
      setTimeout: (fn, ms) => {
        delays.push(ms);
        return setTimeout(fn, ms);
      },
      clearTimeout: (handle) => clearTimeout(handle as NodeJS.Timeout),
    };
  }

  test('a shorter timeoutMs is the deadline', async () => {
    const timers = recordingTimers();
    const client = createGuardedWebhookClient({
      allowLoopback: false,
      timers,
      resolver: fixedResolver(V4_A).resolver,
      connector: scripted({ [V4_A]: connected() }).connector,
    });
    await client.post({ ...webhookRequest('https://dot.example/hook'), timeoutMs: 1_200 });
    expect(timers.delays).toEqual([1_200]);
  });

  test('GUARD-9: a longer timeoutMs does not extend the 5 s deadline', async () => {
    const timers = recordingTimers();
    const client = createGuardedWebhookClient({
      allowLoopback: false,
      timers,
      resolver: fixedResolver(V4_A).resolver,
      connector: scripted({ [V4_A]: connected() }).connector,
    });
    await client.post({ ...webhookRequest('https://dot.example/hook'), timeoutMs: 60_000 });
    expect(timers.delays).toEqual([Limits.outboundDeadlineMs]);
  });

  test('a stalled endpoint answers timeout at the shorter deadline', async () => {
    const client = createGuardedWebhookClient({
      allowLoopback: false,
      resolver: fixedResolver(V4_A).resolver,
      connector: scripted({ [V4_A]: blackhole }).connector,
    });
    const started = Date.now();
    expect(await client.post({ ...webhookRequest('https://dot.example/hook'), timeoutMs: 200 })).toEqual({ kind: 'failure', reason: 'timeout' });
    expect(Date.now() - started).toBeLessThan(Limits.outboundDeadlineMs);
  });

  test.each([0, -1, Number.NaN, Number.POSITIVE_INFINITY])('timeoutMs %p is a programming error, and nothing is sent', async (timeoutMs) => {
    const script = scripted({ [V4_A]: connected() });
    const client = createGuardedWebhookClient({ allowLoopback: false, resolver: fixedResolver(V4_A).resolver, connector: script.connector });
    await expect(client.post({ ...webhookRequest('https://dot.example/hook'), timeoutMs })).rejects.toThrow(/timeoutMs must be a positive number/);
    expect(script.tried).toEqual([]);
  });
});

describe('the node connector reports the connection', () => {
  const address = { address: '127.0.0.1', family: 4 as const };
  const body = Buffer.from('{}');

  test('over http, onConnected fires before the response', async () => {
    const server = await startHttpServer((_req, res) => res.end('ok'));
    try {
      let connectedAt = 0;
      const response = await nodeConnector({
        url: new URL(`${server.origin}/hook`),
        address,
        headers: {},
        body,
        signal: new AbortController().signal,
        onConnected: () => (connectedAt = Date.now()),
      });
      response.destroy();
      expect(response.status).toBe(200);
      expect(connectedAt).toBeGreaterThan(0);
    } finally {
      await server.close();
    }
  });

  test('over https, onConnected fires at the TCP connection even when TLS then fails', async () => {
    const server = await startHttpsServer(selfSignedCertificate(), (_req, res) => res.end('ok'));
    try {
      let connectedCalls = 0;
      const error = await nodeConnector({
        url: new URL(`https://localhost:${server.port}/hook`),
        address,
        headers: {},
        body,
        signal: new AbortController().signal,
        onConnected: () => connectedCalls++,
      }).then(
        () => undefined,
        (e: unknown) => e,
      );
      // The self-signed certificate is refused: a TLS error after the connection was made.
      expect(error).toBeDefined();
      expect(connectedCalls).toBe(1);
    } finally {
      await server.close();
    }
  });

  test('a refused port rejects with ECONNREFUSED and never reports a connection', async () => {
    const raw = await startRawServer(undefined);
    const port = raw.port;
    await raw.close();
    let connectedCalls = 0;
    const error = await nodeConnector({
      url: new URL(`http://127.0.0.1:${port}/hook`),
      address,
      headers: {},
      body,
      signal: new AbortController().signal,
      onConnected: () => connectedCalls++,
    }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect((error as { code?: string }).code).toBe('ECONNREFUSED');
    expect(connectedCalls).toBe(0);
  });
});
