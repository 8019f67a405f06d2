/**
 * The `tunnel-client` profile of this server (docs/chatgpt.md): OpenAI's Secure MCP Tunnel client
 * long-polls OpenAI and forwards each MCP request of the ChatGPT connector to this machine's
 * `/mcp`. The profile names the tunnel, the server's URL and where each secret is read from (a
 * `file:` or `env:` reference tunnel-client resolves when it starts), never a secret: the dm-dot key
 * file's key as `X-Api-Key` (docs/decisions.md says why), OpenAI's runtime key from a file beside it.
 *
 * Deliberately not here: running tunnel-client (it is a Go program the person installs) or
 * checking the tunnel with OpenAI; `tunnel-client doctor` does that.
 */
import { existsSync, readFileSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';

/** The tunnel id format tunnel-client requires: `tunnel_` and 32 lowercase hexadecimal characters. */
export const TUNNEL_ID = /^tunnel_[0-9a-f]{32}$/;
export const PROFILE_NAME = 'dm-dot';
/** The header the profile sends the key in (lambda/http/app.ts accepts it). */
export const KEY_HEADER = 'X-Api-Key';
/** How long tunnel-client waits for this server to listen before its first poll (a service starting both at once). */
const STARTUP_WAIT = '60s';

type Env = Readonly<Record<string, string | undefined>>;

/** The user's home: HOME, else the system's idea of it. */
export const homeOf = (env: Env): string => env.HOME?.trim() || homedir();

/** The folder tunnel-client looks up `--profile NAME` in (tunnel-client's rule). */
function profileDir(env: Env): string {
  if (env.TUNNEL_CLIENT_PROFILE_DIR?.trim()) return env.TUNNEL_CLIENT_PROFILE_DIR.trim();
  if (env.XDG_CONFIG_HOME?.trim()) return join(env.XDG_CONFIG_HOME.trim(), 'tunnel-client');
  return join(homeOf(env), '.config', 'tunnel-client');
}

/** The profile, and the file it reads OpenAI's runtime key from (the person writes it there). */
export function tunnelFiles(env: Env): { profile: string; runtimeKey: string } {
  const dir = profileDir(env);
  return { profile: join(dir, `${PROFILE_NAME}.yaml`), runtimeKey: join(dir, `${PROFILE_NAME}.runtime-key`) };
}

/** `file:/path` or `env:NAME`: how tunnel-client reads the dm-dot key. */
export type KeyReference = { file: string } | { env: 'MCP_API_KEY' };

export function referenceText(ref: KeyReference): string {
  return 'file' in ref ? `file:${ref.file}` : `env:${ref.env}`;
}

/** A YAML double-quoted scalar (JSON's string syntax is one). */
const q = (value: string) => JSON.stringify(value);

/** `mcpUrl`: the server's MCP endpoint as tunnel-client reaches it (`http://127.0.0.1:8787/mcp`). */
export function profileText(input: { tunnelId: string; mcpUrl: string; key: KeyReference; runtimeKeyFile: string }): string {
  return [
    `# tunnel-client profile for dm-dot, written by \`dm-dot connect --tunnel\` (run it again to rewrite it).`,
    '# It holds no secret: each is read from the file or variable named here when tunnel-client starts.',
    'config_version: 1',
    'control_plane:',
    `  tunnel_id: ${q(input.tunnelId)}`,
    "  # OpenAI's runtime API key (Tunnels: Read + Use), one line in this file, mode 0600.",
    `  api_key: ${q(`file:${input.runtimeKeyFile}`)}`,
    'mcp:',
    '  server_urls:',
    '    - channel: main',
    `      url: ${q(input.mcpUrl)}`,
    '  extra_headers:',
    "    # dm-dot's API key, read from its key file (after `dm-dot key rotate`, restart tunnel-client).",
    `    ${KEY_HEADER}: ${q(referenceText(input.key))}`,
    `  startup_wait_timeout: ${STARTUP_WAIT}`,
    '',
  ].join('\n');
}

/** Writes the profile through a temporary file and a rename; its folder is created private. */
export async function writeProfile(path: string, text: string): Promise<{ replaced: boolean }> {
  const replaced = existsSync(path);
  await mkdir(dirname(path), { recursive: true, mode: 0o700 });
  const { writeFileAtomic } = await import('../../adapters/state-files');
  await writeFileAtomic(path, text);
  return { replaced };
}

/** What `service` needs of an existing profile (one with a tunnel and the URL it forwards to): its tunnel; undefined when there is none. */
export function readProfile(path: string): string | undefined {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch {
    return undefined;
  }
  const field = (name: string) => {
    const raw = new RegExp(`^\\s*-?\\s*${name}:\\s*(.+)$`, 'm').exec(text)?.[1]?.trim();
    if (raw === undefined) return undefined;
    try {
      return raw.startsWith('"') ? (JSON.parse(raw) as string) : raw;
    } catch {
      return raw;
    }
  };
  const tunnelId = field('tunnel_id');
  return tunnelId && field('url') ? tunnelId : undefined;
}

/**
 * What to paste into the dot's conversation. A ChatGPT dot (or a Work chat) subscribes when asked
 * to; a regular chat lists events and never subscribes.
 */
export const DOT_INSTRUCTIONS = {
  subscribe:
    'Subscribe to the message.created event of the dm-dot app. Each event is a message someone sent you through dm-dot: ' +
    'read it and answer it here, in this conversation.',
  withInbox:
    'Subscribe to the message.created event of the dm-dot app. Each time the event fires, call get_pending_messages, ' +
    'answer each message here, in this conversation, then call acknowledge_messages with the eventIds of the messages you answered.',
} as const;
