/**
 * `dm-dot subscription [show|clear]`: the live subscription (id, callback host, created,
 * refreshed, expires, last delivery, last error) and, with `clear`, its removal, the way out of
 * the single-subscriber lock-out: a dot removed and added again in ChatGPT subscribes with a new
 * callback URL and is refused with -32000 until the old subscription expires (up to 7 days).
 *
 * Deliberately not here: the secret or the full callback URL (never shown: the host is enough to
 * recognise a dot, and the URL's path and query may carry the dot's own tokens), and clearing
 * without a confirmation unless `--yes` says so.
 */
import type { SubscriptionView } from '../local/admin';
import { AWS_OPTIONS, OperationError, parse, shortTime, table, UsageError, wantsAws, withProgress, type CliIo, type Command } from './common';
import { awsOperator, localOperator } from './operator';

const HELP = `Usage: dm-dot subscription [show|clear] [--yes] [--json] [--aws ...]

show (default)  the live subscription: id, callback host, created, refreshed,
                expires, last delivery, last error (never the secret)
clear           end it now, so that another callback (a re-added ChatGPT dot)
                can subscribe at once; asks for confirmation

Options:
  --yes           clear without asking
  --json          print JSON
  --aws           the AWS stack's table instead of the local server
  --stack NAME    the stack whose outputs name the table (default DmDot)
  --region R      AWS region (default: AWS_REGION)
  --table NAME    the table name (or DMDOT_TABLE), instead of the stack outputs
  -h, --help      this help
`;

export const subscriptionCommand: Command = {
  name: 'subscription',
  summary: 'show or clear the live subscription (local, or --aws)',
  async run(argv: string[], io: CliIo): Promise<number> {
    const { values, positionals } = parse(argv, { yes: { type: 'boolean', short: 'y' }, ...AWS_OPTIONS }, true);
    if (values.help) {
      io.out(HELP);
      return 0;
    }
    if (positionals.length > 1) throw new UsageError(`expected one action (show or clear), got: ${positionals.join(' ')}`);
    const action = positionals[0] ?? 'show';
    if (action !== 'show' && action !== 'clear') throw new UsageError(`unknown action "${action}": use show or clear`);
    if (action === 'show' && values.yes) throw new UsageError('--yes only goes with clear');
    const operator = wantsAws(values) ? await awsOperator(values, io) : await localOperator(io);
    const current = await withProgress(io, `reading the subscription from ${operator.where}`, operator.showSubscription());

    if (action === 'show') {
      if (values.json) io.out(`${JSON.stringify({ subscription: current }, null, 2)}\n`);
      else if (!current) io.out(`No live subscription (${operator.where}).\n`);
      else io.out(describe(current));
      return 0;
    }

    if (!current) {
      if (values.json) io.out(`${JSON.stringify({ cleared: false, id: null }, null, 2)}\n`);
      else io.out(`No live subscription to clear (${operator.where}).\n`);
      return 0;
    }
    if (!values.yes) {
      if (!io.ask) throw new UsageError('clear asks for confirmation on a terminal; pass --yes to clear without asking');
      if (!values.json) io.err(describe(current));
      const answer = await io.ask(`End subscription ${current.id} (callback host ${current.callbackHost})? Its queued deliveries are dropped. [y/N] `);
      if (!/^y(es)?$/i.test((answer ?? '').trim())) {
        io.err('dm-dot: not cleared\n');
        return 1;
      }
    }
    const result = await withProgress(io, 'clearing the subscription', operator.clearSubscription(current.id));
    if (values.json) io.out(`${JSON.stringify(result, null, 2)}\n`);
    if (!result.cleared) {
      // Between the read and the conditional delete, it expired or another callback took over.
      throw new OperationError('the subscription changed while clearing (expired or replaced); run dm-dot subscription show');
    }
    if (!values.json) io.out(`Cleared subscription ${result.id}. A new dot can subscribe now.\n`);
    return 0;
  },
};

function describe(s: SubscriptionView): string {
  return table(
    ['FIELD', 'VALUE'],
    [
      ['id', s.id],
      ['callback host', s.callbackHost],
      ['created', shortTime(s.createdAt)],
      ['refreshed', shortTime(s.refreshedAt)],
      ['expires', shortTime(s.expiresAt)],
      ['last delivery', shortTime(s.lastDeliveryAt)],
      ['last error', s.lastError ?? '-'],
    ],
  );
}
