/**
 * The MCP Lambda (`createMcpLambda`) in-process over the in-memory fakes and a fake key loader,
 * for the unit tests that replay the app's hardening tests through it: payload 2.0 events in,
 * structured results out, no network, no AWS. `asApp` wraps it in the `App` shape of
 * lambda/http/app.ts (web Request in, Response out, through test/support/apigw.ts) so helpers and
 * rows written against the local app (app-support.ts, bad-input.test.ts) run unchanged.
 *
 * Deliberately not here: the environment wiring (`lambda-environment.ts`, covered by
 * test/integration/lambdas.test.ts) and middy (handlers/mcp.ts).
 */
import type { APIGatewayProxyEventV2, APIGatewayProxyStructuredResultV2 } from 'aws-lambda';
import { createMcpLambda, type McpLambda } from '../../lambda/handlers/mcp-lambda';
import type { App } from '../../lambda/http/app';
import type { HttpRequest } from '../../lambda/http/json';
import type { PupConfig } from '../../lambda/http/pup';
import type { Logger } from '../../lambda/log';
import type { WebhookClient } from '../../lambda/ports';
import { localApiGateway, type EventOptions } from './apigw';
import { API_KEY, type LogLine } from './app';
import { fakeOutbox, FakeClock, FakeQueue, FakeStore, ScriptedWebhookClient } from './fakes';

export interface TestLambda {
  lambda: McpLambda;
  store: FakeStore;
  queue: FakeQueue;
  clock: FakeClock;
  logs: LogLine[];
  /** How many times the Lambda asked the key loader for the key. */
  keyReads: { count: number };
}

export interface LambdaConfig {
  /** The key the loader answers; pass `apiKey: undefined` for a key that cannot be loaded (503). */
  apiKey?: string | undefined;
  allowedOrigins?: readonly string[];
  /** The pup door's secrets and manifest (absent: its POST routes answer 503). */
  pup?: PupConfig;
}

export function buildLambda(config: LambdaConfig = {}, options: { webhook?: WebhookClient; deliveryWaitMs?: number; clock?: FakeClock } = {}): TestLambda {
  const store = new FakeStore();
  const queue = new FakeQueue();
  const clock = options.clock ?? new FakeClock();
  const logs: LogLine[] = [];
  const log: Logger = {
    info: (event, fields = {}) => void logs.push({ level: 'info', event, fields }),
    warn: (event, fields = {}) => void logs.push({ level: 'warn', event, fields }),
    error: (event, fields = {}) => void logs.push({ level: 'error', event, fields }),
  };
  const key = 'apiKey' in config ? config.apiKey : API_KEY;
  const keyReads = { count: 0 };
  const lambda = createMcpLambda({
    store,
    outbox: fakeOutbox(store, queue),
    webhook: options.webhook ?? new ScriptedWebhookClient(),
    apiKey: {
      get: async () => {
        keyReads.count++;
        return key;
      },
      peek: () => key,
    },
    deliveryWaitMs: options.deliveryWaitMs ?? 0,
    allowedOrigins: config.allowedOrigins ?? [],
    allowLoopbackCallbacks: false,
    log,
    clock,
    version: '0.0.0-test',
    ...(config.pup ? { pup: config.pup } : {}),
  });
  return { lambda, store, queue, clock, logs, keyReads };
}

/** The request as the Lambda's API Gateway takes it: the shared suites give the app web Requests. */
export function webRequest(request: HttpRequest): Request {
  if (request instanceof Request) return request;
  throw new TypeError('the Lambda behind API Gateway is given web Requests (a test passed another request)');
}

/** The Lambda behind the local API Gateway, as an `App` (`options` of `handle` are ignored: API Gateway has no such inputs). */
export function asApp(lambda: McpLambda, options: EventOptions = {}): App & { lastEvent(): APIGatewayProxyEventV2 | undefined } {
  let last: APIGatewayProxyEventV2 | undefined;
  const gateway = localApiGateway(async (event) => {
    last = event;
    return lambda(event);
  }, options);
  return {
    handle: (request) => gateway.fetch(webRequest(request)),
    close: async () => undefined,
    lastEvent: () => last,
  };
}

/** Reads a result body as text (base64 bodies decoded as UTF-8). */
export function resultText(result: APIGatewayProxyStructuredResultV2): string {
  const body = result.body ?? '';
  return result.isBase64Encoded ? Buffer.from(body, 'base64').toString('utf8') : body;
}
