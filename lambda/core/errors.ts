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
export class DependencyUnavailable extends Error {
  readonly eventId: string | undefined;
  /**
   * The event's fate is not known: the queue failed to confirm its job (which it may have taken
   * all the same) and the record could not be marked failed, so it may still be delivered.
   */
  readonly undecided: boolean;
  constructor(
    readonly dependency: Dependency,
    options?: { cause?: unknown; eventId?: string; undecided?: boolean },
  ) {
    super(`${dependency} unavailable`, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'DependencyUnavailable';
    this.eventId = options?.eventId;
    this.undecided = options?.undecided ?? false;
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
