/**
 * The item table the one Store (./store.ts) is written over (docs/contract/storage.md, STORE-12 and
 * STORE-TABLE-1), implemented by DynamoDB, the embedded LMDB database and the tests' Map. Its
 * primitives are DynamoDB's, each one request there. Also here, pure: what a condition (`holds`)
 * and an update (`applied`) mean, for in-process backends.
 *
 * Deliberately not here: any I/O, and what any key or attribute means.
 */

/** A stored item: the record's fields, plus storage attributes (`ttl`, index keys). Never the key. */
export type Item = Record<string, unknown>;

/** The one small condition language of conditional writes. A comparison on a missing item or field is false. */
export type Condition =
  | { op: 'exists' }
  | { op: 'absent' }
  | { op: 'has'; field: string }
  | { op: 'lacks'; field: string }
  | { op: 'eq'; field: string; value: unknown }
  | { op: 'in'; field: string; values: readonly unknown[] }
  | { op: 'lt' | 'le' | 'gt'; field: string; value: number }
  | { op: 'and' | 'or'; of: readonly Condition[] };

export const when = {
  exists: (): Condition => ({ op: 'exists' }),
  absent: (): Condition => ({ op: 'absent' }),
  has: (field: string): Condition => ({ op: 'has', field }),
  lacks: (field: string): Condition => ({ op: 'lacks', field }),
  eq: (field: string, value: unknown): Condition => ({ op: 'eq', field, value }),
  in: (field: string, values: readonly unknown[]): Condition => ({ op: 'in', field, values }),
  lt: (field: string, value: number): Condition => ({ op: 'lt', field, value }),
  le: (field: string, value: number): Condition => ({ op: 'le', field, value }),
  gt: (field: string, value: number): Condition => ({ op: 'gt', field, value }),
  and: (...of: Condition[]): Condition => ({ op: 'and', of }),
  or: (...of: Condition[]): Condition => ({ op: 'or', of }),
};

/** One update; of a missing item it creates it, as DynamoDB's UpdateItem does (a condition prevents that). A field appears in one part only. */
export interface Update {
  set?: Item;
  setIfAbsent?: Item;
  remove?: readonly string[];
  append?: Record<string, readonly unknown[]>;
  add?: Record<string, number>;
}

export type WriteResult = { ok: true } | { ok: false; old: Item | undefined };

export type TableWrite =
  | { kind: 'put'; key: string; item: Item; condition?: Condition }
  | { kind: 'update'; key: string; update: Update; condition?: Condition }
  | { kind: 'delete'; key: string; condition?: Condition };

/** A sparse index: an item is in it while it has the partition attribute (and the sort attribute). */
export interface IndexDefinition {
  name: string;
  partition: string;
  sort: string;
  sortType: 'N' | 'S';
  /** `keys`: a query returns the key and the index attributes only; `all`: the whole item (possibly stale). */
  projection: 'keys' | 'all';
}

/** Where a range of an index starts or ends, exclusive; `limit` at most that many entries, ascending. */
export interface IndexRange {
  after?: number | string;
  before?: number | string;
  limit: number;
}

export interface TableEntry {
  key: string;
  item: Item;
}

export interface ItemTable {
  /** Strongly consistent read of the item stored under `key`, expired or not. */
  get(key: string): Promise<Item | undefined>;
  put(key: string, item: Item, condition?: Condition): Promise<WriteResult>;
  update(key: string, update: Update, condition?: Condition): Promise<WriteResult>;
  delete(key: string, condition?: Condition): Promise<WriteResult>;
  /** Every item whose key starts with `prefix`: operator listings only, never a request path. */
  queryPrefix(prefix: string): Promise<TableEntry[]>;
  /** One partition of a sparse index, ascending by its sort attribute (eventually consistent on DynamoDB). */
  queryIndex(index: IndexDefinition, partition: string, range: IndexRange): Promise<TableEntry[]>;
  /** All the writes or none; true when every condition held. For a backend's outbox only: the Store never calls it. */
  transact?(writes: readonly TableWrite[]): Promise<boolean>;
}

/** Whether `condition` holds for the stored `item` (undefined: no item). */
export function holds(item: Item | undefined, condition: Condition | undefined): boolean {
  if (!condition) return true;
  const value = (field: string) => item?.[field];
  switch (condition.op) {
    case 'exists':
      return item !== undefined;
    case 'absent':
      return item === undefined;
    case 'has':
      return value(condition.field) !== undefined;
    case 'lacks':
      return value(condition.field) === undefined;
    case 'eq':
      return value(condition.field) !== undefined && sameValue(value(condition.field), condition.value);
    case 'in':
      return value(condition.field) !== undefined && condition.values.some((candidate) => sameValue(value(condition.field), candidate));
    case 'lt':
    case 'le':
    case 'gt': {
      const found = value(condition.field);
      if (typeof found !== 'number') return false;
      return condition.op === 'lt' ? found < condition.value : condition.op === 'le' ? found <= condition.value : found > condition.value;
    }
    case 'and':
      return condition.of.every((part) => holds(item, part));
    case 'or':
      return condition.of.some((part) => holds(item, part));
  }
}

function sameValue(a: unknown, b: unknown): boolean {
  return a === b || (typeof a === 'object' && a !== null && JSON.stringify(a) === JSON.stringify(b));
}

/** The item after `update` (a new object; `item` is left alone). */
export function applied(item: Item | undefined, update: Update): Item {
  const next: Item = { ...(item ?? {}) };
  for (const [field, value] of Object.entries(update.set ?? {})) if (value !== undefined) next[field] = value;
  for (const [field, value] of Object.entries(update.setIfAbsent ?? {})) if (value !== undefined && next[field] === undefined) next[field] = value;
  for (const field of update.remove ?? []) delete next[field];
  for (const [field, values] of Object.entries(update.append ?? {})) {
    next[field] = [...(Array.isArray(next[field]) ? (next[field] as unknown[]) : []), ...values];
  }
  for (const [field, amount] of Object.entries(update.add ?? {})) next[field] = (typeof next[field] === 'number' ? (next[field] as number) : 0) + amount;
  return next;
}

/** An item without its undefined fields (a backend never stores them). */
export function defined(item: Item): Item {
  // A plain loop: every write of the embedded database passes here.
  const out: Item = {};
  for (const field of Object.keys(item)) {
    const value = item[field];
    if (value === undefined) continue;
    // As fromEntries did: a field named __proto__ stays a field, never the prototype.
    if (field === '__proto__') Object.defineProperty(out, field, { value, enumerable: true, writable: true, configurable: true });
    else out[field] = value;
  }
  return out;
}

/** What a put, update or delete does to `stored` when its condition holds (undefined: the item goes). */
export function afterWrite(stored: Item | undefined, write: TableWrite): Item | undefined {
  if (write.kind === 'put') return defined(write.item);
  if (write.kind === 'update') return applied(stored, write.update);
  return undefined;
}
