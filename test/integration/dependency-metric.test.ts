/**
 * ChatGPT's path answers a failed dependency with HTTP 200 (a tool error, or -32603): API Gateway's
 * 5xx count never sees it, so the MCP Lambda counts each such answer as the DependencyUnavailable
 * metric, which an alarm watches. Here the MCP Lambda runs in-process, wired from its environment
 * with dm-dot's own SDK client options, against DynamoDB Local (behind the fault proxy,
 * test/support/aws-fault-proxy.ts), fauxqs and the fake Secrets Manager; the table stalls (the
 * proxy accepts every call and never answers) and the EMF lines are collected from the emitter's sink.
 *
 * What is pinned: each surface still answers as before (200 with isError, 200 with -32603, 503),
 * and each answer writes one DependencyUnavailable line with Dependency=storage.
 */
import { randomBytes } from 'node:crypto';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { SQSClient } from '@aws-sdk/client-sqs';
import { Limits } from '../../lambda/core/protocol';
import { clientOptions } from '../../lambda/handlers/aws-clients';
import { mcpLambdaFromEnvironment } from '../../lambda/handlers/mcp-lambda';
import { createLogger } from '../../lambda/log';
import { createMetrics, MetricName } from '../../lambda/metrics';
import { localApiGateway } from '../support/apigw';
import { startFaultProxy, type FaultProxy } from '../support/aws-fault-proxy';
import { startDynamoDbLocal, type DynamoDbLocal } from '../support/dynamodb-local';
import { startFauxqs, type Fauxqs } from '../support/fauxqs';
import { startFakeSecretsManager, testSecretsReader, type FakeSecretsManager } from '../support/fake-secrets-manager';
import { startReceiver, type Receiver } from '../support/receiver';

const TABLE = 'dm-dot-dependency-metric';
const API_KEY = `dm-${randomBytes(24).toString('base64url')}`;
const MODERN = '2026-07-28';
const REGION = 'us-east-1';

let ddb: DynamoDbLocal;
let fauxqs: Fauxqs;
let secrets: FakeSecretsManager;
let receiver: Receiver;
let ddbProxy: FaultProxy;
const clients: { destroy(): void }[] = [];
const logLines: string[] = [];

function gateway() {
  const metricLines: string[] = [];
  const dynamodb = new DynamoDBClient({ ...clientOptions(), endpoint: ddbProxy.endpoint, region: REGION, credentials: { accessKeyId: 'local', secretAccessKey: 'local' } });
  const sqs = new SQSClient({ ...clientOptions(), endpoint: fauxqs.endpoint, region: REGION, credentials: { accessKeyId: 'test', secretAccessKey: 'test' } });
  clients.push(dynamodb, sqs);
  const lambda = mcpLambdaFromEnvironment(
    {
      TABLE_NAME: TABLE,
      QUEUE_URL: fauxqs.queueUrl,
      DEAD_LETTER_QUEUE_URL: fauxqs.deadLetterQueueUrl,
      API_KEY_SECRET_ARN: secrets.arn,
      DMDOT_DELIVERY_WAIT_MS: '0',
      DMDOT_ALLOW_LOOPBACK_CALLBACKS: '1',
    },
    { dynamodb, sqs, secrets: testSecretsReader(secrets.endpoint) },
    { log: createLogger((line) => logLines.push(line)), metrics: createMetrics({ sink: (line) => metricLines.push(line) }) },
  );
  return { api: localApiGateway(lambda), metricLines };
}

async function rpc(api: ReturnType<typeof gateway>['api'], method: string, params: Record<string, unknown>) {
  const response = await api.fetch(`https://api.example/mcp?key=${encodeURIComponent(API_KEY)}`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': MODERN,
      'mcp-method': method,
      ...(method === 'tools/call' ? { 'mcp-name': String(params.name) } : {}),
    },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method,
      params: { ...params, _meta: { 'io.modelcontextprotocol/protocolVersion': MODERN, 'io.modelcontextprotocol/clientCapabilities': {} } },
    }),
  });
  return { status: response.status, body: (await response.json()) as { result?: Record<string, unknown>; error?: { code: number } } };
}

/** The DependencyUnavailable lines among the emitted ones, parsed. */
function unavailable(lines: string[]): Record<string, unknown>[] {
  return lines.map((l) => JSON.parse(l) as Record<string, unknown>).filter((l) => MetricName.dependencyUnavailable in l);
}

beforeAll(async () => {
  [ddb, fauxqs, secrets, receiver] = await Promise.all([startDynamoDbLocal(), startFauxqs(), startFakeSecretsManager(undefined, { verifySignatures: false }), startReceiver()]);
  ddbProxy = await startFaultProxy('dynamodb', ddb.endpoint);
  await ddb.createTable(TABLE);
  secrets.setSecret(API_KEY);
}, 60_000);

afterEach(() => {
  ddbProxy.setRule(() => 'pass');
  ddbProxy.releaseHeld();
  expect(logLines.join('\n')).not.toContain(API_KEY);
});

afterAll(async () => {
  for (const client of clients) client.destroy();
  await ddbProxy?.stop();
  await Promise.all([ddb?.stop(), fauxqs?.stop(), secrets?.stop(), receiver?.stop()]);
});

describe('ARCH-ALARM-1: a stalled table on the MCP path moves DependencyUnavailable, and the answers stay as they were', () => {
  test('send_to_dot: HTTP 200 with isError, within 5 s, and one line with Dependency=storage', async () => {
    const { api, metricLines } = gateway();
    // The key loads first (Secrets Manager answers), then every table call stalls.
    await api.fetch('https://api.example/healthz');
    ddbProxy.setRule(() => 'stall');
    const started = Date.now();
    const answer = await rpc(api, 'tools/call', { name: 'send_to_dot', arguments: { message: 'into the void' } });
    expect(Date.now() - started).toBeLessThan(Limits.requestMs);
    expect(answer.status).toBe(200);
    expect(answer.body.error).toBeUndefined();
    expect(answer.body.result).toMatchObject({ isError: true });
    expect(ddbProxy.counts()['GetItem:stall']).toBeGreaterThanOrEqual(1);
    expect(unavailable(metricLines)).toEqual([expect.objectContaining({ Dependency: 'storage', DependencyUnavailable: 1 })]);
  }, 20_000);

  test('events/subscribe: HTTP 200 with -32603, and one line with Dependency=storage', async () => {
    const { api, metricLines } = gateway();
    await api.fetch('https://api.example/healthz');
    ddbProxy.setRule(() => 'stall');
    const answer = await rpc(api, 'events/subscribe', {
      name: 'message.created',
      arguments: {},
      delivery: { mode: 'webhook', url: receiver.url, secret: `whsec_${randomBytes(32).toString('base64')}` },
    });
    expect(answer.status).toBe(200);
    expect(answer.body.error?.code).toBe(-32603);
    expect(unavailable(metricLines)).toEqual([expect.objectContaining({ Dependency: 'storage', DependencyUnavailable: 1 })]);
  }, 20_000);

  test('POST /v1/messages: 503 storage_unavailable, counted the same way', async () => {
    const { api, metricLines } = gateway();
    await api.fetch('https://api.example/healthz');
    ddbProxy.setRule(() => 'stall');
    const response = await api.fetch('https://api.example/v1/messages', {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${API_KEY}` },
      body: JSON.stringify({ message: 'into the void' }),
    });
    expect(response.status).toBe(503);
    expect(await response.json()).toMatchObject({ error: { code: 'storage_unavailable' } });
    expect(unavailable(metricLines)).toEqual([expect.objectContaining({ Dependency: 'storage' })]);
  }, 20_000);

  test('with the table answering, a send writes no such line', async () => {
    const { api, metricLines } = gateway();
    const answer = await rpc(api, 'tools/call', { name: 'send_to_dot', arguments: { message: 'nobody subscribed' } });
    expect(answer.status).toBe(200);
    expect(unavailable(metricLines)).toEqual([]);
  }, 20_000);
});
