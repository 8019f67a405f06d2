/**
 * The MCP Lambda writes one embedded-metric-format line per request (lambda/metrics.ts): the route
 * template API Gateway matched, the status class and the latency. Driven through the test API
 * Gateway with stub ports; the lines are collected from the emitter's sink.
 */
import type { APIGatewayProxyEventV2 } from 'aws-lambda';
import { createMcpLambda, type McpLambdaDeps } from '../../../lambda/handlers/mcp-lambda';
import { mcpLambdaFromEnvironment } from '../../support/lambda-environment';
import type { Logger } from '../../../lambda/log';
import { createMetrics, DimensionName, METRICS_NAMESPACE, MetricName } from '../../../lambda/metrics';
import type { Outbox, Store, WebhookClient } from '../../../lambda/ports';
import { eventFromRequest } from '../../support/apigw';
import { messageInit, modernInit } from '../../support/app';
import { fakeOutbox, FakeQueue, FakeStore, respond, ScriptedWebhookClient } from '../../support/fakes';

const API_KEY = 'metrics-test-api-key-0123456789abcdef';
const silentLog: Logger = { info: () => undefined, warn: () => undefined, error: () => undefined };

function unusedPort<T extends object>(name: string): T {
  return new Proxy({} as T, {
    get: (_, prop) => () => Promise.reject(new Error(`${name}.${String(prop)} must not be called in this test`)),
  });
}

/** The MCP Lambda on ports that must not be called (unless `deps` gives others), its EMF lines in `lines`. */
function instrumented({ keyLoaded = true } = {}, deps: Partial<McpLambdaDeps> = {}) {
  const key = keyLoaded ? API_KEY : undefined;
  const lines: string[] = [];
  const lambda = createMcpLambda({
    store: unusedPort<Store>('store'),
    outbox: unusedPort<Outbox>('outbox'),
    webhook: unusedPort<WebhookClient>('webhook'),
    apiKey: { get: async () => key, peek: () => key },
    deliveryWaitMs: 0,
    allowedOrigins: [],
    allowLoopbackCallbacks: false,
    log: silentLog,
    metrics: createMetrics({ sink: (line) => lines.push(line) }),
    ...deps,
  });
  return { lambda, lines };
}

/** An event as API Gateway sends it for a matched route. */
async function event(routeKey: string, url: string, init: RequestInit = {}): Promise<APIGatewayProxyEventV2> {
  const e = await eventFromRequest(new Request(url, init), { requestId: 'rid-1' });
  return { ...e, routeKey, requestContext: { ...e.requestContext, routeKey } };
}

test('one line per request with the route template and the status class of the answer', async () => {
  const { lambda, lines } = instrumented();
  const health = await lambda(await event('GET /healthz', 'https://api.example/healthz'));
  expect(health.statusCode).toBe(200);
  const refused = await lambda(await event('POST /v1/messages', 'https://api.example/v1/messages', { method: 'POST', body: '{}' }));
  expect(refused.statusCode).toBe(401);
  expect(lines).toHaveLength(2);
  const [first, second] = lines.map((l) => JSON.parse(l) as Record<string, unknown>);
  expect(first).toMatchObject({ Route: 'GET /healthz', StatusClass: '2xx', Requests: 1 });
  expect(second).toMatchObject({ Route: 'POST /v1/messages', StatusClass: '4xx', Requests: 1 });
  expect(typeof first?.RequestLatency).toBe('number');
  expect(first?.RequestLatency as number).toBeGreaterThanOrEqual(0);
});

test('HTTP-10: the key in the query string never reaches a metric line: the route is the template, not the path', async () => {
  const { lambda, lines } = instrumented();
  const result = await lambda(await event('GET /mcp', `https://api.example/mcp?key=${API_KEY}`));
  expect(result.statusCode).toBe(405);
  expect(lines).toHaveLength(1);
  expect(lines[0]).not.toContain(API_KEY);
  expect(lines[0]).not.toContain('key=');
  expect(JSON.parse(lines[0] as string)).toMatchObject({ Route: 'GET /mcp', StatusClass: '4xx' });
});

test('an event the translation refuses is counted as the 400 it is answered with', async () => {
  const { lambda, lines } = instrumented();
  const bad = await event('POST /mcp', 'https://api.example/mcp', { method: 'POST', body: '{}' });
  bad.requestContext.http.method = 'CONNECT';
  expect((await lambda(bad)).statusCode).toBe(400);
  expect(JSON.parse(lines[0] as string)).toMatchObject({ Route: 'POST /mcp', StatusClass: '4xx' });
});

describe('ARCH-ALARM-1: every answer a failed dependency forces is counted as DependencyUnavailable, by Dependency', () => {
  /** A JSON-RPC request on /mcp as ChatGPT sends it (2026-07-28, stateless). */
  const rpc = (method: string, params: Record<string, unknown>) => event('POST /mcp', `https://api.example/mcp?key=${API_KEY}`, modernInit(method, params));
  /** POST /v1/messages with the key, as a sender sends it. */
  const sendHello = () => event('POST /v1/messages', 'https://api.example/v1/messages', messageInit('hello', API_KEY));
  const unavailableLines = (lines: string[]) => lines.map((l) => JSON.parse(l) as Record<string, unknown>).filter((l) => MetricName.dependencyUnavailable in l);

  test('send_to_dot with the table failing: still an isError tool result on HTTP 200, and one line with Dependency=storage', async () => {
    const { lambda, lines } = instrumented();
    const result = await lambda(await rpc('tools/call', { name: 'send_to_dot', arguments: { message: 'hello' } }));
    expect(result.statusCode).toBe(200);
    expect(JSON.parse(String(result.body))).toMatchObject({ result: { isError: true } });
    const counted = unavailableLines(lines);
    expect(counted).toHaveLength(1);
    expect(counted[0]).toMatchObject({ Dependency: 'storage', DependencyUnavailable: 1 });
    expect((counted[0]!._aws as { CloudWatchMetrics: unknown[] }).CloudWatchMetrics).toEqual([
      { Namespace: METRICS_NAMESPACE, Dimensions: [[DimensionName.dependency]], Metrics: [{ Name: MetricName.dependencyUnavailable, Unit: 'Count' }] },
    ]);
  });

  test('events/subscribe with the table failing: -32603 on HTTP 200, counted', async () => {
    const { lambda, lines } = instrumented();
    const result = await lambda(
      await rpc('events/subscribe', {
        name: 'message.created',
        arguments: {},
        delivery: { mode: 'webhook', url: 'https://dot.example/hook', secret: `whsec_${Buffer.alloc(32, 7).toString('base64')}` },
      }),
    );
    expect(result.statusCode).toBe(200);
    expect(JSON.parse(String(result.body))).toMatchObject({ error: { code: -32603 } });
    expect(unavailableLines(lines)).toEqual([expect.objectContaining({ Dependency: 'storage', DependencyUnavailable: 1 })]);
  });

  test('POST /v1/messages with the table failing: 503, counted once', async () => {
    const { lambda, lines } = instrumented();
    const result = await lambda(await sendHello());
    expect(result.statusCode).toBe(503);
    expect(unavailableLines(lines)).toEqual([expect.objectContaining({ Dependency: 'storage' })]);
  });

  test('no API key loaded (Secrets Manager failed): the 503 is counted with Dependency=secrets; /healthz is not', async () => {
    const { lambda, lines } = instrumented({ keyLoaded: false });
    expect((await lambda(await event('GET /healthz', 'https://api.example/healthz'))).statusCode).toBe(200);
    expect(unavailableLines(lines)).toEqual([]);
    const result = await lambda(await sendHello());
    expect(result.statusCode).toBe(503);
    expect(unavailableLines(lines)).toEqual([expect.objectContaining({ Dependency: 'secrets', DependencyUnavailable: 1 })]);
  });

  test('a request that needs no dependency writes no such line', async () => {
    const { lambda, lines } = instrumented();
    await lambda(await event('POST /v1/messages', 'https://api.example/v1/messages', { method: 'POST', body: '{}' }));
    expect(lines).toHaveLength(1);
    expect(unavailableLines(lines)).toEqual([]);
  });
});

describe('mcpLambdaFromEnvironment', () => {
  const env = { TABLE_NAME: 't', QUEUE_URL: 'https://q' };
  const clients = { dynamodb: {} as never, sqs: {} as never, secrets: { getSecretValue: async () => ({}) } };

  test.each([
    ['outside Lambda (no AWS_LAMBDA_FUNCTION_NAME): no metric lines', {}, 0],
    ['inside Lambda: one line on stdout per request', { AWS_LAMBDA_FUNCTION_NAME: 'DmDot-Mcp' }, 1],
  ])('%s', async (_name, extra, expected) => {
    const writes: string[] = [];
    const spy = jest.spyOn(process.stdout, 'write').mockImplementation((chunk: string | Uint8Array) => {
      writes.push(String(chunk));
      return true;
    });
    try {
      const lambda = mcpLambdaFromEnvironment({ ...env, ...extra }, clients, { log: silentLog });
      expect((await lambda(await event('GET /healthz', 'https://api.example/healthz'))).statusCode).toBe(200);
    } finally {
      spy.mockRestore();
    }
    const emf = writes.filter((w) => w.includes('"_aws"'));
    expect(emf).toHaveLength(expected);
  });
});

test('DEL-RUN-6: a message delivered inline through POST /v1/messages is counted as Deliveries{Outcome=delivered, Via=inline}', async () => {
  const store = new FakeStore();
  const now = Date.now();
  store.subscription = {
    id: `sub_${'d'.repeat(32)}`,
    url: 'https://dot.example/hook',
    name: 'message.created',
    secret: `whsec_${Buffer.alloc(32, 3).toString('base64')}`,
    principal: 'p',
    createdAt: now,
    refreshedAt: now,
    expiresAt: now + 3_600_000,
  };
  const { lambda, lines } = instrumented(
    {},
    { store, outbox: fakeOutbox(store, new FakeQueue()), webhook: new ScriptedWebhookClient(respond(200)), deliveryWaitMs: 3_000 },
  );
  const answer = await lambda(await event('POST /v1/messages', 'https://api.example/v1/messages', messageInit('hi', API_KEY)));
  expect(answer.statusCode).toBe(200);
  const deliveries = lines.map((l) => JSON.parse(l) as Record<string, unknown>).filter((l) => 'Deliveries' in l);
  expect(deliveries).toEqual([expect.objectContaining({ Outcome: 'delivered', Via: 'inline', Deliveries: 1 })]);
});
