/**
 * The item table (core/store/table.ts) on DynamoDB, and `DynamoDbStore`, the Store over it: one
 * table, partition key `pk` (S), no sort key, TTL attribute `ttl` (epoch seconds), and the two
 * sparse indexes of core/store/items.ts as global secondary indexes. Each primitive is one
 * request; a failed condition answers ALL_OLD, so the loser learns what is stored from the failed
 * write itself. The prefix listing is a paged Scan: only operator listings call it, never a request
 * or delivery path. No transaction (the Store's outbox is a put, then an SQS send), which keeps
 * TransactWriteItems out of the bundles. Marshalling is by hand (`@aws-sdk/util-dynamodb` is not
 * installed): strings, numbers, booleans, null, lists and maps.
 *
 * Deliberately not here: what an item means (the Store), retries and timeouts (the client's, and
 * adapters/deadline.ts), logging (an item may hold a signing secret: nothing here prints one), and
 * creating the table (CDK's; the tests' in test/support/dynamodb-local.ts).
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
  type DynamoDBClient,
} from '@aws-sdk/client-dynamodb';
import { TableStore, type TableStoreOptions } from '../core/store/store';
import type { Condition, IndexDefinition, IndexRange, Item, ItemTable, TableEntry, Update, WriteResult } from '../core/store/table';

type Attributes = Record<string, AttributeValue>;

export class DynamoDbStore extends TableStore {
  constructor(options: TableStoreOptions & { client: DynamoDBClient; tableName: string }) {
    super(new DynamoDbTable(options.client, options.tableName), options);
  }
}

export class DynamoDbTable implements ItemTable {
  constructor(
    private readonly client: DynamoDBClient,
    private readonly tableName: string,
  ) {}

  async get(key: string): Promise<Item | undefined> {
    const result = await this.client.send(new GetItemCommand({ TableName: this.tableName, Key: keyOf(key), ConsistentRead: true }));
    return result.Item ? fromItem(result.Item) : undefined;
  }

  put(key: string, item: Item, condition?: Condition): Promise<WriteResult> {
    return this.conditional(() => new PutItemCommand({ TableName: this.tableName, Item: { ...toAttr(item).M, ...keyOf(key) }, ...this.request(condition) }));
  }

  update(key: string, update: Update, condition?: Condition): Promise<WriteResult> {
    return this.conditional(() => new UpdateItemCommand({ TableName: this.tableName, Key: keyOf(key), ...this.request(condition, update) }));
  }

  delete(key: string, condition?: Condition): Promise<WriteResult> {
    return this.conditional(() => new DeleteItemCommand({ TableName: this.tableName, Key: keyOf(key), ...this.request(condition) }));
  }

  async queryPrefix(prefix: string): Promise<TableEntry[]> {
    const filter = { FilterExpression: 'begins_with(pk, :prefix)', ExpressionAttributeValues: { ':prefix': { S: prefix } } };
    const entries = await this.pages((start) => new ScanCommand({ TableName: this.tableName, ...filter, ConsistentRead: true, ...start }));
    return entries.sort((a, b) => (a.key < b.key ? -1 : 1));
  }

  async queryIndex(index: IndexDefinition, partition: string, range: IndexRange): Promise<TableEntry[]> {
    const expression = new Expression();
    const sort = () => expression.name(index.sort);
    const bounds = [`${expression.name(index.partition)} = ${expression.value(partition)}`];
    if (range.after !== undefined) bounds.push(`${sort()} > ${expression.value(range.after)}`);
    // A key condition takes one bound of the sort key; a second is a filter.
    const filter = range.before === undefined ? undefined : `${sort()} < ${expression.value(range.before)}`;
    if (filter && range.after === undefined) bounds.push(filter);
    const query = {
      TableName: this.tableName,
      IndexName: index.name,
      KeyConditionExpression: bounds.join(' AND '),
      ...(filter && range.after !== undefined ? { FilterExpression: filter } : {}),
      ...expression.parts(),
      ScanIndexForward: true,
    };
    return this.pages((start, found) => new QueryCommand({ ...query, Limit: range.limit - found, ...start }), range.limit);
  }

  /** The entries of every page, until there is no next page or `limit` entries are in. */
  private async pages(command: (start: { ExclusiveStartKey?: Attributes }, found: number) => ScanCommand | QueryCommand, limit = Infinity) {
    const found: TableEntry[] = [];
    let startKey: Attributes | undefined;
    do {
      const page = await this.client.send(command(startKey ? { ExclusiveStartKey: startKey } : {}, found.length) as QueryCommand);
      for (const item of page.Items ?? []) found.push({ key: item.pk!.S!, item: fromItem(item) });
      startKey = page.LastEvaluatedKey;
    } while (startKey && found.length < limit);
    return found;
  }

  /** The expressions of one write: its condition, its update, ALL_OLD for a loser. */
  private request(condition: Condition | undefined, update?: Update) {
    const expression = new Expression();
    const updateExpression = update ? expression.update(update) : undefined;
    const conditionExpression = condition ? expression.condition(condition) : undefined;
    return {
      ...(updateExpression ? { UpdateExpression: updateExpression } : {}),
      ...(conditionExpression ? { ConditionExpression: conditionExpression, ReturnValuesOnConditionCheckFailure: 'ALL_OLD' as const } : {}),
      ...expression.parts(),
    };
  }

  private async conditional(command: () => PutItemCommand | UpdateItemCommand | DeleteItemCommand): Promise<WriteResult> {
    try {
      await this.client.send(command() as PutItemCommand);
      return { ok: true };
    } catch (error) {
      if (!isConditionFailure(error)) throw error;
      return { ok: false, old: error.Item ? fromItem(error.Item) : undefined };
    }
  }
}

/** Names and values of one request's expressions: `#field` for a name, `:v<n>` for a value. */
class Expression {
  private readonly names: Record<string, string> = {};
  private readonly values: Attributes = {};

  name(field: string): string {
    const placeholder = `#${field.replace(/[^A-Za-z0-9_]/g, '_')}`;
    this.names[placeholder] = field;
    return placeholder;
  }

  value(value: unknown): string {
    const placeholder = `:v${Object.keys(this.values).length}`;
    this.values[placeholder] = toAttr(value);
    return placeholder;
  }

  condition(condition: Condition): string {
    switch (condition.op) {
      case 'exists':
      case 'has':
        return `attribute_exists(${condition.op === 'has' ? this.name(condition.field) : 'pk'})`;
      case 'absent':
      case 'lacks':
        return `attribute_not_exists(${condition.op === 'lacks' ? this.name(condition.field) : 'pk'})`;
      case 'in':
        return `${this.name(condition.field)} IN (${condition.values.map((value) => this.value(value)).join(', ')})`;
      case 'eq':
      case 'lt':
      case 'le':
      case 'gt':
        return `${this.name(condition.field)} ${{ eq: '=', lt: '<', le: '<=', gt: '>' }[condition.op]} ${this.value(condition.value)}`;
      case 'and':
      case 'or':
        return condition.of
          .map((part) => (part.op === 'and' || part.op === 'or' ? `(${this.condition(part)})` : this.condition(part)))
          .join(` ${condition.op.toUpperCase()} `);
    }
  }

  update(update: Update): string {
    const defined = (fields: Item = {}) => Object.entries(fields).filter(([, value]) => value !== undefined);
    const sets = [
      ...defined(update.set).map(([field, value]) => `${this.name(field)} = ${this.value(value)}`),
      ...defined(update.setIfAbsent).map(([field, value]) => `${this.name(field)} = if_not_exists(${this.name(field)}, ${this.value(value)})`),
      ...Object.entries(update.append ?? {}).map(
        ([field, values]) => `${this.name(field)} = list_append(if_not_exists(${this.name(field)}, ${this.value([])}), ${this.value(values)})`,
      ),
    ];
    const adds = Object.entries(update.add ?? {}).map(([field, amount]) => `${this.name(field)} ${this.value(amount)}`);
    const removes = (update.remove ?? []).map((field) => this.name(field));
    return [sets.length ? `SET ${sets.join(', ')}` : '', removes.length ? `REMOVE ${removes.join(', ')}` : '', adds.length ? `ADD ${adds.join(', ')}` : '']
      .filter(Boolean)
      .join(' ');
  }

  parts() {
    return {
      ...(Object.keys(this.names).length > 0 ? { ExpressionAttributeNames: this.names } : {}),
      ...(Object.keys(this.values).length > 0 ? { ExpressionAttributeValues: this.values } : {}),
    };
  }
}

function isConditionFailure(error: unknown): error is ConditionalCheckFailedException {
  // By name as well: two copies of the SDK in one bundle would defeat instanceof.
  return error instanceof ConditionalCheckFailedException || (error as { name?: unknown } | null)?.name === 'ConditionalCheckFailedException';
}

const keyOf = (key: string): Attributes => ({ pk: { S: key } });

/**
 * Marshals a value; the error names the field, never the value (secrets). Undefined members of a
 * map are left out (null is kept: it means "cleared").
 */
function toAttr(value: unknown, field?: string): AttributeValue {
  if (value === null) return { NULL: true };
  if (typeof value === 'string') return { S: value };
  if (typeof value === 'number' && Number.isFinite(value)) return { N: String(value) };
  if (typeof value === 'boolean') return { BOOL: value };
  if (Array.isArray(value)) return { L: value.map((member) => toAttr(member, field)) };
  if (typeof value === 'object') {
    const map: Attributes = {};
    for (const [name, member] of Object.entries(value)) if (member !== undefined) map[name] = toAttr(member, field ? `${field}.${name}` : name);
    return { M: map };
  }
  throw new TypeError(`cannot store ${field ?? 'value'}: unsupported type ${typeof value}`);
}

function fromItem(attributes: Attributes): Item {
  const { pk: _key, ...item } = fromAttr({ M: attributes }) as Item;
  return item;
}

function fromAttr(value: AttributeValue, field?: string): unknown {
  if (value.S !== undefined) return value.S;
  if (value.N !== undefined) return Number(value.N);
  if (value.BOOL !== undefined) return value.BOOL;
  if (value.NULL !== undefined) return null;
  if (value.L !== undefined) return value.L.map((member) => fromAttr(member, field));
  if (value.M !== undefined)
    return Object.fromEntries(Object.entries(value.M).map(([name, member]) => [name, fromAttr(member, field ? `${field}.${name}` : name)]));
  throw new TypeError(`cannot read ${field ?? 'value'}: unsupported attribute type`);
}
