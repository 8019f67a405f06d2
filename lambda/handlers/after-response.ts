/**
 * Work after the answer on Lambda (docs/decisions.md, "On Lambda, work after the answer needs an
 * extension"): an internal extension of the MCP function that keeps the environment running until
 * the inline delivery attempt a caller stopped waiting for has settled (core/messages.ts
 * `background`). Lambda freezes an environment only once every extension has asked for the next
 * event, and this one asks only when the handler has answered and the work has settled. The
 * handler finds it on `globalThis`; outside Lambda, or when registration fails, there is none, and
 * the answer waits for the attempt instead.
 *
 * Deliberately not here: what the work is, deadlines (the caller runs the work outside the
 * request's deadline), and retries of the Extensions API (a failed call ends the extension; the
 * environment then freezes as it would without one).
 */
import { request, type IncomingHttpHeaders } from 'node:http';

const KEY = Symbol.for('dm-dot.after-response');
/** The name Lambda knows the extension by (the file the function loads). */
export const EXTENSION_NAME = 'after-response.mjs';

export type AfterResponse = NonNullable<Awaited<ReturnType<typeof register>>>;

/** The extension this process registered, if any. */
export function afterResponse(): AfterResponse | undefined {
  return (globalThis as Record<symbol, unknown>)[KEY] as AfterResponse | undefined;
}

/** One call to the Extensions API. node:http, not fetch: a long poll for the next event has no time limit. */
function call(api: string, method: string, path: string, headers: Record<string, string>, body?: string) {
  return new Promise<{ status: number; headers: IncomingHttpHeaders; body: string }>((resolve, reject) => {
    const req = request(`http://${api}${path}`, { method, headers, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}

/** Registers the extension with the Extensions API at `api` and starts its loop; undefined when registration fails. */
export async function register(api: string, report: (line: string) => void = () => undefined) {
  // Internal extensions may register for INVOKE only (SHUTDOWN is for external ones).
  const registering = call(api, 'POST', '/2020-01-01/extension/register', { 'Lambda-Extension-Name': EXTENSION_NAME }, '{"events":["INVOKE"]}');
  const registered = await registering.catch(() => undefined);
  const id = registered?.status === 200 ? registered.headers['lambda-extension-identifier'] : undefined;
  if (typeof id !== 'string') {
    report('after_response_unavailable');
    return undefined;
  }
  // The invocations seen and not yet answered, plus the work still running: the next event is asked for at 0.
  let pending = 0;
  let wake: (() => void) | undefined;
  const settled = () => {
    pending -= 1;
    const resume = wake;
    wake = undefined;
    resume?.();
  };
  const loop = async () => {
    for (;;) {
      const next = await call(api, 'GET', '/2020-01-01/extension/event/next', { 'Lambda-Extension-Identifier': id });
      if (next.status !== 200) throw new Error(`extension next: HTTP ${next.status}`);
      const event = JSON.parse(next.body) as { eventType?: string };
      if (event.eventType !== 'INVOKE') return;
      pending += 1;
      while (pending > 0) await new Promise<void>((resume) => (wake = resume));
    }
  };
  // Runs for the life of the environment; if it fails, the environment freezes as without the extension.
  void loop().catch(() => report('after_response_ended'));
  return {
    /** Starts `work` now and keeps the environment alive until it settles; returns its promise. */
    run<T>(work: () => Promise<T>): Promise<T> {
      const running = work();
      pending += 1;
      void running.then(settled, settled);
      return running;
    },
    /** The handler answered an invocation: once its work settles the extension asks for the next event. */
    invocationEnded: settled,
  };
}

/** The function's `--import` entry: registers during Init and publishes the extension for the handler. */
export async function install(env: NodeJS.ProcessEnv = process.env): Promise<void> {
  const api = env.AWS_LAMBDA_RUNTIME_API;
  if (!api) return;
  const extension = await register(api, (event) => process.stderr.write(`${JSON.stringify({ level: 'warn', event })}\n`));
  if (extension) (globalThis as Record<symbol, unknown>)[KEY] = extension;
}
