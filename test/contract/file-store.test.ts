/**
 * The storage contract against the embedded file store (a fresh state directory per test), plus
 * the one property only it has: what it acknowledged survives a reopen.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FileStore } from '../../lambda/adapters/file-store';
import { contractClock, describeStoreContract, event, subscription } from './store.contract';

const { T0 } = contractClock;

async function freshDir(): Promise<string> {
  return mkdtemp(join(tmpdir(), 'dm-dot-store-'));
}

describeStoreContract('FileStore', async () => {
  const dir = await freshDir();
  return { store: await FileStore.open(dir), cleanup: () => rm(dir, { recursive: true, force: true }) };
});

describe('FileStore persistence', () => {
  it('acknowledged writes survive a reopen', async () => {
    const dir = await freshDir();
    try {
      const store = await FileStore.open(dir);
      const sub = subscription({ lastError: null });
      await store.putSubscription(sub, T0);
      await store.putEvent(event());
      await store.claimReplayId('msg_1', T0);
      await store.putInboundAnswer('msg_evt', { status: 200, body: '{}' }, T0);

      const reopened = await FileStore.open(dir);
      await expect(reopened.getSubscription(T0)).resolves.toStrictEqual(sub);
      await expect(reopened.getEvent(event().eventId, T0)).resolves.toStrictEqual(event());
      await expect(reopened.claimReplayId('msg_1', T0)).resolves.toBe(false);
      await expect(reopened.putInboundAnswer('msg_evt', { status: 200, body: '{"x":1}' }, T0)).resolves.toStrictEqual({ stored: false, answer: { status: 200, body: '{}' } });
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
