/**
 * docs/contract/outbound-guard.md, address rules of the outbound guard: every address that is not globally routable is
 * refused, whether it is an IP literal in the URL or an answer of the resolver, every resolver
 * answer is checked, and a refusal attempts no connection at all (the canary connector stays
 * untouched). A public answer is connected to as is, host name kept, with no second lookup.
 *
 * No network: the resolver and the connector are injected.
 */
import { createGuardedWebhookClient } from '../../../../lambda/adapters/guarded-https';
import { canaryConnector, fixedResolver, forbiddenResolver, REFUSED, urlHost, webhookRequest } from '../../../support/guard';

/** [contract range, addresses inside it]: first/last addresses where that is meaningful. */
const FORBIDDEN: Array<[string, string[]]> = [
  ['0.0.0.0/8', ['0.0.0.0', '0.0.0.1', '0.255.255.255']],
  ['10.0.0.0/8', ['10.0.0.1', '10.255.255.255']],
  ['100.64.0.0/10', ['100.64.0.1', '100.127.255.255']],
  ['127.0.0.0/8', ['127.0.0.1', '127.255.255.254']],
  ['169.254.0.0/16 (cloud metadata)', ['169.254.169.254', '169.254.0.1', '169.254.255.255']],
  ['172.16.0.0/12', ['172.16.0.1', '172.31.255.255']],
  ['192.0.0.0/24', ['192.0.0.1', '192.0.0.255']],
  ['192.0.2.0/24', ['192.0.2.1']],
  ['192.168.0.0/16', ['192.168.0.1', '192.168.255.255']],
  ['198.18.0.0/15', ['198.18.0.1', '198.19.255.255']],
  ['198.51.100.0/24', ['198.51.100.1']],
  ['203.0.113.0/24', ['203.0.113.1']],
  ['224.0.0.0/4', ['224.0.0.1', '239.255.255.255']],
  ['240.0.0.0/4', ['240.0.0.1', '255.255.255.254']],
  ['255.255.255.255/32', ['255.255.255.255']],
  ['::/128', ['::']],
  ['::1/128', ['::1']],
  ['::ffff:0:0/96 (IPv4-mapped, judged as its IPv4)', ['::ffff:10.0.0.1', '::ffff:127.0.0.1', '::ffff:169.254.169.254', '::ffff:0.0.0.0']],
  ['64:ff9b::/96', ['64:ff9b::a00:1', '64:ff9b::5db8:d822']],
  ['100::/64', ['100::1', '100::ffff:ffff:ffff:ffff']],
  ['2001:db8::/32', ['2001:db8::1', '2001:db8:ffff::1']],
  ['fc00::/7', ['fc00::1', 'fd12:3456::1']],
  ['fe80::/10', ['fe80::1', 'febf::1']],
  ['ff00::/8', ['ff02::1', 'ff0e::1']],
];

const CASES = FORBIDDEN.flatMap(([range, addresses]) => addresses.map((address) => ({ range, address })));

describe('GUARD-1, GUARD-4: guard refuses every address docs/contract/outbound-guard.md forbids', () => {
  describe('GUARD-6: as an IP literal in the URL', () => {
    it.each(CASES)('refuses $address ($range) without resolving or connecting', async ({ address }) => {
      const canary = canaryConnector();
      const dns = forbiddenResolver();
      const client = createGuardedWebhookClient({ allowLoopback: false, resolver: dns.resolver, connector: canary.connector });

      const result = await client.post(webhookRequest(`https://${urlHost(address)}/hook`));

      expect(result).toEqual(REFUSED);
      expect(canary.calls).toHaveLength(0);
      expect(dns.calls).toHaveLength(0);
    });
  });

  describe('as the resolver answer for a DNS name', () => {
    it.each(CASES)('refuses a name resolving to $address ($range) without connecting', async ({ address }) => {
      const canary = canaryConnector();
      const dns = fixedResolver(address);
      const client = createGuardedWebhookClient({ allowLoopback: false, resolver: dns.resolver, connector: canary.connector });

      const result = await client.post(webhookRequest('https://dot.example/hook'));

      expect(result).toEqual(REFUSED);
      expect(dns.calls).toEqual(['dot.example']);
      expect(canary.calls).toHaveLength(0);
    });
  });
});

describe('GUARD-3: guard checks every resolver answer, not only the first', () => {
  it('refuses when the first answer is public and the second private', async () => {
    const canary = canaryConnector();
    const dns = fixedResolver('93.184.216.34', '10.0.0.1');
    const client = createGuardedWebhookClient({ allowLoopback: false, resolver: dns.resolver, connector: canary.connector });

    expect(await client.post(webhookRequest('https://dot.example/hook'))).toEqual(REFUSED);
    expect(canary.calls).toHaveLength(0);
  });

  it('refuses when a public IPv6 answer is followed by the cloud metadata address', async () => {
    const canary = canaryConnector();
    const dns = fixedResolver('2606:4700::1111', '93.184.216.34', '169.254.169.254');
    const client = createGuardedWebhookClient({ allowLoopback: false, resolver: dns.resolver, connector: canary.connector });

    expect(await client.post(webhookRequest('https://dot.example/hook'))).toEqual(REFUSED);
    expect(canary.calls).toHaveLength(0);
  });

  it('refuses a name with no answers', async () => {
    const canary = canaryConnector();
    const dns = fixedResolver();
    const client = createGuardedWebhookClient({ allowLoopback: false, resolver: dns.resolver, connector: canary.connector });

    expect(await client.post(webhookRequest('https://dot.example/hook'))).toEqual(REFUSED);
    expect(canary.calls).toHaveLength(0);
  });

  it.each(['', 'dot.example', '93.184.216.34 ', '2606:4700::1111%eth0', '0x7f.0.0.1'])(
    'refuses a resolver answer %j that is not a plain global IP address',
    async (answer) => {
      const canary = canaryConnector();
      const client = createGuardedWebhookClient({ allowLoopback: false, resolver: fixedResolver(answer).resolver, connector: canary.connector });

      expect(await client.post(webhookRequest('https://dot.example/hook'))).toEqual(REFUSED);
      expect(canary.calls).toHaveLength(0);
    },
  );

  it('EV-CHAL-9, GUARD-1: reports a failed lookup (ENOTFOUND) as connection_refused without connecting', async () => {
    const canary = canaryConnector();
    const client = createGuardedWebhookClient({
      allowLoopback: false,
      resolver: async () => {
        throw Object.assign(new Error('getaddrinfo ENOTFOUND dot.example'), { code: 'ENOTFOUND' });
      },
      connector: canary.connector,
    });

    expect(await client.post(webhookRequest('https://dot.example/hook'))).toEqual(REFUSED);
    expect(canary.calls).toHaveLength(0);
  });
});

describe('guard refuses unusual IPv4 spellings that the URL parser normalises to loopback', () => {
  it.each([
    ['decimal', 'https://2130706433/hook'],
    ['hex', 'https://0x7f000001/hook'],
    ['octal', 'https://0177.0.0.1/hook'],
    ['short', 'https://127.1/hook'],
    ['trailing dot', 'https://127.0.0.1./hook'],
    ['hex metadata address', 'https://0xa9.0xfe.0xa9.0xfe/hook'],
  ])('refuses the %s spelling %s', async (_spelling, url) => {
    const canary = canaryConnector();
    const dns = forbiddenResolver();
    const client = createGuardedWebhookClient({ allowLoopback: false, resolver: dns.resolver, connector: canary.connector });

    expect(await client.post(webhookRequest(url))).toEqual(REFUSED);
    expect(canary.calls).toHaveLength(0);
    expect(dns.calls).toHaveLength(0);
  });
});

describe('guard allows a globally routable address', () => {
  it('GUARD-3, GUARD-12: connects to the exact resolver answer with the original URL (host name kept) and resolves once', async () => {
    const canary = canaryConnector();
    const dns = fixedResolver('93.184.216.34');
    const client = createGuardedWebhookClient({ allowLoopback: false, resolver: dns.resolver, connector: canary.connector });

    const result = await client.post(webhookRequest('https://dot.example:8443/hooks/in?x=1'));

    expect(result).toEqual({ kind: 'response', status: 200, body: Buffer.from('ok') });
    expect(dns.calls).toEqual(['dot.example']);
    expect(canary.calls).toHaveLength(1);
    const call = canary.calls[0]!;
    expect(call.address).toEqual({ address: '93.184.216.34', family: 4 });
    expect(call.url.href).toBe('https://dot.example:8443/hooks/in?x=1');
    expect(call.url.hostname).toBe('dot.example');
  });

  it('connects to a public IPv4 literal without resolving', async () => {
    const canary = canaryConnector();
    const dns = forbiddenResolver();
    const client = createGuardedWebhookClient({ allowLoopback: false, resolver: dns.resolver, connector: canary.connector });

    expect((await client.post(webhookRequest('https://93.184.216.34/hook'))).kind).toBe('response');
    expect(dns.calls).toHaveLength(0);
    expect(canary.calls[0]!.address).toEqual({ address: '93.184.216.34', family: 4 });
  });

  it('connects to a public IPv6 literal without resolving', async () => {
    const canary = canaryConnector();
    const dns = forbiddenResolver();
    const client = createGuardedWebhookClient({ allowLoopback: false, resolver: dns.resolver, connector: canary.connector });

    expect((await client.post(webhookRequest('https://[2606:4700::1111]/hook'))).kind).toBe('response');
    expect(dns.calls).toHaveLength(0);
    expect(canary.calls[0]!.address).toEqual({ address: '2606:4700::1111', family: 6 });
  });

  it('GUARD-5: judges an IPv4-mapped answer as its IPv4: a mapped public address is allowed', async () => {
    const canary = canaryConnector();
    const dns = fixedResolver('::ffff:93.184.216.34');
    const client = createGuardedWebhookClient({ allowLoopback: false, resolver: dns.resolver, connector: canary.connector });

    expect((await client.post(webhookRequest('https://dot.example/hook'))).kind).toBe('response');
    expect(canary.calls).toHaveLength(1);
  });

  it('connects to the first answer when every answer is public', async () => {
    const canary = canaryConnector();
    const dns = fixedResolver('93.184.216.34', '2606:4700::1111');
    const client = createGuardedWebhookClient({ allowLoopback: false, resolver: dns.resolver, connector: canary.connector });

    expect((await client.post(webhookRequest('https://dot.example/hook'))).kind).toBe('response');
    expect(canary.calls.map((c) => c.address)).toEqual([{ address: '93.184.216.34', family: 4 }]);
  });

  it.each([
    '9.255.255.255',
    '11.0.0.0',
    '100.63.255.255',
    '100.128.0.0',
    '126.255.255.255',
    '128.0.0.0',
    '169.253.255.255',
    '169.255.0.0',
    '172.15.255.255',
    '172.32.0.0',
    '192.0.1.0',
    '192.167.255.255',
    '192.169.0.0',
    '198.17.255.255',
    '198.20.0.0',
    '223.255.255.255',
    '2001:db9::1',
    'fbff::1',
    'fe00::1',
  ])('allows %s, just outside a forbidden range', async (address) => {
    const canary = canaryConnector();
    const client = createGuardedWebhookClient({ allowLoopback: false, resolver: fixedResolver(address).resolver, connector: canary.connector });

    expect((await client.post(webhookRequest('https://dot.example/hook'))).kind).toBe('response');
    expect(canary.calls[0]!.address.address).toBe(address);
  });

  it('GUARD-8: sends Accept-Encoding: identity and keeps the caller headers', async () => {
    const canary = canaryConnector();
    const client = createGuardedWebhookClient({ allowLoopback: false, resolver: fixedResolver('93.184.216.34').resolver, connector: canary.connector });

    await client.post(webhookRequest('https://dot.example/hook', Buffer.from('x'), { 'webhook-id': 'msg_1', 'accept-encoding': 'gzip' }));

    expect(canary.calls[0]!.headers).toMatchObject({ 'accept-encoding': 'identity', 'webhook-id': 'msg_1', 'content-type': 'application/json' });
  });
});
