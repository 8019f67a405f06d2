/**
 * Ports that load their real adapter on first use: the MCP Lambda's cold start answers
 * `initialize`, `tools/list` and `/healthz` without evaluating the DynamoDB and SQS clients
 * (docs/performance.md). The Store, the AccessStore, the IdempotencyStore, the InboxStore and the
 * Outbox each get one: the loader (lambda/handlers/mcp-storage.ts) requires a file of its own
 * beside `index.js` (lib/bundling.ts), and the first call that needs storage pays for loading that
 * code, once.
 *
 * A failed load is not cached: the call fails like any storage call (the app answers 503 or a tool
 * error) and the next call loads again.
 *
 * Deliberately not here: which adapters are built or how (the loader decides), and retries.
 */
import type { AccessStore, IdempotencyStore, InboxStore, Outbox, Store } from '../ports';

/** One load shared by concurrent first calls; forgotten when it fails. */
export function once<T>(load: () => Promise<T>): () => Promise<T> {
  let pending: Promise<T> | undefined;
  return () => {
    if (!pending) {
      pending = load();
      pending.catch(() => {
        pending = undefined;
      });
    }
    return pending;
  };
}

type Methods<T> = { [K in keyof T]-?: T[K] extends ((...args: never[]) => Promise<unknown>) | undefined ? K : never }[keyof T];

/** Each of `methods`, forwarded once `load` has given the real port. */
function deferred<T extends object>(load: () => Promise<T>, methods: readonly Methods<T>[]): T {
  const port: Record<PropertyKey, unknown> = {};
  for (const method of methods) {
    port[method] = async (...args: unknown[]) => ((await load())[method] as (...a: unknown[]) => Promise<unknown>)(...args);
  }
  return port as T;
}

export function deferredStore(load: () => Promise<Store>): Store {
  return deferred(load, [
    'getSubscription',
    'getStoredSubscription',
    'putSubscription',
    'deleteSubscription',
    'recordDeliveryOutcome',
    'putEvent',
    'getEvent',
    'updateEvent',
    'restoreEvent',
    'isVerified',
    'markVerified',
    'claimReplayId',
    'settleReplayId',
    'putInboundAnswer',
    'listEvents',
  ]);
}

export function deferredAccessStore(load: () => Promise<AccessStore>): AccessStore {
  const methods = [
    'getDeployment',
    'createDeployment',
    'setDeploymentKeys',
    'addSender',
    'getSender',
    'listSenders',
    'revokeSender',
    'touchSender',
    'countSend',
  ] as const;
  return deferred(load, methods);
}

export function deferredIdempotencyStore(load: () => Promise<IdempotencyStore>): IdempotencyStore {
  return deferred(load, ['claimIdempotencyKey', 'settleIdempotencyKey', 'retakeIdempotencyKey']);
}

export function deferredInboxStore(load: () => Promise<InboxStore>): InboxStore {
  return deferred(load, ['listPending', 'acknowledgeEvent']);
}

export function deferredOutbox(load: () => Promise<Outbox>): Outbox {
  return deferred(load, ['add', 'reopen']);
}
