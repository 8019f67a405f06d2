/**
 * The operator's actions on keys (lambda/operator/access.ts): adding, listing and revoking senders,
 * recording a rotation, and reading `--overlap` durations. Over the unit tests' FakeAccessStore.
 */
import { keyHashOf } from '../../../lambda/core/access';
import { principalOf } from '../../../lambda/core/identity';
import { addSender, listSenders, parseDuration, recordRotation, revokeSender } from '../../../lambda/operator/access';
import { overlapOf } from '../../../lambda/cli/commands/key';
import { FakeAccessStore, T0 } from '../../support/fakes';

describe('senders', () => {
  test('CLI-SND-1: add refuses a bad name or rate before storing anything, and a taken name', async () => {
    const access = new FakeAccessStore();
    await expect(addSender(access, 'Has_Caps', null, T0)).resolves.toMatchObject({ added: false, why: 'invalid_name' });
    await expect(addSender(access, 'ok', 0, T0)).resolves.toMatchObject({ added: false, why: 'invalid_rate' });
    await expect(addSender(access, 'ok', 1.5, T0)).resolves.toMatchObject({ added: false, why: 'invalid_rate' });
    expect(access.senders.size).toBe(0);
    const first = await addSender(access, 'ok', 10, T0);
    expect(first).toMatchObject({ added: true, name: 'ok', rate: 10 });
    await expect(addSender(access, 'ok', 10, T0)).resolves.toMatchObject({ added: false, why: 'exists' });
  });

  test('CLI-SND-2: list shows name, rate, times and revoked, never the key or its hash', async () => {
    const access = new FakeAccessStore();
    const added = await addSender(access, 'ok', null, T0);
    await revokeSender(access, 'ok', T0 + 1000);
    const [view] = await listSenders(access);
    expect(view).toStrictEqual({
      name: 'ok',
      rate: null,
      createdAt: new Date(T0).toISOString(),
      lastUsedAt: null,
      revokedAt: new Date(T0 + 1000).toISOString(),
      revoked: true,
    });
    expect(JSON.stringify(view)).not.toContain(added.added ? keyHashOf(added.key) : 'x');
  });

  test('CLI-SND-3: revoke says why it did nothing', async () => {
    const access = new FakeAccessStore();
    await expect(revokeSender(access, 'ghost', T0)).resolves.toStrictEqual({ revoked: false, name: 'ghost', why: 'not_found' });
    await addSender(access, 'ok', null, T0);
    await revokeSender(access, 'ok', T0);
    await expect(revokeSender(access, 'ok', T0)).resolves.toStrictEqual({ revoked: false, name: 'ok', why: 'already_revoked' });
  });
});

describe('senders under races and reserved names', () => {
  test('HTTP-KEY-NAME-1: connector, pup and dm-dot are refused as new sender names, nothing stored', async () => {
    const access = new FakeAccessStore();
    for (const name of ['connector', 'pup', 'dm-dot']) {
      const refused = await addSender(access, name, null, T0);
      expect(refused).toMatchObject({ added: false, why: 'invalid_name' });
      expect(refused.added ? '' : refused.message).toMatch(/reserved/);
    }
    expect(access.senders.size).toBe(0);
  });

  test('HTTP-KEY-ROT-3: a revoke racing an add never says "already revoked" of a key that still sends: it revokes the sender the add made', async () => {
    // The add lands between the revoke's write (which found nothing) and its read.
    class RacingAdd extends FakeAccessStore {
      pending: (() => Promise<unknown>) | undefined;
      override async revokeSender(name: string, at: number) {
        const written = await super.revokeSender(name, at);
        const add = this.pending;
        this.pending = undefined;
        if (add) await add();
        return written;
      }
    }
    const access = new RacingAdd();
    access.pending = () => addSender(access, 'racer', null, T0);
    const answer = await revokeSender(access, 'racer', T0 + 1);
    expect(answer).toStrictEqual({ revoked: true, name: 'racer' });
    expect(access.senders.get('racer')!.revokedAt).toBe(T0 + 1);
  });
});

describe('rotation', () => {
  test('EV-ID-1, HTTP-KEY-9: the first rotation of an upgraded deployment keeps the principal of the key it replaces', async () => {
    const access = new FakeAccessStore();
    const rotation = await recordRotation(access, 'old-key', 'new-key', 0, T0);
    expect(rotation).toStrictEqual({ principal: principalOf('old-key'), previousKeyUntil: null });
    expect(access.deployment).toMatchObject({ principal: principalOf('old-key'), keyHash: keyHashOf('new-key') });
    await recordRotation(access, 'new-key', 'third-key', 60_000, T0 + 1);
    expect(access.deployment).toMatchObject({
      principal: principalOf('old-key'),
      keyHash: keyHashOf('third-key'),
      previousKeyHash: keyHashOf('new-key'),
      previousKeyUntil: T0 + 60_001,
    });
    await expect(recordRotation(access, 'a', 'b', -1, T0)).rejects.toThrow(RangeError);
  });

  test('CLI-10: --overlap reads 1h, 30m, 90s, 2d and bare milliseconds; anything else, or over 7 days, is bad usage', () => {
    expect(parseDuration('1h')).toBe(3_600_000);
    expect(parseDuration('30m')).toBe(1_800_000);
    expect(parseDuration('90s')).toBe(90_000);
    expect(parseDuration('2d')).toBe(172_800_000);
    expect(parseDuration('1500')).toBe(1500);
    expect(parseDuration('1.5h')).toBeUndefined();
    expect(overlapOf(undefined)).toBe(0);
    expect(() => overlapOf('8d')).toThrow(/--overlap must be a duration/);
    expect(() => overlapOf('soon')).toThrow(/--overlap must be a duration/);
  });
});
