/**
 * The storage contract against DynamoDbStore on DynamoDB Local (started once for this file, a
 * fresh table per test), plus checks of the raw items that only this adapter has: `pk`, `ttl` and
 * no attribute for an undefined field.
 */
import { GetItemCommand } from '@aws-sdk/client-dynamodb';
import { DynamoDbStore, DynamoDbTable } from '../../lambda/adapters/dynamodb-store';
import { Limits } from '../../lambda/core/protocol';
import { startDynamoDbLocal, type DynamoDbLocal } from '../support/dynamodb-local';
import { START_HOOK_MS } from '../support/processes';
import { contractClock, describeStoreContract, event, subscription } from './store.contract';
import { describeAccessStoreContract } from './access-store.contract';
import { describeItemTableContract } from './item-table.contract';

const { T0, HOUR } = contractClock;

let local: DynamoDbLocal | undefined;
let tables = 0;

beforeAll(async () => {
  const started = Date.now();
  local = await startDynamoDbLocal();
  if (process.env.DM_DOT_TIMINGS) process.stderr.write(`DynamoDB Local started in ${Date.now() - started} ms\n`);
}, START_HOOK_MS);

afterAll(async () => {
  await local?.stop();
});

async function freshStore(): Promise<{ store: DynamoDbStore; tableName: string }> {
  if (!local) throw new Error('DynamoDB Local is not running');
  const tableName = `dm-dot-contract-${++tables}`;
  await local.createTable(tableName);
  return { store: new DynamoDbStore({ client: local.client, tableName }), tableName };
}

// Tables are dropped with the in-memory database when DynamoDB Local stops.
describeItemTableContract(
  'DynamoDbTable',
  async () => {
    const { tableName } = await freshStore();
    return { table: new DynamoDbTable(local!.client, tableName), cleanup: async () => undefined };
  },
  { transact: false },
);

describeStoreContract('DynamoDbStore', async () => ({ store: (await freshStore()).store, cleanup: async () => undefined }));

describe('DynamoDbStore items', () => {
  async function raw(tableName: string, pk: string) {
    const result = await local!.client.send(new GetItemCommand({ TableName: tableName, Key: { pk: { S: pk } }, ConsistentRead: true }));
    return result.Item;
  }

  it('ARCH-5, STORE-1, STORE-3: writes pk, ttl (expiresAt + 1 day, in seconds) and no attribute for undefined fields', async () => {
    const { store, tableName } = await freshStore();
    const sub = subscription({ previousSecret: undefined, lastError: null });
    await store.putSubscription(sub, T0, { kind: 'absent' });
    const item = await raw(tableName, 'SUBSCRIPTION');
    expect(item?.pk).toEqual({ S: 'SUBSCRIPTION' });
    expect(item?.ttl).toEqual({ N: String(Math.ceil((sub.expiresAt + Limits.subscriptionItemGraceMs) / 1000)) });
    expect(item?.lastError).toEqual({ NULL: true });
    expect(Object.keys(item ?? {}).sort()).toEqual([...Object.keys(sub).filter((k) => k !== 'previousSecret'), 'pk', 'ttl'].sort());
  });

  it('STORE-4, STORE-5, STORE-6: event, verification and replay items carry a ttl', async () => {
    const { store, tableName } = await freshStore();
    await store.putEvent(event());
    await store.markVerified('k1', T0);
    await store.claimReplayId('msg_1', T0, 'token', 'POST /pup/challenge');
    expect((await raw(tableName, `EVENT#${event().eventId}`))?.ttl).toEqual({ N: String(Math.ceil(event().expiresAt / 1000)) });
    expect((await raw(tableName, 'VERIFIED#k1'))?.ttl).toEqual({ N: String(Math.ceil((T0 + Limits.verificationCacheMs) / 1000)) });
    // A second past the claim's inclusive end, so DynamoDB never deletes a claim still in force.
    expect((await raw(tableName, 'REPLAY#msg_1'))?.ttl).toEqual({ N: String(Math.ceil((T0 + Limits.replayMemoryMs) / 1000) + 1) });
  });

  it('an inbound answer is one ANSWER# item with status, body and a ttl', async () => {
    const { store, tableName } = await freshStore();
    await store.putInboundAnswer('msg_evt', { status: 200, body: '{}' }, T0);
    const item = await raw(tableName, 'ANSWER#msg_evt');
    expect(item).toMatchObject({ status: { N: '200' }, body: { S: '{}' }, ttl: { N: String(Math.ceil((T0 + Limits.pupEventAnswerMs) / 1000)) } });
  });

  it('STORE-2: an expired subscription is still stored yet read as absent', async () => {
    const { store, tableName } = await freshStore();
    await store.putSubscription(subscription({ expiresAt: T0 - 1 }), T0 - HOUR, { kind: 'absent' });
    expect(await raw(tableName, 'SUBSCRIPTION')).toBeDefined();
    await expect(store.getSubscription(T0)).resolves.toBeUndefined();
  });

  it('updateEvent and recordDeliveryOutcome on missing items write no item', async () => {
    const { store, tableName } = await freshStore();
    await store.updateEvent('evt_missing', { status: 'delivered' });
    await store.recordDeliveryOutcome('sub_a', { deliveredAt: T0, error: null });
    expect(await raw(tableName, 'EVENT#evt_missing')).toBeUndefined();
    expect(await raw(tableName, 'SUBSCRIPTION')).toBeUndefined();
  });
});

describe('DynamoDbStore requests', () => {
  it.each([
    [{ kind: 'absent' } as const, 'attribute_not_exists(pk)'],
    [{ kind: 'same', url: 'https://a.example.com/hook', generation: 'gen-a' } as const, '#url = :v0 AND #generation = :v1'],
    [{ kind: 'same', url: 'https://a.example.com/hook', generation: undefined } as const, '#url = :v0 AND attribute_not_exists(#generation)'],
    [{ kind: 'expired', generation: 'gen-a' } as const, '#expiresAt <= :v0 AND #generation = :v1'],
  ])('STORE-9: a subscribe planned as %j is one PutItem with the condition %s', async (expected, condition) => {
    const { store, sent } = recordingStore(() => ({}));
    await expect(store.putSubscription(subscription(), T0, expected)).resolves.toEqual({ ok: true });
    expect(sent).toHaveLength(1);
    expect(sent[0]!.input.ConditionExpression).toBe(condition);
  });

  /** A client that records every command's input and answers with `respond`. */
  function recordingStore(respond: (name: string, input: Record<string, unknown>) => unknown) {
    const sent: { name: string; input: Record<string, unknown> }[] = [];
    const client = {
      send: async (command: { constructor: { name: string }; input: Record<string, unknown> }) => {
        const name = command.constructor.name;
        sent.push({ name, input: command.input });
        return respond(name, command.input);
      },
    } as unknown as ConstructorParameters<typeof DynamoDbStore>[0]['client'];
    return { store: new DynamoDbStore({ client, tableName: 'table' }), sent };
  }

  it('DEL-PIPE-1: every read is a strongly consistent GetItem', async () => {
    const { store, sent } = recordingStore(() => ({}));
    await store.getSubscription(T0);
    await store.getEvent('evt_x', T0);
    await store.isVerified('k1', T0);
    expect(sent.map((s) => s.name)).toEqual(['GetItemCommand', 'GetItemCommand', 'GetItemCommand']);
    for (const { input } of sent) expect(input.ConsistentRead).toBe(true);
  });

  it('EV-SUB-11, STORE-9: a lost subscribe is one conditional PutItem whose ALL_OLD item is the holder (no second read)', async () => {
    const holder = subscription({ url: 'https://b.example.com/hook', lastError: null });
    const { ConditionalCheckFailedException } = await import('@aws-sdk/client-dynamodb');
    const { store, sent } = recordingStore(() => {
      throw new ConditionalCheckFailedException({
        message: 'The conditional request failed',
        $metadata: {},
        Item: {
          ...Object.fromEntries(
            Object.entries(holder).map(([k, v]) => [k, v === null ? { NULL: true } : typeof v === 'number' ? { N: String(v) } : { S: String(v) }]),
          ),
          pk: { S: 'SUBSCRIPTION' },
          ttl: { N: '1' },
        },
      });
    });
    await expect(store.putSubscription(subscription(), T0, { kind: 'expired', generation: 'gen-b' })).resolves.toStrictEqual({ ok: false, holder });
    expect(sent).toHaveLength(1);
    expect(sent[0]).toMatchObject({
      name: 'PutItemCommand',
      input: {
        ConditionExpression: '#expiresAt <= :v0 AND #generation = :v1',
        ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
        ExpressionAttributeValues: { ':v0': { N: String(T0) }, ':v1': { S: 'gen-b' } },
      },
    });
  });

  it('a retried inbound answer is one conditional PutItem whose ALL_OLD item is the answer (no second read)', async () => {
    const { ConditionalCheckFailedException } = await import('@aws-sdk/client-dynamodb');
    const { store, sent } = recordingStore(() => {
      throw new ConditionalCheckFailedException({
        message: 'The conditional request failed',
        $metadata: {},
        Item: { pk: { S: 'ANSWER#msg_1' }, status: { N: '200' }, body: { S: '{"first":true}' }, storedAt: { N: '1' }, expiresAt: { N: '2' }, ttl: { N: '1' } },
      });
    });
    await expect(store.putInboundAnswer('msg_1', { status: 200, body: '{}' }, T0)).resolves.toStrictEqual({
      stored: false,
      answer: { status: 200, body: '{"first":true}' },
    });
    expect(sent).toHaveLength(1);
    expect(sent[0]).toMatchObject({
      name: 'PutItemCommand',
      input: { ConditionExpression: 'attribute_not_exists(pk) OR #expiresAt <= :v0', ReturnValuesOnConditionCheckFailure: 'ALL_OLD' },
    });
  });
});

describeAccessStoreContract('DynamoDbStore', async () => ({ access: (await freshStore()).store, cleanup: async () => undefined }));

describe('DynamoDbStore access items', () => {
  it('STORE-DEP-5: DEPLOYMENT and SENDER# carry no ttl (they never expire); a RATE# counter does', async () => {
    const { store, tableName } = await freshStore();
    await store.createDeployment({ principal: 'p'.repeat(64), keyHash: 'k'.repeat(64), createdAt: T0 });
    await store.addSender({ name: 'billing', keyHash: 'h'.repeat(64), rate: 5, createdAt: T0 });
    await store.countSend('billing', 9, 5, T0 + 120_000);
    const raw = async (pk: string) =>
      (await local!.client.send(new GetItemCommand({ TableName: tableName, Key: { pk: { S: pk } }, ConsistentRead: true }))).Item;
    expect((await raw('DEPLOYMENT'))?.ttl).toBeUndefined();
    expect((await raw('SENDER#billing'))?.ttl).toBeUndefined();
    expect((await raw('RATE#billing#9'))?.ttl).toStrictEqual({ N: String(Math.ceil((T0 + 120_000) / 1000)) });
  });
});
