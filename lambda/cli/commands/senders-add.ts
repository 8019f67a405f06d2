/**
 * `dm-dot senders add NAME [--rate N]`: connector, pup and dm-dot are reserved: the log names the
 * connector key, pup and dm-dot itself so.
 */
import { Argument, Option } from 'commander';
import { newSenderNameProblem, senderNameProblem } from '../../core/access';
import { AccessLimits } from '../../core/protocol';
import { withSenders } from '../backings';
import type { AwsFlags } from '../aws/session';
import type { Context } from '../context';
import { OperationError, UsageError } from '../errors';
import { awsTableOptions, define, integerValue } from '../options';

export const senderNameArgument = () =>
  new Argument('<NAME>', 'the sender: 1 to 32 lower-case letters, digits and dashes (it is part of the key and of every event it sends)');

export function senderNameOf(word: string | undefined): string {
  const name = word ?? '';
  const problem = senderNameProblem(name);
  if (problem) throw new UsageError(`${problem}, got "${name.slice(0, 80)}"`);
  return name;
}

export const command = (ctx: Context) =>
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
      await withSenders(ctx, values, async ({ where, senders }) => {
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
