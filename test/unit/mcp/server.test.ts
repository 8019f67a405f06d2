/**
 * The MCP server's protocol negotiation on the legacy era (MCP-10): `initialize` is answered with
 * 2025-03-26, 2025-06-18 or 2025-11-25, whichever the client asks for, and a client asking for a
 * revision outside those (the SDK itself also knows 2024-11-05 and 2024-10-07) is offered 2025-11-25,
 * so it can decide for itself whether to go on. The 2026-07-28 era is unaffected. And what the
 * 2026-07-28 era publishes about itself: cache hints, the tool's output schema, the server info.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { version } from '../../../lambda/version';
import { buildApp, rpcLegacy, rpcModern } from '../../support/app';
import { ROOT } from '../../support/paths';

const init = (protocolVersion: string) => ({ protocolVersion, capabilities: {}, clientInfo: { name: 't', version: '1' } });

async function negotiated(protocolVersion: string): Promise<unknown> {
  const answer = await rpcLegacy(buildApp().app, 'initialize', init(protocolVersion));
  expect(answer.status).toBe(200);
  return (answer.json as { result: { protocolVersion: string } }).result.protocolVersion;
}

test.each(['2025-03-26', '2025-06-18', '2025-11-25'])('MCP-10: initialize with %s is answered with that revision', async (version) => {
  expect(await negotiated(version)).toBe(version);
});

test.each(['2024-11-05', '2024-10-07', '2099-01-01'])('MCP-10: initialize with %s is offered 2025-11-25 instead', async (version) => {
  expect(await negotiated(version)).toBe('2025-11-25');
});

describe('what the 2026-07-28 era publishes', () => {
  const result = async (method: string) => {
    const answer = await rpcModern(buildApp().app, method);
    expect(answer.status).toBe(200);
    return (answer.json as { result: Record<string, any> }).result;
  };

  test('MCP-9: server/discover and tools/list carry ttlMs and cacheScope (five minutes, private: the answer depends on the key)', async () => {
    for (const method of ['server/discover', 'tools/list']) {
      const found = await result(method);
      expect({ method, ttlMs: found.ttlMs, cacheScope: found.cacheScope }).toEqual({ method, ttlMs: 300_000, cacheScope: 'private' });
    }
  });

  test('TOOL-6: the output schema is an object with eventId (a string) and status (delivered, queued or failed)', async () => {
    const [tool] = (await result('tools/list')).tools as { name: string; outputSchema: Record<string, any> }[];
    expect(tool?.name).toBe('send_to_dot');
    expect(tool?.outputSchema).toMatchObject({
      type: 'object',
      properties: { eventId: { type: 'string' }, status: { type: 'string', enum: ['delivered', 'queued', 'failed'] } },
      required: ['eventId', 'status'],
    });
  });

  test('MCP-14: the server info names dm-dot with the version it was given, and every entry point gives the one from package.json', async () => {
    const info = (await result('server/discover'))._meta['io.modelcontextprotocol/serverInfo'];
    expect(info).toMatchObject({ name: 'dm-dot', version: '0.0.0-test' });
    expect(version).toBe(JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')).version);
    for (const entry of ['lambda/handlers/mcp-lambda.ts', 'lambda/local/runtime.ts']) {
      expect({ entry, usesPackageVersion: /from '\.\.\/version'/.test(readFileSync(join(ROOT, entry), 'utf8')) }).toEqual({ entry, usesPackageVersion: true });
    }
  });
});
