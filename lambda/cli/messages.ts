/**
 * One message to the dot through `POST /v1/messages` (docs/contract/delivery.md) with the API key, and what its
 * answer means: delivered (200), queued (202: not acknowledged yet, retries continue), failed
 * (502, with its category: the dot refused it for good) or not accepted (400, 401, 409, 503, …:
 * no event, or none that will be delivered). `send` prints one; `dot` sends each line typed.
 *
 * Deliberately not here: retrying the POST (a second POST would be a second event) and any
 * validation of the message beyond "there is one" (the server's rules are the only rules).
 */
import { Budgets } from '../core/budgets';
import { Routes } from '../core/protocol';
import type { Context } from './context';
import { httpRequest, jsonOf, TimedOut, Unreachable } from './http';
import type { Target } from './local/target';

export interface SendOutcome {
  status: 'delivered' | 'queued' | 'failed' | 'not_accepted';
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

export async function sendMessage(ctx: Context, target: Target, message: string): Promise<SendOutcome> {
  let answer;
  try {
    answer = await httpRequest(`${target.base}${Routes.messages}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${target.key}`, 'content-type': 'application/json', accept: 'application/json' },
      body: JSON.stringify({ message }),
      timeoutMs: Budgets.cliAnsweredCallMs,
    });
  } catch (error) {
    const origin = new URL(target.base).origin;
    const why =
      error instanceof Unreachable
        ? `no server at ${origin} (${error.code})${target.local ? ': start it with npm start, or pass --url' : ''}`
        : error instanceof TimedOut
          ? `${origin} did not answer in time`
          : `the connection to ${origin} broke off (${(error as NodeJS.ErrnoException).code ?? (error as Error).message}): the message may or may not have been accepted (dm-dot events)`;
    return { status: 'not_accepted', eventId: null, reason: 'unreachable', httpStatus: null, message: why };
  }
  const body = jsonOf<Answer>(answer) ?? {};
  const eventId = body.eventId ?? body.error?.eventId ?? null;
  switch (answer.status) {
    case 200:
      return { status: 'delivered', eventId, reason: null, httpStatus: 200, message: 'the dot accepted it' };
    case 202:
      return { status: 'queued', eventId, reason: null, httpStatus: 202, message: `not acknowledged yet; retries continue (dm-dot events show ${eventId})` };
    case 502: {
      const reason = body.error?.reason ?? 'rejected';
      return { status: 'failed', eventId, reason, httpStatus: 502, message: `the delivery failed for good (${reason}); it is not retried (dm-dot events show ${eventId})` };
    }
    case 401:
      return { status: 'not_accepted', eventId: null, reason: 'unauthorized', httpStatus: 401, message: 'the server refused the API key (pass --key, or check MCP_API_KEY and <state dir>/api-key; after dm-dot key rotate use the new key)' };
    case 409:
      return { status: 'not_accepted', eventId: null, reason: body.error?.code ?? 'no_subscription', httpStatus: 409, message: 'no dot is subscribed: run dm-dot dot (locally), or connect the dot in ChatGPT first' };
    default: {
      const detail = body.error?.message ?? (answer.text.slice(0, 200).trim() || 'no detail');
      return { status: 'not_accepted', eventId, reason: body.error?.code ?? `http_${answer.status}`, httpStatus: answer.status, message: ctx.scrub(`the server answered ${answer.status}: ${detail}`) };
    }
  }
}

/** `delivered evt_…: the dot accepted it`, as send and dot print it. */
export function outcomeLine(outcome: SendOutcome): string {
  if (outcome.status === 'not_accepted') return `not accepted: ${outcome.message}`;
  return `${outcome.status} ${outcome.eventId ?? '(no event id)'}: ${outcome.message}`;
}
