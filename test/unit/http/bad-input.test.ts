/**
 * The bad-input rows (test/support/bad-input.ts) against the HTTP app: one row per
 * malformed-request class, each answered with its own status and error code, always as JSON and
 * never with a stack trace; with DMDOT_PRINT_TABLE=1 the rows are printed as the markdown table of
 * docs/http-and-errors.md.
 *
 * Pinned behaviour of the SDK where the contract is silent: on the legacy era, malformed JSON is also
 * HTTP 400 -32700 (plain JSON), and an unknown method is HTTP 200 with -32601 in an SSE event.
 */
import {
  buildApp,
  legacyHeaders,
  liveSubscription,
  MODERN,
  modernBody,
  modernHeaders,
  rpcErrorCode,
  rpcLegacy,
  rpcModern,
  SECRET,
  send,
} from '../../support/app';
import { BAD_INPUT_ROWS, badInputMarkdown, callTool, expectBadInputAnswer, MiB, ping, rest, TOOL } from '../../support/bad-input';

describe('DEL-PIPE-1, DEL-REST-1, DEL-REST-2, DEL-REST-3, EV-SUB-1, EV-SUB-2, EV-SUB-3, EV-SUB-4, EV-SUB-5, EV-SUB-6, EV-SUB-7, EV-SUB-8, EV-UNSUB-1, HTTP-2, HTTP-3, HTTP-8, HTTP-9, HTTP-11, HTTP-16, HTTP-17, HTTP-18, HTTP-19, LIM-1, LIM-2, MCP-3, MCP-4, MCP-5, MCP-6, MCP-15, PUP-3, TOOL-7, TOOL-8: bad input: one row per malformed-request class', () => {
  test.each(BAD_INPUT_ROWS.map((row) => [row.klass, row] as const))('%s', async (_klass, row) => {
    const t = buildApp(row.config);
    const answer = await row.call(t.app);
    await t.app.close();
    expectBadInputAnswer(row, answer);
  });
});

describe('EV-1, EV-SUB-2: the same subscribe checks on the legacy era', () => {
  const rows = BAD_INPUT_ROWS.filter((row) => row.klass.startsWith('events/subscribe:'));
  test.each(rows.map((row) => [row.klass, row] as const))('%s', async (_klass, row) => {
    const t = buildApp();
    const answer = await rpcLegacy(t.app, 'events/subscribe', row.params!);
    await t.app.close();
    expect(answer.status).toBe(200);
    expect(answer.headers.get('content-type')).toMatch(/^text\/event-stream/);
    expect(rpcErrorCode(answer.json)).toBe(-32602);
    expect((answer.json as { error: { message: string } }).error.message).toMatch(row.message!);
    expect(answer.text).not.toContain(SECRET.slice(6));
  });
});

describe('one validation for both send surfaces', () => {
  test('DEL-REST-1, TOOL-7: bytes that are not UTF-8 are refused with the very same sentence by the tool and by REST', async () => {
    const t = buildApp();
    t.store.subscription = liveSubscription();
    const withBadByte = (json: string, marker: string) => {
      const at = Buffer.from(json).indexOf(marker);
      return Buffer.concat([Buffer.from(json).subarray(0, at), Buffer.from([0xc3, 0x28]), Buffer.from(json).subarray(at + marker.length)]);
    };
    const tool = await send(t.app, {
      headers: modernHeaders('tools/call', { 'mcp-name': TOOL }),
      body: withBadByte(modernBody('tools/call', { name: TOOL, arguments: { message: 'x#y' } }), '#'),
    });
    const viaRest = await send(t.app, { path: '/v1/messages', headers: { 'content-type': 'application/json' }, body: withBadByte('{"message":"x#y"}', '#') });
    const toolText = (tool.json as any).result.content[0].text;
    expect((tool.json as any).result.isError).toBe(true);
    expect(viaRest.status).toBe(400);
    expect((viaRest.json as any).error.message).toBe(toolText);
    // Nothing was queued: the message never became U+FFFD.
    expect(t.queue.jobs).toEqual([]);
    await t.app.close();
  });
});

describe('the boundaries next to the bad rows are accepted', () => {
  test('DEL-REST-1, LIM-1, TOOL-7: a message of exactly 16,384 UTF-8 bytes (multi-byte) is queued, on the tool and on REST', async () => {
    const t = buildApp();
    t.store.subscription = liveSubscription();
    const message = `${'€'.repeat(5461)}x`; // 3 * 5461 + 1 = 16,384 bytes
    expect(Buffer.byteLength(message)).toBe(16_384);
    const tool = await callTool(t.app, { message: `  ${message}\n` });
    expect((tool.json as any).result).toMatchObject({ isError: false, structuredContent: { status: 'queued' } });
    const viaRest = await rest(JSON.stringify({ message }))(t.app);
    expect(viaRest.status).toBe(202);
    expect((viaRest.json as any).status).toBe('queued');
    await t.app.close();
  });

  test('HTTP-16, LIM-2, MCP-11: a body of exactly 1 MiB is read (streamed and declared)', async () => {
    const t = buildApp();
    const padded = (n: number) => ping + ' '.repeat(n - ping.length);
    const streamed = await send(t.app, { headers: legacyHeaders(), body: new Blob([padded(MiB)]).stream() });
    const declared = await send(t.app, { headers: legacyHeaders({ 'content-length': String(MiB) }), body: padded(MiB) });
    for (const answer of [streamed, declared]) {
      expect(answer.status).toBe(200);
      expect((answer.json as any).result).toEqual({});
    }
    await t.app.close();
  });

  test('HTTP-12: an allowed Origin passes and gets CORS headers', async () => {
    const t = buildApp({ allowedOrigins: ['https://inspector.example'] });
    const answer = await send(t.app, { headers: legacyHeaders({ origin: 'https://inspector.example' }), body: ping });
    expect(answer.status).toBe(200);
    expect(answer.headers.get('access-control-allow-origin')).toBe('https://inspector.example');
    await t.app.close();
  });

  test('HTTP-1, TOOL-1: the modern era with a known version is served', async () => {
    const t = buildApp();
    const answer = await rpcModern(t.app, 'tools/list');
    expect(answer.status).toBe(200);
    expect((answer.json as any).result.tools.map((tool: { name: string }) => tool.name)).toEqual([TOOL]);
    expect(MODERN).toBe('2026-07-28');
    await t.app.close();
  });
});

afterAll(() => {
  if (process.env.DMDOT_PRINT_TABLE === '1') process.stdout.write(`\n${badInputMarkdown()}\n`);
});
