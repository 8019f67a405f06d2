/**
 * The pup door's behaviour (docs/contract/pup.md) as one suite that runs against every way dm-dot is served:
 * the HTTP app in-process (pup-door.test.ts), the MCP Lambda through the API Gateway translation
 * over fakes (pup-door.test.ts) and over DynamoDB Local with a Secrets Manager double
 * (test/integration/pup-lambda.test.ts).
 *
 * Every request is signed here with node:crypto, independently of the production code (which
 * verifies with its own streaming node:crypto verifier, itself tested against `standardwebhooks`). Timestamps follow the target's clock, which the
 * rotation tests move in-process.
 */
import { createHmac, randomBytes } from 'node:crypto';
import type { InboundSecrets } from '../../lambda/core/inbound';
import type { App } from '../../lambda/http/app';
import type { LogLine } from './app';

export interface PupTarget {
  app: App;
  clock: { now(): number; advance(ms: number): void };
  logs: LogLine[];
  cleanup?(): Promise<void>;
}

export interface PupTargetOptions {
  /** The secrets, or a function of the target clock's start (to place a rotation on that clock). */
  secrets?: InboundSecrets | ((start: number) => InboundSecrets);
  manifest?: string;
}

export type PupTargetFactory = (options: PupTargetOptions) => Promise<PupTarget>;

/** For factories: the secrets of `options` on a clock that starts at `start`. */
export function secretsAt(options: PupTargetOptions, start: number): InboundSecrets | undefined {
  return typeof options.secrets === 'function' ? options.secrets(start) : options.secrets;
}

const BASE = 'https://dmdot.example';
const MODERN = '2026-07-28';
const MINUTE = 60_000;
const utf8 = new TextEncoder();

export function newPupSecret(): { secret: string; key: Buffer } {
  const key = randomBytes(32);
  return { secret: `whsec_${key.toString('base64')}`, key };
}

export function pupSignature(key: Buffer, id: string, ts: number, body: Uint8Array): string {
  return `v1,${createHmac('sha256', key)
    .update(Buffer.concat([Buffer.from(`${id}.${ts}.`), body]))
    .digest('base64')}`;
}

let counter = 0;
export const newWebhookId = () => `msg_${Date.now().toString(36)}_${++counter}_${randomBytes(6).toString('hex')}`;

export interface SignedOptions {
  id?: string;
  key?: Buffer;
  /** Seconds; defaults to the target clock's now. */
  ts?: number;
  headers?: Record<string, string>;
  /** Header names to leave out. */
  omit?: readonly string[];
  query?: string;
}

export async function signedPost(
  target: PupTarget,
  path: string,
  body: string | Uint8Array,
  key: Buffer,
  options: SignedOptions = {},
): Promise<{ status: number; text: string; json: unknown; headers: Headers }> {
  const bytes = typeof body === 'string' ? utf8.encode(body) : body;
  const id = options.id ?? newWebhookId();
  const ts = options.ts ?? Math.floor(target.clock.now() / 1000);
  const headers: Record<string, string> = {
    'content-type': 'application/json',
    'webhook-id': id,
    'webhook-timestamp': String(ts),
    'webhook-signature': pupSignature(options.key ?? key, id, ts, bytes),
    ...options.headers,
  };
  for (const name of options.omit ?? []) delete headers[name];
  const response = await target.app.handle(
    new Request(`${BASE}${path}${options.query ? `?${options.query}` : ''}`, { method: 'POST', headers, body: bytes as BodyInit }),
  );
  const text = await response.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: response.status, text, json, headers: response.headers };
}

export function mcpBody(method: string, params: Record<string, unknown> = {}, context?: unknown, id: number | string = 1): string {
  const meta: Record<string, unknown> = {
    'io.modelcontextprotocol/protocolVersion': MODERN,
    'io.modelcontextprotocol/clientCapabilities': {},
  };
  if (context !== undefined) meta['io.puphq/context'] = context;
  return JSON.stringify({ jsonrpc: '2.0', id, method, params: { ...params, _meta: meta } });
}

export const mcpHeaders = (method: string, name?: string): Record<string, string> => ({
  accept: 'application/json, text/event-stream',
  'mcp-protocol-version': MODERN,
  'mcp-method': method,
  ...(name ? { 'mcp-name': name } : {}),
});

export function envelope(id: string, event: unknown, overrides: Record<string, unknown> = {}): string {
  return JSON.stringify({
    version: '1',
    id,
    eventId: `evt_${id}`,
    occurredAt: '2026-11-30T12:00:00.000Z',
    event,
    context: { installationId: 'inst_1' },
    ...overrides,
  });
}

const CONTEXT = {
  installationId: 'inst_42',
  askerId: 'user_7',
  channelId: 'chan_9',
  callId: 'call_3',
  settings: { tone: 'SECRET-SETTING-VALUE' },
  userRequest: 'PRIVATE USER TEXT',
};

function expectRefusal(answer: { status: number; json: unknown }, code: string): void {
  expect(answer.status).toBe(401);
  expect(Object.keys(answer.json as object)).toEqual(['error']);
  const error = (answer.json as { error: Record<string, unknown> }).error;
  expect(Object.keys(error).sort()).toEqual(['code', 'message']);
  expect(error.code).toBe(code);
}

export function describePupDoor(name: string, factory: PupTargetFactory): void {
  describe(`CON-1, PUP-1: pup door: ${name}`, () => {
    const current = newPupSecret();
    const previous = newPupSecret();
    let target: PupTarget;

    async function build(options: PupTargetOptions): Promise<PupTarget> {
      await target?.cleanup?.();
      target = await factory(options);
      return target;
    }

    afterEach(async () => {
      await target?.cleanup?.();
      target = undefined as unknown as PupTarget;
    });

    describe('PUP-5: manifest', () => {
      test('PUP-6: the default manifest names the endpoints and the one tool, with no secret configured', async () => {
        const t = await build({});
        const response = await t.app.handle(new Request(`${BASE}/pup/manifest.json`));
        expect(response.status).toBe(200);
        expect(response.headers.get('content-type')).toBe('application/json');
        const manifest = (await response.json()) as Record<string, unknown>;
        expect(manifest).toMatchObject({ name: 'dm-dot', mcp: { url: '/pup/mcp' }, challengeUrl: '/pup/challenge', eventsUrl: '/pup/events' });
        expect((manifest.tools as { name: string }[]).map((tool) => tool.name)).toEqual(['send_to_dot']);
      });

      test('PUP-5: a configured manifest is served byte for byte', async () => {
        const text = '{ "name" : "my-dot",\n  "x": "é" }';
        const t = await build({ manifest: text, secrets: { secrets: [current.secret] } });
        const response = await t.app.handle(new Request(`${BASE}/pup/manifest.json`));
        expect(response.status).toBe(200);
        expect(await response.text()).toBe(text);
      });

      test('PUP-2: POST on the manifest is 405', async () => {
        const t = await build({});
        const response = await t.app.handle(
          new Request(`${BASE}/pup/manifest.json`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' }),
        );
        expect(response.status).toBe(405);
      });
    });

    describe('configuration and request limits', () => {
      test.each(['/pup/mcp', '/pup/challenge', '/pup/events'])('PUP-3: %s answers 503 with no secret configured, even when signed', async (path) => {
        const t = await build({});
        const answer = await signedPost(t, path, '"x"', current.key);
        expect(answer.status).toBe(503);
        expect(answer.json).toMatchObject({ error: { code: 'not_configured' } });
      });

      test('PUP-2: GET /pup/mcp is 405 with Allow: POST', async () => {
        const t = await build({ secrets: { secrets: [current.secret] } });
        const response = await t.app.handle(new Request(`${BASE}/pup/mcp`));
        expect(response.status).toBe(405);
        expect(response.headers.get('allow')).toBe('POST');
      });

      test('a Content-Type other than application/json is 415', async () => {
        const t = await build({ secrets: { secrets: [current.secret] } });
        const answer = await signedPost(t, '/pup/challenge', '"x"', current.key, { headers: { 'content-type': 'text/plain' } });
        expect(answer.status).toBe(415);
      });

      test('a body over 1 MiB is 413, before any signature work', async () => {
        const t = await build({ secrets: { secrets: [current.secret] } });
        const answer = await signedPost(t, '/pup/events', `"${'a'.repeat(1024 * 1024)}"`, current.key);
        expect(answer.status).toBe(413);
      });
    });

    describe('PUP-7: signature', () => {
      test('the API key alone is not accepted instead of a signature', async () => {
        const t = await build({ secrets: { secrets: [current.secret] } });
        const response = await t.app.handle(
          new Request(`${BASE}/pup/mcp?key=test-api-key-0123456789abcdef`, {
            method: 'POST',
            headers: { 'content-type': 'application/json', authorization: 'Bearer test-api-key-0123456789abcdef', ...mcpHeaders('server/discover') },
            body: mcpBody('server/discover'),
          }),
        );
        expectRefusal({ status: response.status, json: await response.json() }, 'invalid_signature');
      });

      test('a wrong secret is 401 invalid_signature and the answer holds nothing else (no echo of the body)', async () => {
        const t = await build({ secrets: { secrets: [current.secret] } });
        const body = envelope('x', 'member.joined', { marker: 'BODY-MARKER-123' });
        const answer = await signedPost(t, '/pup/events', body, newPupSecret().key);
        expectRefusal(answer, 'invalid_signature');
        expect(answer.text).not.toContain('BODY-MARKER-123');
      });

      test.each(['webhook-id', 'webhook-timestamp', 'webhook-signature'])('a missing %s is 401 invalid_signature', async (header) => {
        const t = await build({ secrets: { secrets: [current.secret] } });
        expectRefusal(await signedPost(t, '/pup/challenge', '"x"', current.key, { omit: [header] }), 'invalid_signature');
      });

      test('one byte of the body changed after signing is 401 invalid_signature', async () => {
        const t = await build({ secrets: { secrets: [current.secret] } });
        const id = newWebhookId();
        const ts = Math.floor(t.clock.now() / 1000);
        const signature = pupSignature(current.key, id, ts, utf8.encode('"abc"'));
        const answer = await signedPost(t, '/pup/challenge', '"abd"', current.key, { id, ts, headers: { 'webhook-signature': signature } });
        expectRefusal(answer, 'invalid_signature');
      });

      test.each([
        [-299, 200],
        [299, 200],
        [-301, 401],
        [301, 401],
      ])('LIM-9, PUP-8: a timestamp %i s away from the server clock: %i', async (offset, status) => {
        const t = await build({ secrets: { secrets: [current.secret] } });
        const answer = await signedPost(t, '/pup/challenge', '"nonce"', current.key, { ts: Math.floor(t.clock.now() / 1000) + offset });
        expect(answer.status).toBe(status);
        if (status === 401) expectRefusal(answer, 'stale_timestamp');
      });

      test('several signatures in one header: the one made with the secret is found', async () => {
        const t = await build({ secrets: { secrets: [current.secret] } });
        const id = newWebhookId();
        const ts = Math.floor(t.clock.now() / 1000);
        const bytes = utf8.encode('"nonce"');
        const signature = [newPupSecret(), current, newPupSecret()].map((s) => pupSignature(s.key, id, ts, bytes)).join(' ');
        const answer = await signedPost(t, '/pup/challenge', bytes, current.key, { id, ts, headers: { 'webhook-signature': signature } });
        expect(answer.status).toBe(200);
      });

      test('PUP-9: rotation: both secrets inside the overlap; after it (clock moved) the previous one is refused', async () => {
        const r = await build({ secrets: (start) => ({ secrets: [current.secret, previous.secret], rotatedAt: start }) });
        expect((await signedPost(r, '/pup/challenge', '"a"', current.key)).status).toBe(200);
        expect((await signedPost(r, '/pup/challenge', '"b"', previous.key)).status).toBe(200);
        r.clock.advance(9 * MINUTE);
        expect((await signedPost(r, '/pup/challenge', '"c"', previous.key)).status).toBe(200);
        r.clock.advance(2 * MINUTE);
        expectRefusal(await signedPost(r, '/pup/challenge', '"d"', previous.key), 'invalid_signature');
        expect((await signedPost(r, '/pup/challenge', '"e"', current.key)).status).toBe(200);
      });
    });

    describe('replay (/pup/mcp and /pup/challenge share one namespace)', () => {
      test('PUP-22: an id used on /pup/mcp is refused on /pup/challenge, and the other way round', async () => {
        const t = await build({ secrets: { secrets: [current.secret] } });
        const first = newWebhookId();
        expect((await signedPost(t, '/pup/mcp', mcpBody('server/discover'), current.key, { id: first, headers: mcpHeaders('server/discover') })).status).toBe(
          200,
        );
        expectRefusal(await signedPost(t, '/pup/challenge', '"x"', current.key, { id: first }), 'replayed');

        const second = newWebhookId();
        expect((await signedPost(t, '/pup/challenge', '"y"', current.key, { id: second })).status).toBe(200);
        expectRefusal(
          await signedPost(t, '/pup/mcp', mcpBody('server/discover'), current.key, { id: second, headers: mcpHeaders('server/discover') }),
          'replayed',
        );
      });

      test('LIM-9, PUP-10: the two windows agree at their edges: a replay is refused as replayed until the window closes, then it is stale', async () => {
        const t = await build({ secrets: { secrets: [current.secret] } });
        const id = newWebhookId();
        // On a whole second, so that the window's edges fall on whole milliseconds.
        t.clock.advance((1000 - (t.clock.now() % 1000)) % 1000);
        // Signed 300 s in the future: first used at the earliest instant the window accepts it.
        const ts = t.clock.now() / 1000 + 300;
        const first = await signedPost(t, '/pup/challenge', '"x"', current.key, { id, ts });
        expect(first.status).toBe(200);
        // 600,000 ms later the timestamp is 300 s old: still inside the window, so still a replay.
        t.clock.advance(600_000);
        expectRefusal(await signedPost(t, '/pup/challenge', '"x"', current.key, { id, ts }), 'replayed');
        // One millisecond later the window has closed: stale, never accepted.
        t.clock.advance(1);
        expectRefusal(await signedPost(t, '/pup/challenge', '"x"', current.key, { id, ts }), 'stale_timestamp');
      });

      test('PUP-10: the same signed challenge sent twice: the second is refused as replayed, and its answer is nowhere in the refusal', async () => {
        const t = await build({ secrets: { secrets: [current.secret] } });
        const id = newWebhookId();
        const ts = Math.floor(t.clock.now() / 1000);
        const first = await signedPost(t, '/pup/challenge', '{ "challenge": "n-1" }', current.key, { id, ts });
        expect(first.status).toBe(200);
        const second = await signedPost(t, '/pup/challenge', '{ "challenge": "n-1" }', current.key, { id, ts });
        expectRefusal(second, 'replayed');
        expect(second.text).not.toContain('n-1');
        expect(t.logs.filter((l) => l.event === 'pup_request_replayed')).toHaveLength(1);
      });

      test('PUP-10: an MCP call sent again with its id is refused as replayed and runs once', async () => {
        const t = await build({ secrets: { secrets: [current.secret] } });
        const id = newWebhookId();
        const body = mcpBody('tools/call', { name: 'send_to_dot', arguments: { message: 'once only' } }, CONTEXT);
        const headers = mcpHeaders('tools/call', 'send_to_dot');
        const first = await signedPost(t, '/pup/mcp', body, current.key, { id, headers });
        expect(first.status).toBe(200);
        // Signed anew (a later timestamp), as a retry is: the same bytes under the same id.
        t.clock.advance(30_000);
        const retry = await signedPost(t, '/pup/mcp', body, current.key, { id, headers });
        expectRefusal(retry, 'replayed');
        expect(t.logs.filter((l) => l.event === 'pup_request')).toHaveLength(1);
      });

      test('PUP-21: a request whose first try failed (a malformed challenge, 400) is processed again when retried with its id', async () => {
        const t = await build({ secrets: { secrets: [current.secret] } });
        const id = newWebhookId();
        const first = await signedPost(t, '/pup/challenge', '{"challenge":null}', current.key, { id });
        expect(first.status).toBe(400);
        expect(first.json).toMatchObject({ error: { code: 'invalid_challenge' } });
        const retry = await signedPost(t, '/pup/challenge', '{"challenge":null}', current.key, { id });
        expect(retry.status).toBe(400);
        expect(retry.json).toMatchObject({ error: { code: 'invalid_challenge' } });
      });

      test('PUP-22: the id reused for other bytes on the same route is refused as replayed', async () => {
        const t = await build({ secrets: { secrets: [current.secret] } });
        const id = newWebhookId();
        expect((await signedPost(t, '/pup/challenge', '"x"', current.key, { id })).status).toBe(200);
        expectRefusal(await signedPost(t, '/pup/challenge', '"other"', current.key, { id }), 'replayed');
      });
    });

    describe('PUP-12: MCP on /pup/mcp', () => {
      test('MCP-8, PUP-12: server/discover answers with dm-dot as server, 2026-07-28', async () => {
        const t = await build({ secrets: { secrets: [current.secret] } });
        const answer = await signedPost(t, '/pup/mcp', mcpBody('server/discover', {}, CONTEXT), current.key, { headers: mcpHeaders('server/discover') });
        expect(answer.status).toBe(200);
        const result = (answer.json as { result: Record<string, unknown> }).result;
        expect(result.resultType).toBe('complete');
        expect(JSON.stringify(result)).toContain('"dm-dot"');
      });

      test('TOOL-1: tools/list holds exactly send_to_dot', async () => {
        const t = await build({ secrets: { secrets: [current.secret] } });
        const answer = await signedPost(t, '/pup/mcp', mcpBody('tools/list', {}, CONTEXT), current.key, { headers: mcpHeaders('tools/list') });
        expect((answer.json as { result: { tools: { name: string }[] } }).result.tools.map((tool) => tool.name)).toEqual(['send_to_dot']);
      });

      test('PUP-1: tools/call reaches the tool (no dot subscribed: a tool error, not a protocol error)', async () => {
        const t = await build({ secrets: { secrets: [current.secret] } });
        const body = mcpBody('tools/call', { name: 'send_to_dot', arguments: { message: 'hi from discord' } }, CONTEXT);
        const answer = await signedPost(t, '/pup/mcp', body, current.key, { headers: mcpHeaders('tools/call', 'send_to_dot') });
        expect(answer.status).toBe(200);
        const result = (answer.json as { result: { isError?: boolean; content: { text: string }[] } }).result;
        expect(result.isError).toBe(true);
        expect(result.content[0]!.text).toMatch(/subscri/i);
      });

      test('PUP-12: the legacy era (initialize) is refused with -32022: /pup/mcp is 2026-07-28 only', async () => {
        const t = await build({ secrets: { secrets: [current.secret] } });
        const body = JSON.stringify({
          jsonrpc: '2.0',
          id: 1,
          method: 'initialize',
          params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'x', version: '1' } },
        });
        const answer = await signedPost(t, '/pup/mcp', body, current.key, { headers: { accept: 'application/json, text/event-stream' } });
        expect(JSON.stringify(answer.json)).toContain('-32022');
      });

      test('PUP-13: the context is logged as ids only: never settings or the user request', async () => {
        const t = await build({ secrets: { secrets: [current.secret] } });
        await signedPost(t, '/pup/mcp', mcpBody('tools/list', {}, CONTEXT), current.key, { headers: mcpHeaders('tools/list') });
        const line = t.logs.find((l) => l.event === 'pup_request');
        expect(line?.fields.context).toEqual({ installationId: 'inst_42', askerId: 'user_7', channelId: 'chan_9', callId: 'call_3' });
        const all = JSON.stringify(t.logs);
        expect(all).not.toContain('SECRET-SETTING-VALUE');
        expect(all).not.toContain('PRIVATE USER TEXT');
      });

      test('PUP-13, PUP-14: a malformed context is -32602 naming the field, after the signature verified', async () => {
        const t = await build({ secrets: { secrets: [current.secret] } });
        const body = mcpBody('tools/list', {}, { ...CONTEXT, installationId: { nested: true } }, 'req-9');
        const answer = await signedPost(t, '/pup/mcp', body, current.key, { headers: mcpHeaders('tools/list') });
        expect(answer.status).toBe(200);
        expect(answer.json).toMatchObject({ jsonrpc: '2.0', id: 'req-9', error: { code: -32602 } });
        expect((answer.json as { error: { message: string } }).error.message).toContain('installationId');
      });

      test('PUP-14: a malformed context with a bad signature is still only invalid_signature', async () => {
        const t = await build({ secrets: { secrets: [current.secret] } });
        const body = mcpBody('tools/list', {}, { installationId: { nested: true } });
        expectRefusal(await signedPost(t, '/pup/mcp', body, newPupSecret().key, { headers: mcpHeaders('tools/list') }), 'invalid_signature');
      });
    });

    describe('PUP-15: challenge', () => {
      test('a JSON string body is answered with the same JSON string', async () => {
        const t = await build({ secrets: { secrets: [current.secret] } });
        const answer = await signedPost(t, '/pup/challenge', '"n0nce-\\u00e9-é"', current.key);
        expect(answer.status).toBe(200);
        expect(answer.text).toBe('"n0nce-\\u00e9-é"');
        expect(answer.headers.get('content-type')).toBe('application/json');
      });

      test('an object with a challenge field is answered {"challenge": same value}', async () => {
        const t = await build({ secrets: { secrets: [current.secret] } });
        const answer = await signedPost(t, '/pup/challenge', JSON.stringify({ type: 'verification', challenge: 'abc123' }), current.key);
        expect(answer.status).toBe(200);
        expect(answer.text).toBe('{"challenge":"abc123"}');
      });

      test('any other body is 400 invalid_challenge', async () => {
        const t = await build({ secrets: { secrets: [current.secret] } });
        const answer = await signedPost(t, '/pup/challenge', '{"nonce":"abc"}', current.key);
        expect(answer.status).toBe(400);
        expect(answer.json).toMatchObject({ error: { code: 'invalid_challenge' } });
      });
    });

    describe('PUP-16: events', () => {
      test('PUP-11, PUP-17: member.joined: {} once; the retry with the same id gets identical bytes and commits nothing twice', async () => {
        const t = await build({ secrets: { secrets: [current.secret] } });
        const id = newWebhookId();
        const body = envelope(id, { type: 'member.joined', memberId: 'member_5' });
        const first = await signedPost(t, '/pup/events', body, current.key, { id });
        t.clock.advance(90_000); // pup retries later, re-signed with a fresh timestamp
        const second = await signedPost(t, '/pup/events', body, current.key, { id });
        expect(first.status).toBe(200);
        expect(first.text).toBe('{}');
        expect(second.status).toBe(first.status);
        expect(second.text).toBe(first.text);
        const effects = t.logs.filter((l) => l.event === 'pup_member_event');
        expect(effects).toHaveLength(1);
        expect(effects[0]!.fields).toMatchObject({ type: 'member.joined', memberId: 'member_5', installationId: 'inst_1' });
        expect(t.logs.filter((l) => l.event === 'pup_event_repeated')).toHaveLength(1);
      });

      test('member.left given as a plain string is understood', async () => {
        const t = await build({ secrets: { secrets: [current.secret] } });
        const id = newWebhookId();
        const answer = await signedPost(t, '/pup/events', envelope(id, 'member.left'), current.key, { id });
        expect(answer.status).toBe(200);
        expect(t.logs.find((l) => l.event === 'pup_member_event')?.fields.type).toBe('member.left');
      });

      test('an unknown event type is answered {} too, and logged as ignored', async () => {
        const t = await build({ secrets: { secrets: [current.secret] } });
        const id = newWebhookId();
        const answer = await signedPost(t, '/pup/events', envelope(id, { name: 'guild.renamed' }), current.key, { id });
        expect(answer.status).toBe(200);
        expect(answer.text).toBe('{}');
        expect(t.logs.find((l) => l.event === 'pup_event_ignored')?.fields.type).toBe('guild.renamed');
        expect(t.logs.some((l) => l.event === 'pup_member_event')).toBe(false);
      });

      test('an envelope id that differs from webhook-id is 400 id_mismatch', async () => {
        const t = await build({ secrets: { secrets: [current.secret] } });
        const answer = await signedPost(t, '/pup/events', envelope('some-other-id', 'member.joined'), current.key);
        expect(answer.status).toBe(400);
        expect(answer.json).toMatchObject({ error: { code: 'id_mismatch' } });
      });

      test.each(['version', 'eventId', 'occurredAt', 'event', 'context'])('an envelope without %s is 400 invalid_envelope naming it', async (field) => {
        const t = await build({ secrets: { secrets: [current.secret] } });
        const id = newWebhookId();
        const value = JSON.parse(envelope(id, 'member.joined')) as Record<string, unknown>;
        delete value[field];
        const answer = await signedPost(t, '/pup/events', JSON.stringify(value), current.key, { id });
        expect(answer.status).toBe(400);
        expect(answer.json).toMatchObject({ error: { code: 'invalid_envelope' } });
        expect((answer.json as { error: { message: string } }).error.message).toContain(field);
      });

      test('a body that is not JSON is 400 invalid_json', async () => {
        const t = await build({ secrets: { secrets: [current.secret] } });
        const answer = await signedPost(t, '/pup/events', '{not json', current.key);
        expect(answer.status).toBe(400);
        expect(answer.json).toMatchObject({ error: { code: 'invalid_json' } });
      });
    });
  });
}
