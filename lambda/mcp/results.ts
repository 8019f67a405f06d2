/**
 * Wording of send outcomes for each surface: `send_to_dot` tool results (SPEC 3.1) and the
 * `POST /v1/messages` REST answers (SPEC 6.4). One place, so both surfaces say the same thing.
 *
 * Deliberately not here: deciding outcomes (core/messages.ts).
 */
import type { SendOutcome } from '../core/messages';

export interface ToolResult {
  [key: string]: unknown;
  content: { type: 'text'; text: string }[];
  isError: boolean;
  structuredContent?: { eventId: string; status: 'delivered' | 'queued' | 'failed' };
}

const REASON_TEXT: Record<string, string> = {
  http_4xx: 'the callback refused it (HTTP 4xx)',
  http_5xx: 'the callback kept failing (HTTP 5xx or an unusable response)',
  timeout: 'the callback did not answer in time',
  tls_error: 'the TLS connection to the callback failed',
  connection_refused: 'the callback could not be reached',
  challenge_failed: 'the callback answered incorrectly',
};

export function describeReason(reason: string | null | undefined): string {
  return (reason && REASON_TEXT[reason]) || 'its subscription ended before it could be delivered';
}

function text(value: string, isError: boolean, structured?: ToolResult['structuredContent']): ToolResult {
  return { content: [{ type: 'text', text: value }], isError, ...(structured ? { structuredContent: structured } : {}) };
}

export function toolResultOf(outcome: SendOutcome): ToolResult {
  switch (outcome.kind) {
    case 'invalid':
      return text(outcome.error, true);
    case 'no_subscription':
      return text('No dot is subscribed: subscribe a ChatGPT dot to message.created first, then send again.', true);
    case 'unavailable':
      return outcome.eventId
        ? text(`The delivery queue is unavailable, so event ${outcome.eventId} was not sent; try again shortly.`, true, { eventId: outcome.eventId, status: 'failed' })
        : text(`The ${outcome.dependency === 'queue' ? 'delivery queue' : 'subscription storage'} is unavailable; nothing was sent. Try again shortly.`, true);
    case 'delivered':
      return text(`ChatGPT accepted event ${outcome.eventId} for asynchronous processing by your dot.`, false, { eventId: outcome.eventId, status: 'delivered' });
    case 'queued':
      return text(
        `Event ${outcome.eventId} is queued: the dot has not acknowledged it yet, and delivery will be retried automatically.`,
        false,
        { eventId: outcome.eventId, status: 'queued' },
      );
    case 'failed':
      return text(`Delivery of event ${outcome.eventId} was rejected: ${describeReason(outcome.reason)}. It will not be retried.`, true, {
        eventId: outcome.eventId,
        status: 'failed',
      });
  }
}

export interface RestAnswer {
  status: number;
  body: unknown;
}

export function restAnswerOf(outcome: SendOutcome): RestAnswer {
  const error = (status: number, code: string, message: string, extra: object = {}) => ({ status, body: { error: { code, message, ...extra } } });
  switch (outcome.kind) {
    case 'invalid':
      return error(400, 'invalid_input', outcome.error);
    case 'no_subscription':
      return error(409, 'no_subscription', 'No dot is subscribed to message.created.');
    case 'unavailable':
      return error(503, `${outcome.dependency}_unavailable`, `The ${outcome.dependency} is unavailable; try again shortly.`, outcome.eventId ? { eventId: outcome.eventId } : {});
    case 'delivered':
      return { status: 200, body: { eventId: outcome.eventId, status: 'delivered' } };
    case 'queued':
      return { status: 202, body: { eventId: outcome.eventId, status: 'queued' } };
    case 'failed':
      return error(502, 'delivery_failed', `Delivery was rejected: ${describeReason(outcome.reason)}.`, {
        eventId: outcome.eventId,
        status: 'failed',
        reason: outcome.reason ?? 'dropped',
      });
  }
}
