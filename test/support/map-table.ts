/**
 * The tests' item table (lambda/core/store/table.ts) on a Map: the one Store over it is the unit
 * tests' FakeStore. Conditions and updates are the core's own `holds` and `applied`, evaluated
 * synchronously, so every write is atomic.
 *
 * The storage-only attributes (`ttl`, the index keys) are kept beside each record, not in it: a
 * test that reads `records` (FakeStore's `events`, `subscription`) sees the record as the Store
 * returns it, and a record it changes in place stays changed.
 *
 * Deliberately not here: expiry (the Store judges it), and any ordering or index beyond a sort of
 * what is stored (this table is never large).
 */
import { afterWrite, holds, type IndexDefinition, type IndexRange, type Item } from '../../lambda/core/store/table';
import type { ItemTable, TableEntry, TableWrite, WriteResult } from '../../lambda/core/store/table';
import { storageAttributes } from '../../lambda/core/store/items';

export class MapTable implements ItemTable {
  /** The records, by key, without their storage-only attributes. */
  readonly records = new Map<string, Item>();
  private readonly storage = new Map<string, Item>();

  async get(key: string): Promise<Item | undefined> {
    return this.read(key);
  }

  async put(key: string, item: Item, condition?: Condition): Promise<WriteResult> {
    return this.apply({ kind: 'put', key, item, condition });
  }

  async update(key: string, update: Update, condition?: Condition): Promise<WriteResult> {
    return this.apply({ kind: 'update', key, update, condition });
  }

  async delete(key: string, condition?: Condition): Promise<WriteResult> {
    return this.apply({ kind: 'delete', key, condition });
  }

  async queryPrefix(prefix: string): Promise<TableEntry[]> {
    return [...this.records.keys()]
      .filter((key) => key.startsWith(prefix))
      .sort()
      .map((key) => ({ key, item: this.read(key)! }));
  }

  async queryIndex(index: IndexDefinition, partition: string, range: IndexRange): Promise<TableEntry[]> {
    const entries: { key: string; item: Item; sort: number | string }[] = [];
    for (const key of this.records.keys()) {
      const item = this.read(key)!;
      const sort = item[index.sort] as number | string | undefined;
      if (item[index.partition] !== partition || sort === undefined) continue;
      if ((range.after !== undefined && sort <= range.after) || (range.before !== undefined && sort >= range.before)) continue;
      entries.push({ key, item, sort });
    }
    entries.sort((a, b) => (a.sort < b.sort ? -1 : a.sort > b.sort ? 1 : a.key < b.key ? -1 : 1));
    return entries.slice(0, range.limit).map(({ key, item }) => ({ key, item }));
  }

  async transact(writes: readonly TableWrite[]): Promise<boolean> {
    if (!writes.every((write) => holds(this.read(write.key), write.condition))) return false;
    for (const write of writes) this.apply(write);
    return true;
  }

  /** Stores `item` as is, unconditionally (a test arranging what is stored). */
  set(key: string, item: Item): void {
    this.apply({ kind: 'put', key, item });
  }

  private read(key: string): Item | undefined {
    const record = this.records.get(key);
    return record ? structuredClone({ ...record, ...this.storage.get(key) }) : undefined;
  }

  private apply(write: TableWrite): WriteResult {
    const stored = this.read(write.key);
    if (!holds(stored, write.condition)) return { ok: false, old: stored };
    const next = afterWrite(stored, write);
    if (!next) {
      this.records.delete(write.key);
      this.storage.delete(write.key);
      return { ok: true };
    }
    const record: Item = {};
    const storage: Item = {};
    for (const [field, value] of Object.entries(structuredClone(next))) (storageAttributes.has(field) ? storage : record)[field] = value;
    // An update changes the record a test may hold in place; a put stores a new one.
    const held = write.kind === 'update' ? this.records.get(write.key) : undefined;
    if (held) {
      for (const field of Object.keys(held)) if (!(field in record)) delete held[field];
      Object.assign(held, record);
    } else this.records.set(write.key, record);
    this.storage.set(write.key, storage);
    return { ok: true };
  }
}

type Condition = NonNullable<TableWrite['condition']>;
type Update = Extract<TableWrite, { kind: 'update' }>['update'];
