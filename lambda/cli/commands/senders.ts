/** `dm-dot senders [add|list|revoke]`: alone it lists them; the rules and their reasons are docs/operating.md's, "`senders`: send-only keys". */
import { Argument, Option } from 'commander';
import { newSenderNameProblem, senderNameProblem } from '../../core/access';
import { AccessLimits } from '../../core/protocol';
import { withOperator } from '../backings';
import type { AwsFlags } from '../aws/session';
import type { Context } from '../context';
import { OperationError, UsageError } from '../errors';
import { awsTableOptions, define, integerValue, yesOption } from '../options';
import { shortTime, table } from '../output';

const senderNameArgument = () =>
  new Argument('<NAME>', 'the sender: 1 to 32 lower-case letters, digits and dashes (it is part of the key and of every event it sends)');

function senderNameOf(word: string | undefined): string {
  const name = word ?? '';
  const problem = senderNameProblem(name);
  if (problem) throw new UsageError(`${problem}, got "${name.slice(0, 80)}"`);
  return name;
}

const add = (ctx: Context) =>
  define({
    name: 'add',
    summary: 'a new send-only key, printed once',
    details:
      'The key may list the tools, call send_to_dot and POST /v1/messages; subscribing, unsubscribing and every operator action are refused ' +
      '(Forbidden). Only its hash is stored: copy it now, it is never shown again (revoke and add another if it is lost). ' +
      'Every event it sends names it in the delivery log. With --rate N, past N messages in a minute it gets HTTP 429 with Retry-After ' +
      '(on /mcp a send_to_dot tool error carrying retryAfterMs). ' +
      'connector, pup and dm-dot are reserved names.',
    argument: senderNameArgument(),
    options: [new Option('--rate <N>', `at most N messages per minute (1..${AccessLimits.maxSenderRate}); default: no limit`), ...awsTableOptions()],
    json: '{"name", "key", "rate": N | null} (the key is a secret: a notice on stderr says so first).',
    async run(values: { rate?: string } & AwsFlags, word) {
      const name = senderNameOf(word);
      // A reserved name is refused here, as a usage error, before anything is asked of a server.
      const reserved = newSenderNameProblem(name);
      if (reserved) throw new UsageError(reserved);
      const rate = integerValue(values.rate, 'rate', 1, AccessLimits.maxSenderRate) ?? null;
      await withOperator(ctx, values, async ({ where, senders }) => {
        const result = await ctx.progress(`adding sender ${name} in ${where}`, senders.add(name, rate));
        if (!result.added) throw new OperationError(result.message, result.why);
        ctx.keepSecret(result.key);
        ctx.reveal(
          `Added sender ${name}${rate === null ? '' : ` (at most ${rate} messages per minute)`}. Its key, shown this once:\n${result.key}\n` +
            'It sends with Authorization: Bearer KEY (or ?key=KEY) to /mcp (send_to_dot) or POST /v1/messages; dm-dot senders revoke ' +
            name +
            ' stops it.\n',
          { name, key: result.key, rate },
          'this prints the new sender key',
        );
      });
    },
  });

/** `senders list`, and `senders` alone (the same command under the group's name). */
const list = (ctx: Context, name = 'list') =>
  define({
    name,
    summary: 'the sender keys: names, rates, creation, last use, revoked',
    details: 'Never a key: only its hash is stored. Last use is kept to the minute (a send rewrites it at most once a minute).',
    options: awsTableOptions(),
    json: '{"senders": [{"name", "rate": N | null, "createdAt", "lastUsedAt": ISO | null, "revokedAt": ISO | null, "revoked": bool}, ...]}, by name.',
    run: (values) =>
      withOperator(ctx, values, async ({ where, senders }) => {
        const list = await ctx.progress(`reading the senders from ${where}`, senders.list());
        ctx.result({ senders: list }, () =>
          list.length === 0
            ? `No senders (${where}); dm-dot senders add NAME makes one.\n`
            : table(
                ['NAME', 'RATE', 'CREATED', 'LAST USED', 'REVOKED'],
                list.map((s) => [
                  s.name,
                  s.rate === null ? '-' : `${s.rate}/min`,
                  shortTime(s.createdAt),
                  shortTime(s.lastUsedAt),
                  s.revokedAt ? shortTime(s.revokedAt) : 'no',
                ]),
              ),
        );
      }),
  });

const revoke = (ctx: Context) =>
  define({
    name: 'revoke',
    summary: "stop a sender's key at once",
    details:
      'Its next request gets 401. Events it already sent are not touched. The name stays taken (and listed as revoked). ' +
      'Asks for confirmation on a terminal; without one, pass --yes. Exit 1 when there is no such sender or it is revoked already.',
    argument: senderNameArgument(),
    options: [yesOption(), ...awsTableOptions()],
    json: '{"revoked": true | false, "name", "why"?: "not_found" | "already_revoked"} (revoked false: exit 1).',
    async run(values: { yes?: boolean } & AwsFlags, word) {
      const name = senderNameOf(word);
      await withOperator(ctx, values, async ({ where, senders }) => {
        await ctx.confirm({ yes: values.yes, what: 'revoked', question: `Revoke sender ${name} in ${where}? Its key stops working at once.` });
        const result = await ctx.progress(`revoking sender ${name}`, senders.revoke(name));
        if (!result.revoked) {
          const why = result.why === 'already_revoked' ? `sender ${name} is revoked already` : `no sender named ${name} (${where})`;
          ctx.refuse(result, why, result.why ?? 'not_found');
        }
        ctx.result(result, `Revoked sender ${name}: its key gets 401 from now on.\n`);
      });
    },
  });

export const command = (ctx: Context) => list(ctx, 'senders').addCommand(add(ctx)).addCommand(list(ctx)).addCommand(revoke(ctx));
