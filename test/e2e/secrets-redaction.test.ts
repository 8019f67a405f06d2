/**
 * Secrets never reach a log line (docs/contract: http, events, local-runtime): every stdout and stderr byte of a full
 * end-to-end run of the child-process runtime is captured (start, subscribe, refresh with a
 * rotated secret, deliveries that succeed, retry after 503 and fail with 410, wrong keys,
 * invalid secrets, a failed challenge, unsubscribe, stop) and searched for the API key, every
 * `whsec_` secret used (valid or not), its base64 body, and the base64 / hex of the decoded key
 * bytes. The state directory is searched for the API key as well: it may only be in `api-key`,
 * and only when the runtime generated it.
 *
 * The capture is shown to be real: it must contain the listening line, one request line per
 * request made (with the statuses they got) and the shutdown line, so this test cannot pass by
 * capturing nothing.
 */
import { afterEach, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { newSecret, rpc, startReceiver, startServer, waitFor, type ReceivedRequest, type RunningServer } from '../support/e2e';

const cleanups: (() => Promise<unknown> | unknown)[] = [];
afterEach(async () => {
  while (cleanups.length) await cleanups.pop()!();
});

/** Everything the child writes, raw (a needle split across chunks is still found) and as lines. */
interface Capture {
  raw(): string;
  lines(): string[];
  closed: Promise<void>;
}

function capture(server: RunningServer): Capture {
  let out = '';
  let err = '';
  server.child.stdout!.on('data', (chunk: string) => (out += chunk));
  server.child.stderr!.on('data', (chunk: string) => (err += chunk));
  const closed = new Promise<void>((done) => {
    if (server.child.exitCode !== null || server.child.signalCode !== null) done();
    server.child.once('close', () => done());
  });
  return {
    // Lines written before the listeners were attached (start-up) are in the support's arrays.
    raw: () => [...server.stdout, ...server.stderr, out, err].join('\n'),
    lines: () => [...new Set([...server.stdout, ...server.stderr, ...out.split('\n'), ...err.split('\n')])].filter(Boolean),
    closed,
  };
}

/** The forms under which a `whsec_` secret (or a string offered as one) could leak. */
function secretForms(secret: string): string[] {
  const body = secret.startsWith('whsec_') ? secret.slice(6) : secret;
  const bytes = Buffer.from(body, 'base64');
  return [secret, body, bytes.toString('base64'), bytes.toString('base64url'), bytes.toString('hex'), encodeURIComponent(secret)];
}

/** The forms under which the API key could leak (it is base64url text; its bytes too). */
function keyForms(key: string): string[] {
  const bytes = Buffer.from(key, 'base64url');
  return [key, encodeURIComponent(key), Buffer.from(key).toString('base64'), bytes.toString('base64'), bytes.toString('hex')];
}

function assertNoneIn(haystack: string, needles: Map<string, string>, where: string) {
  for (const [needle, label] of needles) {
    assert.ok(!haystack.includes(needle), `${label} appears in ${where}`);
  }
}

function needlesOf(entries: [label: string, forms: string[]][]): Map<string, string> {
  const needles = new Map<string, string>();
  for (const [label, forms] of entries) {
    for (const [i, form] of forms.entries()) if (form.length >= 12) needles.set(form, `${label} (form ${i}: ${form.slice(0, 4)}…)`);
  }
  return needles;
}

function filesUnder(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((entry) => entry.isFile())
    .map((entry) => join(entry.parentPath ?? (entry as unknown as { path: string }).path, entry.name));
}

function requestLines(lines: string[]): { path: string; status: number; method: string }[] {
  return lines.flatMap((line) => {
    try {
      const parsed = JSON.parse(line) as { event?: string; path?: string; status?: number; method?: string };
      return parsed.event === 'request' ? [{ path: String(parsed.path), status: Number(parsed.status), method: String(parsed.method) }] : [];
    } catch {
      return [];
    }
  });
}

const subscribeParams = (url: string, secret: unknown) => ({ name: 'message.created', arguments: {}, delivery: { mode: 'webhook', url, secret } });

async function send(s: RunningServer, message: string) {
  const { body } = await rpc(s, 'tools/call', { name: 'send_to_dot', arguments: { message } }, { 'mcp-name': 'send_to_dot' });
  return body.result as { isError: boolean; content: { text: string }[]; structuredContent?: { eventId: string; status: string } };
}

describe('HTTP-10: no secret in any log line of a full run', () => {
  it('ARCH-10, EV-SUB-2, EV-UNSUB-3, HTTP-10, LOCAL-16, LOCAL-17: API key (from the environment), every whsec_ secret and every invalid secret stay out of stdout, stderr and the state dir', async () => {
    const stateDir = mkdtempSync(join(tmpdir(), 'dmdot-redaction-'));
    cleanups.push(() => rmSync(stateDir, { recursive: true, force: true }));
    const key = `dmdot_${randomBytes(30).toString('base64url')}`;
    const server = await startServer({ DMDOT_RETRY_DELAYS: '1,1,1,1,1' }, { stateDir, key });
    cleanups.push(() => server.stop());
    const logs = capture(server);

    // Events answer by message: "retry-me" gets 503 once, "gone" gets 410, others 200.
    const seen = new Map<string, number>();
    const receiver = await startReceiver((r: ReceivedRequest) => {
      if (r.url.startsWith('/reject')) return { status: 404 };
      if (r.json?.type === 'verification') return { status: 200, body: JSON.stringify({ challenge: r.json.challenge }) };
      const message = String(r.json?.data?.message ?? '');
      const count = (seen.get(message) ?? 0) + 1;
      seen.set(message, count);
      if (message === 'retry-me' && count === 1) return { status: 503 };
      if (message === 'gone') return { status: 410 };
      return { status: 200 };
    });
    cleanups.push(() => receiver.close());
    const url = receiver.url('/hook?dot=redaction');

    const secretA = newSecret(32);
    const secretB = newSecret(48);
    const secretC = newSecret(24);
    const invalid = {
      tooShort: `whsec_${randomBytes(16).toString('base64')}`,
      tooLong: `whsec_${randomBytes(80).toString('base64')}`,
      noPrefix: `sk_${randomBytes(32).toString('base64')}`,
      notBase64: `whsec_${randomBytes(24).toString('hex')}!*`,
      urlSafeAlphabet: `whsec_${randomBytes(33).toString('base64url').replace(/^./, '-')}`,
    };
    const wrongKey = `dmdot_${randomBytes(30).toString('base64url')}`;
    let requests = 0;
    const call = async <T>(promise: Promise<T>) => {
      requests++;
      return promise;
    };

    // Subscribe, then refresh with a rotated secret.
    const first = await call(rpc(server, 'events/subscribe', subscribeParams(url, secretA)));
    const subscriptionId = first.body.result?.id as string;
    assert.match(subscriptionId ?? '', /^sub_[0-9a-f]{32}$/, JSON.stringify(first.body));
    const refreshed = await call(rpc(server, 'events/subscribe', subscribeParams(url, secretB)));
    assert.equal(refreshed.body.result?.deliveryStatus?.active, true, JSON.stringify(refreshed.body));

    // Deliveries: delivered, retried after 503 (then delivered), permanently failed with 410.
    const delivered = await call(send(server, 'hello, dot'));
    assert.equal(delivered.structuredContent?.status, 'delivered');
    const retried = await call(send(server, 'retry-me'));
    assert.ok(['queued', 'delivered'].includes(retried.structuredContent!.status));
    await waitFor('the retry after 503', () => seen.get('retry-me') === 2, 15_000);
    const rest = await call(
      fetch(`${server.url}/v1/messages`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${server.key}` },
        body: JSON.stringify({ message: 'over REST' }),
      }),
    );
    assert.equal(rest.status, 200);
    // Last: a 410 also ends the subscription (Standard Webhooks: the endpoint is gone).
    const gone = await call(send(server, 'gone'));
    assert.equal(gone.structuredContent?.status, 'failed');
    const events = receiver.events();
    assert.equal(events.length, 5, 'hello, retry-me twice, over REST, gone');
    assert.ok(
      events.every((e) => String(e.headers['webhook-signature']).split(' ').length === 2),
      'rotation overlap: two signatures',
    );

    // Wrong keys: query parameter, bearer, and none at all.
    const wrong = await call(rpc({ ...server, key: wrongKey }, 'tools/list'));
    assert.equal(wrong.status, 401);
    const wrongBearer = await call(
      fetch(`${server.url}/v1/messages`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${wrongKey}` },
        body: '{"message":"x"}',
      }),
    );
    assert.equal(wrongBearer.status, 401);
    const none = await call(fetch(server.mcpUrl, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' }));
    assert.equal(none.status, 401);

    // Invalid secrets: -32602 naming the field, never echoing the value.
    for (const [kind, secret] of Object.entries(invalid)) {
      const { body } = await call(rpc(server, 'events/subscribe', subscribeParams(url, secret)));
      assert.equal(body.error?.code, -32602, `${kind}: ${JSON.stringify(body)}`);
      assert.match(body.error.message, /delivery\.secret/);
      assert.ok(!JSON.stringify(body).includes(secret.replace(/^whsec_/, '')), `${kind} is not echoed`);
    }
    // A secret inside a body that is not JSON at all (parse errors quote the input they choke on).
    const garbled = await call(
      fetch(`${server.mcpUrl}?key=${encodeURIComponent(server.key)}`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          'mcp-protocol-version': '2026-07-28',
          'mcp-method': 'events/subscribe',
        },
        body: `{"jsonrpc":"2.0","id":1,"method":"events/subscribe","params":{"delivery":{"secret":${invalid.noPrefix}}}}`,
      }),
    );
    assert.equal(garbled.status, 400);

    // Unsubscribe; then a failed challenge with a fresh secret, and a send with no subscription.
    const unsubscribed = await call(rpc(server, 'events/unsubscribe', { name: 'message.created', arguments: {}, delivery: { url } }));
    assert.equal(unsubscribed.body.result?.resultType, 'complete');
    const rejected = await call(rpc(server, 'events/subscribe', subscribeParams(receiver.url('/reject'), secretC)));
    assert.deepEqual(rejected.body.error?.data, { reason: 'http_4xx' });
    const orphan = await call(send(server, 'nobody listens'));
    assert.equal(orphan.isError, true);

    assert.equal(await server.stop(), 0, 'clean exit on SIGTERM');
    await logs.closed;

    // The capture is real: the listening line, a request line per request, the shutdown line.
    const lines = logs.lines();
    assert.ok(
      lines.some((line) => /^dm-dot listening on http:\/\/127\.0\.0\.1:\d+\/mcp$/.test(line)),
      'listening line captured',
    );
    assert.ok(
      lines.some((line) => line.includes('SIGTERM received')),
      'shutdown line captured',
    );
    const logged = requestLines(lines);
    assert.equal(logged.length, requests, `one request line per request: ${JSON.stringify(logged)}`);
    assert.ok(logged.some((r) => r.status === 401) && logged.some((r) => r.status === 200) && logged.some((r) => r.path === '/v1/messages'));
    assert.ok(
      logged.every((r) => r.path === '/mcp' || r.path === '/v1/messages'),
      'only paths are logged, never a query string',
    );

    const needles = needlesOf([
      ['API key', keyForms(key)],
      ['wrong API key', keyForms(wrongKey)],
      ['secret A', secretForms(secretA)],
      ['secret B (rotated in)', secretForms(secretB)],
      ['secret C (failed challenge)', secretForms(secretC)],
      ...Object.entries(invalid).map(([kind, secret]): [string, string[]] => [`invalid secret ${kind}`, secretForms(secret)]),
    ]);
    assert.ok(needles.size >= 40, `needles: ${needles.size}`);
    assertNoneIn(logs.raw(), needles, 'the captured stdout/stderr');
    for (const line of lines) assertNoneIn(line, needles, `log line ${line.slice(0, 120)}`);

    // State dir: the key is in no file (it came from the environment, so there is no api-key file).
    const files = filesUnder(stateDir);
    assert.ok(files.length > 0);
    assert.ok(!files.some((f) => relative(stateDir, f) === 'api-key'), 'no api-key file when MCP_API_KEY is set');
    const contents = files.map((f) => readFileSync(f, 'latin1'));
    assert.ok(
      contents.some((text) => text.includes(subscriptionId)),
      'the search reads the store',
    );
    for (const [i, text] of contents.entries()) assertNoneIn(text, needlesOf([['API key', keyForms(key)]]), relative(stateDir, files[i]!));
  });

  it('LOCAL-9, LOCAL-17: a generated API key is only in <state dir>/api-key (0600), never in a log line', async () => {
    const stateDir = mkdtempSync(join(tmpdir(), 'dmdot-redaction-gen-'));
    cleanups.push(() => rmSync(stateDir, { recursive: true, force: true }));
    const started = await startServer({ MCP_API_KEY: '' }, { stateDir });
    cleanups.push(() => started.stop());
    const logs = capture(started);
    const keyFile = join(stateDir, 'api-key');
    const key = readFileSync(keyFile, 'utf8').trim();
    assert.ok(key.length >= 32);
    assert.equal(statSync(keyFile).mode & 0o777, 0o600);
    const server = { ...started, key };

    const ok = await rpc(server, 'events/list');
    assert.equal(ok.status, 200);
    assert.equal(ok.body.result.events[0].name, 'message.created');
    const wrong = await rpc({ ...server, key: `${key.slice(0, -1)}x` }, 'events/list');
    assert.equal(wrong.status, 401);
    const bearer = await fetch(`${server.url}/v1/messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
      body: '{"message":"hi"}',
    });
    assert.equal(bearer.status, 409, 'authenticated, no subscription yet');
    assert.equal(await started.stop(), 0);
    await logs.closed;

    const lines = logs.lines();
    assert.ok(
      lines.some((line) => line.includes('API key generated and stored in') && line.includes(keyFile)),
      'the file is announced',
    );
    assert.equal(requestLines(lines).length, 3);
    const needles = needlesOf([['generated API key', keyForms(key)]]);
    assertNoneIn(logs.raw(), needles, 'the captured stdout/stderr');

    const holders = filesUnder(stateDir).filter((f) => readFileSync(f, 'latin1').includes(key));
    assert.deepEqual(
      holders.map((f) => relative(stateDir, f)),
      ['api-key'],
    );
  });
});
