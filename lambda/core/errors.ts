/**
 * Errors split by audience. `ProtocolFault` is for the caller: a JSON-RPC code, a message that is
 * safe to show and optional data. `DependencyUnavailable` says a port (storage, queue) failed; the
 * edge turns it into -32603, a tool error or HTTP 503 and logs the cause with a request id.
 * Programmer misuse stays a plain `Error`.
 *
 * Deliberately not here: mapping to HTTP or to SDK error classes (that is the edge's job), and
 * any text from a callback endpoint (only categories ever leave the outbound guard).
 */
import { CALLBACK_ENDPOINT_ERROR_MESSAGE, ErrorCodes, type FailureReason } from './protocol';

export class ProtocolFault extends Error {
  constructor(
    readonly code: number,
    message: string,
    readonly data?: unknown,
  ) {
    super(message);
    this.name = 'ProtocolFault';
  }
}

export function invalidParams(message: string): ProtocolFault {
  return new ProtocolFault(ErrorCodes.invalidParams, message);
}

/** `code`: the events profile's CallbackEndpointError (-32015 under chatgpt, -32027 under sep-3415). */
export function callbackEndpointError(reason: FailureReason, code: number = ErrorCodes.callbackEndpointError): ProtocolFault {
  return new ProtocolFault(code, CALLBACK_ENDPOINT_ERROR_MESSAGE, { reason });
}

export type Dependency = 'storage' | 'queue';

/**
 * A port failed. The one way the core reports it: every use case throws this, and one function at
 * the edge (core/answers.ts `answerUnavailable`) turns it into each surface's answer and logs it.
 * `eventId` is set when an event exists anyway (its record was written, its job could not be
 * queued), so that the answer can name it.
 */
const DEPENDENCY_UNAVAILABLE = Symbol.for('dm-dot.dependency-unavailable');

export class DependencyUnavailable extends Error {
  /**
   * `instanceof` by brand, not by class: the MCP Lambda's storage code is a file of its own with
   * its own copy of this module (lib/bundling.ts), and an outbox error thrown there must still be
   * recognised in index.js, or its event id and "undecided" are lost to a generic storage error.
   */
  static override [Symbol.hasInstance](value: unknown): boolean {
    return typeof value === 'object' && value !== null && (value as Record<symbol, unknown>)[DEPENDENCY_UNAVAILABLE] === true;
  }
  readonly [DEPENDENCY_UNAVAILABLE] = true;
  readonly eventId: string | undefined;
  /**
   * The event's fate is not known: the queue failed to confirm its job (which it may have taken
   * all the same) and the record could not be marked failed, so it may still be delivered.
   */
  readonly undecided: boolean;
  /**
   * Undecided, yet something will settle the event: its record is stored and the reconciler
   * re-enqueues or fails it, or its job is out and the worker restores a record that never landed.
   * The caller may then answer "queued" with the event id.
   */
  readonly willSettle: boolean;
  constructor(
    readonly dependency: Dependency,
    options?: { cause?: unknown; eventId?: string; undecided?: boolean; willSettle?: boolean },
  ) {
    super(`${dependency} unavailable`, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'DependencyUnavailable';
    this.eventId = options?.eventId;
    this.undecided = options?.undecided ?? false;
    this.willSettle = this.undecided && (options?.willSettle ?? false);
  }
}

const EVENT_EXISTS = Symbol.for('dm-dot.event-exists');

/**
 * A store refused to create an event record because another live record has its id. Event ids are
 * random, so this is never a retry of our own put (that one succeeds): nothing of this event was
 * stored, and nothing may be compensated on the record that holds the id. Recognised by brand,
 * like DependencyUnavailable, because the stores may run from a file of their own.
 */
export class EventExists extends Error {
  static override [Symbol.hasInstance](value: unknown): boolean {
    return typeof value === 'object' && value !== null && (value as Record<symbol, unknown>)[EVENT_EXISTS] === true;
  }
  readonly [EVENT_EXISTS] = true;
  constructor(eventId: string) {
    super(`event ${eventId} already exists`);
    this.name = 'EventExists';
  }
}

/** Runs `fn`, turning any failure into `DependencyUnavailable(dependency)` with the cause kept for logs. */
export async function guardDependency<T>(dependency: Dependency, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (error) {
    if (error instanceof DependencyUnavailable) throw error;
    throw new DependencyUnavailable(dependency, { cause: error });
  }
}

/**
 * An error as one line, its name and message, as our adapters and the AWS SDK word them: the one
 * description for log lines and the CLI's "failed: …" and AWS errors alike (callers scrub secrets).
 * An object that is not an Error but carries a message (an SDK error from another realm) reads the same.
 */
export function describeCause(error: unknown): string {
  if (error instanceof Error) return `${error.name || 'Error'}: ${error.message}`;
  const named = error as { name?: unknown; message?: unknown } | null;
  if (typeof named === 'object' && named !== null && typeof named.message === 'string') {
    return `${typeof named.name === 'string' && named.name ? named.name : 'Error'}: ${named.message}`;
  }
  try {
    return String(error);
  } catch {
    return Object.prototype.toString.call(error);
  }
}

/**
 * The client went away before its request's body had arrived (a closed connection, a deadline
 * that ended the exchange). Nothing failed on our side: it is logged at info, never as an internal
 * error, and no answer can reach the client anyway.
 */
export class ClientAborted extends Error {
  constructor(message = 'the request ended before its body') {
    super(message);
    this.name = 'ClientAborted';
  }
}

/** True when `error`, or any cause in its chain, is a ClientAborted. */
export function isClientAbort(error: unknown): boolean {
  for (let e: unknown = error, depth = 0; e instanceof Error && depth < 8; e = e.cause, depth++) if (e instanceof ClientAborted) return true;
  return false;
}
