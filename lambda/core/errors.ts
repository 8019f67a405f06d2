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
 * A port failed: every use case throws this, and core/answers.ts `answerUnavailable` answers and
 * logs it. `eventId` is set when an event exists anyway, so that the answer can name it.
 */
const DEPENDENCY_UNAVAILABLE = Symbol.for('dm-dot.dependency-unavailable');

export class DependencyUnavailable extends Error {
  /** `instanceof` by brand, not by class: the MCP Lambda's storage code is a bundle of its own with its own copy of this module. */
  static override [Symbol.hasInstance](value: unknown): boolean {
    return typeof value === 'object' && value !== null && (value as Record<symbol, unknown>)[DEPENDENCY_UNAVAILABLE] === true;
  }
  readonly [DEPENDENCY_UNAVAILABLE] = true;
  readonly eventId: string | undefined;
  /** The event's fate is not known: its job may have been queued and its record could not be marked failed. */
  readonly undecided: boolean;
  /** Undecided, yet the reconciler or the worker will settle the event: the caller may answer "queued". */
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
 * Another live record has this event's id (never our own retried put, which succeeds): nothing of
 * this event was stored, and nothing may be compensated on that record. Recognised by brand too.
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

/** An error as one line, `name: message`, for log lines and the CLI alike (callers scrub secrets); also an Error from another realm. */
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

/** The client went away before its request's body had arrived: logged at info, never as an internal error. */
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
