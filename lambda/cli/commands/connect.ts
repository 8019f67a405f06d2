/**
 * `dm-dot connect`: its --help says where each URL comes from. With `--show-key` a one-line notice
 * on stderr says a secret follows; `--tunnel` writes the profile local-server/tunnel.ts describes
 * (docs/chatgpt.md), naming the key file, never the key.
 */
import { Option } from 'commander';
import type { LocalSettings } from '../../config/settings';
import { LOOPBACK_HOSTNAMES } from '../../core/loopback';
import { PupRoutes } from '../../core/protocol';
import { type AwsFlags, type AwsSession, orFail, withAws } from '../aws/session';
import type { Context } from '../context';
import { OperationError, UsageError } from '../errors';
import { type KeySource, type LocalStatus, localStatus } from '../local-server/local-operator';
import { reachable } from '../local-server/server';
import { configuredBase, keyFileOf, readKeyFile } from '../local-server/target';
import {
  DOT_INSTRUCTIONS,
  KEY_HEADER,
  PROFILE_NAME,
  profileText,
  referenceText,
  TUNNEL_ID,
  tunnelFiles,
  writeProfile,
  type KeyReference,
} from '../local-server/tunnel';
import { awsStackOptions, define, showKeyOption, wantsAws } from '../options';

const KEY_PLACEHOLDER = '<KEY>';

export const command = (ctx: Context) =>
  define({
    name: 'connect',
    summary: 'the connector URL for ChatGPT and the pup manifest URL',
    details:
      "The URL to paste into a ChatGPT connector, <mcp url>?key=<KEY>, and pup's manifest URL. The key is left out unless --show-key is given. " +
      'Locally ChatGPT and pup reach the server only through an HTTPS tunnel, whose host goes into DMDOT_ALLOWED_HOSTS: with one there, the URL is ' +
      "https://<that host>/mcp; without, the running server's own (else HOST/PORT). " +
      "With --aws it is the stack's McpEndpoint, and --show-key reads the key from Secrets Manager (ApiKeySecretArn). " +
      "With --tunnel TUNNEL_ID it writes a profile for OpenAI's tunnel-client instead (ChatGPT reaches this machine through it, no public address needed): " +
      'the URL of this server and the key by a file: reference to the key file, never the key; it prints where it wrote it and what to run. ' +
      'Every form prints the text to paste into the dot so that it subscribes (and, with the inbox on, reads and acknowledges its messages).',
    options: [
      showKeyOption(),
      new Option(
        '--tunnel <TUNNEL_ID>',
        "write a tunnel-client profile for OpenAI's Secure MCP Tunnel (tunnel_ and 32 hex digits) and print the steps (docs/chatgpt.md)",
      ),
      ...awsStackOptions(),
    ],
    json:
      '{"mode": "local" | "aws", "mcpUrl", "connectorUrl" (with <KEY> in place of the key unless --show-key), "keyShown": bool, ' +
      '"key": {"from": "file", "file"} | {"from": "MCP_API_KEY"} | {"from": "none", "file"} | {"from": "secretsManager", "secretArn"}, ' +
      '"pupManifestUrl", "pupConfigured": bool | null, "serverRunning": bool | null, ' +
      '"tunnelHost": the DMDOT_ALLOWED_HOSTS host the URLs use | null, "serverUrl": where the local server listens | null, ' +
      '"dotInstructions": {"subscribe", "withInbox"}}. With --tunnel: {"mode": "tunnel", "tunnelId", "profile", "replaced": bool, "runtimeKeyFile", ' +
      '"mcpUrl", "keyReference": "file:…" | "env:MCP_API_KEY", "serverRunning": bool, "commands": [..], "dotInstructions"}.',
    async run(values: { tunnel?: string; showKey?: boolean } & AwsFlags) {
      if (values.tunnel !== undefined) {
        if (values.aws) throw new UsageError('--tunnel is for the local server: ChatGPT reaches a stack on AWS at its own URL (dm-dot connect --aws)');
        if (values.showKey) throw new UsageError('--tunnel takes no --show-key: the profile names the key file, and tunnel-client reads the key from it');
        if (!TUNNEL_ID.test(values.tunnel))
          throw new UsageError("--tunnel must be a tunnel id: tunnel_ and 32 lowercase hexadecimal digits, as OpenAI's Tunnels page shows it");
        return connectTunnel(ctx, values.tunnel);
      }
      if (wantsAws(values)) return withAws(ctx, values, (session) => connectAws(ctx, session, !!values.showKey));
      return connectLocal(ctx, !!values.showKey);
    },
  });

type KeyPlace = KeySource | { from: 'secretsManager'; secretArn: string };

function whereKeyIs(key: KeyPlace): string {
  switch (key.from) {
    case 'file':
      return `the API key in ${key.file}`;
    case 'MCP_API_KEY':
      return 'the value of MCP_API_KEY the server runs with';
    case 'none':
      return `the API key npm start generates into ${key.file} on its first start`;
    case 'secretsManager':
      return `the API key in the Secrets Manager secret ${key.secretArn}`;
  }
}

/** What to paste into the dot, as the last lines of every form of `connect`. */
const DOT_LINES = [
  "Ask the dot to subscribe: paste this into the dot's conversation (a dot or a Work chat subscribes when asked; a regular chat never does):",
  `  ${DOT_INSTRUCTIONS.subscribe}`,
  'With the inbox on (DMDOT_INBOX=1; on AWS inbox=true), paste this instead:',
  `  ${DOT_INSTRUCTIONS.withInbox}`,
  'dm-dot status then shows the subscription.',
];

interface Found {
  mode: 'local' | 'aws';
  mcpUrl: string;
  /** The key itself, only with --show-key. */
  key: string | undefined;
  keyPlace: KeyPlace;
  pupConfigured: boolean | null;
  serverRunning: boolean | null;
  tunnelHost: string | null;
  serverUrl: string | null;
}

/** The document and text of `connect` (not `--tunnel`), the key in it only when asked for. */
function print(ctx: Context, found: Found, notes: string[]): void {
  const { mode, mcpUrl, key } = found;
  const doc = {
    mode,
    mcpUrl,
    connectorUrl: `${mcpUrl}?key=${key === undefined ? KEY_PLACEHOLDER : encodeURIComponent(key)}`,
    keyShown: key !== undefined,
    key: found.keyPlace,
    pupManifestUrl: mcpUrl.replace(/\/mcp\/?$/, '') + PupRoutes.manifest,
    pupConfigured: found.pupConfigured,
    serverRunning: found.serverRunning,
    tunnelHost: found.tunnelHost,
    serverUrl: found.serverUrl,
    dotInstructions: DOT_INSTRUCTIONS,
  };
  const lines = ['Connector URL (paste it into ChatGPT as the MCP server URL of a new connector, no authentication):', `  ${doc.connectorUrl}`];
  if (!doc.keyShown)
    lines.push(`  ${KEY_PLACEHOLDER} is ${whereKeyIs(doc.key)}; dm-dot connect${mode === 'aws' ? ' --aws' : ''} --show-key prints the URL with it.`);
  lines.push('pup manifest URL:', `  ${doc.pupManifestUrl}${doc.pupConfigured === false ? '   (pup is not configured: no signing secrets yet)' : ''}`);
  const text = `${[...lines, ...notes, ...DOT_LINES].join('\n')}\n`;
  if (doc.keyShown) ctx.reveal(text, doc);
  else ctx.result(doc, text);
}

/** The local status, and the server's origin as a person reaches it (0.0.0.0 and :: on 127.0.0.1). */
async function local(ctx: Context): Promise<{ settings: LocalSettings; status: LocalStatus; origin: string }> {
  const settings = ctx.settings.local();
  const status = await localStatus(ctx);
  return { settings, status, origin: status.server.running ? reachable(status.server.url).connectUrl : configuredBase(settings) };
}

async function connectLocal(ctx: Context, showKey: boolean): Promise<void> {
  const { settings, status, origin } = await local(ctx);
  const tunnelHost = tunnelHostOf(status.switches.allowedHosts);
  // A host given to this command that the running server was not started with: it refuses that Host until restarted.
  const missingHost = status.server.running ? tunnelHostOf(settings.allowedHosts.filter((host) => !status.switches.allowedHosts.includes(host))) : undefined;
  const mcpUrl = `${tunnelHost ? `https://${tunnelHost}` : origin}/mcp`;
  let key: string | undefined;
  if (showKey) {
    if (status.apiKey.from === 'MCP_API_KEY') {
      key = settings.apiKey;
      if (!key)
        throw new OperationError(
          'the server takes its key from MCP_API_KEY, which this environment does not have: the key is the value you gave it there',
          'key_from_environment',
        );
    } else {
      key = (await readKeyFile(status.stateDir)).key;
      if (!key) throw new OperationError(`there is no key yet: npm start generates one into ${status.apiKey.file}`, 'no_key');
    }
    ctx.keepSecret(key);
  }
  const notes = status.server.running ? [] : [`The server is not running: start it with npm start (it listens on ${origin}).`];
  if (missingHost) {
    notes.push(
      `The running server does not allow the host ${missingHost}: it reads DMDOT_ALLOWED_HOSTS only when it starts. ` +
        `Stop it and start it again with DMDOT_ALLOWED_HOSTS=${settings.allowedHosts.join(',')} npm start.`,
    );
  }
  notes.push(
    tunnelHost
      ? `These URLs go through the tunnel host ${tunnelHost} (from DMDOT_ALLOWED_HOSTS): the tunnel must forward https://${tunnelHost} to ${origin}, ` +
          'where the server listens.'
      : `ChatGPT and pup reach this machine only through an HTTPS tunnel: use the tunnel's URL in place of ${origin}, and add its host to DMDOT_ALLOWED_HOSTS.`,
  );
  print(
    ctx,
    {
      mode: 'local',
      mcpUrl,
      key,
      keyPlace: status.apiKey,
      pupConfigured: status.switches.pup !== false,
      serverRunning: status.server.running,
      tunnelHost: tunnelHost ?? null,
      serverUrl: origin,
    },
    notes,
  );
}

/** The first host in DMDOT_ALLOWED_HOSTS that names a tunnel: a host name, not an address of this machine. */
export function tunnelHostOf(allowedHosts: readonly string[]): string | undefined {
  return allowedHosts.find((host) => {
    const name = host.replace(/:\d+$/, '');
    return !name.startsWith('[') && !/^\d+(\.\d+){3}$/.test(name) && !LOOPBACK_HOSTNAMES.has(name);
  });
}

async function connectAws(ctx: Context, session: AwsSession, showKey: boolean): Promise<void> {
  const mcpUrl = (await session.output('McpEndpoint')).replace(/\/$/, '');
  const secretArn = await session.output('ApiKeySecretArn');
  const outputs = await session.outputs();
  let key: string | undefined;
  if (showKey) {
    const { GetSecretValueCommand } = await import('@aws-sdk/client-secrets-manager');
    const client = await session.client('secretsManager');
    const secret: { SecretString?: string } = await orFail(
      () => client.send(new GetSecretValueCommand({ SecretId: secretArn })),
      (why) => `could not read the API key from ${secretArn}: ${why}`,
      'secret_unreadable',
    );
    key = secret.SecretString?.trim();
    if (!key) throw new OperationError(`the secret ${secretArn} holds no API key`, 'secret_empty');
    ctx.keepSecret(key);
  }
  const keyPlace = { from: 'secretsManager', secretArn } as const;
  print(
    ctx,
    { mode: 'aws', mcpUrl, key, keyPlace, pupConfigured: outputs.PupSecretArn ? null : false, serverRunning: null, tunnelHost: null, serverUrl: null },
    [],
  );
}

/** `connect --tunnel`: the tunnel-client profile for this server, and the steps around it. */
async function connectTunnel(ctx: Context, tunnelId: string): Promise<void> {
  const { status, origin } = await local(ctx);
  if (/:0$/.test(origin))
    throw new OperationError('PORT=0 picks another port at every start, so no profile can name it: give the server a fixed PORT', 'no_fixed_port');
  const mcpUrl = `${origin}/mcp`;
  const key: KeyReference = status.apiKey.from === 'MCP_API_KEY' ? { env: 'MCP_API_KEY' } : { file: await keyFileOf(status.stateDir) };
  const files = tunnelFiles(ctx.io.env);
  const { replaced } = await writeProfile(files.profile, profileText({ tunnelId, mcpUrl, key, runtimeKeyFile: files.runtimeKey }));
  const commands = [`tunnel-client doctor --profile-file ${files.profile}`, `tunnel-client run --profile-file ${files.profile}`];
  const doc = {
    mode: 'tunnel' as const,
    tunnelId,
    profile: files.profile,
    replaced,
    runtimeKeyFile: files.runtimeKey,
    mcpUrl,
    keyReference: referenceText(key),
    serverRunning: status.server.running,
    commands,
    dotInstructions: DOT_INSTRUCTIONS,
  };
  ctx.result(doc, () =>
    [
      `${replaced ? 'Replaced' : 'Wrote'} the tunnel-client profile ${files.profile} (profile name ${PROFILE_NAME}):`,
      `  tunnel ${tunnelId} -> ${mcpUrl}, with the API key as ${KEY_HEADER} read from ` +
        `${'file' in key ? key.file : "MCP_API_KEY in tunnel-client's environment"} (never written into the profile).`,
      ...(status.server.running ? [] : [`The server is not running: start it with npm start (the profile expects it on ${origin}).`]),
      'Next:',
      `  1. Put OpenAI's runtime API key (Tunnels: Read + Use) into ${files.runtimeKey}, one line, mode 0600.`,
      `  2. Check: ${commands[0]}`,
      `  3. Run: ${commands[1]}   (or keep both running: dm-dot service install)`,
      `  4. In ChatGPT: Settings > Connectors > Create, name it dm-dot, Connection: Tunnel, tunnel ${tunnelId}, no authentication.`,
      ...DOT_LINES,
      '',
    ].join('\n'),
  );
}
