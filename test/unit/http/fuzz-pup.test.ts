/**
 * Fuzzing of the pup door in-process (the HTTP app over the fakes, one pup secret configured):
 * generated requests that ARE validly signed (so they reach everything after the verifier) with
 * arbitrary JSON and non-JSON bodies, odd Unicode, JSON-RPC envelopes with broken `_meta` and
 * contexts, event envelopes with wrong types, random webhook-ids (repeated on purpose), and
 * unsigned or mis-signed ones. Invariants:
 *
 * - `handle` never throws and never answers 5xx (the fakes are healthy), never logs an error, and
 *   no answer carries a stack trace or the secret;
 * - every answer has a JSON body (or SSE whose data is JSON, from the SDK) or is an empty 202;
 * - a request that is not validly signed gets exactly 401 with one of the three codes, and changes
 *   nothing in the store;
 * - `/pup/events` answers a repeated id with the very bytes it gave first.
 *
 * Fixed seed by default; FC_SEED=<n> overrides it (see test/support/app.ts `fuzzParams`).
 */
import fc from 'fast-check';
import { buildApp, fuzzParams, hasStackTrace, readAnswer } from '../../support/app';
import { FakeClock } from '../../support/fakes';
import { mcpHeaders, newPupSecret, pupSignature } from '../../support/pup-suite';

const { secret, key } = newPupSecret();
const ROUTES = ['/pup/mcp', '/pup/challenge', '/pup/events'] as const;

const oddText = fc.string({ unit: fc.constantFrom('a', 'é', '😀', '\u0000', '\ud800', '\ufeff', '"', '\\', '{', '}', ' ', '\n', '\u2028'), maxLength: 40 });
const jsonValue = fc.jsonValue({ maxDepth: 4 });
const context = fc.oneof(
  fc.record(
    {
      installationId: fc.oneof(fc.string(), fc.integer()),
      askerId: fc.option(fc.string(), { nil: undefined }),
      settings: fc.option(jsonValue, { nil: undefined }),
    },
    { requiredKeys: [] },
  ),
  jsonValue,
);
const rpcBody = fc
  .record(
    {
      jsonrpc: fc.constantFrom('2.0', '1.0', 2),
      id: fc.oneof(fc.integer(), fc.string(), fc.constant(null)),
      method: fc.constantFrom('server/discover', 'tools/list', 'tools/call', 'events/list', 'initialize', 'ping', 'tasks/get', 'nope'),
      params: fc.oneof(
        jsonValue,
        fc.record(
          {
            name: fc.constantFrom('send_to_dot', 'other'),
            arguments: jsonValue,
            _meta: fc.record(
              { 'io.modelcontextprotocol/protocolVersion': fc.constantFrom('2026-07-28', '2025-11-25', 'x'), 'io.puphq/context': context },
              { requiredKeys: [] },
            ),
          },
          { requiredKeys: [] },
        ),
      ),
    },
    { requiredKeys: [] },
  )
  .map((value) => JSON.stringify(value));
const envelopeBody = (id: string) =>
  fc
    .record(
      {
        version: fc.oneof({ weight: 4, arbitrary: fc.constant('1') }, jsonValue),
        id: fc.oneof({ weight: 4, arbitrary: fc.constant(id) }, fc.string()),
        eventId: fc.oneof(fc.string({ minLength: 1 }), fc.integer(), jsonValue),
        occurredAt: fc.oneof({ weight: 4, arbitrary: fc.constant('2026-11-30T12:00:00Z') }, fc.string()),
        event: fc.oneof(
          { weight: 2, arbitrary: fc.constantFrom('member.joined', 'member.left', 'x.y') },
          {
            weight: 2,
            arbitrary: fc.record(
              { type: fc.option(fc.string(), { nil: undefined }), name: fc.option(oddText, { nil: undefined }), memberId: jsonValue },
              { requiredKeys: [] },
            ),
          },
          jsonValue,
        ),
        context: fc.oneof({ weight: 4, arbitrary: fc.constant({ installationId: 'i' }) }, jsonValue),
      },
      { requiredKeys: ['version', 'id', 'eventId', 'occurredAt', 'event', 'context'] },
    )
    .map((value) => JSON.stringify(value));

const webhookId = fc.constantFrom('msg_a', 'msg_b', 'msg_c', 'msg_d').chain((base) => fc.constantFrom(base, `${base}_x`));
const signing = fc.constantFrom('valid', 'valid', 'valid', 'wrong-secret', 'stale', 'missing');

const anyBody = fc.oneof(
  oddText,
  jsonValue.map((v) => JSON.stringify(v)),
);
const challengeBody = fc.oneof(
  oddText.map((t) => JSON.stringify(t)),
  jsonValue.map((v) => JSON.stringify({ challenge: v })),
);

/** Mostly the route's own kind of body, sometimes anything at all. */
const requestCase = fc.tuple(webhookId, fc.constantFrom(...ROUTES)).chain(([id, route]) =>
  fc.record({
    route: fc.constant(route),
    id: fc.constant(id),
    body: fc.oneof(
      { weight: 4, arbitrary: route === '/pup/mcp' ? rpcBody : route === '/pup/events' ? envelopeBody(id) : challengeBody },
      { weight: 1, arbitrary: anyBody },
    ),
    signing,
  }),
);

/** Mcp-Method / Mcp-Name as a well-behaved client would send them, so most requests get past the SDK's header check. */
function mcpHeadersFor(body: string): Record<string, string> {
  try {
    const parsed = JSON.parse(body) as { method?: unknown; params?: { name?: unknown } };
    if (typeof parsed?.method === 'string') return mcpHeaders(parsed.method, typeof parsed.params?.name === 'string' ? parsed.params.name : undefined);
  } catch {
    // not JSON: no MCP headers at all
  }
  return { accept: 'application/json, text/event-stream' };
}

/** Outcomes over the whole run, to show the fuzzing reaches past the verifier on every route. */
const reached = new Map<string, number>();

afterAll(() => {
  for (const route of ROUTES) expect(reached.get(`${route} 200`) ?? 0).toBeGreaterThan(0);
  expect(reached.get('/pup/mcp 401') ?? 0).toBeGreaterThan(0);
  if (process.env.FUZZ_STATS === '1') process.stdout.write(`${JSON.stringify(Object.fromEntries([...reached].sort()), null, 1)}\n`);
});

test('PUP-7, PUP-11, PUP-17: the pup door answers every generated request within its contract', async () => {
  await fc.assert(
    fc.asyncProperty(fc.array(requestCase, { minLength: 1, maxLength: 6 }), async (cases) => {
      const clock = new FakeClock();
      const t = buildApp({ pup: { secrets: async () => ({ secrets: [secret] }) } }, { clock });
      const firstEventAnswer = new Map<string, string>();
      for (const c of cases) {
        const bytes = Buffer.from(c.body, 'utf8');
        const ts = Math.floor(clock.now() / 1000) - (c.signing === 'stale' ? 400 : 0);
        const headers: Record<string, string> = {
          'content-type': 'application/json',
          ...mcpHeadersFor(c.body),
          'webhook-id': c.id,
          'webhook-timestamp': String(ts),
        };
        if (c.signing !== 'missing') headers['webhook-signature'] = pupSignature(c.signing === 'wrong-secret' ? newPupSecret().key : key, c.id, ts, bytes);
        const writesBefore = t.store.writes.length;
        const answer = await readAnswer(await t.app.handle(new Request(`https://dmdot.example${c.route}`, { method: 'POST', headers, body: bytes })));

        reached.set(`${c.route} ${answer.status}`, (reached.get(`${c.route} ${answer.status}`) ?? 0) + 1);
        expect(answer.status).toBeLessThan(500);
        expect(hasStackTrace(answer.text)).toBe(false);
        expect(answer.text).not.toContain(secret.slice(6, 30));
        if (!(answer.status === 202 && answer.text === '')) expect(answer.unreadable || answer.json === undefined).toBe(false);
        if (c.signing !== 'valid') {
          expect(answer.status).toBe(401);
          expect(['invalid_signature', 'stale_timestamp']).toContain((answer.json as { error: { code: string } }).error.code);
          expect(t.store.writes.length).toBe(writesBefore);
        }
        if (c.route === '/pup/events' && c.signing === 'valid' && answer.status === 200) {
          const first = firstEventAnswer.get(c.id);
          if (first === undefined) firstEventAnswer.set(c.id, answer.text);
          else expect(answer.text).toBe(first);
        }
      }
      expect(t.logs.filter((line) => line.level === 'error')).toEqual([]);
      await t.app.close();
    }),
    fuzzParams(500),
  );
});
