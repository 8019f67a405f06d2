/**
 * docs/contract/outbound-guard.md, URL rules of the outbound guard: HTTPS only, no user info, no fragment, and the local
 * switch (DMDOT_ALLOW_LOOPBACK_CALLBACKS) that additionally allows http: and https: to exactly the
 * literal hosts 127.0.0.1 and [::1], nothing else. A refusal attempts no connection.
 *
 * No network: the resolver and the connector are injected.
 */
import { createGuardedWebhookClient } from '../../../../lambda/adapters/guarded-https';
import { canaryConnector, fixedResolver, forbiddenResolver, REFUSED, webhookRequest } from '../../../support/guard';

function publicClient(allowLoopback: boolean) {
  const canary = canaryConnector();
  const dns = fixedResolver('93.184.216.34');
  const client = createGuardedWebhookClient({ allowLoopback, resolver: dns.resolver, connector: canary.connector });
  return { client, canary, dns };
}

describe('GUARD-2: scheme: https only', () => {
  it.each(['http://dot.example/hook', 'ftp://dot.example/hook', 'ws://dot.example/hook', 'file:///etc/passwd'])(
    'refuses %s even when the host is public',
    async (url) => {
      const { client, canary, dns } = publicClient(false);
      expect(await client.post(webhookRequest(url))).toEqual(REFUSED);
      expect(canary.calls).toHaveLength(0);
      expect(dns.calls).toHaveLength(0);
    },
  );

  it('allows https to a public host', async () => {
    const { client, canary } = publicClient(false);
    expect((await client.post(webhookRequest('https://dot.example/hook'))).kind).toBe('response');
    expect(canary.calls).toHaveLength(1);
  });

  it('GUARD-13: refuses http to a public host even with the loopback switch on', async () => {
    const { client, canary } = publicClient(true);
    expect(await client.post(webhookRequest('http://dot.example/hook'))).toEqual(REFUSED);
    expect(canary.calls).toHaveLength(0);
  });

  it('refuses http to a public IP literal even with the loopback switch on', async () => {
    const { client, canary } = publicClient(true);
    expect(await client.post(webhookRequest('http://93.184.216.34/hook'))).toEqual(REFUSED);
    expect(canary.calls).toHaveLength(0);
  });
});

describe('GUARD-2: no user info', () => {
  it.each(['https://user:pass@dot.example/hook', 'https://user@dot.example/hook', 'https://:pass@dot.example/hook'])('refuses %s', async (url) => {
    const { client, canary, dns } = publicClient(false);
    expect(await client.post(webhookRequest(url))).toEqual(REFUSED);
    expect(canary.calls).toHaveLength(0);
    expect(dns.calls).toHaveLength(0);
  });

  it('refuses user info on a loopback literal with the switch on', async () => {
    const canary = canaryConnector();
    const client = createGuardedWebhookClient({ allowLoopback: true, resolver: forbiddenResolver().resolver, connector: canary.connector });
    expect(await client.post(webhookRequest('http://user:pass@127.0.0.1:8080/hook'))).toEqual(REFUSED);
    expect(canary.calls).toHaveLength(0);
  });
});

describe('GUARD-2: no fragment', () => {
  it.each(['https://dot.example/hook#frag', 'https://dot.example/hook?x=1#frag', 'https://dot.example/hook#'])('refuses %s', async (url) => {
    const { client, canary, dns } = publicClient(false);
    expect(await client.post(webhookRequest(url))).toEqual(REFUSED);
    expect(canary.calls).toHaveLength(0);
    expect(dns.calls).toHaveLength(0);
  });
});

describe('loopback switch off', () => {
  it.each(['https://127.0.0.1/hook', 'https://[::1]/hook', 'http://127.0.0.1:8080/hook', 'http://[::1]:8080/hook'])('refuses %s', async (url) => {
    const canary = canaryConnector();
    const client = createGuardedWebhookClient({ allowLoopback: false, resolver: forbiddenResolver().resolver, connector: canary.connector });
    expect(await client.post(webhookRequest(url))).toEqual(REFUSED);
    expect(canary.calls).toHaveLength(0);
  });
});

describe('GUARD-13: loopback switch on: only the literal hosts 127.0.0.1 and [::1]', () => {
  it.each([
    ['http://127.0.0.1:8080/hook', { address: '127.0.0.1', family: 4 }],
    ['https://127.0.0.1:8443/hook', { address: '127.0.0.1', family: 4 }],
    ['http://[::1]:8080/hook', { address: '::1', family: 6 }],
    ['https://[::1]:8443/hook', { address: '::1', family: 6 }],
  ])('allows %s and connects to the literal without resolving', async (url, address) => {
    const canary = canaryConnector();
    const dns = forbiddenResolver();
    const client = createGuardedWebhookClient({ allowLoopback: true, resolver: dns.resolver, connector: canary.connector });

    expect((await client.post(webhookRequest(url))).kind).toBe('response');
    expect(dns.calls).toHaveLength(0);
    expect(canary.calls).toHaveLength(1);
    expect(canary.calls[0]!.address).toEqual(address);
    expect(canary.calls[0]!.url.href).toBe(url);
  });

  it('refuses http://localhost (a name, not the literal) and does not resolve it', async () => {
    const canary = canaryConnector();
    const dns = fixedResolver('127.0.0.1');
    const client = createGuardedWebhookClient({ allowLoopback: true, resolver: dns.resolver, connector: canary.connector });

    expect(await client.post(webhookRequest('http://localhost:8080/hook'))).toEqual(REFUSED);
    expect(canary.calls).toHaveLength(0);
    expect(dns.calls).toHaveLength(0);
  });

  it('refuses https://localhost resolving to 127.0.0.1', async () => {
    const canary = canaryConnector();
    const dns = fixedResolver('127.0.0.1');
    const client = createGuardedWebhookClient({ allowLoopback: true, resolver: dns.resolver, connector: canary.connector });

    expect(await client.post(webhookRequest('https://localhost:8443/hook'))).toEqual(REFUSED);
    expect(canary.calls).toHaveLength(0);
  });

  it('refuses a DNS name resolving to 127.0.0.1 over https', async () => {
    const canary = canaryConnector();
    const dns = fixedResolver('127.0.0.1');
    const client = createGuardedWebhookClient({ allowLoopback: true, resolver: dns.resolver, connector: canary.connector });

    expect(await client.post(webhookRequest('https://loop.example/hook'))).toEqual(REFUSED);
    expect(dns.calls).toEqual(['loop.example']);
    expect(canary.calls).toHaveLength(0);
  });

  it('refuses a DNS name resolving to ::1 over https', async () => {
    const canary = canaryConnector();
    const dns = fixedResolver('::1');
    const client = createGuardedWebhookClient({ allowLoopback: true, resolver: dns.resolver, connector: canary.connector });

    expect(await client.post(webhookRequest('https://loop.example/hook'))).toEqual(REFUSED);
    expect(canary.calls).toHaveLength(0);
  });

  it('refuses a DNS name resolving to 127.0.0.1 over http', async () => {
    const canary = canaryConnector();
    const dns = fixedResolver('127.0.0.1');
    const client = createGuardedWebhookClient({ allowLoopback: true, resolver: dns.resolver, connector: canary.connector });

    expect(await client.post(webhookRequest('http://loop.example:8080/hook'))).toEqual(REFUSED);
    expect(canary.calls).toHaveLength(0);
  });

  it.each(['https://127.0.0.2/hook', 'http://127.0.0.2:8080/hook', 'https://[::ffff:127.0.0.1]/hook', 'http://[::ffff:127.0.0.1]:8080/hook'])(
    'refuses the other loopback literal %s',
    async (url) => {
      const canary = canaryConnector();
      const client = createGuardedWebhookClient({ allowLoopback: true, resolver: forbiddenResolver().resolver, connector: canary.connector });
      expect(await client.post(webhookRequest(url))).toEqual(REFUSED);
      expect(canary.calls).toHaveLength(0);
    },
  );

  it.each(['https://10.0.0.1/hook', 'https://169.254.169.254/latest/meta-data/', 'https://[fe80::1]/hook'])(
    'still refuses the private literal %s',
    async (url) => {
      const canary = canaryConnector();
      const client = createGuardedWebhookClient({ allowLoopback: true, resolver: forbiddenResolver().resolver, connector: canary.connector });
      expect(await client.post(webhookRequest(url))).toEqual(REFUSED);
      expect(canary.calls).toHaveLength(0);
    },
  );

  it('still checks every answer for other names (public then private refused)', async () => {
    const canary = canaryConnector();
    const client = createGuardedWebhookClient({
      allowLoopback: true,
      resolver: fixedResolver('93.184.216.34', '127.0.0.1').resolver,
      connector: canary.connector,
    });
    expect(await client.post(webhookRequest('https://dot.example/hook'))).toEqual(REFUSED);
    expect(canary.calls).toHaveLength(0);
  });
});

describe('unusable URLs', () => {
  it.each(['not a url', 'https://', 'https://[fe80::1%25eth0]/hook', 'https://dot.example:99999/hook'])(
    'refuses %s without resolving or connecting',
    async (url) => {
      const { client, canary, dns } = publicClient(true);
      expect(await client.post(webhookRequest(url))).toEqual(REFUSED);
      expect(canary.calls).toHaveLength(0);
      expect(dns.calls).toHaveLength(0);
    },
  );
});

describe('GUARD-11, LIM-3: outgoing body cap (256 KiB)', () => {
  it('throws for a body of 256 KiB + 1 byte and connects to nothing', async () => {
    const { client, canary, dns } = publicClient(false);
    await expect(client.post(webhookRequest('https://dot.example/hook', new Uint8Array(256 * 1024 + 1)))).rejects.toThrow(/256 KiB/);
    expect(canary.calls).toHaveLength(0);
    expect(dns.calls).toHaveLength(0);
  });

  it('sends a body of exactly 256 KiB', async () => {
    const { client, canary } = publicClient(false);
    expect((await client.post(webhookRequest('https://dot.example/hook', new Uint8Array(256 * 1024)))).kind).toBe('response');
    expect(canary.calls[0]!.body.byteLength).toBe(256 * 1024);
  });
});
