/**
 * `dm-dot key rotate` (`key` is a group without an action of its own): locally through the
 * running server (POST /admin/key) or, with no server, by writing a new key file. With `--aws` the
 * MCP function's execution environments are recycled by UpdateFunctionConfiguration with a
 * changed description on McpFunctionName (each reads the key once, at cold start).
 *
 * `--overlap DURATION` keeps the previous key working that long, recorded before the new key is in
 * force; without it the old key stops at once (docs/contract/http.md, HTTP-KEY-10 and HTTP-KEY-11).
 */
import { randomInt } from 'node:crypto';
import { Command, Option } from 'commander';
import { AccessLimits } from '../../core/protocol';
import { parseDuration, recordRotation } from '../../operator/access';
import { type AwsFlags, type AwsSession, orFail } from '../aws/session';
import { onBacking, storeOf } from '../backings';
import type { Context } from '../context';
import { OperationError, UsageError } from '../errors';
import type { LocalOperator } from '../local-server/local-operator';
import { readKeyFile } from '../local-server/target';
import { awsStackOptions, define, showKeyOption, yesOption } from '../options';

const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';

/** The stack generates 48 letters and digits (lib/constructs/secrets.ts); so does a rotation. */
const newAwsApiKey = () => Array.from({ length: 48 }, () => ALPHABET[randomInt(ALPHABET.length)]).join('');

/** What to do after a rotation, the same sentences locally and on AWS. `until`: the end of the overlap (ISO), or null. */
export function nextSteps(mode: 'local' | 'aws', immediate: boolean, until: string | null = null): string[] {
  const connect = mode === 'aws' ? 'dm-dot connect --aws' : 'dm-dot connect';
  if (until !== null) {
    return [
      `The old key keeps working until ${until} (the overlap), then it stops.`,
      `Update the dot's connector URL in ChatGPT before then (${connect} prints the new one; --show-key puts the key in), and anything that sends ` +
        'with the connector key (POST /v1/messages, dm-dot send --key).',
      "The subscription id does not change (it is the deployment's, not the key's): the dot keeps its subscription and keeps receiving.",
    ];
  }
  return [
    immediate ? 'The old key stopped working at once.' : 'The old key stops working when the server next starts.',
    "The dot's connector URL in ChatGPT holds the old key: its next MCP call (its subscription refresh) gets 401. Reconnect it with the new URL " +
      `(${connect} prints it; --show-key puts the key in).`,
    "The subscription id does not change (it is the deployment's, not the key's); anything that sends with the old key (POST /v1/messages, dm-dot " +
      'send --key) needs the new one. --overlap DURATION keeps the old key working meanwhile.',
  ];
}

/** `--overlap` in milliseconds: 0 when absent. */
export function overlapOf(value: string | undefined): number {
  if (value === undefined) return 0;
  const ms = parseDuration(value);
  if (ms === undefined || ms > AccessLimits.maxOverlapMs)
    throw new UsageError(`--overlap must be a duration such as 1h, 30m or 90s, at most 7d, got "${value.slice(0, 40)}"`);
  return ms;
}

const rotate = (ctx: Context) =>
  define({
    name: 'rotate',
    summary: 'replace the API key and say what to update',
    details:
      'A new random key; the old one stops working, and the dot must be reconnected with the new connector URL. ' +
      'Locally through the running server (it swaps the new key in at once) or, with no server running, by writing a new <state dir>/api-key; ' +
      'refused when the key comes from MCP_API_KEY. ' +
      "With --aws: a new value in the stack's API key secret, then the MCP function's execution environments are recycled so that they read it. " +
      'Asks for confirmation on a terminal; without one, pass --yes.',
    options: [
      new Option('--overlap <DURATION>', 'keep the previous key working this long (1h, 30m, 90s; at most 7d); default: it stops at once'),
      yesOption(),
      showKeyOption(),
      ...awsStackOptions(),
    ],
    json:
      'locally {"rotated": true, "mode": "local", "via": "server" | "database", "keyFile", "immediate": bool (the old key stopped working at ' +
      'once), "overlapUntil": ISO | null, "key"?: only with --show-key, "next": [sentence, ...]}; ' +
      'with --aws {"rotated": true, "mode": "aws", "secretArn", "functionName", "recycled": true, "overlapUntil": ISO | null, "key"?: only with ' +
      '--show-key, "next": [...]}.',
    async run(values: Flags) {
      const overlapMs = overlapOf(values.overlap);
      await onBacking(
        ctx,
        values,
        (op) => rotateLocal(ctx, op, values, overlapMs),
        (session) => rotateAws(ctx, session, values, overlapMs),
      );
    },
  });

type Flags = { overlap?: string; yes?: boolean; showKey?: boolean } & AwsFlags;

function confirmRotation(ctx: Context, values: Flags, of: string): Promise<void> {
  const question = `Replace the API key of ${of}? The dot must then be reconnected with the new connector URL.`;
  return ctx.confirm({ yes: values.yes, what: 'rotated', question });
}

/** The result; `key` (the new key) only with --show-key. */
function printRotated(ctx: Context, doc: object, text: string, key: string | undefined): void {
  if (key === undefined) ctx.result(doc, text);
  else ctx.reveal(`${text}New key: ${key}\n`, { ...doc, key });
}

async function rotateLocal(ctx: Context, op: LocalOperator, values: Flags, overlapMs: number): Promise<void> {
  await confirmRotation(ctx, values, op.where);
  const started = Date.now();
  const rotated = await ctx.progress(`rotating the key through ${op.where}`, op.rotateKey(overlapMs));
  const { keyFile } = rotated;
  // The end the store recorded (the old key is refused after it); a server of an older version
  // does not say, and the end is at least this late.
  const overlapUntil = rotated.overlapUntil !== undefined ? rotated.overlapUntil : overlapMs > 0 ? new Date(started + overlapMs).toISOString() : null;
  // Whether the old key stopped working at once: not with an overlap, nor before the server's next start.
  const immediate = op.via === 'server' && overlapUntil === null;
  const next = nextSteps('local', immediate, overlapUntil);
  let key: string | undefined;
  if (values.showKey) {
    key = (await readKeyFile(ctx.settings.local().stateDir)).key;
    if (!key) throw new OperationError(`rotated, but ${keyFile} cannot be read back`, 'key_unreadable');
    ctx.keepSecret(key);
  }
  const doc = { rotated: true, mode: 'local', via: op.via, keyFile, immediate, overlapUntil, next };
  printRotated(ctx, doc, `Rotated the API key: the new key is in ${keyFile}.\n${next.join('\n')}\n`, key);
}

async function rotateAws(ctx: Context, session: AwsSession, values: Flags, overlapMs: number): Promise<void> {
  const secretArn = await session.output('ApiKeySecretArn');
  const functionName = await session.output('McpFunctionName');
  await confirmRotation(ctx, values, `stack ${session.stack}`);
  const key = newAwsApiKey();
  ctx.keepSecret(key);
  const [{ GetSecretValueCommand, PutSecretValueCommand }, { GetFunctionConfigurationCommand, UpdateFunctionConfigurationCommand }] = await Promise.all([
    import('@aws-sdk/client-secrets-manager'),
    import('@aws-sdk/client-lambda'),
  ]);
  const secrets = await session.client('secretsManager');
  // The key being replaced: its hash keeps the deployment's principal (and, with an overlap, the
  // old key working), recorded in the DEPLOYMENT item before the new key is in force.
  const { parseApiKeySecret } = await import('../../adapters/secret-loader');
  const previous = await orFail(
    async () => parseApiKeySecret(await secrets.send(new GetSecretValueCommand({ SecretId: secretArn }))),
    (why) => `could not read the current key from ${secretArn}: ${why}; nothing was changed`,
    'secret_unreadable',
  );
  ctx.keepSecret(previous);
  const started = Date.now();
  const { previousKeyUntil: overlapUntil } = await orFail(
    async () => ctx.progress('recording the rotation in the table', recordRotation((await storeOf(session)).access, previous, key, overlapMs, started)),
    (why) => `could not record the rotation in the table: ${why}; nothing was changed, the old key still works`,
    'table_unwritable',
  );
  await orFail(
    () => ctx.progress('writing the new key into Secrets Manager', secrets.send(new PutSecretValueCommand({ SecretId: secretArn, SecretString: key }))),
    (why) => `could not put the new key into ${secretArn}: ${why}; the old key still works`,
    'secret_unwritable',
  );
  const lambda = await session.client('lambda');
  await orFail(
    async () => {
      const current: { Description?: string } = await lambda.send(new GetFunctionConfigurationCommand({ FunctionName: functionName }));
      const base = (current.Description ?? '').replace(/ \(API key rotated [^)]*\)$/, '');
      const description = `${base} (API key rotated ${new Date().toISOString()})`.trim().slice(-256);
      await ctx.progress(
        'recycling the MCP function',
        lambda.send(new UpdateFunctionConfigurationCommand({ FunctionName: functionName, Description: description })),
      );
    },
    (why) =>
      `the new key is in ${secretArn}, but the MCP function ${functionName} could not be recycled (${why}): its warm ` +
      'environments accept the old key until they are replaced. ' +
      `To finish without another new key, change any setting of ${functionName} (for example its description in the Lambda console); running key ` +
      'rotate again would write yet another key',
    'recycle_failed',
  );
  const next = [
    `The MCP function ${functionName} is recycling its execution environments: within a few seconds every one reads the new key` +
      (overlapUntil === null ? ', and the old key stops working.' : `; the old key keeps working until ${overlapUntil}.`),
    ...nextSteps('aws', true, overlapUntil).slice(1),
  ];
  const doc = { rotated: true, mode: 'aws', secretArn, functionName, recycled: true, overlapUntil, next };
  printRotated(ctx, doc, `Rotated the API key in ${secretArn}.\n${next.join('\n')}\n`, values.showKey ? key : undefined);
}

export const command = (ctx: Context) =>
  new Command('key')
    .description('The connector API key: key rotate [--overlap DURATION] makes a new one (the previous one keeps working that long).')
    .addCommand(rotate(ctx));
