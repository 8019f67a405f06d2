/**
 * `dm-dot dot`: a stand-in ChatGPT dot, to see messages arrive without ChatGPT: a webhook receiver
 * on 127.0.0.1 (stand-in-dot/receiver.ts) and its subscription (stand-in-dot/subscription.ts), so
 * that one terminal runs the server and a second one the whole walkthrough. A subscription a
 * refresh or a check created after the old one ended is removed at once.
 *
 * Deliberately not here: a public callback (the server must run with
 * DMDOT_ALLOW_LOOPBACK_CALLBACKS=1; the AWS stack never does), and printing the key or a secret.
 */
import { Option } from 'commander';
import { Budgets } from '../../core/budgets';
import { Limits } from '../../core/protocol';
import type { Context } from '../context';
import { type Target, target as findTarget } from '../local-server/target';
import { define, integerValue, targetOptions } from '../options';
import { relative, shortTime } from '../output';
import { outcomeLine, type SendOutcome, sendMessage } from '../send-message';
import { Receiver, type ReceiverOptions } from '../stand-in-dot/receiver';
import { DotSubscription, type EndReason, subscribeRefusal } from '../stand-in-dot/subscription';

const DEFAULT_PORT = 8788;

type DotOptions = Pick<ReceiverOptions, 'port' | 'status' | 'delayMs'> & { ttlMs: number | undefined; checkMs: number };

export const command = (ctx: Context) =>
  define({
    name: 'dot',
    summary: 'a stand-in ChatGPT dot: receive, verify and print messages; type lines to send them',
    details:
      'Listens on http://127.0.0.1:PORT/dot, subscribes to message.created with a fresh signing secret, verifies every delivery, prints each ' +
      'message with its event id and latency, and sends each line typed on its standard input as a message. ' +
      'The server must allow loopback callbacks: DMDOT_ALLOW_LOOPBACK_CALLBACKS=1 npm start. ' +
      'It refreshes the subscription before it expires and unsubscribes on Ctrl-C (exit 0); the server then drops the queued events of that ' +
      'subscription. It stops with exit 1 and says why when its subscription ended: it answered 410, another callback took it, the key was ' +
      'rotated, or the subscription had been cleared; ' +
      `it checks its subscription every ${Budgets.dotCheckMs / 1000} s (--check), so none of these goes unnoticed for longer. ` +
      '"attempt N" counts the POSTs of an event in this round of the retry schedule, as the server log and dm-dot events show count them ' +
      '(docs/operating.md says how). ' +
      'Messages go to stdout, everything else to stderr.',
    options: [
      new Option('--port <N>', `receiver port on 127.0.0.1 (default ${DEFAULT_PORT}; 0 picks a free one)`),
      new Option(
        '--status <N>',
        'answer deliveries with HTTP status N (default 200): 500 to watch retries, 400 for a permanent failure, 410 to end the subscription',
      ),
      new Option('--delay <MS>', "wait MS milliseconds before answering (0..60000); past the server's 5 s deadline the server hangs up first and retries"),
      new Option('--ttl <MS>', `ask for this subscription lifetime (${Limits.ttlMinMs}..${Limits.ttlMaxMs}; default: the server's, 7 days)`),
      new Option('--check <MS>', `check that the subscription still stands every MS milliseconds (1000..3600000; default ${Budgets.dotCheckMs})`),
      ...targetOptions(),
    ],
    json:
      'one document when it stops: {"subscription": {"id", "callbackUrl", "expiresAt", "refreshAt"}, "ended": {"reason": "interrupted" | "gone" | ' +
      '"ended_before_refresh" | "conflict" | "key_refused" | "expired", "message"}, ' +
      '"unsubscribed": bool, "received": [{"eventId", "message", "latencyMs", "attempt", "answered": N | null, "hungUp": bool}], "sent": [send\'s ' +
      'document, ...]}; the live lines go to stderr.',
    async run(values: { port?: string; status?: string; delay?: string; ttl?: string; check?: string; url?: string; key?: string }) {
      const options: DotOptions = {
        port: integerValue(values.port, 'port', 0, 65_535) ?? DEFAULT_PORT,
        status: integerValue(values.status, 'status', 200, 599) ?? 200,
        delayMs: integerValue(values.delay, 'delay', 0, 60_000) ?? 0,
        ttlMs: integerValue(values.ttl, 'ttl', Limits.ttlMinMs, Limits.ttlMaxMs),
        checkMs: integerValue(values.check, 'check', 1000, 3_600_000) ?? Budgets.dotCheckMs,
      };
      ctx.exitCode = await runDot(ctx, await findTarget(ctx, values), options);
    },
  });

/** Runs the dot until Ctrl-C or the end of its subscription; resolves with the exit code. */
async function runDot(ctx: Context, target: Target, options: DotOptions): Promise<number> {
  const say = (line: string) => ctx.note(line);
  let finish!: (end: { reason: EndReason; message: string }) => void;
  const ended = new Promise<{ reason: EndReason; message: string }>((done) => (finish = done));
  let stopping = false;
  const end = (reason: EndReason, message: string) => {
    stopping = true;
    finish({ reason, message });
  };
  const receiver = new Receiver({
    ...options,
    say,
    print: (line) => (ctx.json ? say(`received ${line}`) : ctx.print(`${line}\n`)),
    gone: (id) =>
      end(
        'gone',
        `the subscription ended: this dot answered 410 Gone to ${id}, and the server ends the subscription on a 410. This dot stops; run dm-dot ` +
          'dot again to subscribe anew',
      ),
  });
  const subscription = new DotSubscription(ctx, target, receiver, options, end);
  await receiver.listen();
  try {
    const granted = await ctx.progress('subscribing (the server challenges this receiver first)', subscription.start());
    const tookOver = granted.deliveryStatus ? ' (it took over the live subscription an earlier dm-dot dot left on this URL)' : '';
    say(`subscribed ${granted.id} for ${receiver.callbackUrl}${tookOver}`);
    say(
      `the subscription expires at ${shortTime(granted.refreshBefore)} (${relative(granted.refreshBefore)}) unless refreshed; this dot refreshes ` +
        `it at ${shortTime(subscription.refreshAt)}`,
    );
    const every = options.checkMs % 1000 === 0 ? `${options.checkMs / 1000} s` : `${options.checkMs} ms`;
    say(`it checks the subscription every ${every}: a subscription clear, a key rotation or another dot taking over is noticed within that`);
    say('waiting for messages; type a line to send it as a message; Ctrl-C unsubscribes and stops');
  } catch (error) {
    subscription.stop();
    await receiver.close();
    throw subscribeRefusal(error, target);
  }
  const signal = ctx.io.signal;
  const onAbort = () => end('interrupted', 'stopped (Ctrl-C)');
  if (signal?.aborted) onAbort();
  signal?.addEventListener('abort', onAbort, { once: true });
  const sent: SendOutcome[] = [];
  const sending = pumpStdin(ctx, target, sent, () => stopping);

  const last = await ended;
  receiver.stop();
  subscription.stop();
  // Its "sent:" line comes before the dot's last words, not after it stopped listening.
  await sending.current?.catch(() => undefined);
  signal?.removeEventListener('abort', onAbort);
  let unsubscribed = false;
  if (last.reason === 'interrupted' || last.reason === 'ended_before_refresh') {
    try {
      await subscription.unsubscribe();
      unsubscribed = true;
    } catch (error) {
      say(
        `could not unsubscribe (${ctx.scrub((error as Error).message)}); the subscription expires by itself at ` +
          `${shortTime(subscription.expiresAt)}, or end it with dm-dot subscription clear`,
      );
    }
  }
  if (last.reason === 'interrupted') {
    // Not at once: a queued event ends `dropped` when its next attempt comes due (at most the longest retry delay).
    if (unsubscribed) say(`unsubscribed ${subscription.id}; events still queued for it end dropped at their next attempt, not delivered`);
  } else {
    say(last.message);
    if (last.reason === 'ended_before_refresh' && unsubscribed) say(`removed the subscription that refresh created (${subscription.id})`);
  }
  await receiver.close();
  if (ctx.json) {
    ctx.printJson({
      subscription: {
        id: subscription.id,
        callbackUrl: receiver.callbackUrl,
        expiresAt: new Date(subscription.expiresAt).toISOString(),
        refreshAt: new Date(subscription.refreshAt).toISOString(),
      },
      ended: last,
      unsubscribed,
      received: receiver.received,
      sent,
    });
  }
  return last.reason === 'interrupted' && unsubscribed ? 0 : 1;
}

/**
 * Sends each line typed on standard input as a message, until its end (the dot keeps receiving
 * until Ctrl-C) or the dot stops. `current` is the send under way: the dot says how it ended before
 * it stops (a 410 to that very line ends the dot first).
 */
function pumpStdin(ctx: Context, target: Target, sent: SendOutcome[], stopping: () => boolean): { current?: Promise<unknown> } {
  const state: { current?: Promise<unknown> } = {};
  const lines = ctx.io.stdinLines?.();
  if (!lines) return state;
  void (async () => {
    try {
      for await (const line of lines) {
        if (stopping()) break;
        const text = line.trim();
        if (!text) continue;
        const sending = sendMessage(ctx, target, text);
        state.current = sending;
        const outcome = await sending;
        sent.push(outcome);
        ctx.note(`sent: ${outcomeLine(outcome)}`);
      }
    } catch (error) {
      if (!stopping()) ctx.note(`stopped reading standard input (${ctx.scrub((error as Error).message)})`);
    }
  })();
  return state;
}
