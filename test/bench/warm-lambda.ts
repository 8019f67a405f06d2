/**
 * A built Lambda bundle kept warm in one child process (the Lambda runtime's Node where test/tools has it, as the
 * cold starts of lambda-bundles.ts): the child requires `index.js` once and then runs one
 * invocation per message it gets over the IPC channel, as one execution environment serves
 * request after request. What the AWS-calls section drives the deployed MCP asset with.
 *
 * Deliberately not here: timing (the caller decides what to measure), the Lambda runtime's own
 * freeze and thaw between invocations, and concurrency (one invocation at a time, as Lambda).
 */
import { spawn } from 'node:child_process';
import { ROOT } from './lambda-bundles';

export interface WarmLambda {
  /** One invocation with an API Gateway payload 2.0 event (JSON text); the result's status and body. */
  invoke(event: string, timeoutMs?: number): Promise<{ status: number; body: string }>;
  /** The child's stderr so far (its last 4,000 characters), to explain a failure. */
  stderr(): string;
  stop(): Promise<void>;
}

const CHILD = `
const file = process.argv[1];
const mod = require(file);
let n = 0;
process.on('message', async (message) => {
  const context = { awsRequestId: 'bench-' + (++n), functionName: process.env.AWS_LAMBDA_FUNCTION_NAME, getRemainingTimeInMillis: () => 10000, callbackWaitsForEmptyEventLoop: true };
  try {
    const result = await mod.handler(JSON.parse(message.event), context);
    process.send({ id: message.id, status: result.statusCode, body: result.body });
  } catch (error) {
    process.send({ id: message.id, error: String((error && error.stack) || error) });
  }
});
process.send({ ready: true });
`;

interface Answer {
  id?: number;
  ready?: boolean;
  status?: number;
  body?: string;
  error?: string;
}

export async function startWarmLambda(nodeBinary: string, file: string, env: Record<string, string>): Promise<WarmLambda> {
  const child = spawn(nodeBinary, ['-e', CHILD, file], { cwd: ROOT, env, stdio: ['ignore', 'ignore', 'pipe', 'ipc'] });
  let err = '';
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (err = (err + chunk).slice(-4000)));
  const waiting = new Map<number, (answer: Answer) => void>();
  let exited = false;
  const exit = new Promise<void>((done) => child.once('exit', () => done()));
  void exit.then(() => {
    exited = true;
    for (const settle of waiting.values()) settle({ error: `the child exited: ${err.trim().slice(-400)}` });
    waiting.clear();
  });
  await new Promise<void>((ready, fail) => {
    const timer = setTimeout(() => fail(new Error(`the warm Lambda did not start: ${err.trim().slice(-400)}`)), 30_000);
    child.once('error', fail);
    child.on('message', (message: Answer) => {
      if (message.ready) {
        clearTimeout(timer);
        ready();
        return;
      }
      if (message.id !== undefined) {
        waiting.get(message.id)?.(message);
        waiting.delete(message.id);
      }
    });
    void exit.then(() => fail(new Error(`the warm Lambda exited during init: ${err.trim().slice(-400)}`)));
  });
  let next = 0;
  return {
    invoke(event, timeoutMs = 15_000) {
      if (exited) return Promise.reject(new Error(`the warm Lambda has exited: ${err.trim().slice(-400)}`));
      const id = ++next;
      return new Promise((done, fail) => {
        const timer = setTimeout(() => {
          waiting.delete(id);
          fail(new Error(`invocation ${id} got no answer within ${timeoutMs} ms`));
        }, timeoutMs);
        waiting.set(id, (answer) => {
          clearTimeout(timer);
          if (answer.error !== undefined) fail(new Error(answer.error.slice(0, 400)));
          else done({ status: answer.status ?? 0, body: answer.body ?? '' });
        });
        child.send({ id, event });
      });
    },
    stderr: () => err,
    async stop() {
      if (exited) return;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 3_000);
      await exit;
      clearTimeout(timer);
    },
  };
}
