/**
 * Ports that load their real adapter (handlers/mcp-storage.ts) on first use: docs/decisions.md,
 * "The MCP Lambda's storage loads on first use". A failed load is not cached: that call fails like
 * any storage call (a 503 or a tool error) and the next one loads again.
 *
 * Deliberately not here: which adapters are built or how (the loader decides), and retries.
 */
import type { AccessStore, IdempotencyStore, InboxStore, Outbox, Store } from '../ports';

/** One load shared by concurrent first calls; forgotten when it fails. */
export function once<T>(load: () => Promise<T>): () => Promise<T> {
  let pending: Promise<T> | undefined;
  return () =>
    (pending ??= load().catch((error: unknown) => {
      pending = undefined;
      throw error;
    }));
}

/** A port's required methods (the Store's optional ones are the reconciler's: the MCP Lambda never calls them). */
type Methods<T> = { [K in keyof T]-?: undefined extends T[K] ? never : T[K] extends (...args: never[]) => Promise<unknown> ? K : never }[keyof T];

/** The names of `T`'s methods, from a record of them all: a method missing or unknown there fails to compile. */
const methodsOf = <T>(all: Record<Methods<T>, true>) => Object.keys(all) as Methods<T>[];

// What each deferred port forwards; the tests' FakeStore (test/support/fakes.ts) wraps the same names.
export const StoreMethods = methodsOf<Store>({
  getSubscription: true,
  getStoredSubscription: true,
  putSubscription: true,
  deleteSubscription: true,
  recordDeliveryOutcome: true,
  putEvent: true,
  getEvent: true,
  updateEvent: true,
  restoreEvent: true,
  isVerified: true,
  markVerified: true,
  claimReplayId: true,
  settleReplayId: true,
  putInboundAnswer: true,
  listEvents: true,
});
const AccessStoreMethods = methodsOf<AccessStore>({
  getDeployment: true,
  createDeployment: true,
  setDeploymentKeys: true,
  addSender: true,
  getSender: true,
  listSenders: true,
  revokeSender: true,
  touchSender: true,
  countSend: true,
});
export const IdempotencyStoreMethods = methodsOf<IdempotencyStore>({ claimIdempotencyKey: true, settleIdempotencyKey: true, retakeIdempotencyKey: true });
export const InboxStoreMethods = methodsOf<InboxStore>({ listPending: true, acknowledgeEvent: true });

/** Each of `methods`, forwarded once `load` has given the real port. */
function deferred<T extends object>(load: () => Promise<T>, methods: readonly Methods<T>[]): T {
  const forward = (method: Methods<T>) => [method, async (...args: unknown[]) => ((await load())[method] as (...a: unknown[]) => Promise<unknown>)(...args)];
  return Object.fromEntries(methods.map(forward)) as T;
}

export const deferredStore = (load: () => Promise<Store>): Store => deferred(load, StoreMethods);
export const deferredAccessStore = (load: () => Promise<AccessStore>): AccessStore => deferred(load, AccessStoreMethods);
export const deferredIdempotencyStore = (load: () => Promise<IdempotencyStore>): IdempotencyStore => deferred(load, IdempotencyStoreMethods);
export const deferredInboxStore = (load: () => Promise<InboxStore>): InboxStore => deferred(load, InboxStoreMethods);
export const deferredOutbox = (load: () => Promise<Outbox>): Outbox => deferred(load, ['add', 'reopen']);
