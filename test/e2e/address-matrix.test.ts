/**
 * docs/contract/outbound-guard.md hardening, end to end: a matrix of forbidden callback forms, each refused twice.
 *
 * 1. At subscribe time (the callback challenge): `events/subscribe` answers -32015
 *    `{reason: "connection_refused"}`, or -32602 where the URL itself is invalid per docs/contract/events.md
 *    (the `expect` column of each row says which).
 * 2. At delivery time (DNS rebinding): a subscription to `rebind-<n>.test` whose first lookup is
 *    public passes the challenge, then the name's answer changes to the row's forbidden address;
 *    every delivery attempt then fails transiently with connection_refused and connects nowhere.
 *
 * How this stays on loopback: the runtime runs IN-PROCESS (`startLocal`) with the real guarded
 * client (`createGuardedWebhookClient`, loopback switch OFF) built around a scripted resolver
 * (`*.test` names; the system resolver is never asked) and a canary connector. The canary records
 * every connection attempt the guard lets through and forwards only the scripted public answers
 * (93.184.216.34, 2606:2800:…) to a real receiver on 127.0.0.1: the only way traffic leaves the
 * guard here, and it only ever targets 127.0.0.1. Anything else reaching the canary is a
 * violation and is not forwarded.
 *
 * A third part runs the literal forms that denote this host with the REAL node connector (nothing
 * injected, switch OFF) against raw TCP canary listeners on 127.0.0.1 and [::1]: their accepted
 * socket counts must stay 0. Forms that denote other hosts are not run there: if the guard ever
 * let one through, the real connector would leave loopback. A control then shows the same
 * listeners do count a real connection when the loopback switch allows it.
 *
 * The switch stays OFF throughout: with it ON, WHATWG-normalised spellings of 127.0.0.1
 * (http://127.1, http://2130706433) are the allowed literal by design.
 *
 * Set DMDOT_MATRIX_OUT=<file> to write the matrix (form → subscribe → delivery) as Markdown.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  createGuardedWebhookClient,
  type ConnectRequest,
  type ConnectResponse,
  type Connector,
  type ResolvedAddress,
  type Resolver,
} from '../../lambda/adapters/guarded-https';
import type { LocalSettings as Settings } from '../../lambda/config/settings';
import { testLocalSettings } from '../support/paths';
import { startLocal, type LocalRuntime } from '../../lambda/local/runtime';
import { createLogger } from '../../lambda/log';
import type { WebhookClient, WebhookRequest, WebhookResponse } from '../../lambda/ports';
import { echoing, newSecret, rpc, startReceiver, waitFor, type RunningServer } from '../support/e2e';

const PUBLIC_V4 = '93.184.216.34';
const PUBLIC_V6 = '2606:2800:220:1:248:1893:25c8:1946';
const PUBLIC = new Set([PUBLIC_V4, PUBLIC_V6]);
/** The one address the canary ever forwards to. */
const FORWARD_HOST = '127.0.0.1';

type Expect = 'refused' | 'invalid';
/** Where an unguarded connection to this form would land on this machine (part 3 only). */
type Reach = 'v4' | 'v6';

interface Row {
  form: string;
  /** The callback URL; `port` is only given in part 3 (real connector). */
  url(port?: number): string;
  /** refused: -32015 connection_refused at the challenge. invalid: -32602 (docs/contract/events.md). */
  expect: Expect;
  /** The DNS answer for the rebinding name at delivery time; 'NXDOMAIN' for a failing lookup. */
  rebindTo: string[] | 'NXDOMAIN';
  /** Scripted answers when the row's host is a name (part 1 resolver table). */
  dns?: string[] | 'NXDOMAIN';
  reach?: Reach;
}

function lit(
  form: string,
  host: string,
  expect: Expect,
  rebindTo: string[],
  options: { scheme?: string; userinfo?: string; suffix?: string; reach?: Reach } = {},
): Row {
  const { scheme = 'https', userinfo = '', suffix = '', reach } = options;
  return { form, url: (port) => `${scheme}://${userinfo}${host}${port ? `:${port}` : ''}/hook${suffix}`, expect, rebindTo, ...(reach ? { reach } : {}) };
}

function name(form: string, host: string, answers: string[] | 'NXDOMAIN'): Row {
  return { form, url: () => `https://${host}/hook`, expect: 'refused', rebindTo: answers, dns: answers };
}

const L = '127.0.0.1';
const R = 'refused' as const;
const I = 'invalid' as const;

const ROWS: Row[] = [
  // 127.0.0.1 in every spelling the WHATWG URL parser normalises to it.
  lit('IPv4 decimal (2130706433)', '2130706433', R, [L], { reach: 'v4' }),
  lit('IPv4 octal dotted (0177.0.0.1)', '0177.0.0.1', R, [L], { reach: 'v4' }),
  lit('IPv4 octal whole (017700000001)', '017700000001', R, [L], { reach: 'v4' }),
  lit('IPv4 zero-padded (127.000.000.001)', '127.000.000.001', R, [L], { reach: 'v4' }),
  lit('IPv4 hex dotted (0x7f.0.0.1)', '0x7f.0.0.1', R, [L], { reach: 'v4' }),
  lit('IPv4 hex whole (0x7f000001)', '0x7f000001', R, [L], { reach: 'v4' }),
  lit('IPv4 hex octets (0x7f.0x0.0x0.0x1)', '0x7f.0x0.0x0.0x1', R, [L], { reach: 'v4' }),
  lit('IPv4 short form (127.1)', '127.1', R, [L], { reach: 'v4' }),
  lit('IPv4 short hex (0x7f.1)', '0x7f.1', R, [L], { reach: 'v4' }),
  lit('IPv4 trailing dot (127.0.0.1.)', '127.0.0.1.', R, [L], { reach: 'v4' }),
  lit('IPv4 percent-encoded (%31%32%37.0.0.1)', '%31%32%37.0.0.1', R, [L], { reach: 'v4' }),
  lit('IPv4 ideographic full stops (127。0。0。1)', '127。0。0。1', R, [L], { reach: 'v4' }),
  lit('IPv4 fullwidth digits (１２７.０.０.１)', '１２７.０.０.１', R, [L], { reach: 'v4' }),
  lit('loopback 127.0.0.1', '127.0.0.1', R, [L], { reach: 'v4' }),
  lit('loopback 127.255.255.254', '127.255.255.254', R, ['127.255.255.254']),
  lit('IPv6 loopback [::1]', '[::1]', R, ['::1'], { reach: 'v6' }),
  lit('IPv6 loopback long form [0:0:0:0:0:0:0:1]', '[0:0:0:0:0:0:0:1]', R, ['::1'], { reach: 'v6' }),
  // Unspecified and "this network".
  lit('unspecified 0.0.0.0', '0.0.0.0', R, ['0.0.0.0'], { reach: 'v4' }),
  lit('unspecified short (0)', '0', R, ['0.0.0.0'], { reach: 'v4' }),
  lit('this network 0.1.2.3', '0.1.2.3', R, ['0.1.2.3']),
  lit('IPv6 unspecified [::]', '[::]', R, ['::'], { reach: 'v6' }),
  // Private addresses in odd spellings.
  lit('IPv4 short form (10.1 = 10.0.0.1)', '10.1', R, ['10.0.0.1']),
  lit('IPv4 octal (012.0.0.1 = 10.0.0.1)', '012.0.0.1', R, ['10.0.0.1']),
  lit('IPv4 decimal (3232235521 = 192.168.0.1)', '3232235521', R, ['192.168.0.1']),
  // IPv4 carried inside IPv6.
  lit('IPv4-mapped [::ffff:127.0.0.1]', '[::ffff:127.0.0.1]', R, ['::ffff:127.0.0.1'], { reach: 'v4' }),
  lit('IPv4-mapped long form [0:0:0:0:0:ffff:127.0.0.1]', '[0:0:0:0:0:ffff:127.0.0.1]', R, ['::ffff:7f00:1'], { reach: 'v4' }),
  lit('IPv4-mapped [::ffff:10.0.0.1]', '[::ffff:10.0.0.1]', R, ['::ffff:10.0.0.1']),
  lit('IPv4-mapped hex [::ffff:a9fe:a9fe] (169.254.169.254)', '[::ffff:a9fe:a9fe]', R, ['::ffff:a9fe:a9fe']),
  lit('IPv4-mapped [::ffff:0.0.0.0]', '[::ffff:0.0.0.0]', R, ['::ffff:0.0.0.0'], { reach: 'v4' }),
  lit('IPv4-translated [::ffff:0:7f00:1]', '[::ffff:0:7f00:1]', R, ['::ffff:0:7f00:1']),
  lit('IPv4-compatible, deprecated [::127.0.0.1]', '[::127.0.0.1]', R, ['::7f00:1']),
  lit('IPv4-compatible, deprecated [::169.254.169.254]', '[::169.254.169.254]', R, ['::a9fe:a9fe']),
  lit('NAT64 [64:ff9b::a9fe:a9fe] (169.254.169.254)', '[64:ff9b::a9fe:a9fe]', R, ['64:ff9b::a9fe:a9fe']),
  lit('NAT64 [64:ff9b::127.0.0.1]', '[64:ff9b::127.0.0.1]', R, ['64:ff9b::7f00:1']),
  lit('NAT64 local-use [64:ff9b:1::a9fe:a9fe]', '[64:ff9b:1::a9fe:a9fe]', R, ['64:ff9b:1::a9fe:a9fe']),
  lit('6to4 [2002:a9fe:a9fe::1] (embeds 169.254.169.254)', '[2002:a9fe:a9fe::1]', R, ['2002:a9fe:a9fe::1']),
  lit('Teredo [2001::1]', '[2001::1]', R, ['2001::1']),
  // Link-local.
  lit('IPv6 link-local with zone [fe80::1%25eth0]', '[fe80::1%25eth0]', I, ['fe80::1%eth0']),
  lit('IPv6 link-local [fe80::1]', '[fe80::1]', R, ['fe80::1']),
  lit('IPv4 link-local 169.254.0.1', '169.254.0.1', R, ['169.254.0.1']),
  // Cloud metadata.
  lit('metadata 169.254.169.254', '169.254.169.254', R, ['169.254.169.254']),
  lit('metadata hex (0xa9fea9fe)', '0xa9fea9fe', R, ['169.254.169.254']),
  lit('metadata octal (0251.0376.0251.0376)', '0251.0376.0251.0376', R, ['169.254.169.254']),
  lit('metadata short form (169.254.43518)', '169.254.43518', R, ['169.254.169.254']),
  lit('metadata AWS IPv6 [fd00:ec2::254]', '[fd00:ec2::254]', R, ['fd00:ec2::254']),
  lit('metadata Alibaba 100.100.100.200', '100.100.100.200', R, ['100.100.100.200']),
  lit('metadata ECS task 169.254.170.2', '169.254.170.2', R, ['169.254.170.2']),
  // Private ranges.
  lit('private 10.0.0.1', '10.0.0.1', R, ['10.0.0.1']),
  lit('private 10.255.255.254', '10.255.255.254', R, ['10.255.255.254']),
  lit('private 172.16.0.1', '172.16.0.1', R, ['172.16.0.1']),
  lit('private 172.31.255.254', '172.31.255.254', R, ['172.31.255.254']),
  lit('private 192.168.0.1', '192.168.0.1', R, ['192.168.0.1']),
  lit('private 192.168.255.254', '192.168.255.254', R, ['192.168.255.254']),
  lit('IPv6 unique-local [fc00::1]', '[fc00::1]', R, ['fc00::1']),
  lit('IPv6 unique-local [fd12:3456:789a::1]', '[fd12:3456:789a::1]', R, ['fd12:3456:789a::1']),
  // Shared address space (CGNAT) and IETF protocol assignments.
  lit('CGNAT 100.64.0.1', '100.64.0.1', R, ['100.64.0.1']),
  lit('CGNAT 100.127.255.254', '100.127.255.254', R, ['100.127.255.254']),
  lit('IETF assignments 192.0.0.1', '192.0.0.1', R, ['192.0.0.1']),
  lit('IETF assignments 192.0.0.170 (NAT64 discovery)', '192.0.0.170', R, ['192.0.0.170']),
  // Benchmarking.
  lit('benchmarking 198.18.0.1', '198.18.0.1', R, ['198.18.0.1']),
  lit('benchmarking 198.19.255.254', '198.19.255.254', R, ['198.19.255.254']),
  lit('IPv6 benchmarking [2001:2::1]', '[2001:2::1]', R, ['2001:2::1']),
  // Documentation.
  lit('documentation 192.0.2.1 (TEST-NET-1)', '192.0.2.1', R, ['192.0.2.1']),
  lit('documentation 198.51.100.1 (TEST-NET-2)', '198.51.100.1', R, ['198.51.100.1']),
  lit('documentation 203.0.113.1 (TEST-NET-3)', '203.0.113.1', R, ['203.0.113.1']),
  lit('IPv6 documentation [2001:db8::1]', '[2001:db8::1]', R, ['2001:db8::1']),
  lit('IPv6 documentation [3fff::1]', '[3fff::1]', R, ['3fff::1']),
  lit('IPv6 discard-only [100::1]', '[100::1]', R, ['100::1']),
  // Multicast, reserved, broadcast.
  lit('multicast 224.0.0.1', '224.0.0.1', R, ['224.0.0.1']),
  lit('multicast 239.255.255.250', '239.255.255.250', R, ['239.255.255.250']),
  lit('IPv6 multicast [ff02::1]', '[ff02::1]', R, ['ff02::1']),
  lit('IPv6 multicast [ff05::1:3]', '[ff05::1:3]', R, ['ff05::1:3']),
  lit('reserved 240.0.0.1', '240.0.0.1', R, ['240.0.0.1']),
  lit('reserved 255.255.255.254', '255.255.255.254', R, ['255.255.255.254']),
  lit('broadcast 255.255.255.255', '255.255.255.255', R, ['255.255.255.255']),
  lit('broadcast decimal (4294967295)', '4294967295', R, ['255.255.255.255']),
  lit('broadcast hex (0xffffffff)', '0xffffffff', R, ['255.255.255.255']),
  // URLs that are invalid per docs/contract/events.md before any address is considered (switch OFF: https only).
  lit('http: decimal loopback (http://2130706433)', '2130706433', I, [L], { scheme: 'http', reach: 'v4' }),
  lit('http: short form (http://127.1)', '127.1', I, [L], { scheme: 'http', reach: 'v4' }),
  lit('http: IPv6 loopback (http://[::1])', '[::1]', I, ['::1'], { scheme: 'http', reach: 'v6' }),
  lit('user info (https://user:pw@127.0.0.1)', '127.0.0.1', I, [L], { userinfo: 'user:pw@', reach: 'v4' }),
  lit('fragment (https://127.0.0.1/hook#x)', '127.0.0.1', I, [L], { suffix: '#x', reach: 'v4' }),
  // Names whose (scripted) DNS answers are forbidden: every answer is checked.
  name('name → 10.0.0.1 (private.test)', 'private.test', ['10.0.0.1']),
  name('name with trailing dot → 10.0.0.1 (private.test.)', 'private.test.', ['10.0.0.1']),
  name('name → 127.0.0.1 (loopback.test)', 'loopback.test', [L]),
  name('name → ::1 (loopback6.test)', 'loopback6.test', ['::1']),
  name('name → 169.254.169.254 (metadata.test)', 'metadata.test', ['169.254.169.254']),
  name('name → ::ffff:127.0.0.1 (mapped.test)', 'mapped.test', ['::ffff:127.0.0.1']),
  name('name → fd00::1 (ula.test)', 'ula.test', ['fd00::1']),
  name('name → 100.64.0.1 (cgnat.test)', 'cgnat.test', ['100.64.0.1']),
  name('name → fe80::1%eth0, zoned answer (zoned.test)', 'zoned.test', ['fe80::1%eth0']),
  name('name → public then private (mixed.test)', 'mixed.test', [PUBLIC_V4, '10.0.0.1']),
  name('name → private then public (mixed6.test)', 'mixed6.test', ['::1', PUBLIC_V6]),
  name('name → no address at all (empty.test)', 'empty.test', []),
  name('name that does not resolve (nxdomain.test)', 'nxdomain.test', 'NXDOMAIN'),
];

const matrix = new Map<string, { subscribe?: string; delivery?: string; realConnector?: string }>();
function note(form: string, column: 'subscribe' | 'delivery' | 'realConnector', value: string) {
  matrix.set(form, { ...matrix.get(form), [column]: value });
}

const serverOf = (runtime: LocalRuntime, key: string) => ({ mcpUrl: runtime.url, url: runtime.url.replace(/\/mcp$/, ''), key }) as RunningServer;
const subscribeParams = (url: string, secret: string) => ({ name: 'message.created', arguments: {}, delivery: { mode: 'webhook', url, secret } });
const unsubscribeParams = (url: string) => ({ name: 'message.created', arguments: {}, delivery: { url } });

function describeSubscribe(body: any): string {
  if (body.result?.id) return 'accepted';
  const reason = body.error?.data?.reason;
  return `${body.error?.code}${reason ? ` ${reason}` : ''}`;
}

function assertSubscribeRefused(row: Row, body: any) {
  if (row.expect === 'invalid') {
    assert.equal(body.error?.code, -32602, `expected -32602, got ${JSON.stringify(body)}`);
    assert.match(body.error.message, /delivery\.url/);
  } else {
    assert.equal(body.error?.code, -32015, `expected -32015, got ${JSON.stringify(body)}`);
    assert.equal(body.error.message, 'CallbackEndpointError');
    assert.deepEqual(body.error.data, { reason: 'connection_refused' });
  }
}

function settingsFor(stateDir: string, overrides: Partial<Settings> = {}): Settings {
  return testLocalSettings({ host: '127.0.0.1', port: 0, stateDir, allowLoopbackCallbacks: false, ...overrides });
}

function familyOf(address: string): 4 | 6 {
  return address.includes(':') ? 6 : 4;
}

after(() => {
  const out = process.env.DMDOT_MATRIX_OUT;
  if (!out) return;
  const lines = ['| form | subscribe | delivery (rebinding) | real connector |', '|---|---|---|---|'];
  for (const [form, r] of matrix) lines.push(`| ${form} | ${r.subscribe ?? ''} | ${r.delivery ?? ''} | ${r.realConnector ?? '(not run)'} |`);
  writeFileSync(out, `${lines.join('\n')}\n`);
});

describe('GUARD-1, GUARD-4, GUARD-12: address matrix through the guard with a scripted resolver and a canary connector', () => {
  const apiKey = 'matrix-test-key-0123456789abcdef';
  const stateDir = mkdtempSync(join(tmpdir(), 'dmdot-matrix-'));
  const logLines: string[] = [];
  /** Every connection attempt the guard let through to the connector. */
  const canaryCalls: { host: string; address: string }[] = [];
  /** Attempts for an address the test never scripted as public: must stay empty. */
  const violations: { host: string; address: string }[] = [];
  const forwardedTo: string[] = [];
  const lookups: string[] = [];
  const attempts: { url: string; eventId: string; result: WebhookResponse }[] = [];
  const rebinding = new Map<string, { lookups: number; then: string[] | 'NXDOMAIN' }>();
  const staticDns = new Map<string, string[] | 'NXDOMAIN'>([
    ['public.test', [PUBLIC_V4]],
    ['public6.test', [PUBLIC_V6]],
  ]);
  for (const row of ROWS) if (row.dns) staticDns.set(new URL(row.url()).hostname, row.dns);

  let receiver: Awaited<ReturnType<typeof startReceiver>>;
  let runtime: LocalRuntime;
  let s: RunningServer;

  const answer = (addresses: string[] | 'NXDOMAIN', host: string): ResolvedAddress[] => {
    if (addresses === 'NXDOMAIN') throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: 'ENOTFOUND' });
    return addresses.map((address) => ({ address, family: familyOf(address) }));
  };
  /** Scripted DNS: `rebind-*` names answer public once, then their forbidden answer; nothing reaches a real resolver. */
  const resolver: Resolver = async (host) => {
    lookups.push(host);
    const rebind = rebinding.get(host);
    if (rebind) {
      rebind.lookups++;
      if (rebind.lookups === 1) return answer([familyOf(String(rebind.then[0] ?? '')) === 6 ? PUBLIC_V6 : PUBLIC_V4], host);
      return answer(rebind.then, host);
    }
    const fixed = staticDns.get(host);
    return answer(fixed ?? 'NXDOMAIN', host);
  };

  /** Forwards an allowed attempt to the loopback receiver: 127.0.0.1 only, whatever the URL says. */
  const forward = ({ url, headers, body, signal }: ConnectRequest): Promise<ConnectResponse> =>
    new Promise((resolve, reject) => {
      forwardedTo.push(FORWARD_HOST);
      const req = http.request(
        {
          host: FORWARD_HOST,
          port: receiver.port,
          path: `${url.pathname}${url.search}`,
          method: 'POST',
          headers: { ...headers, 'content-length': String(body.byteLength) },
          signal,
          agent: false,
        },
        (res) => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: res, destroy: () => res.destroy() }),
      );
      req.on('error', reject);
      req.end(body);
    });
  const connector: Connector = async (request) => {
    const call = { host: request.url.hostname, address: request.address.address };
    canaryCalls.push(call);
    if (!PUBLIC.has(call.address)) {
      violations.push(call);
      throw Object.assign(new Error('canary: not forwarding a forbidden address'), { code: 'ECONNREFUSED' });
    }
    return forward(request);
  };

  before(async () => {
    receiver = await startReceiver(echoing());
    const guarded = createGuardedWebhookClient({ allowLoopback: false, resolver, connector });
    const webhook: WebhookClient = {
      async post(request: WebhookRequest) {
        const result = await guarded.post(request);
        attempts.push({ url: request.url, eventId: request.headers['webhook-id'] ?? '', result });
        return result;
      },
    };
    runtime = await startLocal({
      settings: settingsFor(stateDir, { retryDelaysS: [0.1, 600], deliveryWaitMs: 250, apiKey }),
      webhook,
      log: createLogger((line) => logLines.push(line)),
      announce: () => undefined,
    });
    s = serverOf(runtime, apiKey);
  });

  after(async () => {
    await runtime?.stop();
    await receiver?.close();
    rmSync(stateDir, { recursive: true, force: true });
  });

  it('control: a public answer passes the guard and reaches the loopback receiver only through the canary', async (t) => {
    const url = 'https://public.test/hook?route=control';
    t.after(() => rpc(s, 'events/unsubscribe', unsubscribeParams(url)));
    const secret = newSecret();
    const subscribed = await rpc(s, 'events/subscribe', subscribeParams(url, secret));
    assert.match(subscribed.body.result?.id ?? '', /^sub_[0-9a-f]{32}$/, JSON.stringify(subscribed.body));
    assert.deepEqual(canaryCalls, [{ host: 'public.test', address: PUBLIC_V4 }]);
    assert.equal(receiver.challenges().length, 1);
    assert.equal(receiver.challenges()[0]!.url, '/hook?route=control', 'path and query are kept byte-exact');
    const sent = await rpc(s, 'tools/call', { name: 'send_to_dot', arguments: { message: 'control' } }, { 'mcp-name': 'send_to_dot' });
    // Delivered within the wait window, or (on a loaded machine) queued while the one attempt runs on.
    assert.ok(['delivered', 'queued'].includes(sent.body.result.structuredContent.status), JSON.stringify(sent.body));
    await waitFor('the event at the receiver', () => receiver.events().length >= 1, 10_000);
    assert.equal(receiver.events().length, 1);
    assert.equal(canaryCalls.length, 2);
    assert.deepEqual(violations, []);
    assert.ok(forwardedTo.every((host) => host === '127.0.0.1'));
  });

  it(`has at least 40 forbidden forms (${ROWS.length})`, () => {
    assert.ok(ROWS.length >= 40);
    assert.equal(new Set(ROWS.map((r) => r.form)).size, ROWS.length, 'form labels are unique');
  });

  describe('EV-CHAL-1, EV-CHAL-9, EV-SUB-6, EV-SUB-16, GUARD-5, GUARD-6: refused at subscribe: the challenge never connects', () => {
    for (const row of ROWS) {
      it(`${row.form} → ${row.expect === 'invalid' ? '-32602' : '-32015 connection_refused'}`, async () => {
        const url = row.url();
        const callsBefore = canaryCalls.length;
        const lookupsBefore = lookups.length;
        const received = receiver.received.length;
        const { body } = await rpc(s, 'events/subscribe', subscribeParams(url, newSecret()));
        note(row.form, 'subscribe', describeSubscribe(body));
        assertSubscribeRefused(row, body);
        assert.equal(canaryCalls.length, callsBefore, 'no connection attempt reached the connector');
        assert.equal(receiver.received.length, received, 'nothing arrived at the receiver');
        const asked = lookups.slice(lookupsBefore);
        if (row.expect === 'invalid' || !row.dns) assert.deepEqual(asked, [], 'IP literals and invalid URLs are never resolved');
        else assert.deepEqual(asked, [new URL(url).hostname], 'a name is resolved exactly once');
      });
    }
  });

  it('GUARD-3: rebinding resolver: public on the first lookup (challenge passes), private on the second (delivery refused)', async (t) => {
    const url = 'https://rebind.test/hook';
    t.after(() => rpc(s, 'events/unsubscribe', unsubscribeParams(url)));
    rebinding.set('rebind.test', { lookups: 0, then: ['10.0.0.1'] });
    const callsBefore = canaryCalls.length;
    const subscribed = await rpc(s, 'events/subscribe', subscribeParams(url, newSecret()));
    assert.ok(subscribed.body.result?.id, JSON.stringify(subscribed.body));
    assert.deepEqual(canaryCalls.slice(callsBefore), [{ host: 'rebind.test', address: PUBLIC_V4 }]);
    const sent = await rpc(s, 'tools/call', { name: 'send_to_dot', arguments: { message: 'rebound' } }, { 'mcp-name': 'send_to_dot' });
    const eventId = sent.body.result.structuredContent.eventId as string;
    assert.equal(sent.body.result.structuredContent.status, 'queued');
    await waitFor('a refused attempt', () => attempts.some((a) => a.eventId === eventId));
    assert.deepEqual(attempts.find((a) => a.eventId === eventId)!.result, { kind: 'failure', reason: 'connection_refused' });
    assert.equal(canaryCalls.length, callsBefore + 1, 'only the challenge connected');
    assert.ok(rebinding.get('rebind.test')!.lookups >= 2);
    note('rebinding name (rebind.test: public, then 10.0.0.1)', 'subscribe', 'accepted (first lookup public)');
    note('rebinding name (rebind.test: public, then 10.0.0.1)', 'delivery', 'transient connection_refused');
  });

  describe('GUARD-1: refused at delivery: the DNS answer changes to the forbidden address after subscribe', () => {
    ROWS.forEach((row, index) => {
      const host = `rebind-${index}.test`;
      const answerText = row.rebindTo === 'NXDOMAIN' ? 'NXDOMAIN' : row.rebindTo.join(', ') || 'no address';
      it(`${row.form}: ${host} → ${answerText} → transient connection_refused`, async (t) => {
        const url = `https://${host}/hook`;
        rebinding.set(host, { lookups: 0, then: row.rebindTo });
        const callsBefore = canaryCalls.length;
        const eventsBefore = receiver.events().length;

        // Unsubscribe whatever happens, so one failing row cannot hold the single subscription.
        t.after(() => rpc(s, 'events/unsubscribe', unsubscribeParams(url)));
        const secret = newSecret();
        const subscribed = await rpc(s, 'events/subscribe', subscribeParams(url, secret));
        assert.ok(subscribed.body.result?.id, `subscribe while the name is public: ${JSON.stringify(subscribed.body)}`);
        assert.equal(canaryCalls.length, callsBefore + 1, 'the challenge went through the canary');
        assert.ok(PUBLIC.has(canaryCalls.at(-1)!.address));

        const sent = await rpc(s, 'tools/call', { name: 'send_to_dot', arguments: { message: `after rebinding ${index}` } }, { 'mcp-name': 'send_to_dot' });
        const result = sent.body.result;
        assert.equal(result.isError, false, JSON.stringify(result));
        assert.equal(result.structuredContent.status, 'queued', 'a refused destination is transient, not a permanent failure');
        const eventId = result.structuredContent.eventId as string;

        // Two attempts: the first, and its retry (the schedule keeps going: transient).
        const mine = await waitFor('two refused attempts', () => {
          const list = attempts.filter((a) => a.eventId === eventId);
          return list.length >= 2 && list;
        });
        for (const attempt of mine) assert.deepEqual(attempt.result, { kind: 'failure', reason: 'connection_refused' });
        assert.equal(canaryCalls.length, callsBefore + 1, 'no delivery attempt reached the connector');
        assert.equal(receiver.events().length, eventsBefore, 'nothing was delivered');
        assert.ok(rebinding.get(host)!.lookups >= 3, 'each attempt resolved again and was checked');

        // The same secret: proven within 24 h, so the refresh sends no challenge (a new secret would
        // be challenged, and the name now points at a forbidden address).
        const refreshed = await rpc(s, 'events/subscribe', subscribeParams(url, secret));
        assert.equal(refreshed.body.result?.deliveryStatus?.lastError, 'connection_refused', JSON.stringify(refreshed.body));
        note(row.form, 'delivery', `transient ${refreshed.body.result.deliveryStatus.lastError} (${mine.length} attempts, 0 connections)`);
      });
    });
  });

  it('no forbidden address ever reached the canary, and it only ever forwarded to 127.0.0.1', () => {
    assert.deepEqual(violations, []);
    assert.ok(canaryCalls.every((call) => PUBLIC.has(call.address)));
    assert.ok(forwardedTo.length > 0 && forwardedTo.every((host) => host === '127.0.0.1'));
    assert.ok(!logLines.some((line) => /"level":"error"/.test(line)), `no internal errors: ${logLines.filter((l) => l.includes('"error"')).join('\n')}`);
  });
});

/** A raw TCP listener that counts accepted sockets and closes them at once. */
interface Canary {
  port: number;
  accepted: () => number;
  /** The count once every connection made before this call has been accepted. */
  settled: () => Promise<number>;
  close(): Promise<void>;
}

async function canaryListener(host: string, port = 0): Promise<Canary | undefined> {
  /** The remote port of every connection accepted, in order, and which of them were our own probes. */
  const seen: number[] = [];
  const probes = new Set<number>();
  const accepted = () => seen.filter((remote) => !probes.has(remote)).length;
  const server = net.createServer((socket) => {
    seen.push(socket.remotePort ?? -1);
    socket.on('error', () => undefined);
    socket.destroy();
  });
  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, host, () => resolve());
    });
  } catch {
    return undefined;
  }
  return {
    port: (server.address() as AddressInfo).port,
    accepted,
    // Connections are accepted in the order they arrive: once a probe made now is seen, whatever
    // connected before it has been counted.
    settled: async () => {
      const socket = net.connect((server.address() as AddressInfo).port, host);
      socket.on('error', () => undefined);
      await new Promise((done) => socket.once('connect', done));
      const local = socket.localPort!;
      probes.add(local);
      await waitFor(`the probe from port ${local} accepted`, () => seen.includes(local));
      socket.destroy();
      return accepted();
    },
    close: () => new Promise<void>((done) => server.close(() => done())),
  };
}

describe('literal forms of this host with the real node connector and TCP canaries on 127.0.0.1 and [::1]', () => {
  const apiKey = 'matrix-real-connector-key-0123456789';
  const stateDir = mkdtempSync(join(tmpdir(), 'dmdot-matrix-real-'));
  let runtime: LocalRuntime;
  let s: RunningServer;
  let canary4: NonNullable<Awaited<ReturnType<typeof canaryListener>>>;
  let canary6: Awaited<ReturnType<typeof canaryListener>>;
  const localRows = ROWS.filter((row) => row.reach);
  // /etc/hosts names only: the system resolver must not send a DNS query anywhere.
  const hostsFile = (() => {
    try {
      return readFileSync('/etc/hosts', 'utf8');
    } catch {
      return '';
    }
  })();
  const hasLocalhost = /^\s*127\.0\.0\.1\s+(.*\s)?localhost(\s|$)/m.test(hostsFile);

  before(async () => {
    canary4 = (await canaryListener('127.0.0.1'))!;
    canary6 = await canaryListener('::1', canary4.port);
    runtime = await startLocal({
      // Nothing injected: the default guarded client with the system resolver and node:http(s).
      settings: settingsFor(stateDir, { apiKey }),
      log: createLogger(() => undefined),
      announce: () => undefined,
    });
    s = serverOf(runtime, apiKey);
  });

  after(async () => {
    await runtime?.stop();
    await canary4?.close();
    await canary6?.close();
    rmSync(stateDir, { recursive: true, force: true });
  });

  for (const row of localRows) {
    it(`${row.form} on the canary port → ${row.expect === 'invalid' ? '-32602' : '-32015 connection_refused'}, 0 sockets`, async (t) => {
      if (row.reach === 'v6' && !canary6) return t.skip('no [::1] on this machine');
      const { body } = await rpc(s, 'events/subscribe', subscribeParams(row.url(canary4.port), newSecret()));
      note(row.form, 'realConnector', describeSubscribe(body));
      assertSubscribeRefused(row, body);
      assert.equal(await canary4.settled(), 0, 'nothing connected to 127.0.0.1');
      assert.equal((await canary6?.settled()) ?? 0, 0, 'nothing connected to [::1]');
    });
  }

  it('localhost (system resolver, /etc/hosts) on the canary port → -32015 connection_refused, 0 sockets', async (t) => {
    if (!hasLocalhost) return t.skip('/etc/hosts has no localhost entry; not asking a DNS server');
    const { body } = await rpc(s, 'events/subscribe', subscribeParams(`https://localhost:${canary4.port}/hook`, newSecret()));
    note('name localhost (system resolver)', 'realConnector', describeSubscribe(body));
    assert.deepEqual(body.error?.data, { reason: 'connection_refused' }, JSON.stringify(body));
    assert.equal(await canary4.settled(), 0);
    assert.equal((await canary6?.settled()) ?? 0, 0);
  });

  it(`covers every form that denotes this host (${localRows.length})`, () => {
    assert.ok(localRows.length >= 20);
  });

  it('GUARD-13: control: the same canaries do count a real connection when the loopback switch allows it', async () => {
    const permissive = createGuardedWebhookClient({ allowLoopback: true });
    const request = (url: string): WebhookRequest => ({ url, headers: { 'content-type': 'application/json' }, body: Buffer.from('{}') });
    const result = await permissive.post(request(`http://127.0.0.1:${canary4.port}/hook`));
    assert.equal(result.kind, 'failure', 'the canary closes every socket');
    await waitFor('the v4 canary to count', () => canary4.accepted() === 1);
    if (canary6) {
      await permissive.post(request(`http://[::1]:${canary6.port}/hook`));
      await waitFor('the v6 canary to count', () => canary6!.accepted() === 1);
    }
  });
});
