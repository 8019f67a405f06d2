/**
 * JSON-RPC batches follow each protocol revision (MCP-15): the 2025-03-26 transport takes an array
 * of requests in one POST, 2025-06-18 removed batches and 2025-11-25 and 2026-07-28 kept them out.
 * A batch on a revision without them is refused as one JSON-RPC error, before anything in it runs;
 * a POST without `MCP-Protocol-Version` is of 2025-03-26, as that transport says.
 * Runs on the app both runtimes share (lambda/http/app.ts).
 */
import { API_KEY, buildApp, legacyHeaders, liveSubscription, MODERN, rpcErrorCode, send } from '../../support/app';

const TOOL_CALL = (id: number, message: string) => ({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'send_to_dot', arguments: { message } } });
const BATCH = JSON.stringify([
  { jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} },
  { jsonrpc: '2.0', id: 2, method: 'ping' },
]);
const auth = { authorization: `Bearer ${API_KEY}` };

describe('MCP-15: JSON-RPC batches follow each protocol revision', () => {
  it('MCP-15: a batch on 2025-03-26 (header or none) is served, one answer per request', async () => {
    for (const version of ['2025-03-26', undefined]) {
      const { app } = buildApp();
      const answer = await send(app, { headers: legacyHeaders({ ...auth, ...(version ? { 'mcp-protocol-version': version } : {}) }), body: BATCH });
      expect(answer.status).toBe(200);
      const values = ([] as unknown[]).concat(answer.json).flat() as { id: number; result?: unknown }[];
      expect(values.map((v) => v.id).sort()).toEqual([1, 2]);
      for (const value of values) expect(value.result).toBeDefined();
    }
  });

  it.each(['2025-06-18', '2025-11-25', MODERN])('MCP-15: a batch on %s is refused with -32600 naming the revision, and nothing in it runs', async (version) => {
    const { app, store, logs } = buildApp();
    // A live subscription: a batch that ran would record its messages.
    store.subscription = liveSubscription();
    const body = JSON.stringify([TOOL_CALL(1, 'first of a batch'), TOOL_CALL(2, 'second of a batch')]);
    const answer = await send(app, {
      headers: legacyHeaders({ ...auth, 'mcp-protocol-version': version, 'mcp-method': 'tools/call', 'mcp-name': 'send_to_dot' }),
      body,
    });
    expect(answer.status).toBe(400);
    expect(answer.headers.get('content-type')).toMatch(/application\/json/);
    expect(rpcErrorCode(answer.json)).toBe(-32600);
    expect((answer.json as { error: { message: string } }).error.message).toContain(version);
    expect((answer.json as { error: { message: string } }).error.message).toMatch(/one request per POST/);
    expect(store.events.size).toBe(0);
    expect(logs.filter((l) => l.level === 'error')).toEqual([]);
  });

  it('MCP-15: a single request on 2025-06-18 is still served (only arrays are refused)', async () => {
    const { app } = buildApp();
    const answer = await send(app, {
      headers: legacyHeaders({ ...auth, 'mcp-protocol-version': '2025-06-18' }),
      body: JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'ping' }),
    });
    expect(answer.status).toBe(200);
    expect((answer.json as { id: number }).id).toBe(7);
  });
});

it('MCP-15: a batch under a version dm-dot does not serve is refused as that version, not served', async () => {
  const { app } = buildApp();
  const answer = await send(app, { headers: legacyHeaders({ ...auth, 'mcp-protocol-version': '2099-01-01' }), body: BATCH });
  expect(answer.status).toBe(400);
  expect(answer.text).toMatch(/[Uu]nsupported protocol version/);
});
