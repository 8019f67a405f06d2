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
import { Limits } from '../../lambda/core/protocol';
import { createMetrics, MetricName } from '../../lambda/metrics';
import { startAwsWorld, timed, type AwsWorld } from '../support/aws-world';
import { START_HOOK_MS } from '../support/processes';

const TABLE = 'dm-dot-dependency-metric';
const API_KEY = `dm-${randomBytes(24).toString('base64url')}`;

let world: AwsWorld<'dynamodb'>;

/** The MCP Lambda on fresh clients (the table through the proxy), its EMF lines in `metricLines`. */
function gateway() {
  const metricLines: string[] = [];
  const api = world.mcpGateway({ overrides: { metrics: createMetrics({ sink: (line) => metricLines.push(line) }) } });
  return { api, metricLines };
}

/** The same with the key loaded first (Secrets Manager answers), then every table call stalled. */
async function stalledGateway() {
  const made = gateway();
  await made.api.fetch('https://api.example/healthz');
  world.proxies.dynamodb.setRule(() => 'stall');
  return made;
}

/** The DependencyUnavailable lines among the emitted ones, parsed. */
function unavailable(lines: string[]): Record<string, unknown>[] {
  return lines.map((l) => JSON.parse(l) as Record<string, unknown>).filter((l) => MetricName.dependencyUnavailable in l);
}

beforeAll(async () => {
  world = await startAwsWorld({
    table: TABLE,
    apiKey: API_KEY,
    env: { DMDOT_DELIVERY_WAIT_MS: '0' },
    secrets: { verifySignatures: false },
    proxies: ['dynamodb'],
  });
}, START_HOOK_MS);

afterEach(() => {
  world.resetProxies();
  expect(world.logLines.join('\n')).not.toContain(API_KEY);
});

afterAll(() => world?.stop());

describe('ARCH-ALARM-1: a stalled table on the MCP path moves DependencyUnavailable, and the answers stay as they were', () => {
  test('send_to_dot: HTTP 200 with isError, within 5 s, and one line with Dependency=storage', async () => {
    const { api, metricLines } = await stalledGateway();
    const { value: answer, ms, cpuWaitMs } = await timed(() => api.sendToDot('into the void'));
    expect(ms).toBeLessThan(Limits.requestMs + cpuWaitMs);
    expect(answer.status).toBe(200);
    expect(answer.body.error).toBeUndefined();
    expect(answer.body.result).toMatchObject({ isError: true });
    expect(world.proxies.dynamodb.counts()['GetItem:stall']).toBeGreaterThanOrEqual(1);
    expect(unavailable(metricLines)).toEqual([expect.objectContaining({ Dependency: 'storage', DependencyUnavailable: 1 })]);
  }, 20_000);

  test('events/subscribe: HTTP 200 with -32603, and one line with Dependency=storage', async () => {
    const { api, metricLines } = await stalledGateway();
    const answer = await api.subscribe(world.receiver.url);
    expect(answer.status).toBe(200);
    expect(answer.body.error?.code).toBe(-32603);
    expect(unavailable(metricLines)).toEqual([expect.objectContaining({ Dependency: 'storage', DependencyUnavailable: 1 })]);
  }, 20_000);

  test('POST /v1/messages: 503 storage_unavailable, counted the same way', async () => {
    const { api, metricLines } = await stalledGateway();
    const answer = await api.postMessage('into the void');
    expect(answer.status).toBe(503);
    expect(answer.body).toMatchObject({ error: { code: 'storage_unavailable' } });
    expect(unavailable(metricLines)).toEqual([expect.objectContaining({ Dependency: 'storage' })]);
  }, 20_000);

  test('with the table answering, a send writes no such line', async () => {
    const { api, metricLines } = gateway();
    const answer = await api.sendToDot('nobody subscribed');
    expect(answer.status).toBe(200);
    expect(unavailable(metricLines)).toEqual([]);
  }, 20_000);
});
