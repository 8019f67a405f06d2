/**
 * ChatGPT through OpenAI's Secure MCP Tunnel, as far as this machine can show it (docs/chatgpt.md):
 * `dm-dot connect --tunnel` writes a tunnel-client profile naming the server's `/mcp` URL and the
 * key file by a `file:` reference, never the key; the server started as `npm start` starts it (the
 * built bundle) answers requests forwarded as tunnel-client forwards them; and a dot that
 * subscribes through them shows in `dm-dot status` and gets what `dm-dot send` sends.
 *
 * tunnel-client itself is a Go program that cannot run here (it long-polls OpenAI), so a small
 * stand-in plays its part, following its published protocol and configuration documents: it reads
 * the profile's URL and static headers (resolving `file:` references as tunnel-client does:
 * the file's content less one trailing line ending), takes poll commands of the documented shape
 * (`request_id`, `channel`, `command_type: "jsonrpc"`, multi-valued `headers`, the raw `jsonrpc`),
 * POSTs each raw JSON-RPC payload to the MCP URL with the command's headers applied last, and builds
 * the documented response envelope (`jsonrpc_response` with `resp_json`, `resp_code`, the
 * allowlisted `resp_headers`; `notify_ack` for a notification).
 *
 * Deliberately not here: OpenAI's side (the poll and response endpoints) and ChatGPT.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildCli, runCli } from '../support/cli-run';
import { echoing, newSecret, startReceiver, startServer, verifies, waitFor, type RunningServer } from '../support/e2e';

const TUNNEL_ID = 'tunnel_0123456789abcdef0123456789abcdef';
/** The response headers tunnel-client passes back (its protocol document's allowlist). */
const RESPONSE_HEADER_ALLOWLIST = [
  'content-type',
  'mcp-session-id',
  'mcp-protocol-version',
  'last-event-id',
  'access-control-expose-headers',
  'www-authenticate',
];

interface PollCommand {
  request_id: string;
  channel?: string;
  command_type: 'jsonrpc';
  headers?: Record<string, string[]>;
  jsonrpc: { jsonrpc: '2.0'; id?: string | number; method: string; params?: unknown };
}

interface ResponseEnvelope {
  request_id: string;
  channel?: string;
  resp_json?: any;
  resp_headers: Record<string, string[]>;
  resp_code: number;
  resp_type: 'jsonrpc_response' | 'notify_ack';
}

/** What the stand-in reads of a profile: the main channel's URL and the static MCP headers, references resolved. */
function readProfile(text: string): { url: string; headers: Record<string, string> } {
  const url = /^\s*url:\s*"([^"]+)"/m.exec(text)?.[1];
  assert.ok(url, 'the profile names the MCP URL');
  const block = /^ {2}extra_headers:\n((?: {4}.*\n)+)/m.exec(text)?.[1] ?? '';
  const headers: Record<string, string> = {};
  for (const line of block.split('\n')) {
    const m = /^ {4}([A-Za-z0-9-]+):\s*"(.*)"$/.exec(line);
    if (!m) continue;
    const raw = JSON.parse(`"${m[2]}"`) as string;
    // tunnel-client's file: reference: the file's content less one trailing line ending.
    headers[m[1]!] = raw.startsWith('file:') ? readFileSync(raw.slice('file:'.length).trim(), 'utf8').replace(/\r?\n$|\r$/, '') : raw;
  }
  return { url, headers };
}

/** One forwarded command, as tunnel-client does it for a Streamable HTTP `main` channel. */
async function forward(profile: { url: string; headers: Record<string, string> }, command: PollCommand): Promise<ResponseEnvelope> {
  const headers = new Headers({ 'content-type': 'application/json', accept: 'application/json, text/event-stream' });
  for (const [name, value] of Object.entries(profile.headers)) headers.set(name, value);
  // Connector-forwarded headers are applied last, each value kept.
  for (const [name, values] of Object.entries(command.headers ?? {})) {
    headers.delete(name);
    for (const value of values) headers.append(name, value);
  }
  const response = await fetch(profile.url, { method: 'POST', headers, body: JSON.stringify(command.jsonrpc) });
  const resp_headers: Record<string, string[]> = {};
  for (const name of RESPONSE_HEADER_ALLOWLIST) {
    const value = response.headers.get(name);
    if (value) resp_headers[name] = [value];
  }
  const base = { request_id: command.request_id, channel: command.channel ?? 'main', resp_headers, resp_code: response.status };
  const text = await response.text();
  if (command.jsonrpc.id === undefined) return { ...base, resp_type: 'notify_ack' };
  let message: any;
  if ((response.headers.get('content-type') ?? '').startsWith('text/event-stream')) {
    // The terminal message of the stream is the one with the request's id.
    const messages = text
      .split('\n')
      .filter((line) => line.startsWith('data:'))
      .map((line) => JSON.parse(line.slice(5)));
    message = messages.find((m) => m.id === command.jsonrpc.id);
  } else {
    message = JSON.parse(text);
  }
  return { ...base, resp_json: message, resp_type: 'jsonrpc_response' };
}

let n = 0;
/** A poll command of the documented shape. */
function command(method: string, params: unknown, headers: Record<string, string[]> = {}, notification = false): PollCommand {
  n += 1;
  return {
    request_id: `req_${n}`,
    channel: 'main',
    command_type: 'jsonrpc',
    headers,
    jsonrpc: { jsonrpc: '2.0', ...(notification ? {} : { id: `rpc_${n}` }), method, ...(params === undefined ? {} : { params }) },
  };
}

describe('ChatGPT through the Secure MCP Tunnel: the profile, and a stand-in forwarding as tunnel-client does', () => {
  let server: RunningServer;
  let home: string;
  const cleanups: (() => unknown)[] = [];
  before(async () => {
    buildCli();
    home = mkdtempSync(join(tmpdir(), 'dmdot-tunnel-home-'));
    cleanups.push(() => rmSync(home, { recursive: true, force: true }));
    // As npm start runs it, with no MCP_API_KEY: the key is generated into the key file the profile names.
    server = await startServer({ MCP_API_KEY: '' }, { built: true });
    cleanups.push(() => server.stop());
  });
  after(async () => {
    while (cleanups.length) await cleanups.pop()!();
  });

  const env = () => ({ PATH: process.env.PATH ?? '', HOME: home, DMDOT_STATE_DIR: server.stateDir });

  it('LOCAL-TUN-1: connect --tunnel writes a profile with the /mcp URL and the key file by a file: reference, never the key', async () => {
    const r = await runCli(['connect', '--tunnel', TUNNEL_ID, '--json'], env());
    assert.equal(r.code, 0, r.err);
    const doc = JSON.parse(r.out);
    const profilePath = join(home, '.config', 'tunnel-client', 'dm-dot.yaml');
    assert.equal(doc.profile, profilePath);
    assert.equal(doc.mcpUrl, server.mcpUrl);
    assert.equal(doc.keyReference, `file:${join(server.stateDir, 'api-key')}`);
    assert.match(doc.dotInstructions.subscribe, /Subscribe to the message\.created event/);
    assert.match(doc.dotInstructions.withInbox, /get_pending_messages[\s\S]*acknowledge_messages/);
    const text = readFileSync(profilePath, 'utf8');
    const key = readFileSync(join(server.stateDir, 'api-key'), 'utf8').trim();
    assert.ok(!text.includes(key), 'the profile never holds the key');
    assert.ok(!r.out.includes(key) && !r.err.includes(key), 'nor does what connect printed');
    assert.match(text, new RegExp(`tunnel_id: "${TUNNEL_ID}"`));
    assert.match(text, /X-Api-Key: "file:/);
    assert.equal(statSync(profilePath).mode & 0o077, 0, 'the profile is private to its owner');
  });

  it('LOCAL-TUN-1: the text form says where it wrote the profile, what to run, and what to ask the dot', async () => {
    const r = await runCli(['connect', '--tunnel', TUNNEL_ID], env());
    assert.equal(r.code, 0, r.err);
    assert.match(r.out, /^Replaced the tunnel-client profile .*dm-dot\.yaml/m);
    assert.match(r.out, /tunnel-client run --profile-file .*dm-dot\.yaml/);
    assert.match(r.out, /Connection: Tunnel/);
    assert.match(r.out, /Subscribe to the message\.created event/);
  });

  it('LOCAL-TUN-1: a bad tunnel id is a usage error naming the format (exit 2), and nothing is written', async () => {
    const r = await runCli(['connect', '--tunnel', 'tunnel_XYZ'], { ...env(), HOME: join(home, 'none') });
    assert.equal(r.code, 2);
    assert.match(r.err, /--tunnel must be a tunnel id: tunnel_ and 32 lowercase hexadecimal digits/);
    assert.throws(() => statSync(join(home, 'none')));
  });

  it('LOCAL-TUN-2, LOCAL-19: the server started as npm start starts it answers what the stand-in forwards: initialize, tools/list, events/list and a subscribe that status then shows', async () => {
    const profile = readProfile(readFileSync(join(home, '.config', 'tunnel-client', 'dm-dot.yaml'), 'utf8'));
    const receiver = await startReceiver(echoing());
    cleanups.push(() => receiver.close());

    const initialize = command('initialize', { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'openai-mcp', version: '1' } });
    const init = await forward(profile, initialize);
    assert.equal(init.resp_code, 200, JSON.stringify(init));
    assert.equal(init.resp_type, 'jsonrpc_response');
    assert.equal(init.resp_json.id, initialize.jsonrpc.id);
    assert.ok(init.resp_json.result.capabilities.events, 'the events capability reaches the connector');
    const version = { 'Mcp-Protocol-Version': [init.resp_json.result.protocolVersion as string] };

    const initialized = await forward(profile, command('notifications/initialized', undefined, version, true));
    assert.equal(initialized.resp_type, 'notify_ack');
    assert.ok(initialized.resp_code >= 200 && initialized.resp_code < 300, String(initialized.resp_code));

    const tools = await forward(profile, command('tools/list', {}, version));
    assert.equal(tools.resp_code, 200);
    assert.ok(tools.resp_json.result.tools.some((t: { name: string }) => t.name === 'send_to_dot'));
    assert.match(tools.resp_headers['content-type']?.[0] ?? '', /json|event-stream/);

    const listed = await forward(profile, command('events/list', {}, version));
    assert.equal(listed.resp_code, 200);
    assert.ok(JSON.stringify(listed.resp_json.result).includes('message.created'));

    const secret = newSecret();
    const subscribed = await forward(
      profile,
      command('events/subscribe', { name: 'message.created', arguments: {}, delivery: { mode: 'webhook', url: receiver.url('/dot'), secret } }, version),
    );
    assert.equal(subscribed.resp_code, 200, JSON.stringify(subscribed.resp_json));
    assert.ok(subscribed.resp_json.result, JSON.stringify(subscribed.resp_json));

    const status = await runCli(['status', '--json'], env());
    assert.equal(status.code, 0, status.err);
    assert.ok(JSON.parse(status.out).subscription, 'dm-dot status shows the subscription');

    const sent = await runCli(['send', 'through the tunnel'], env());
    assert.equal(sent.code, 0, sent.err);
    const event = await waitFor('the event at the dot', () => receiver.events()[0]);
    assert.ok(verifies(secret, event));
    assert.equal(event.json.data.message, 'through the tunnel');
  });

  it('without the key header the forwarded request is refused with 401, as the connector would then see', async () => {
    const r = await forward({ url: server.mcpUrl, headers: {} }, command('tools/list', {}));
    assert.equal(r.resp_code, 401);
    assert.deepEqual(r.resp_headers['www-authenticate'], ['Bearer']);
  });
});
