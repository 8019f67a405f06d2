/**
 * The MCP Lambda's storage loaded on first use (lambda/adapters/deferred.ts): nothing is loaded
 * until a call needs it, concurrent first calls share one load, a failed load is tried again, and
 * every Store and Queue method reaches the real adapter with its arguments and result. And the
 * request deadline crosses into the separately bundled storage code (adapters/deadline.ts keeps
 * one store per process, not per copy of the module).
 */
import { deferredIdempotencyStore, deferredInboxStore, deferredOutbox, deferredStore, once } from '../../../lambda/adapters/deferred';
import type { Outbox, Store } from '../../../lambda/ports';

test('once: no load before the first call; concurrent first calls share one load', async () => {
  const load = jest.fn(async () => ({ ready: true }));
  const get = once(load);
  expect(load).not.toHaveBeenCalled();
  const [a, b] = await Promise.all([get(), get()]);
  expect(a).toBe(b);
  expect(load).toHaveBeenCalledTimes(1);
  await get();
  expect(load).toHaveBeenCalledTimes(1);
});

test('once: a failed load is not kept; the next call loads again', async () => {
  let fail = true;
  const load = jest.fn(async () => {
    if (fail) throw new Error('chunk missing');
    return 'loaded';
  });
  const get = once(load);
  await expect(get()).rejects.toThrow('chunk missing');
  fail = false;
  await expect(get()).resolves.toBe('loaded');
  expect(load).toHaveBeenCalledTimes(2);
});

test('STORE-12: every Store method is forwarded with its arguments and its result, and only when called', async () => {
  const calls: Array<[string, unknown[]]> = [];
  // A Store whose every method records its call and answers with its own name.
  const real = new Proxy({} as Store, {
    get: (_target, name: string) =>
      // Not a thenable: a promise resolving to it must not adopt it.
      name === 'then'
        ? undefined
        : async (...args: unknown[]) => {
            calls.push([name, args]);
            return `result of ${name}`;
          },
  });
  const load = jest.fn(async () => real);
  const store = deferredStore(load);
  expect(load).not.toHaveBeenCalled();
  const methods = Object.keys(store).sort();
  // The Store port's methods, as the type has them today (a new one fails to compile in deferred.ts).
  expect(methods).toEqual(
    [
      'claimReplayId',
      'deleteSubscription',
      'getEvent',
      'getStoredSubscription',
      'getSubscription',
      'isVerified',
      'listEvents',
      'markVerified',
      'putEvent',
      'putInboundAnswer',
      'putSubscription',
      'recordDeliveryOutcome',
      'restoreEvent',
      'settleReplayId',
      'updateEvent',
    ].sort(),
  );
  for (const name of methods) {
    const args = [`${name}-a`, { n: name.length }];
    await expect((store as unknown as Record<string, (...a: unknown[]) => Promise<unknown>>)[name]!(...args)).resolves.toBe(`result of ${name}`);
  }
  expect(calls).toEqual(methods.map((name) => [name, [`${name}-a`, { n: name.length }]]));
  expect(load).toHaveBeenCalledTimes(methods.length);
});

test('the Outbox forwards add and reopen; a failed load fails the call like any storage error', async () => {
  const add = jest.fn(async () => undefined);
  const reopen = jest.fn(async () => true);
  const outbox = deferredOutbox(async () => ({ add, reopen }) as Outbox);
  const record = { eventId: 'e', status: 'queued', subscriptionId: 's', attempts: 0, createdAt: 0, expiresAt: 1 } as const;
  const job = { eventId: 'e', subscriptionId: 's', body: '{}' };
  await outbox.add(record, job, { delayMs: 1000 });
  expect(add).toHaveBeenCalledWith(record, job, { delayMs: 1000 });
  await expect(outbox.reopen(record, { status: 'queued' }, job)).resolves.toBe(true);
  expect(reopen).toHaveBeenCalledWith(record, { status: 'queued' }, job);
  const broken = deferredOutbox(async () => {
    throw new Error('no chunk');
  });
  await expect(broken.add(record, job)).rejects.toThrow('no chunk');
});

test('the deadline set in one copy of adapters/deadline.ts is seen by another copy (the storage file has its own)', async () => {
  const first = await import('../../../lambda/adapters/deadline');
  let second: typeof first | undefined;
  jest.isolateModules(() => {
    second = require('../../../lambda/adapters/deadline') as typeof first;
  });
  expect(second).toBeDefined();
  expect(second).not.toBe(first);
  const at = Date.now() + 60_000;
  const left = await first.runWithDeadline(at, async () => second!.deadlineLeftMs());
  expect(left).toBeGreaterThan(50_000);
  expect(second!.deadlineLeftMs()).toBeUndefined();
});

test('IDEM-3, INBOX-2: the idempotency keys` and the inbox`s ports are forwarded the same way, and only when called', async () => {
  const calls: string[] = [];
  const real = new Proxy({} as Record<string, unknown>, {
    get: (_target, name: string) => (name === 'then' ? undefined : async (...args: unknown[]) => (calls.push(`${name}:${args.length}`), `result of ${name}`)),
  });
  const load = jest.fn(async () => real as never);
  const idempotency = deferredIdempotencyStore(load);
  const inbox = deferredInboxStore(load);
  expect(load).not.toHaveBeenCalled();
  expect(Object.keys(idempotency).sort()).toEqual(['claimIdempotencyKey', 'retakeIdempotencyKey', 'settleIdempotencyKey']);
  expect(Object.keys(inbox).sort()).toEqual(['acknowledgeEvent', 'listPending']);
  const record = { eventId: 'evt_x', messageHash: 'h', state: 'in_progress' as const, createdAt: 1, expiresAt: 2 };
  await expect(idempotency.claimIdempotencyKey('alice', 'k', record, 1)).resolves.toBe('result of claimIdempotencyKey');
  await expect(idempotency.settleIdempotencyKey('alice', 'k', 'evt_x', 'done')).resolves.toBe('result of settleIdempotencyKey');
  await expect(idempotency.retakeIdempotencyKey('alice', 'k', 'evt_x', record, 1)).resolves.toBe('result of retakeIdempotencyKey');
  await expect(inbox.listPending(1, 10)).resolves.toBe('result of listPending');
  await expect(inbox.acknowledgeEvent('evt_x', 1, 1)).resolves.toBe('result of acknowledgeEvent');
  expect(calls).toEqual(['claimIdempotencyKey:4', 'settleIdempotencyKey:4', 'retakeIdempotencyKey:5', 'listPending:2', 'acknowledgeEvent:3']);
});
