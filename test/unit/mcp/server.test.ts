/**
 * The MCP server's protocol negotiation on the legacy era (MCP-10): `initialize` is answered with
 * 2025-03-26, 2025-06-18 or 2025-11-25, whichever the client asks for, and a client asking for a
 * revision outside those (the SDK itself also knows 2024-11-05 and 2024-10-07) is offered 2025-11-25,
 * so it can decide for itself whether to go on. The 2026-07-28 era is unaffected.
 */
import { buildApp, rpcLegacy } from '../../support/app';

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
