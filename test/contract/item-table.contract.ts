/**
 * The item table contract (lambda/core/store/table.ts): each primitive the one Store is written
 * over, pinned on every table (the tests' Map, the embedded database, DynamoDB Local), so the
 * Store's meaning holds wherever it runs.
 *
 * Deliberately not here: what any item means (the Store's contract suites, store.contract.ts).
 */
import { PendingIndex, QueuedIndex } from '../../lambda/core/store/items';
import { when, type ItemTable } from '../../lambda/core/store/table';

export type ItemTableFactory = () => Promise<{ table: ItemTable; cleanup(): Promise<void> }>;

/** `transact`: whether this table has the transaction (only where its outbox needs one). */
export function describeItemTableContract(name: string, factory: ItemTableFactory, options: { transact: boolean }): void {
  describe(`STORE-TABLE-1: item table primitives: ${name}`, () => {
    let table: ItemTable;
    let cleanup: (() => Promise<void>) | undefined;

    beforeEach(async () => {
      ({ table, cleanup } = await factory());
    });

    afterEach(async () => {
      await cleanup?.();
      cleanup = undefined;
    });

    it('put then get round-trips strings, numbers, booleans, null and lists of maps; undefined fields are not stored', async () => {
      const item = { s: 'text', n: 12.5, b: true, z: null, log: [{ at: 1, outcome: 'delivered', statusClass: null }], gone: undefined };
      await expect(table.put('A#1', item)).resolves.toStrictEqual({ ok: true });
      const { gone: _gone, ...stored } = item;
      await expect(table.get('A#1')).resolves.toStrictEqual(stored);
      await expect(table.get('A#2')).resolves.toBeUndefined();
    });

    it('a put whose condition fails writes nothing and returns the stored item (ALL_OLD), or none', async () => {
      await table.put('A#1', { v: 1 });
      await expect(table.put('A#1', { v: 2 }, when.absent())).resolves.toStrictEqual({ ok: false, old: { v: 1 } });
      await expect(table.put('A#2', { v: 2 }, when.exists())).resolves.toStrictEqual({ ok: false, old: undefined });
      await expect(table.get('A#1')).resolves.toStrictEqual({ v: 1 });
      await expect(table.get('A#2')).resolves.toBeUndefined();
    });

    it('conditions: eq, in, has, lacks, lt, le, gt, and, or; a comparison on a missing field is false', async () => {
      await table.put('A#1', { s: 'x', n: 5 });
      const tries: [Parameters<typeof when.and>[0], boolean][] = [
        [when.eq('s', 'x'), true],
        [when.eq('s', 'y'), false],
        [when.eq('missing', 'x'), false],
        [when.in('s', ['y', 'x']), true],
        [when.in('s', ['y']), false],
        [when.has('n'), true],
        [when.lacks('n'), false],
        [when.lacks('missing'), true],
        [when.lt('n', 6), true],
        [when.lt('n', 5), false],
        [when.le('n', 5), true],
        [when.gt('n', 4), true],
        [when.gt('n', 5), false],
        [when.lt('missing', 100), false],
        [when.and(when.eq('s', 'x'), when.lt('n', 5)), false],
        [when.or(when.eq('s', 'y'), when.le('n', 5)), true],
      ];
      for (const [condition, expected] of tries) {
        const result = await table.update('A#1', { set: { touched: true } }, condition);
        expect([condition, result.ok]).toStrictEqual([condition, expected]);
      }
    });

    it('update sets, sets when absent, removes, appends and adds in one write', async () => {
      await table.put('A#1', { a: 1, b: 'x', log: [1], keep: 'k' });
      const update = {
        set: { a: 2, c: null },
        setIfAbsent: { keep: 'no', fresh: 'yes' },
        remove: ['b'],
        append: { log: [2, 3], list: ['first'] },
        add: { count: 2 },
      };
      await expect(table.update('A#1', update, when.exists())).resolves.toStrictEqual({ ok: true });
      await expect(table.get('A#1')).resolves.toStrictEqual({ a: 2, c: null, keep: 'k', fresh: 'yes', log: [1, 2, 3], list: ['first'], count: 2 });
      await table.update('A#1', { add: { count: 3 } });
      await expect(table.get('A#1')).resolves.toMatchObject({ count: 5 });
    });

    it('an update of a missing item creates it, unless its condition says otherwise; a failed one returns ALL_OLD', async () => {
      await expect(table.update('A#1', { set: { a: 1 } }, when.exists())).resolves.toStrictEqual({ ok: false, old: undefined });
      await expect(table.get('A#1')).resolves.toBeUndefined();
      await expect(table.update('A#1', { add: { count: 1 } })).resolves.toStrictEqual({ ok: true });
      await expect(table.update('A#1', { add: { count: 1 } }, when.lt('count', 1))).resolves.toStrictEqual({ ok: false, old: { count: 1 } });
    });

    it('delete-if deletes only when its condition holds', async () => {
      await table.put('A#1', { v: 1 });
      await expect(table.delete('A#1', when.eq('v', 2))).resolves.toStrictEqual({ ok: false, old: { v: 1 } });
      await expect(table.delete('A#1', when.eq('v', 1))).resolves.toStrictEqual({ ok: true });
      await expect(table.get('A#1')).resolves.toBeUndefined();
    });

    it('20 concurrent conditional puts of one key: exactly one wins', async () => {
      const results = await Promise.all(Array.from({ length: 20 }, (_, i) => table.put('A#race', { i }, when.absent())));
      expect(results.filter((result) => result.ok)).toHaveLength(1);
    });

    it('queryPrefix returns every item whose key starts with the prefix, and nothing else', async () => {
      await table.put('B#2', { v: 2 });
      await table.put('B#1', { v: 1 });
      await table.put('C#1', { v: 3 });
      await table.put('BB', { v: 4 });
      const found = await table.queryPrefix('B#');
      expect(found.map((entry) => entry.key).sort()).toStrictEqual(['B#1', 'B#2']);
      expect(found.find((entry) => entry.key === 'B#1')?.item).toMatchObject({ v: 1 });
    });

    it('queryIndex: only items with the index attributes, of one partition, ascending, after/before exclusive, at most limit', async () => {
      const p = QueuedIndex.partition;
      const s = QueuedIndex.sort;
      await table.put('E#1', { [p]: 'Q#1', [s]: 30 });
      await table.put('E#2', { [p]: 'Q#1', [s]: 10 });
      await table.put('E#3', { [p]: 'Q#1', [s]: 20 });
      await table.put('E#4', { [p]: 'Q#2', [s]: 5 });
      await table.put('E#5', { other: 1 });
      const keys = async (range: Parameters<ItemTable['queryIndex']>[2]) => (await table.queryIndex(QueuedIndex, 'Q#1', range)).map((entry) => entry.key);
      await expect(keys({ limit: 10 })).resolves.toStrictEqual(['E#2', 'E#3', 'E#1']);
      await expect(keys({ limit: 2 })).resolves.toStrictEqual(['E#2', 'E#3']);
      await expect(keys({ before: 30, limit: 10 })).resolves.toStrictEqual(['E#2', 'E#3']);
      await expect(keys({ after: 10, limit: 10 })).resolves.toStrictEqual(['E#3', 'E#1']);
      const [first] = await table.queryIndex(QueuedIndex, 'Q#1', { limit: 1 });
      expect(first?.item).toMatchObject({ [s]: 10 });
      // Leaving the index: the attributes removed.
      await table.update('E#2', { remove: [p, s] });
      await expect(keys({ limit: 10 })).resolves.toStrictEqual(['E#3', 'E#1']);
    });

    it('queryIndex on a string-sorted index with a whole-item projection', async () => {
      const { partition: p, sort: s, shard } = PendingIndex;
      await table.put('E#b', { [p]: shard, [s]: '2#b', body: 'two' });
      await table.put('E#a', { [p]: shard, [s]: '1#a', body: 'one' });
      const found = await table.queryIndex(PendingIndex, shard, { after: '0', limit: 10 });
      expect(found.map((entry) => [entry.key, entry.item.body])).toStrictEqual([
        ['E#a', 'one'],
        ['E#b', 'two'],
      ]);
    });

    if (!options.transact) {
      it('has no transaction (nothing of this backend calls one)', () => {
        expect(table.transact).toBeUndefined();
      });
      return;
    }

    it('transact applies all of its writes, or none when one condition fails', async () => {
      await table.put('T#1', { v: 1 });
      const failing = await table.transact!([
        { kind: 'put', key: 'T#2', item: { v: 2 }, condition: when.absent() },
        { kind: 'update', key: 'T#1', update: { set: { v: 9 } }, condition: when.eq('v', 2) },
      ]);
      expect(failing).toBe(false);
      await expect(table.get('T#2')).resolves.toBeUndefined();
      const passing = await table.transact!([
        { kind: 'put', key: 'T#2', item: { v: 2 }, condition: when.absent() },
        { kind: 'update', key: 'T#1', update: { set: { v: 9 } }, condition: when.eq('v', 1) },
        { kind: 'delete', key: 'T#3' },
      ]);
      expect(passing).toBe(true);
      await expect(table.get('T#1')).resolves.toStrictEqual({ v: 9 });
      await expect(table.get('T#2')).resolves.toStrictEqual({ v: 2 });
    });
  });
}
