/**
 * A Store and an Outbox that load their real adapter on first use: the MCP Lambda's cold start
 * answers `initialize`, `tools/list` and `/healthz` without evaluating the DynamoDB and SQS
 * clients (docs/performance.md). The loader (lambda/handlers/mcp-lambda.ts) requires
 * a file of its own beside `index.js` (lib/bundling.ts): the first call that needs storage pays for
 * loading that code, once.
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

/** Every method of the Store, forwarded once `load` has given the real one. */
export function deferredStore(load: () => Promise<Store>): Store {
  return {
    getSubscription: async (...args) => (await load()).getSubscription(...args),
    getStoredSubscription: async (...args) => (await load()).getStoredSubscription(...args),
    putSubscription: async (...args) => (await load()).putSubscription(...args),
    deleteSubscription: async (...args) => (await load()).deleteSubscription(...args),
    recordDeliveryOutcome: async (...args) => (await load()).recordDeliveryOutcome(...args),
    putEvent: async (...args) => (await load()).putEvent(...args),
    getEvent: async (...args) => (await load()).getEvent(...args),
    updateEvent: async (...args) => (await load()).updateEvent(...args),
    restoreEvent: async (...args) => (await load()).restoreEvent(...args),
    isVerified: async (...args) => (await load()).isVerified(...args),
    markVerified: async (...args) => (await load()).markVerified(...args),
    claimReplayId: async (...args) => (await load()).claimReplayId(...args),
    settleReplayId: async (...args) => (await load()).settleReplayId(...args),
    putInboundAnswer: async (...args) => (await load()).putInboundAnswer(...args),
    listEvents: async (...args) => (await load()).listEvents(...args),
  };
}

/** Every method of the AccessStore, forwarded once `load` has given the real one. */
export function deferredAccessStore(load: () => Promise<AccessStore>): AccessStore {
  return {
    getDeployment: async (...args) => (await load()).getDeployment(...args),
    createDeployment: async (...args) => (await load()).createDeployment(...args),
    setDeploymentKeys: async (...args) => (await load()).setDeploymentKeys(...args),
    addSender: async (...args) => (await load()).addSender(...args),
    getSender: async (...args) => (await load()).getSender(...args),
    listSenders: async (...args) => (await load()).listSenders(...args),
    revokeSender: async (...args) => (await load()).revokeSender(...args),
    touchSender: async (...args) => (await load()).touchSender(...args),
    countSend: async (...args) => (await load()).countSend(...args),
  };
}

export function deferredOutbox(load: () => Promise<Outbox>): Outbox {
  return {
    add: async (...args) => (await load()).add(...args),
    reopen: async (...args) => (await load()).reopen(...args),
  };
}

/** The idempotency keys' storage (core/idempotency.ts), forwarded once loaded. */
export function deferredIdempotencyStore(load: () => Promise<IdempotencyStore>): IdempotencyStore {
  return {
    claimIdempotencyKey: async (...args) => (await load()).claimIdempotencyKey(...args),
    settleIdempotencyKey: async (...args) => (await load()).settleIdempotencyKey(...args),
    retakeIdempotencyKey: async (...args) => (await load()).retakeIdempotencyKey(...args),
  };
}

/** The inbox's storage (core/inbox.ts), forwarded once loaded. */
export function deferredInboxStore(load: () => Promise<InboxStore>): InboxStore {
  return {
    listPending: async (...args) => (await load()).listPending(...args),
    acknowledgeEvent: async (...args) => (await load()).acknowledgeEvent(...args),
  };
}
