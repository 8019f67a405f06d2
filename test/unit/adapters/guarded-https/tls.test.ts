/**
 * docs/contract/outbound-guard.md, TLS: the guard verifies certificates (a self-signed one is a tls_error, the server's
 * handler never runs), and nodeConnector keeps the URL host name for SNI while connecting to the
 * checked address. The certificate is made fresh by openssl; only 127.0.0.1 is contacted.
 */
import dns from 'node:dns';
import { createGuardedWebhookClient, nodeConnector } from '../../../../lambda/adapters/guarded-https';
import {
  forbiddenResolver,
  selfSignedCertificate,
  startHttpServer,
  startHttpsServer,
  webhookRequest,
  type SelfSigned,
  type TestServer,
} from '../../../support/guard';

let credentials: SelfSigned;
let server: TestServer & { servernames: string[] };

beforeAll(() => {
  credentials = selfSignedCertificate();
});

beforeEach(async () => {
  server = await startHttpsServer(credentials, (_req, res) => res.end('should not be reached'));
});

afterEach(async () => {
  jest.restoreAllMocks();
  await server.close();
});

describe('TLS certificate checks', () => {
  it('EV-CHAL-9: yields tls_error for a self-signed certificate on https://127.0.0.1 with the loopback switch on', async () => {
    const client = createGuardedWebhookClient({ allowLoopback: true, resolver: forbiddenResolver().resolver });

    expect(await client.post(webhookRequest(`${server.origin}/hook`))).toEqual({ kind: 'failure', reason: 'tls_error' });
    expect(server.requests).toHaveLength(0);
  });

  it('yields tls_error when the https URL reaches a server that does not speak TLS', async () => {
    const plain = await startHttpServer((_req, res) => res.end('plain http'));
    try {
      const client = createGuardedWebhookClient({ allowLoopback: true, resolver: forbiddenResolver().resolver });

      expect(await client.post(webhookRequest(`https://127.0.0.1:${plain.port}/hook`))).toEqual({ kind: 'failure', reason: 'tls_error' });
      expect(plain.requests).toHaveLength(0);
    } finally {
      await plain.close();
    }
  });
});

describe('nodeConnector and SNI', () => {
  it('GUARD-3: sends the URL host name as SNI while connecting to the pinned address, without a DNS lookup', async () => {
    const lookups = jest.spyOn(dns, 'lookup').mockImplementation(((host: string) => {
      throw new Error(`unexpected DNS lookup of ${host}`);
    }) as unknown as typeof dns.lookup);

    const attempt = nodeConnector({
      url: new URL(`https://dot.example:${server.port}/hook`),
      address: { address: '127.0.0.1', family: 4 },
      headers: { 'accept-encoding': 'identity' },
      body: Buffer.from('x'),
      signal: new AbortController().signal,
    });

    await expect(attempt).rejects.toMatchObject({ code: expect.stringMatching(/SELF_SIGNED|CERT|UNABLE_TO/) });
    expect(server.servernames).toEqual(['dot.example']);
    expect(server.requests).toHaveLength(0);
    expect(lookups).not.toHaveBeenCalled();
  });
});
