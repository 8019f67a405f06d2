/**
 * How dm-dot says what happened, on each surface: `send_to_dot` tool results, `POST /v1/messages`
 * answers, and the one mapping of a failed dependency to the answer of the surface that asked. One
 * place, so every surface says the same thing.
 *
 * Deliberately not here: deciding outcomes (core/messages.ts), HTTP framing (lambda/http), and
 * the SDK's error classes (lambda/mcp turns the JSON-RPC shape below into a ProtocolError).
 */
import type { Logger } from '../ports';
import type { IdempotentOutcome } from './idempotency';
import type { SendOutcome } from './messages';
import { type DependencyUnavailable, describeCause } from './errors';
import { ErrorCodes } from './protocol';

export { describeCause };

/** `S`: what `structuredContent` holds, `{eventId, status}` once an event exists (a rate refusal says when instead). */
export interface ToolResult<S = { eventId: string; status: 'delivered' | 'queued' | 'failed' | 'kept' }> {
  [key: string]: unknown;
  content: { type: 'text'; text: string }[];
  isError: boolean;
  structuredContent?: S;
}

export interface RestAnswer {
  status: number;
  body: unknown;
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
  return (reason && Object.hasOwn(REASON_TEXT, reason) && REASON_TEXT[reason]) || 'its subscription ended before it could be delivered';
}

/** What a kept message's sender is told (docs/contract/mcp.md, the inbox): no webhook, the inbox holds it. */
export const KEPT_TEXT = (eventId: string) =>
  `No dot is subscribed now: event ${eventId} is kept in the inbox, where the dot reads it with get_pending_messages once it is back. No webhook ` +
  'will be sent for it.';

/** What a sender without a dot is told, on both surfaces: where a dot comes from. */
export const NO_SUBSCRIPTION_TEXT =
  'No dot is subscribed to message.created: connect a ChatGPT dot to this server (it subscribes by itself), or run `dm-dot dot` for a local ' +
  'stand-in; then send again.';

/** A sender past its rate, on both surfaces: nothing was sent, and when the next window opens. */
export function rateLimitedText(rate: number, retryAfterSeconds: number): string {
  return `This sender's rate (${rate} messages per minute) is used up; nothing was sent. Try again in ${retryAfterSeconds} s.`;
}

/** `send_to_dot` past the sender's rate: a tool error like every other send failure, saying when to try again. */
export function rateLimitedToolResult(rate: number, retryAfterMs: number): ToolResult<{ retryAfterMs: number }> {
  return toolText(rateLimitedText(rate, Math.max(1, Math.ceil(retryAfterMs / 1000))), true, { retryAfterMs });
}

export function toolText<S = ToolResult['structuredContent']>(value: string, isError: boolean, structured?: S): ToolResult<S> {
  return { content: [{ type: 'text', text: value }], isError, ...(structured ? { structuredContent: structured } : {}) };
}

const KEY_REUSED_TEXT = 'This idempotency key was already used for another message: nothing was sent. Use a new key for a new message.';
const inProgressText = (seconds: number) =>
  `A request with this idempotency key is still being answered; nothing new was sent. Try again in ${seconds} s to learn its outcome.`;

/** A send's outcome as a tool result; with an idempotency key (core/idempotency.ts) a repeat answers as its first request. */
export function toolResultOf(outcome: IdempotentOutcome): ToolResult {
  switch (outcome.kind) {
    case 'invalid':
    case 'invalid_key':
      return toolText(outcome.error, true);
    case 'no_subscription':
      return toolText(NO_SUBSCRIPTION_TEXT, true);
    case 'key_reused':
      return toolText(KEY_REUSED_TEXT, true);
    case 'in_progress':
      return toolText(inProgressText(outcome.retryAfterSeconds), true);
    case 'delivered':
      return eventResult(outcome, `ChatGPT accepted event ${outcome.eventId} for asynchronous processing by your dot.`);
    case 'queued':
      return eventResult(outcome, `Event ${outcome.eventId} is queued: the dot has not acknowledged it yet, and delivery will be retried automatically.`);
    case 'kept':
      return eventResult(outcome, KEPT_TEXT(outcome.eventId));
    case 'failed':
      return eventResult(outcome, `Delivery of event ${outcome.eventId} was rejected: ${describeReason(outcome.reason)}. It will not be retried.`);
  }
}

/** The tool result of an event that exists: its sentence and `{eventId, status}`, an error only when it failed. */
function eventResult(outcome: Extract<SendOutcome, { eventId: string }>, text: string): ToolResult {
  return toolText(text, outcome.kind === 'failed', { eventId: outcome.eventId, status: outcome.kind });
}

/** The one shape of a REST error, `{"error":{"code","message",…}}`, on every route of both runtimes. */
export function restError(status: number, code: string, message: string, extra: object = {}): RestAnswer {
  return { status, body: { error: { code, message, ...extra } } };
}

/**
 * The same on `POST /v1/messages`; with a key also `400 invalid_idempotency_key`, `422
 * idempotency_key_reused` and `409 in_progress` (with the seconds for Retry-After in `retryAfterSeconds`).
 */
export function restAnswerOf(outcome: IdempotentOutcome): RestAnswer & { retryAfterSeconds?: number } {
  switch (outcome.kind) {
    case 'invalid':
      return restError(400, 'invalid_input', outcome.error);
    case 'invalid_key':
      return restError(400, 'invalid_idempotency_key', outcome.error);
    case 'no_subscription':
      return restError(409, 'no_subscription', NO_SUBSCRIPTION_TEXT);
    case 'key_reused':
      return restError(422, 'idempotency_key_reused', KEY_REUSED_TEXT);
    case 'in_progress':
      return { ...restError(409, 'in_progress', inProgressText(outcome.retryAfterSeconds)), retryAfterSeconds: outcome.retryAfterSeconds };
    case 'delivered':
    case 'queued':
    case 'kept':
      return { status: outcome.kind === 'delivered' ? 200 : 202, body: { eventId: outcome.eventId, status: outcome.kind } };
    case 'failed':
      return restError(502, 'delivery_failed', `Delivery was rejected: ${describeReason(outcome.reason)}.`, {
        eventId: outcome.eventId,
        status: 'failed',
        reason: outcome.reason ?? 'dropped',
      });
  }
}

/** The surfaces a failed dependency is answered on. */
export type Surface = 'tool' | 'rest' | 'rpc';
type AnswerOn<S extends Surface> = S extends 'tool' ? ToolResult : S extends 'rest' ? RestAnswer : { code: number; message: string };

function unavailableText(error: DependencyUnavailable): string {
  if (error.eventId && error.undecided) {
    return (
      `The delivery queue did not confirm event ${error.eventId}, and its record could not be marked failed: it may still be delivered. Check with ` +
      `dm-dot events show ${error.eventId} before sending it again.`
    );
  }
  if (error.eventId) return `The delivery queue is unavailable, so event ${error.eventId} was not sent; try again shortly.`;
  return `The ${error.dependency === 'queue' ? 'delivery queue' : 'storage'} is unavailable; nothing was sent. Try again shortly.`;
}

const DEPENDENCY_UNAVAILABLE_EVENT = 'dependency_unavailable';

/**
 * `log`, also calling `seen` with the fields of each answer `answerUnavailable` gave: through the
 * Logger port, so the core never knows who watches (the Lambda's metric, the pup door's replay claims).
 */
export function watchingUnavailable(log: Logger, seen: (fields: Record<string, unknown> | undefined) => void): Logger {
  return {
    info: (event, fields) => log.info(event, fields),
    warn: (event, fields) => log.warn(event, fields),
    error: (event, fields) => {
      log.error(event, fields);
      if (event === DEPENDENCY_UNAVAILABLE_EVENT) seen(fields);
    },
  };
}

/** The one mapping of a failed dependency: logged once with the request id and cause, answered in the asking surface's shape. */
export function answerUnavailable<S extends Surface>(
  log: Logger,
  surface: S,
  error: DependencyUnavailable,
  context: { requestId: string; where: string },
): AnswerOn<S> {
  log.error(DEPENDENCY_UNAVAILABLE_EVENT, {
    requestId: context.requestId,
    where: context.where,
    dependency: error.dependency,
    ...(error.eventId ? { eventId: error.eventId } : {}),
    ...(error.undecided ? { undecided: true } : {}),
    cause: describeCause(error.cause),
  });
  const sentence = unavailableText(error);
  if (surface === 'tool') {
    return (
      error.eventId ? toolText(sentence, true, { eventId: error.eventId, status: error.undecided ? 'queued' : 'failed' }) : toolText(sentence, true)
    ) as AnswerOn<S>;
  }
  if (surface === 'rest') return restError(503, `${error.dependency}_unavailable`, sentence, error.eventId ? { eventId: error.eventId } : {}) as AnswerOn<S>;
  return { code: ErrorCodes.internalError, message: `The ${error.dependency} is unavailable; try again shortly.` } as AnswerOn<S>;
}
