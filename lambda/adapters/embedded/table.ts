/**
 * The item table (lambda/core/store/table.ts) on the embedded LMDB environment (environment.ts):
 * the one Store runs over it in the local runtime and the operator CLI.
 *
 * Each conditional write reads, evaluates (the core's `holds` and `afterWrite`) and writes inside
 * one `write` of environment.ts; the outbox writes an event and its job in one (`transact`).
 *
 * An event updated to `delivered` loses its job (its safety net) in the same transaction: the
 * worker would only find the event final and complete it, at the cost of a receive, reads and a
 * write. A crash before that commit leaves the job, which redelivers.
 *
 * Deliberately not here: what any item means (the Store), the jobs (jobs.ts), the file's handling
 * (environment.ts: its creation, ownership, damage and full-disk checks).
 */
import { afterWrite, holds, type Condition, type IndexDefinition, type IndexRange, type Item } from '../../core/store/table';
import type { ItemTable, TableEntry, TableWrite, Update, WriteResult } from '../../core/store/table';
import { EventStatus } from '../../core/protocol';
import { ItemKeys } from '../../core/store/items';
import { getItem, setItem, storageKey, write, type Databases } from './environment';
import { removeJobInTxn } from './jobs';

const EVENT_PREFIX = ItemKeys.event('');

export class LmdbTable implements ItemTable {
  constructor(readonly dbs: Databases) {}

  async get(key: string): Promise<Item | undefined> {
    return getItem(this.dbs, key);
  }

  put(key: string, item: Item, condition?: Condition): Promise<WriteResult> {
    return write(this.dbs, () => this.applyInTxn({ kind: 'put', key, item, condition }));
  }

  update(key: string, update: Update, condition?: Condition): Promise<WriteResult> {
    return write(this.dbs, () => {
      const result = this.applyInTxn({ kind: 'update', key, update, condition });
      if (result.ok && update.set?.status === EventStatus.delivered && key.startsWith(EVENT_PREFIX)) removeJobInTxn(this.dbs, key.slice(EVENT_PREFIX.length));
      return result;
    });
  }

  delete(key: string, condition?: Condition): Promise<WriteResult> {
    return write(this.dbs, () => this.applyInTxn({ kind: 'delete', key, condition }));
  }

  async queryPrefix(prefix: string): Promise<TableEntry[]> {
    const start = storageKey(prefix);
    const entries: TableEntry[] = [];
    // An ordered range of keys, not a scan of the rest.
    for (const { key, value } of this.dbs.items.getRange({ start })) {
      if (!key.startsWith(start)) break;
      entries.push({ key, item: value });
    }
    return entries;
  }

  async queryIndex(index: IndexDefinition, partition: string, range: IndexRange): Promise<TableEntry[]> {
    const db = this.dbs.indexes.get(index.name)!;
    const entries: TableEntry[] = [];
    const start = range.after === undefined ? [partition] : [partition, range.after];
    // Past every sort value of the partition: strings sort after numbers, and no key holds U+FFFF.
    const end = range.before === undefined ? [partition, '\uffff'] : [partition, range.before];
    for (const [, sort, key] of db.getKeys({ start, end } as never) as Iterable<[string, number | string, string]>) {
      if (range.after !== undefined && sort === range.after) continue;
      const item = this.dbs.items.get(key);
      if (item) entries.push({ key, item });
      if (entries.length >= range.limit) break;
    }
    return entries;
  }

  /** All the writes or none; `also` runs in the same transaction when every condition held. */
  transact(writes: readonly TableWrite[], also?: () => void): Promise<boolean> {
    return write(this.dbs, () => {
      if (!writes.every((planned) => holds(getItem(this.dbs, planned.key), planned.condition))) return false;
      for (const planned of writes) this.applyInTxn(planned);
      also?.();
      return true;
    });
  }

  /** Inside a write: one conditional write. */
  private applyInTxn(planned: TableWrite): WriteResult {
    const stored = getItem(this.dbs, planned.key);
    if (!holds(stored, planned.condition)) return { ok: false, old: stored };
    setItem(this.dbs, planned.key, afterWrite(stored, planned), stored);
    return { ok: true };
  }
}
