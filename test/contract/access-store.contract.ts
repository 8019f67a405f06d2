/**
 * The access contract (docs/contract/storage.md: DEPLOYMENT, SENDER#, RATE#; ports.AccessStore)
 * that every adapter passes: the embedded database, DynamoDB and the unit tests' fake run this
 * same suite. Times are explicit, never the wall clock.
 *
 * Deliberately not here: how a request uses these items (core/access.ts, its unit tests).
 */
import type { AccessStore, DeploymentRecord, SenderRecord } from '../../lambda/ports';

export type AccessStoreFactory = () => Promise<{ access: AccessStore; cleanup(): Promise<void> }>;

const T0 = Math.floor(Date.now() / 1000) * 1000 + 365 * 24 * 3_600_000;

const deployment = (overrides: Partial<DeploymentRecord> = {}): DeploymentRecord => ({
  principal: 'p'.repeat(64),
  keyHash: 'k'.repeat(64),
  createdAt: T0,
  ...overrides,
});
const sender = (overrides: Partial<SenderRecord> = {}): SenderRecord => ({ name: 'billing', keyHash: 'h'.repeat(64), rate: null, createdAt: T0, ...overrides });

export function describeAccessStoreContract(name: string, factory: AccessStoreFactory): void {
  describe(`AccessStore contract: ${name}`, () => {
    let access: AccessStore;
    let cleanup: (() => Promise<void>) | undefined;

    beforeEach(async () => {
      ({ access, cleanup } = await factory());
    });

    afterEach(async () => {
      await cleanup?.();
      cleanup = undefined;
    });

    describe('DEPLOYMENT', () => {
      it('STORE-DEP-1: absent until created; created once, then read back as stored', async () => {
        await expect(access.getDeployment()).resolves.toBeUndefined();
        await expect(access.createDeployment(deployment())).resolves.toStrictEqual(deployment());
        await expect(access.getDeployment()).resolves.toStrictEqual(deployment());
      });

      it('STORE-DEP-2: a second create (a racing first request) keeps and returns the first principal', async () => {
        await access.createDeployment(deployment({ principal: 'a'.repeat(64) }));
        await expect(access.createDeployment(deployment({ principal: 'b'.repeat(64) }))).resolves.toMatchObject({ principal: 'a'.repeat(64) });
        await expect(access.getDeployment()).resolves.toMatchObject({ principal: 'a'.repeat(64) });
      });

      it('STORE-DEP-3: concurrent creates agree on one principal', async () => {
        const results = await Promise.all(['1', '2', '3', '4'].map((c) => access.createDeployment(deployment({ principal: c.repeat(64) }))));
        const principals = new Set(results.map((r) => r.principal));
        expect(principals.size).toBe(1);
        await expect(access.getDeployment()).resolves.toMatchObject({ principal: [...principals][0] });
      });

      it('STORE-DEP-4: setting the keys keeps the principal; an overlap is set, and a rotation without one removes it', async () => {
        await expect(access.setDeploymentKeys({ keyHash: 'n'.repeat(64), rotatedAt: T0 })).resolves.toBe(false);
        await access.createDeployment(deployment());
        await expect(
          access.setDeploymentKeys({ keyHash: 'n'.repeat(64), previousKeyHash: 'k'.repeat(64), previousKeyUntil: T0 + 3_600_000, rotatedAt: T0 + 1 }),
        ).resolves.toBe(true);
        await expect(access.getDeployment()).resolves.toStrictEqual({
          ...deployment(),
          keyHash: 'n'.repeat(64),
          previousKeyHash: 'k'.repeat(64),
          previousKeyUntil: T0 + 3_600_000,
          rotatedAt: T0 + 1,
        });
        await access.setDeploymentKeys({ keyHash: 'm'.repeat(64), rotatedAt: T0 + 2 });
        await expect(access.getDeployment()).resolves.toStrictEqual({ ...deployment(), keyHash: 'm'.repeat(64), rotatedAt: T0 + 2 });
      });
    });

    describe('SENDER#', () => {
      it('STORE-SND-1: add, get and list round-trip; a name is added once', async () => {
        await expect(access.getSender('billing')).resolves.toBeUndefined();
        await expect(access.addSender(sender({ rate: 30 }))).resolves.toBe(true);
        await expect(access.addSender(sender({ keyHash: 'x'.repeat(64) }))).resolves.toBe(false);
        await expect(access.getSender('billing')).resolves.toStrictEqual(sender({ rate: 30 }));
        await access.addSender(sender({ name: 'alerts' }));
        await expect(access.listSenders()).resolves.toStrictEqual([sender({ name: 'alerts' }), sender({ rate: 30 })]);
      });

      it('STORE-SND-2: revoke sets revokedAt once; a revoked name stays taken', async () => {
        await expect(access.revokeSender('billing', T0)).resolves.toBe(false);
        await access.addSender(sender());
        await expect(access.revokeSender('billing', T0 + 5)).resolves.toBe(true);
        await expect(access.revokeSender('billing', T0 + 6)).resolves.toBe(false);
        await expect(access.getSender('billing')).resolves.toStrictEqual(sender({ revokedAt: T0 + 5 }));
        await expect(access.addSender(sender())).resolves.toBe(false);
      });

      it('STORE-SND-3: lastUsedAt is written at most once per interval', async () => {
        await access.addSender(sender());
        await access.touchSender('billing', T0 + 1000, 60_000);
        await expect(access.getSender('billing')).resolves.toMatchObject({ lastUsedAt: T0 + 1000 });
        await access.touchSender('billing', T0 + 30_000, 60_000);
        await expect(access.getSender('billing')).resolves.toMatchObject({ lastUsedAt: T0 + 1000 });
        await access.touchSender('billing', T0 + 61_000, 60_000);
        await expect(access.getSender('billing')).resolves.toMatchObject({ lastUsedAt: T0 + 61_000 });
        // No stub for a sender that does not exist.
        await access.touchSender('ghost', T0, 60_000);
        await expect(access.getSender('ghost')).resolves.toBeUndefined();
      });
    });

    describe('RATE#', () => {
      it('STORE-RATE-1: counts up to the limit in one window, then refuses; the next window starts over', async () => {
        const results: boolean[] = [];
        for (let i = 0; i < 4; i++) results.push(await access.countSend('billing', 100, 3, T0 + 120_000));
        expect(results).toStrictEqual([true, true, true, false]);
        await expect(access.countSend('billing', 101, 3, T0 + 180_000)).resolves.toBe(true);
        await expect(access.countSend('alerts', 100, 3, T0 + 120_000)).resolves.toBe(true);
      });

      it('STORE-RATE-2: concurrent sends never count past the limit', async () => {
        const results = await Promise.all(Array.from({ length: 10 }, () => access.countSend('billing', 7, 4, T0 + 120_000)));
        expect(results.filter(Boolean)).toHaveLength(4);
      });
    });
  });
}
