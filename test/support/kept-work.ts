/**
 * What the MCP function's after-response extension does for its handler, played in-process: each
 * piece of work runs on after the answer, `pending` counts what has not settled, and `settled`
 * waits for it, as the extension waits before it asks Lambda for the next invocation. Shared by
 * the one-POST integration test and the bench's Lambda section.
 *
 * Deliberately not here: the Extensions API itself (lambda/handlers/after-response.ts).
 */
import type { AfterResponse } from '../../lambda/handlers/after-response';

export function keptWork(): AfterResponse & { settled(): Promise<unknown>; pending(): number } {
  const running = new Set<Promise<unknown>>();
  return {
    run(work) {
      const promise = work();
      const tracked = promise.then(
        () => undefined,
        () => undefined,
      );
      running.add(tracked);
      void tracked.then(() => running.delete(tracked));
      return promise;
    },
    invocationEnded: () => undefined,
    settled: () => Promise.all([...running]),
    pending: () => running.size,
  };
}
