/**
 * The DynamoDB storage adapter (docs/contract/storage.md): one table, partition key `pk` (S), no sort key, TTL
 * attribute `ttl` (epoch seconds) on every item. Item keys and TTL rules come from ./items, so
 * this adapter and the embedded file store write the same item shapes and pass one contract suite
 * (test/contract).
 *
 * What it does:
 * - every read is a strongly consistent GetItem, and an item past its own expiry (expiresAt, or
 *   verifiedAt + 24 h) is treated as absent: DynamoDB's TTL deletion is lazy (up to days late);
 * - every check-and-set is a single conditional write whose condition treats an expired item as
 *   absent too, so no decision is ever taken from a read followed by a write;
 * - subscribe is ONE conditional PutItem with `ReturnValuesOnConditionCheckFailure: ALL_OLD`,
 *   conditional on the stored item being what the subscribe read (absent; this URL with this
 *   generation; or another URL's, expired): the loser learns what is stored from the failed write
 *   itself, no second read.
 *
 * Deliberately not here: retries and timeouts (the SDK client's configuration, and the request
 * deadline every call of a Lambda's client carries: adapters/deadline.ts), logging (the
 * subscription item holds the signing secret, so nothing here ever prints an item or an
 * attribute value), table creation (CDK owns the table; `tableDefinition` exists for tests), and
 * scans or queries on any request or delivery path (every access there is by key). The one Scan,
 * `listEvents`, is operator-only (`dm-dot events --aws`): read-only, paged, filtered to EVENT#
 * items, never called by a Lambda. The one Query, `listQueuedBefore`, is the reconciler's, on the
 * sparse keys-only `queued` index (adapters/queued-index.ts), whose attributes every event write
 * that sets `status` keeps in step (`queuedIndexUpdate`).
 *
 * When the SUBSCRIPTION item counts as live (epoch ms on the caller's clock `now`):
 *
 *   createdAt / refreshedAt      expiresAt                  ttl * 1000 = expiresAt + 1 day
 *   |---------- live ------------|---- stored, expired -----|---- DynamoDB may delete it (lazily, days late)
 *   live:    now < expiresAt (items.isLive; at now == expiresAt it is already expired). Reads
 *            return it; a put for another url fails with it as the holder; a put for the same url
 *            refreshes it (new secret, new expiresAt).
 *   expired: reads say absent and any put overwrites it, whether or not TTL has removed it yet.
 */
import {
  ConditionalCheckFailedException,
  DeleteItemCommand,
  GetItemCommand,
  PutItemCommand,
  QueryCommand,
  ScanCommand,
  UpdateItemCommand,
  type AttributeValue,
  type CreateTableCommandInput,
  type DynamoDBClient,
} from '@aws-sdk/client-dynamodb';
import type {
  AccessStore,
  DeploymentKeys,
  DeploymentRecord,
  SenderRecord,
  EventExpectation,
  EventPatch,
  EventRecord,
  InboundAnswer,
  InboundAnswerResult,
  PutSubscriptionResult,
  QueuedEntry,
  ReplayClaim,
  Store,
  SubscriptionExpectation,
  SubscriptionRecord,
} from '../ports';
import { EventStatus as EventStatuses, Limits, type EventStatus } from '../core/protocol';
import { EventExists } from '../core/errors';
import { byName, ItemKeys, isLive, newestFirst, replayClaimOf, ttlOfEvent, ttlOfSubscription } from './items';
import { QueuedIndex, queuedShardOf, queuedShards } from './queued-index';

type Item = Record<string, AttributeValue>;

/** The fields an event update may set (EventPatch, but for `body` and `appendLog`, which have their own rules). */
const EVENT_PATCH_FIELDS = ['status', 'attempts', 'lastError', 'lastHttpStatus', 'deliveredAt', 'notBefore', 'subscriptionId', 'generation', 'cancelledAt'] as const satisfies readonly (keyof EventPatch)[];
/** What a restored record drops of an expired one it replaces, as a put would. */
const EVENT_OPTIONAL_FIELDS = [...EVENT_PATCH_FIELDS, 'body', 'log'] as const;

export interface DynamoDbStoreOptions {
  client: DynamoDBClient;
  tableName: string;
}

export class DynamoDbStore implements Store, AccessStore {
  private readonly client: DynamoDBClient;
  private readonly tableName: string;

  constructor(options: DynamoDbStoreOptions) {
    this.client = options.client;
    this.tableName = options.tableName;
  }

  async getSubscription(now: number): Promise<SubscriptionRecord | undefined> {
    const item = await this.get(ItemKeys.subscription);
    return item && isLive(item.expiresAt, now) ? (item as unknown as SubscriptionRecord) : undefined;
  }

  async getStoredSubscription(): Promise<SubscriptionRecord | undefined> {
    return (await this.get(ItemKeys.subscription)) as SubscriptionRecord | undefined;
  }

  async putSubscription(record: SubscriptionRecord, now: number, expected: SubscriptionExpectation): Promise<PutSubscriptionResult> {
    const names: Record<string, string> = {};
    const values: Item = {};
    const generationIs = (generation: string | undefined) => {
      names['#generation'] = 'generation';
      if (generation === undefined) return 'attribute_not_exists(#generation)';
      values[':generation'] = { S: generation };
      return '#generation = :generation';
    };
    let condition: string;
    switch (expected.kind) {
      case 'absent':
        condition = 'attribute_not_exists(pk)';
        break;
      case 'same':
        names['#url'] = 'url';
        values[':url'] = { S: expected.url };
        condition = `#url = :url AND ${generationIs(expected.generation)}`;
        break;
      case 'expired':
        // `<=`: items.isLive calls a subscription expired at now == expiresAt, and the condition
        // must agree with the reads at that instant.
        names['#expiresAt'] = 'expiresAt';
        values[':now'] = { N: String(now) };
        condition = `#expiresAt <= :now AND ${generationIs(expected.generation)}`;
        break;
    }
    try {
      await this.client.send(
        new PutItemCommand({
          TableName: this.tableName,
          Item: toItem(ItemKeys.subscription, record, ttlOfSubscription(record.expiresAt)),
          ConditionExpression: condition,
          ...(Object.keys(names).length > 0 ? { ExpressionAttributeNames: names } : {}),
          ...(Object.keys(values).length > 0 ? { ExpressionAttributeValues: values } : {}),
          ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
        }),
      );
      return { ok: true };
    } catch (error) {
      if (!isConditionFailure(error)) throw error;
      // ALL_OLD returns what is stored; nothing when the item is gone (a same-URL put after a delete).
      return { ok: false, holder: error.Item ? (fromItem(error.Item) as unknown as SubscriptionRecord) : undefined };
    }
  }

  async deleteSubscription(url: string): Promise<boolean> {
    try {
      await this.client.send(
        new DeleteItemCommand({
          TableName: this.tableName,
          Key: key(ItemKeys.subscription),
          ConditionExpression: '#url = :url',
          ExpressionAttributeNames: { '#url': 'url' },
          ExpressionAttributeValues: { ':url': { S: url } },
        }),
      );
      return true;
    } catch (error) {
      if (isConditionFailure(error)) return false;
      throw error;
    }
  }

  async recordDeliveryOutcome(subscriptionId: string, outcome: { deliveredAt?: number; error: SubscriptionRecord['lastError'] }): Promise<void> {
    const names: Record<string, string> = { '#id': 'id', '#lastError': 'lastError' };
    const values: Item = { ':id': { S: subscriptionId }, ':lastError': toAttr(outcome.error ?? null) };
    let update = 'SET #lastError = :lastError';
    if (outcome.deliveredAt !== undefined) {
      names['#lastDeliveryAt'] = 'lastDeliveryAt';
      values[':lastDeliveryAt'] = toAttr(outcome.deliveredAt);
      update += ', #lastDeliveryAt = :lastDeliveryAt';
    }
    // The condition also keeps UpdateItem from creating a stub SUBSCRIPTION item when there is none.
    // When it fails, the subscription was replaced or removed since the event was queued: nothing to record.
    await this.updateIf(ItemKeys.subscription, update, '#id = :id', names, values);
  }

  async putEvent(record: EventRecord): Promise<void> {
    try {
      await this.client.send(
        new PutItemCommand({
          TableName: this.tableName,
          Item: withQueuedIndex(toItem(ItemKeys.event(record.eventId), record, ttlOfEvent(record.expiresAt)), record, record.createdAt),
          // The record's own createdAt is the writer's "now": it keeps the decision on the caller's
          // clock (as every other method) instead of this process's wall clock.
          ConditionExpression: 'attribute_not_exists(pk) OR #expiresAt <= :now',
          ExpressionAttributeNames: { '#expiresAt': 'expiresAt' },
          ExpressionAttributeValues: { ':now': { N: String(record.createdAt) } },
          // A retry of this very put (the SDK's, after an answer was lost) learns from the failed
          // write itself that its first try was applied.
          ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
        }),
      );
    } catch (error) {
      if (!isConditionFailure(error)) throw error;
      if (isSameEvent(error.Item, record)) return;
      throw new EventExists(record.eventId);
    }
  }

  async getEvent(eventId: string, now: number): Promise<EventRecord | undefined> {
    const item = await this.get(ItemKeys.event(eventId));
    return item && isLive(item.expiresAt, now) ? eventOf(item) : undefined;
  }

  async updateEvent(eventId: string, patch: EventPatch, expected?: EventExpectation): Promise<boolean> {
    const names: Record<string, string> = {};
    const values: Item = {};
    const sets: string[] = [];
    const removes: string[] = [];
    for (const field of EVENT_PATCH_FIELDS) {
      const value = patch[field];
      if (value === undefined) continue;
      names[`#${field}`] = field;
      values[`:${field}`] = toAttr(value);
      sets.push(`#${field} = :${field}`);
    }
    if (patch.body !== undefined) {
      names['#body'] = 'body';
      if (patch.body === null) removes.push('#body');
      else {
        values[':body'] = { S: patch.body };
        sets.push('#body = :body');
      }
    }
    if (patch.appendLog !== undefined) {
      // Appended by DynamoDB itself: the compare-and-set below is what keeps one entry per attempt.
      names['#log'] = 'log';
      values[':logEntry'] = { L: [toAttr(patch.appendLog, 'log')] };
      values[':emptyLog'] = { L: [] };
      sets.push('#log = list_append(if_not_exists(#log, :emptyLog), :logEntry)');
    }
    if (sets.length === 0 && removes.length === 0) return false;
    queuedIndexUpdate(eventId, patch.status, names, values, sets, removes);
    // attribute_exists keeps UpdateItem from creating a stub item (no expiresAt, no ttl) for an
    // unknown id; the expectation makes the status transition a compare-and-set.
    const conditions = ['attribute_exists(pk)'];
    if (expected) {
      names['#status'] = 'status';
      const statuses = typeof expected.status === 'string' ? [expected.status] : [...expected.status];
      statuses.forEach((status, i) => (values[`:expectedStatus${i}`] = { S: status }));
      conditions.push(`#status IN (${statuses.map((_, i) => `:expectedStatus${i}`).join(', ')})`);
      if (expected.attempts !== undefined) {
        names['#attempts'] = 'attempts';
        values[':expectedAttempts'] = { N: String(expected.attempts) };
        conditions.push('#attempts = :expectedAttempts');
      }
      if (expected.notBefore !== undefined) {
        // The lease as it was read: absent, or exactly that time (the worker's lease before a POST).
        names['#notBefore'] = 'notBefore';
        if (expected.notBefore === null) conditions.push('attribute_not_exists(#notBefore)');
        else {
          values[':expectedNotBefore'] = { N: String(expected.notBefore) };
          conditions.push('#notBefore = :expectedNotBefore');
        }
      }
    }
    const update = [sets.length > 0 ? `SET ${sets.join(', ')}` : '', removes.length > 0 ? `REMOVE ${removes.join(', ')}` : ''].filter(Boolean).join(' ');
    return this.updateIf(ItemKeys.event(eventId), update, conditions.join(' AND '), names, values);
  }

  async restoreEvent(record: EventRecord): Promise<boolean> {
    // UpdateItem rather than PutItem: it creates the item when absent, and the Delivery Lambda,
    // the only caller, then needs no PutItem permission (least privilege).
    const names: Record<string, string> = { '#expiresAt': 'expiresAt', '#ttl': 'ttl' };
    const values: Item = { ':now': { N: String(record.createdAt) }, ':ttl': { N: String(ttlOfEvent(record.expiresAt)) } };
    const sets = ['#ttl = :ttl'];
    const removes: string[] = [];
    for (const [name, value] of Object.entries(record)) {
      if (value === undefined) continue;
      names[`#f_${name}`] = name;
      values[`:f_${name}`] = toAttr(value, name);
      sets.push(`#f_${name} = :f_${name}`);
    }
    // What the expired record had and the new one lacks must go, as a put would drop it.
    for (const field of EVENT_OPTIONAL_FIELDS) {
      if ((record as Partial<EventRecord>)[field] !== undefined) continue;
      names[`#r_${field}`] = field;
      removes.push(`#r_${field}`);
    }
    queuedIndexUpdate(record.eventId, record.status, names, values, sets, removes, { restart: true });
    const update = `SET ${sets.join(', ')}${removes.length > 0 ? ` REMOVE ${removes.join(', ')}` : ''}`;
    return this.updateIf(ItemKeys.event(record.eventId), update, 'attribute_not_exists(pk) OR #expiresAt <= :now', names, values);
  }

  async isVerified(key: string, now: number): Promise<boolean> {
    const item = await this.get(ItemKeys.verified(key));
    return item !== undefined && typeof item.verifiedAt === 'number' && isLive(item.verifiedAt + Limits.verificationCacheMs, now);
  }

  async markVerified(key: string, now: number): Promise<void> {
    // Unconditional: a newer verification simply restarts the 24 h window.
    await this.client.send(
      new PutItemCommand({
        TableName: this.tableName,
        Item: toItem(ItemKeys.verified(key), { verifiedAt: now }, Math.ceil((now + Limits.verificationCacheMs) / 1000)),
      }),
    );
  }

  async claimReplayId(id: string, now: number, token: string, request: string): Promise<ReplayClaim> {
    const expiresAt = now + Limits.replayMemoryMs;
    try {
      await this.client.send(
        new PutItemCommand({
          TableName: this.tableName,
          // TTL a second later than the claim's end, so DynamoDB never removes a claim still in force.
          Item: toItem(ItemKeys.replay(id), { claimedAt: now, expiresAt, leaseUntil: now + Limits.replayLeaseMs, token, request }, Math.ceil(expiresAt / 1000) + 1),
          // `<`: a claim holds through its expiresAt, the last instant the timestamp window accepts;
          // an unsettled one (no answer) only through its lease.
          ConditionExpression: 'attribute_not_exists(pk) OR #expiresAt < :now OR (attribute_not_exists(#answerStatus) AND #leaseUntil < :now)',
          ExpressionAttributeNames: { '#expiresAt': 'expiresAt', '#answerStatus': 'answerStatus', '#leaseUntil': 'leaseUntil' },
          ExpressionAttributeValues: { ':now': { N: String(now) } },
          // The claim that blocked the write comes back with the failure: ours (the SDK retried a
          // put whose answer was lost), settled with an answer, or still running.
          ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
        }),
      );
      return { claimed: true };
    } catch (error) {
      if (!isConditionFailure(error)) throw error;
      return replayClaimOf(error.Item ? fromItem(error.Item) : undefined, token, request);
    }
  }

  async settleReplayId(id: string, token: string, answer: InboundAnswer | undefined): Promise<void> {
    const condition = { ConditionExpression: '#token = :token', ExpressionAttributeNames: { '#token': 'token' } };
    try {
      if (answer) {
        await this.client.send(
          new UpdateItemCommand({
            TableName: this.tableName,
            Key: key(ItemKeys.replay(id)),
            UpdateExpression: 'SET #answerStatus = :status, #answerBody = :body',
            ...condition,
            ExpressionAttributeNames: { ...condition.ExpressionAttributeNames, '#answerStatus': 'answerStatus', '#answerBody': 'answerBody' },
            ExpressionAttributeValues: { ':token': { S: token }, ':status': { N: String(answer.status) }, ':body': { S: answer.body } },
          }),
        );
      } else {
        await this.client.send(
          new DeleteItemCommand({ TableName: this.tableName, Key: key(ItemKeys.replay(id)), ...condition, ExpressionAttributeValues: { ':token': { S: token } } }),
        );
      }
    } catch (error) {
      // Another request took the id over after this one's lease: its claim is not ours to settle.
      if (!isConditionFailure(error)) throw error;
    }
  }

  async putInboundAnswer(deliveryId: string, answer: InboundAnswer, now: number): Promise<InboundAnswerResult> {
    const expiresAt = now + Limits.pupEventAnswerMs;
    try {
      await this.client.send(
        new PutItemCommand({
          TableName: this.tableName,
          Item: toItem(ItemKeys.inboundAnswer(deliveryId), { status: answer.status, body: answer.body, storedAt: now, expiresAt }, Math.ceil(expiresAt / 1000)),
          ConditionExpression: 'attribute_not_exists(pk) OR #expiresAt <= :now',
          ExpressionAttributeNames: { '#expiresAt': 'expiresAt' },
          ExpressionAttributeValues: { ':now': { N: String(now) } },
          // The retry learns the first answer from this failed write itself: no second read, and
          // no window in which a read could see something other than what blocked the write.
          ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
        }),
      );
      return { stored: true };
    } catch (error) {
      if (!isConditionFailure(error)) throw error;
      if (!error.Item) throw new Error('conditional put of an inbound answer failed without returning the stored one');
      const stored = fromItem(error.Item);
      if (typeof stored.status !== 'number' || typeof stored.body !== 'string') throw new Error('stored inbound answer has no status or body');
      return { stored: false, answer: { status: stored.status, body: stored.body } };
    }
  }

  async listEvents(now: number, filter: { status?: EventStatus } = {}): Promise<EventRecord[]> {
    // A Scan reads (and bills) every item of the table whatever the filter: the filter only trims
    // what comes back. Fine for an operator's occasional look at a one-dot table; never on a
    // request path. Each page is at most 1 MB; LastEvaluatedKey pages on until the end.
    // https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Scan.html
    const names: Record<string, string> = { '#pk': 'pk', '#expiresAt': 'expiresAt' };
    const values: Item = { ':prefix': { S: ItemKeys.event('') }, ':now': { N: String(now) } };
    let condition = 'begins_with(#pk, :prefix) AND #expiresAt > :now';
    if (filter.status !== undefined) {
      names['#status'] = 'status';
      values[':status'] = { S: filter.status };
      condition += ' AND #status = :status';
    }
    const events: EventRecord[] = [];
    let startKey: Item | undefined;
    do {
      const page = await this.client.send(
        new ScanCommand({
          TableName: this.tableName,
          FilterExpression: condition,
          ExpressionAttributeNames: names,
          ExpressionAttributeValues: values,
          ConsistentRead: true,
          ...(startKey ? { ExclusiveStartKey: startKey } : {}),
        }),
      );
      for (const item of page.Items ?? []) events.push(eventOf(fromItem(item)));
      startKey = page.LastEvaluatedKey;
    } while (startKey);
    return newestFirst(events);
  }

  // --- The reconciler's reads and its one write (core/reconcile.ts), over the sparse index of
  // queued records (adapters/queued-index.ts).

  async listQueuedBefore(before: number, limit: number): Promise<QueuedEntry[]> {
    const found: QueuedEntry[] = [];
    // One Query per shard, oldest first; each stops at `limit`, so the merge below is exact.
    for (const shard of queuedShards()) {
      let startKey: Item | undefined;
      let taken = 0;
      do {
        const page = await this.client.send(
          new QueryCommand({
            TableName: this.tableName,
            IndexName: QueuedIndex.name,
            KeyConditionExpression: '#shard = :shard AND #since < :before',
            ExpressionAttributeNames: { '#shard': QueuedIndex.shardAttribute, '#since': QueuedIndex.sinceAttribute },
            ExpressionAttributeValues: { ':shard': { S: shard }, ':before': { N: String(before) } },
            ScanIndexForward: true,
            Limit: limit - taken,
            ...(startKey ? { ExclusiveStartKey: startKey } : {}),
          }),
        );
        for (const item of page.Items ?? []) {
          const pk = item.pk?.S;
          const since = Number(item[QueuedIndex.sinceAttribute]?.N);
          if (!pk?.startsWith(ItemKeys.event('')) || !Number.isFinite(since)) continue;
          found.push({ eventId: pk.slice(ItemKeys.event('').length), queuedSince: since });
          taken++;
        }
        startKey = page.LastEvaluatedKey;
      } while (startKey && taken < limit);
    }
    return found.sort((a, b) => a.queuedSince - b.queuedSince).slice(0, limit);
  }

  async markRequeued(eventId: string, attempts: number, now: number, notBefore: number | null): Promise<boolean> {
    // The lease as it was read, as in updateEvent: a worker that took it since wins.
    const lease = notBefore === null ? 'attribute_not_exists(#notBefore)' : '#notBefore = :notBefore';
    return this.updateIf(
      ItemKeys.event(eventId),
      'SET #repairedAt = :now, #since = :now',
      `attribute_exists(pk) AND #status = :queued AND #attempts = :attempts AND attribute_not_exists(#repairedAt) AND ${lease}`,
      { '#repairedAt': 'repairedAt', '#since': QueuedIndex.sinceAttribute, '#status': 'status', '#attempts': 'attempts', '#notBefore': 'notBefore' },
      {
        ':now': { N: String(now) },
        ':queued': { S: EventStatuses.queued },
        ':attempts': { N: String(attempts) },
        ...(notBefore === null ? {} : { ':notBefore': { N: String(notBefore) } }),
      },
    );
  }

  // ---- Access (ports.AccessStore): DEPLOYMENT, SENDER#, RATE# -------------------------------------
  // DEPLOYMENT and SENDER# items carry no `ttl`: they never expire. Every request-path access is a
  // GetItem or a conditional write by key; listSenders is operator-only (a Scan, like listEvents).

  async getDeployment(): Promise<DeploymentRecord | undefined> {
    return (await this.get(ItemKeys.deployment)) as DeploymentRecord | undefined;
  }

  async createDeployment(record: DeploymentRecord): Promise<DeploymentRecord> {
    try {
      await this.client.send(
        new PutItemCommand({
          TableName: this.tableName,
          Item: withoutTtl(toItem(ItemKeys.deployment, record, 0)),
          ConditionExpression: 'attribute_not_exists(pk)',
          // The loser of two first requests learns the winner's principal from this failed write.
          ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
        }),
      );
      return { ...record };
    } catch (error) {
      if (!isConditionFailure(error)) throw error;
      if (error.Item) return fromItem(error.Item) as unknown as DeploymentRecord;
      const stored = await this.getDeployment();
      if (!stored) throw new Error('conditional put of the deployment failed, yet none is stored');
      return stored;
    }
  }

  async setDeploymentKeys(keys: DeploymentKeys): Promise<boolean> {
    const names: Record<string, string> = { '#keyHash': 'keyHash', '#rotatedAt': 'rotatedAt', '#previousKeyHash': 'previousKeyHash', '#previousKeyUntil': 'previousKeyUntil' };
    const values: Item = { ':keyHash': { S: keys.keyHash }, ':rotatedAt': { N: String(keys.rotatedAt) } };
    let update = 'SET #keyHash = :keyHash, #rotatedAt = :rotatedAt';
    if (keys.previousKeyHash !== undefined && keys.previousKeyUntil !== undefined) {
      values[':previousKeyHash'] = { S: keys.previousKeyHash };
      values[':previousKeyUntil'] = { N: String(keys.previousKeyUntil) };
      update += ', #previousKeyHash = :previousKeyHash, #previousKeyUntil = :previousKeyUntil';
    } else {
      update += ' REMOVE #previousKeyHash, #previousKeyUntil';
    }
    return this.updateIf(ItemKeys.deployment, update, 'attribute_exists(pk)', names, values);
  }

  async addSender(record: SenderRecord): Promise<boolean> {
    try {
      await this.client.send(
        new PutItemCommand({
          TableName: this.tableName,
          Item: withoutTtl(toItem(ItemKeys.sender(record.name), record, 0)),
          ConditionExpression: 'attribute_not_exists(pk)',
        }),
      );
      return true;
    } catch (error) {
      if (isConditionFailure(error)) return false;
      throw error;
    }
  }

  async getSender(name: string): Promise<SenderRecord | undefined> {
    return (await this.get(ItemKeys.sender(name))) as SenderRecord | undefined;
  }

  async listSenders(): Promise<SenderRecord[]> {
    const senders: SenderRecord[] = [];
    let startKey: Item | undefined;
    do {
      const page = await this.client.send(
        new ScanCommand({
          TableName: this.tableName,
          FilterExpression: 'begins_with(#pk, :prefix)',
          ExpressionAttributeNames: { '#pk': 'pk' },
          ExpressionAttributeValues: { ':prefix': { S: ItemKeys.sender('') } },
          ConsistentRead: true,
          ...(startKey ? { ExclusiveStartKey: startKey } : {}),
        }),
      );
      for (const item of page.Items ?? []) senders.push(fromItem(item) as unknown as SenderRecord);
      startKey = page.LastEvaluatedKey;
    } while (startKey);
    return byName(senders);
  }

  async revokeSender(name: string, at: number): Promise<boolean> {
    return this.updateIf(ItemKeys.sender(name), 'SET #revokedAt = :at', 'attribute_exists(pk) AND attribute_not_exists(#revokedAt)', { '#revokedAt': 'revokedAt' }, { ':at': { N: String(at) } });
  }

  async touchSender(name: string, at: number, minIntervalMs: number): Promise<void> {
    await this.updateIf(
      ItemKeys.sender(name),
      'SET #lastUsedAt = :at',
      'attribute_exists(pk) AND (attribute_not_exists(#lastUsedAt) OR #lastUsedAt <= :before)',
      { '#lastUsedAt': 'lastUsedAt' },
      { ':at': { N: String(at) }, ':before': { N: String(at - minIntervalMs) } },
    );
  }

  async countSend(name: string, window: number, limit: number, expiresAt: number): Promise<boolean> {
    // One conditional UpdateItem per send: ADD creates the counter at 1, the condition stops it at the limit.
    return this.updateIf(
      ItemKeys.rate(name, window),
      'ADD #count :one SET #expiresAt = :expiresAt, #ttl = :ttl',
      'attribute_not_exists(#count) OR #count < :limit',
      { '#count': 'count', '#expiresAt': 'expiresAt', '#ttl': 'ttl' },
      { ':one': { N: '1' }, ':limit': { N: String(limit) }, ':expiresAt': { N: String(expiresAt) }, ':ttl': { N: String(Math.ceil(expiresAt / 1000)) } },
    );
  }
  // ---- end of Access ------------------------------------------------------------------------------

  /** One conditional UpdateItem: true when it was applied, false when its condition failed. */
  private async updateIf(pk: string, update: string, condition: string, names: Record<string, string>, values: Item): Promise<boolean> {
    try {
      await this.client.send(
        new UpdateItemCommand({
          TableName: this.tableName,
          Key: key(pk),
          UpdateExpression: update,
          ConditionExpression: condition,
          ExpressionAttributeNames: names,
          ExpressionAttributeValues: values,
        }),
      );
      return true;
    } catch (error) {
      if (isConditionFailure(error)) return false;
      throw error;
    }
  }

  /** Strongly consistent read, unmarshalled, without `pk` and `ttl`. */
  private async get(pk: string): Promise<Record<string, unknown> | undefined> {
    const result = await this.client.send(new GetItemCommand({ TableName: this.tableName, Key: key(pk), ConsistentRead: true }));
    return result.Item ? fromItem(result.Item) : undefined;
  }
}

/** CreateTable input for the single table; tests create it in DynamoDB Local (CDK owns the real one). */
export function tableDefinition(tableName: string): CreateTableCommandInput {
  return {
    TableName: tableName,
    AttributeDefinitions: [
      { AttributeName: 'pk', AttributeType: 'S' },
      { AttributeName: QueuedIndex.shardAttribute, AttributeType: 'S' },
      { AttributeName: QueuedIndex.sinceAttribute, AttributeType: 'N' },
    ],
    KeySchema: [{ AttributeName: 'pk', KeyType: 'HASH' }],
    GlobalSecondaryIndexes: [
      {
        IndexName: QueuedIndex.name,
        KeySchema: [
          { AttributeName: QueuedIndex.shardAttribute, KeyType: 'HASH' },
          { AttributeName: QueuedIndex.sinceAttribute, KeyType: 'RANGE' },
        ],
        Projection: { ProjectionType: 'KEYS_ONLY' },
      },
    ],
    BillingMode: 'PAY_PER_REQUEST',
  };
}

// --- The sparse index of queued records (adapters/queued-index.ts): set while `queued`, gone after.

/** A put's item with the index attributes when the record is queued. */
function withQueuedIndex(item: Item, record: EventRecord, since: number): Item {
  if (record.status !== EventStatuses.queued) return item;
  return { ...item, [QueuedIndex.shardAttribute]: { S: queuedShardOf(record.eventId) }, [QueuedIndex.sinceAttribute]: { N: String(since) } };
}

/**
 * The index part of an update that sets `status`: to `queued`, the shard and (when absent: a
 * record that stays queued keeps its time) since when; to anything else, both removed with
 * `repairedAt`. `restart`: a restored record is queued from now, whatever an expired one said.
 * The time is this process's clock: the index only orders records for the reconciler, which
 * runs on the same wall clock.
 */
function queuedIndexUpdate(
  eventId: string,
  status: EventStatus | undefined,
  names: Record<string, string>,
  values: Item,
  sets: string[],
  removes: string[],
  options: { restart?: boolean } = {},
): void {
  if (status === undefined) return;
  names['#q_shard'] = QueuedIndex.shardAttribute;
  names['#q_since'] = QueuedIndex.sinceAttribute;
  if (status === EventStatuses.queued) {
    values[':q_shard'] = { S: queuedShardOf(eventId) };
    values[':q_since'] = { N: String(Date.now()) };
    sets.push('#q_shard = :q_shard', options.restart ? '#q_since = :q_since' : '#q_since = if_not_exists(#q_since, :q_since)');
    return;
  }
  names['#q_repairedAt'] = 'repairedAt';
  removes.push('#q_shard', '#q_since', '#q_repairedAt');
}

/** An event record as stored, without the index's attributes (they are the store's, not the record's). */
function eventOf(item: Record<string, unknown>): EventRecord {
  const record = { ...item };
  delete record[QueuedIndex.shardAttribute];
  delete record[QueuedIndex.sinceAttribute];
  return record as unknown as EventRecord;
}

/** True when a stored item (ALL_OLD of a failed put) is this very record: our own earlier try. */
function isSameEvent(stored: Item | undefined, record: EventRecord): boolean {
  if (!stored) return false;
  const old = fromItem(stored);
  // Event ids are 128 random bits: the same id with the same bytes and creation time is this put.
  return old.eventId === record.eventId && old.body === record.body && old.createdAt === record.createdAt;
}

/** An item that never expires: no `ttl` attribute at all. */
function withoutTtl(item: Item): Item {
  const { ttl: _ttl, ...rest } = item;
  return rest;
}

function isConditionFailure(error: unknown): error is ConditionalCheckFailedException {
  // By name as well: two copies of the SDK in one bundle would defeat instanceof.
  return error instanceof ConditionalCheckFailedException || (error as { name?: unknown } | null)?.name === 'ConditionalCheckFailedException';
}

function key(pk: string): Item {
  return { pk: { S: pk } };
}

/** Marshals a record; undefined fields are left out of the item (null is kept: it means "cleared"). */
function toItem(pk: string, record: object, ttl: number): Item {
  const item: Item = {};
  for (const [name, value] of Object.entries(record)) {
    if (value !== undefined) item[name] = toAttr(value, name);
  }
  item.pk = { S: pk };
  item.ttl = { N: String(ttl) };
  return item;
}

/**
 * The few attribute types our records use: scalars, and for the delivery log a list of small maps.
 * The error names the field, never the value (secrets). Undefined members of a map are left out.
 */
function toAttr(value: unknown, field = 'value'): AttributeValue {
  if (value === null) return { NULL: true };
  if (typeof value === 'string') return { S: value };
  if (typeof value === 'number' && Number.isFinite(value)) return { N: String(value) };
  if (typeof value === 'boolean') return { BOOL: value };
  if (Array.isArray(value)) return { L: value.map((member) => toAttr(member, field)) };
  if (typeof value === 'object') {
    const map: Record<string, AttributeValue> = {};
    for (const [name, member] of Object.entries(value)) if (member !== undefined) map[name] = toAttr(member, `${field}.${name}`);
    return { M: map };
  }
  throw new TypeError(`cannot store ${field}: unsupported type ${typeof value}`);
}

function fromItem(item: Item): Record<string, unknown> {
  const record: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(item)) {
    if (name === 'pk' || name === 'ttl') continue;
    record[name] = fromAttr(value, name);
  }
  return record;
}

function fromAttr(value: AttributeValue, field: string): unknown {
  if (value.S !== undefined) return value.S;
  if (value.N !== undefined) return Number(value.N);
  if (value.BOOL !== undefined) return value.BOOL;
  if (value.NULL !== undefined) return null;
  if (value.L !== undefined) return value.L.map((member) => fromAttr(member, field));
  if (value.M !== undefined) return Object.fromEntries(Object.entries(value.M).map(([name, member]) => [name, fromAttr(member, `${field}.${name}`)]));
  throw new TypeError(`cannot read ${field}: unsupported attribute type`);
}
