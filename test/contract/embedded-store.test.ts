/**
 * The storage contract against the embedded database (a fresh state directory per test), plus
 * what only it has: what it acknowledged survives a reopen, a second handle on the same
 * environment (another process, for LMDB) sees it at once, and check-and-set stays atomic when
 * two handles race.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openEmbeddedDatabase, type EmbeddedDatabase } from '../../lambda/adapters/embedded';
import { openDatabases, closeDatabases } from '../../lambda/adapters/embedded/environment';
import { LmdbTable } from '../../lambda/adapters/embedded/table';
import { contractClock, describeStoreContract, event, subscription } from './store.contract';
import { describeItemTableContract } from './item-table.contract';
import { describeAccessStoreContract } from './access-store.contract';

const { T0 } = contractClock;

async function freshDir(): Promise<string> {
  return mkdtemp(join(tmpdir(), 'dm-dot-embedded-'));
}

describeItemTableContract(
  'embedded database (LMDB)',
  async () => {
    const dir = await freshDir();
    const dbs = (await openDatabases(dir, { create: true }))!;
    return {
      table: new LmdbTable(dbs),
      cleanup: async () => {
        await closeDatabases(dbs);
        await rm(dir, { recursive: true, force: true });
      },
    };
  },
  { transact: true },
);

describeStoreContract('embedded database (LMDB)', async () => {
  const dir = await freshDir();
  const db = await openEmbeddedDatabase(dir, { role: 'server' });
  return {
    store: db.store,
    cleanup: async () => {
      await db.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
});

describe('LOCAL-2: embedded database persistence', () => {
  let dir: string;
  const open: EmbeddedDatabase[] = [];

  beforeEach(async () => {
    dir = await freshDir();
  });

  afterEach(async () => {
    for (const db of open.splice(0)) await db.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('acknowledged writes survive a close and reopen', async () => {
    const first = await openEmbeddedDatabase(dir, { role: 'server' });
    const sub = subscription({ lastError: null });
    await first.store.putSubscription(sub, T0, { kind: 'absent' });
    const delivered = event({ status: 'delivered', attempts: 1, deliveredAt: T0 });
    await first.store.putEvent(delivered);
    await first.store.claimReplayId('msg_1', T0, 'first', 'POST /pup/challenge');
    await first.store.putInboundAnswer('msg_evt', { status: 200, body: '{}' }, T0);
    await first.store.markVerified('k1', T0);
    await first.close();

    const reopened = await openEmbeddedDatabase(dir, { role: 'server' });
    open.push(reopened);
    await expect(reopened.store.getSubscription(T0)).resolves.toStrictEqual(sub);
    await expect(reopened.store.getEvent(delivered.eventId, T0)).resolves.toStrictEqual(delivered);
    await expect(reopened.store.claimReplayId('msg_1', T0, 'second', 'POST /pup/challenge')).resolves.toMatchObject({ claimed: false });
    await expect(reopened.store.putInboundAnswer('msg_evt', { status: 200, body: '{"x":1}' }, T0)).resolves.toStrictEqual({
      stored: false,
      answer: { status: 200, body: '{}' },
    });
    await expect(reopened.store.isVerified('k1', T0)).resolves.toBe(true);
  });

  it('a write of one handle is visible to a second handle on the same environment as soon as it resolves', async () => {
    const server = await openEmbeddedDatabase(dir, { role: 'operator' });
    const other = await openEmbeddedDatabase(dir, { role: 'operator' });
    open.push(server, other);
    await server.store.putEvent(event());
    await expect(other.store.getEvent(event().eventId, T0)).resolves.toStrictEqual(event());
  });

  it('two handles racing one replay id: exactly one claim wins', async () => {
    const a = await openEmbeddedDatabase(dir, { role: 'operator' });
    const b = await openEmbeddedDatabase(dir, { role: 'operator' });
    open.push(a, b);
    const results = await Promise.all(
      Array.from({ length: 20 }, (_, i) => (i % 2 === 0 ? a : b).store.claimReplayId('msg_race', T0, `t${i}`, 'POST /pup/challenge')),
    );
    expect(results.filter((r) => r.claimed)).toHaveLength(1);
  });

  it('an id longer than an LMDB key is kept under its hash and still claimed once', async () => {
    const db = await openEmbeddedDatabase(dir, { role: 'server' });
    open.push(db);
    const long = `msg_${'x'.repeat(5000)}`;
    await expect(db.store.claimReplayId(long, T0, 'a', 'POST /pup/challenge')).resolves.toStrictEqual({ claimed: true });
    await expect(db.store.claimReplayId(long, T0 + 1, 'b', 'POST /pup/challenge')).resolves.toMatchObject({ claimed: false });
    await expect(db.store.claimReplayId(`${long}y`, T0, 'c', 'POST /pup/challenge')).resolves.toStrictEqual({ claimed: true });
  });

  it('the sweep removes only items whose ttl has passed at the time it is given, and reads never needed it', async () => {
    const db = await openEmbeddedDatabase(dir, { role: 'server' });
    open.push(db);
    const short = event({ eventId: 'evt_11111111111111111111111111111111', expiresAt: T0 + 1000 });
    const long = event({ eventId: 'evt_22222222222222222222222222222222' });
    await db.store.putEvent(short);
    await db.store.putEvent(long);
    // Expired for reads before any sweep.
    await expect(db.store.getEvent(short.eventId, T0 + 1000)).resolves.toBeUndefined();
    await expect(db.sweepExpired(T0)).resolves.toBe(0);
    await expect(db.store.getEvent(short.eventId, T0)).resolves.toStrictEqual(short);
    await expect(db.sweepExpired(T0 + 2000)).resolves.toBe(1);
    // Gone for good now, even for a reader whose clock is behind.
    await expect(db.store.getEvent(short.eventId, T0)).resolves.toBeUndefined();
    await expect(db.store.getEvent(long.eventId, T0 + 2000)).resolves.toStrictEqual(long);
  });
});

describeAccessStoreContract('embedded database (LMDB)', async () => {
  const dir = await freshDir();
  const db = await openEmbeddedDatabase(dir, { role: 'server' });
  return {
    access: db.store,
    cleanup: async () => {
      await db.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
});
