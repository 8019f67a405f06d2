/**
 * The app a key rotation replaces (runtime.ts), retired without cutting an answer: it counts the
 * requests it is answering and closes once the last answer is complete (closing the MCP handler
 * cuts the exchanges it holds: an empty 499). The server takes the app in force synchronously
 * when a request starts (http-server.ts), so no request reaches a retired app after its count came
 * to zero.
 *
 * Deliberately not here: when a rotation happens and which app is in force (runtime.ts).
 */
import type { App } from '../http/app';

export interface RetiringApp {
  app: App;
  /** No new request comes to it any more: it is closed once the requests it holds are answered. */
  retire(): void;
}

export function retiringApp(inner: App): RetiringApp {
  let inFlight = 0;
  let retired = false;
  let closed: Promise<void> | undefined;
  const closeIfDone = () => {
    if (retired && inFlight === 0) closed ??= inner.close().catch(() => undefined);
  };
  const finished = () => {
    inFlight--;
    closeIfDone();
  };
  return {
    app: {
      async handle(request, options) {
        inFlight++;
        let response: Response;
        try {
          response = await inner.handle(request, options);
        } catch (error) {
          finished();
          throw error;
        }
        // Only an event stream runs on after its answer is returned; any other body is whole by
        // then (the MCP SDK tears its exchange down at once for those too), so closing the app
        // cannot cut it. Wrapping every body cost a stream per request (the throughput section).
        if (!response.body || !isEventStream(response)) {
          finished();
          return response;
        }
        return new Response(countedBody(response.body, finished), { status: response.status, statusText: response.statusText, headers: response.headers });
      },
      close: () => (closed ??= inner.close()),
    },
    retire() {
      retired = true;
      closeIfDone();
    },
  };
}

function isEventStream(response: Response): boolean {
  return /^\s*text\/event-stream\s*(;|$)/i.test(response.headers.get('content-type') ?? '');
}

/** `body` as it is, calling `done` once when it ends, fails or is cancelled. */
function countedBody(body: ReadableStream<Uint8Array>, done: () => void): ReadableStream<Uint8Array> {
  const reader = body.getReader();
  let settled = false;
  const settle = () => {
    if (settled) return;
    settled = true;
    done();
  };
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      try {
        const next = await reader.read();
        if (next.done) {
          settle();
          controller.close();
        } else controller.enqueue(next.value);
      } catch (error) {
        settle();
        controller.error(error);
      }
    },
    async cancel(reason) {
      settle();
      await reader.cancel(reason).catch(() => undefined);
    },
  });
}
