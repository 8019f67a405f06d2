/**
 * The pup door on the MCP Lambda as the stack wires it (`mcpLambdaFromEnvironment`): the shared
 * suite (test/support/pup-suite.ts) through the local API Gateway (payload 2.0 events), with the
 * replay claims and stored event answers in DynamoDB Local and the pup secret read from a Secrets
 * Manager double by PUP_SECRET_ARN, as JSON `{"secrets":[…],"rotatedAt":"…"}`. Plus what only
 * this wiring has: a rotation written to Secrets Manager takes effect without a new Lambda, and
 * the items the door leaves in the table.
 *
 * No SQS is needed: no test here reaches the queue (no dot is subscribed), so QUEUE_URL points
 * nowhere.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { DynamoDBClient, GetItemCommand } from '@aws-sdk/client-dynamodb';
import { SQSClient } from '@aws-sdk/client-sqs';
import type { InboundSecrets } from '../../lambda/core/inbound';
import { Limits } from '../../lambda/core/protocol';
import { clientOptions } from '../../lambda/handlers/aws-clients';
import { mcpLambdaFromEnvironment } from '../support/lambda-environment';
import { createLogger } from '../../lambda/log';
import { localApiGateway } from '../support/apigw';
import { startFaultProxy } from '../support/aws-fault-proxy';
import { startDynamoDbLocal, type DynamoDbLocal } from '../support/dynamodb-local';
import type { LogLine } from '../support/app';
import { FakeClock } from '../support/fakes';
import {
  describePupDoor,
  envelope,
  mcpBody,
  mcpHeaders,
  newPupSecret,
  newWebhookId,
  secretsAt,
  signedPost,
  type PupTarget,
  type PupTargetOptions,
} from '../support/pup-suite';
import { startFakeSecretsManager, testSecretsReader, type FakeSecretsManager } from '../support/fake-secrets-manager';
import { webRequest } from '../support/lambda';
import { START_HOOK_MS } from '../support/processes';
import { pollUntil } from '../support/cpu-wait';

const PUP_ARN = 'arn:aws:secretsmanager:us-east-1:000000000000:secret:dm-dot-pup-TeSt02';

let ddb: DynamoDbLocal;
let secrets: FakeSecretsManager;
let tables = 0;

beforeAll(async () => {
  [ddb, secrets] = await Promise.all([startDynamoDbLocal(), startFakeSecretsManager()]);
  secrets.setSecret(`key-${randomBytes(24).toString('base64url')}`);
}, START_HOOK_MS);

afterAll(async () => {
  jest.restoreAllMocks();
  await Promise.all([ddb?.stop(), secrets?.stop()]);
});

function secretString(config: InboundSecrets): string {
  return JSON.stringify({ secrets: config.secrets, ...(config.rotatedAt !== undefined ? { rotatedAt: new Date(config.rotatedAt).toISOString() } : {}) });
}

/** Log lines as the suite reads them: the real logger's JSON lines, parsed back. */
function parsedLogs(lines: string[]): LogLine[] {
  return new Proxy([] as LogLine[], {
    get(_target, property) {
      const parsed = lines.map((line) => {
        const { level, event, time: _time, ...fields } = JSON.parse(line) as { level: LogLine['level']; event: string; time: string } & Record<string, unknown>;
        return { level, event, fields };
      });
      const value = (parsed as unknown as Record<PropertyKey, unknown>)[property];
      return typeof value === 'function' ? value.bind(parsed) : value;
    },
  });
}

function manifestFile(text: string): string {
  const file = join(mkdtempSync(join(tmpdir(), 'dmdot-manifest-')), 'pup-manifest.json');
  writeFileSync(file, text);
  return file;
}

async function lambdaTarget(
  options: PupTargetOptions,
  clock = new FakeClock(Date.now()),
  dynamodb: DynamoDBClient = ddb.client,
): Promise<PupTarget & { tableName: string; lines: string[] }> {
  const tableName = `dm-dot-pup-${++tables}`;
  await ddb.createTable(tableName);
  const config = secretsAt(options, clock.now());
  if (config) secrets.setSecret(secretString(config), PUP_ARN);
  const lines: string[] = [];
  const env: NodeJS.ProcessEnv = {
    TABLE_NAME: tableName,
    QUEUE_URL: 'http://127.0.0.1:9/000000000000/unused',
    API_KEY_SECRET_ARN: secrets.arn,
    DMDOT_DELIVERY_WAIT_MS: '0',
    ...(config ? { PUP_SECRET_ARN: PUP_ARN } : {}),
    // The stack ships the manifest in the function's asset and names it; here a file of a task root.
    ...(options.manifest !== undefined ? { PUP_MANIFEST_FILE: manifestFile(options.manifest), LAMBDA_TASK_ROOT: '/' } : {}),
  };
  const clients = {
    dynamodb,
    sqs: new SQSClient({ endpoint: 'http://127.0.0.1:9', region: 'us-east-1', credentials: { accessKeyId: 'x', secretAccessKey: 'x' }, maxAttempts: 1 }),
    secrets: testSecretsReader(secrets.endpoint, { maxAttempts: 1 }),
  };
  const lambda = mcpLambdaFromEnvironment(env, clients, { log: createLogger((line) => lines.push(line)), clock });
  const gateway = localApiGateway(lambda);
  return { app: { handle: (request) => gateway.fetch(webRequest(request)), close: async () => undefined }, clock, logs: parsedLogs(lines), tableName, lines };
}

describePupDoor('MCP Lambda from its environment (API Gateway translation, DynamoDB Local, Secrets Manager)', (options) => lambdaTarget(options));

describe('pup door on the Lambda: what only this wiring shows', () => {
  test('a rotation written to Secrets Manager takes effect within the refresh interval, without a new Lambda', async () => {
    const old = newPupSecret();
    const fresh = newPupSecret();
    const clock = new FakeClock(Date.now());
    const t = await lambdaTarget({ secrets: { secrets: [old.secret] } }, clock);
    expect((await signedPost(t, '/pup/challenge', '"a"', old.key)).status).toBe(200);
    expect((await signedPost(t, '/pup/challenge', '"b"', fresh.key)).status).toBe(401);

    // The operator's put-secret-value: new first, old second, rotatedAt now. On AWS, PutSecretValue
    // without VersionStages moves AWSCURRENT to the new version, and GetSecretValue without a stage
    // returns AWSCURRENT, so the next refresh reads it; the double here serves one value per ARN.
    // https://docs.aws.amazon.com/secretsmanager/latest/apireference/API_PutSecretValue.html
    // https://docs.aws.amazon.com/secretsmanager/latest/apireference/API_GetSecretValue.html
    secrets.setSecret(secretString({ secrets: [fresh.secret, old.secret], rotatedAt: clock.now() }), PUP_ARN);
    clock.advance(2 * 60_000);
    await signedPost(t, '/pup/challenge', '"c"', old.key); // served from the cache; the refresh starts beside it
    let tries = 0;
    const accepted = await pollUntil(async () => (await signedPost(t, '/pup/challenge', `"d${tries++}"`, fresh.key)).status === 200, { limitMs: 1_000 });
    expect(accepted).toBe(true);
    expect((await signedPost(t, '/pup/challenge', '"e"', old.key)).status).toBe(200);
    clock.advance(10 * 60_000);
    expect((await signedPost(t, '/pup/challenge', '"f"', old.key)).status).toBe(401);
    expect(t.lines.join('\n')).not.toContain(fresh.secret.slice(6, 30));
    expect(t.lines.join('\n')).not.toContain(old.secret.slice(6, 30));
  });

  test('STORE-6, PUP-10: a REPLAY# item (10 min, marked processed, never the answer) per MCP/challenge id, an ANSWER# item per event id', async () => {
    const { secret, key } = newPupSecret();
    const t = await lambdaTarget({ secrets: { secrets: [secret] } });
    const challengeId = newWebhookId();
    const eventId = newWebhookId();
    await signedPost(t, '/pup/challenge', '"nonce-kept-nowhere"', key, { id: challengeId });
    await signedPost(t, '/pup/events', envelope(eventId, 'member.joined'), key, { id: eventId });
    const item = async (pk: string) =>
      (await ddb.client.send(new GetItemCommand({ TableName: t.tableName, Key: { pk: { S: pk } }, ConsistentRead: true }))).Item;
    const replay = await item(`REPLAY#${challengeId}`);
    // A second past the claim's inclusive end (adapters/dynamodb-store.ts).
    expect(Number(replay?.ttl?.N)).toBe(Math.ceil((t.clock.now() + Limits.replayMemoryMs) / 1000) + 1);
    // What a replay gets: the refusal. Nothing of the answer is in the table.
    expect(replay).toMatchObject({ answerStatus: { N: '401' } });
    expect(JSON.parse(replay!.answerBody!.S!)).toMatchObject({ error: { code: 'replayed' } });
    expect(JSON.stringify(replay)).not.toContain('nonce-kept-nowhere');
    const answer = await item(`ANSWER#${eventId}`);
    expect(answer).toMatchObject({ status: { N: '200' }, body: { S: '{}' } });
    expect(await item(`REPLAY#${eventId}`)).toBeUndefined();
  });

  test('PUP-20: the claim`s PutItem applied but its answer was lost: the SDK`s retry finds its own claim, and the request is answered, not refused', async () => {
    const { secret, key } = newPupSecret();
    const proxy = await startFaultProxy('dynamodb', ddb.endpoint);
    const client = new DynamoDBClient({
      ...clientOptions(),
      endpoint: proxy.endpoint,
      region: 'us-east-1',
      credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
    });
    try {
      let lost = false;
      // The first PutItem of a REPLAY# item reaches DynamoDB Local and is applied; its answer never comes.
      proxy.setRule((call) => {
        const pk = (call.body as { Item?: { pk?: { S?: string } } } | undefined)?.Item?.pk?.S ?? '';
        if (call.action === 'PutItem' && pk.startsWith('REPLAY#') && !lost) {
          lost = true;
          return 'lost';
        }
        return 'pass';
      });
      const t = await lambdaTarget({ secrets: { secrets: [secret] } }, new FakeClock(Date.now()), client);
      const id = newWebhookId();
      const answer = await signedPost(t, '/pup/mcp', mcpBody('server/discover'), key, { id, headers: mcpHeaders('server/discover') });
      expect(proxy.counts()['PutItem:lost']).toBe(1);
      expect(proxy.counts()['PutItem:pass']).toBeGreaterThanOrEqual(1);
      expect(answer.status).toBe(200);
      expect((answer.json as { result?: unknown }).result).toBeDefined();
      // It was processed: the same request sent again is a replay, refused (PUP-10).
      const retry = await signedPost(t, '/pup/mcp', mcpBody('server/discover'), key, { id, headers: mcpHeaders('server/discover') });
      expect(retry.status).toBe(401);
      expect(retry.json).toMatchObject({ error: { code: 'replayed' } });
    } finally {
      proxy.releaseHeld();
      client.destroy();
      await proxy.stop();
    }
  }, 30_000);

  test('PUP-21: a challenge whose first try failed (400) leaves no claim behind: the item is gone and the retry is processed', async () => {
    const { secret, key } = newPupSecret();
    const t = await lambdaTarget({ secrets: { secrets: [secret] } });
    const id = newWebhookId();
    expect((await signedPost(t, '/pup/challenge', '{"nope":1}', key, { id })).status).toBe(400);
    const stored = await ddb.client.send(new GetItemCommand({ TableName: t.tableName, Key: { pk: { S: `REPLAY#${id}` } }, ConsistentRead: true }));
    expect(stored.Item).toBeUndefined();
    expect((await signedPost(t, '/pup/challenge', '{"nope":1}', key, { id })).status).toBe(400);
  });
});
