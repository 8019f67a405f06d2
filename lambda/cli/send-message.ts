/**
 * One message to the dot through `POST /v1/messages` (docs/contract/delivery.md), and what its
 * answer means: delivered (200), queued (202), kept (202 with the inbox on and no dot subscribed),
 * failed (502, with its category) or not accepted (no event, or none that will be delivered).
 *
 * Each message carries an Idempotency-Key of its own (docs/contract/http.md): an answer lost on the
 * way back, or a `409 in_progress`, is asked for again with the same key (SEND_TRIES).
 *
 * Deliberately not here: any validation of the message beyond "there is one" (the server's rules
 * are the only rules).
 */
import { randomUUID } from 'node:crypto';
import { Budgets } from '../core/budgets';
import { IDEMPOTENCY_KEY_HEADER, Routes } from '../core/protocol';
import type { Context } from './context';
import { httpRequest, jsonOf, TimedOut, Unreachable, type HttpAnswer } from './http';
import type { Target } from './local-server/target';
import { KEY_REFUSED } from './mcp/rpc';

export interface SendOutcome {
  status: 'delivered' | 'queued' | 'kept' | 'failed' | 'not_accepted';
  eventId: string | null;
  /** The failure category (failed) or the server's error code (not accepted); null otherwise. */
  reason: string | null;
  httpStatus: number | null;
  /** A sentence for a person. */
  message: string;
}

interface Answer {
  eventId?: string;
  status?: string;
  error?: { code?: string; message?: string; eventId?: string; reason?: string };
}

/** Tries of one message: the first, and up to two more when its answer was lost or still in progress. */
export const SEND_TRIES = 3;
/** The longest a `409 in_progress` is waited out before the next try (the server's request budget). */
const IN_PROGRESS_WAIT_MAX_MS = 5_000;

export async function sendMessage(ctx: Context, target: Target, message: string, options: { wait?: (ms: number) => Promise<void> } = {}): Promise<SendOutcome> {
  const wait = options.wait ?? ((ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms)));
  const key = `dmdot-cli-${randomUUID()}`;
  const origin = new URL(target.base).origin;
  let answer: HttpAnswer | undefined;
  let lost: unknown;
  for (let attempt = 1; attempt <= SEND_TRIES; attempt++) {
    try {
      answer = await httpRequest(`${target.base}${Routes.messages}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${target.key}`, 'content-type': 'application/json', accept: 'application/json', [IDEMPOTENCY_KEY_HEADER]: key },
        body: JSON.stringify({ message }),
        timeoutMs: Budgets.cliAnsweredCallMs,
      });
    } catch (error) {
      // Nobody listens: nothing was sent, and asking again would not change that.
      if (error instanceof Unreachable)
        return notAccepted('unreachable', null, `no server at ${origin} (${error.code})${target.local ? ': start it with npm start, or pass --url' : ''}`);
      // The answer was lost: ask again with the same key, which makes no second event.
      answer = undefined;
      lost = error;
      continue;
    }
    if (answer.status !== 409 || jsonOf<Answer>(answer.text)?.error?.code !== 'in_progress' || attempt === SEND_TRIES) break;
    const seconds = Number(answer.headers['retry-after']);
    await wait(Math.min(Number.isFinite(seconds) && seconds > 0 ? seconds * 1000 : 1000, IN_PROGRESS_WAIT_MAX_MS));
  }
  if (!answer) {
    const why =
      lost instanceof TimedOut
        ? `${origin} did not answer in time, ${SEND_TRIES} times`
        : `the connection to ${origin} broke off ${SEND_TRIES} times (${(lost as NodeJS.ErrnoException).code ?? (lost as Error).message})`;
    return notAccepted('unreachable', null, `${why}: the message may or may not have been accepted (dm-dot events)`);
  }
  const body = jsonOf<Answer>(answer.text) ?? {};
  const eventId = body.eventId ?? body.error?.eventId ?? null;
  const httpStatus = answer.status;
  const outcome = (status: SendOutcome['status'], reason: string | null, message: string) => ({ status, eventId, reason, httpStatus, message });
  switch (answer.status) {
    case 200:
      return outcome('delivered', null, 'the dot accepted it');
    case 202:
      if (body.status === 'kept') return outcome('kept', null, 'no dot is subscribed now: it waits in the inbox until the dot reads it');
      return outcome('queued', null, `not acknowledged yet; retries continue (dm-dot events show ${eventId})`);
    case 502: {
      const reason = body.error?.reason ?? 'rejected';
      return outcome('failed', reason, `the delivery failed for good (${reason}); it is not retried (dm-dot events show ${eventId})`);
    }
    case 401:
      return notAccepted('unauthorized', 401, KEY_REFUSED);
    case 409:
      if (body.error?.code === 'in_progress')
        return notAccepted('in_progress', 409, 'the server was still answering this message after every try: see dm-dot events before sending it again');
      return notAccepted(body.error?.code ?? 'no_subscription', 409, 'no dot is subscribed: run dm-dot dot (locally), or connect the dot in ChatGPT first');
    default: {
      const detail = body.error?.message ?? (answer.text.slice(0, 200).trim() || 'no detail');
      return outcome('not_accepted', body.error?.code ?? `http_${answer.status}`, ctx.scrub(`the server answered ${answer.status}: ${detail}`));
    }
  }
}

function notAccepted(reason: string, httpStatus: number | null, message: string): SendOutcome {
  return { status: 'not_accepted', eventId: null, reason, httpStatus, message };
}

/** `delivered evt_…: the dot accepted it`, as send and dot print it. */
export function outcomeLine(outcome: SendOutcome): string {
  if (outcome.status === 'not_accepted') return `not accepted: ${outcome.message}`;
  return `${outcome.status} ${outcome.eventId ?? '(no event id)'}: ${outcome.message}`;
}
