/**
 * Subscribe, refresh and unsubscribe (docs/contract/events.md): validation, the callback challenge
 * with its verification cache, the single-subscriber rule, the secret rotation overlap, and the
 * subscription's generation (EV-GEN-1..3).
 *
 * The put is conditional on the stored item being what the subscribe read: anything that lands
 * while the challenge runs makes it fail, and the subscribe plans again from the item the failed
 * put returned (ALL_OLD), without a second read.
 *
 * Deliberately not here: transport details of the challenge (the WebhookClient port), and
 * persistence of anything but the records of ports.ts.
 */
import { timeOfDay, type Clock, type Store, type SubscriptionExpectation, type SubscriptionRecord, type WebhookClient, type WebhookResponse } from '../ports';
import { callbackEndpointError, guardDependency, ProtocolFault } from './errors';
import { newChallengeNonce, newGeneration, newVerificationMessageId, subscriptionIdOf, verificationKeyOf } from './identity';
import { DEFAULT_EVENTS_PROFILE, ErrorCodes, EVENT_NAME, EventsProfiles, Limits, type EventsProfile, type FailureReason } from './protocol';
import { constantTimeEqual, signedHeaders } from './signing';
import { grantTtlMs, parseSubscribeParams, parseUnsubscribeParams, type SubscribeRequest, type TtlPolicy, type UrlPolicy } from './validation';

/** What subscribe and unsubscribe read and write of the Store: the subscription item and the verification cache. */
export type SubscriptionStore = Pick<Store, 'getStoredSubscription' | 'putSubscription' | 'deleteSubscription' | 'isVerified' | 'markVerified'>;

export interface SubscriptionDeps {
  store: SubscriptionStore;
  webhook: WebhookClient;
  clock: Clock;
  urlPolicy: UrlPolicy;
  /** Default and cap of the subscription TTL; 7 days each when absent. */
  ttlPolicy?: TtlPolicy;
  /** The events profile (its error codes and the SEP-3415 behaviours); chatgpt when absent. */
  eventsProfile?: EventsProfile;
  /** Called when a subscribe made a new subscription (not a refresh), before it answers (the inbox's announcement). Must not throw. */
  onNewSubscription?: () => Promise<void>;
}

const profileOf = (deps: Pick<SubscriptionDeps, 'eventsProfile'>): EventsProfile => deps.eventsProfile ?? EventsProfiles[DEFAULT_EVENTS_PROFILE];

/** How often a subscribe plans again after its put lost a race; more means something is wrong. */
const MAX_PUT_ROUNDS = 3;

function conflict(): ProtocolFault {
  const message = 'A subscription for another callback is active; unsubscribe it or wait for it to expire before subscribing a new callback.';
  return new ProtocolFault(ErrorCodes.subscriptionConflict, message);
}

function isLive(record: SubscriptionRecord | undefined, now: number): record is SubscriptionRecord {
  return record !== undefined && record.expiresAt > now;
}

export async function subscribe(deps: SubscriptionDeps, principal: string, params: unknown) {
  const profile = profileOf(deps);
  const request = parseSubscribeParams(params, deps.urlPolicy, profile);
  const id = subscriptionIdOf(principal, request.url, EVENT_NAME, {});

  // Read first so a conflicting callback is refused before anything is sent; the conditional put enforces the rule.
  let stored = await guardDependency('storage', () => deps.store.getStoredSubscription());
  if (isLive(stored, deps.clock.now()) && stored.url !== request.url) throw conflict();

  // A secret signs nothing before the callback proved it holds it: a new secret is challenged again.
  const verificationKey = verificationKeyOf(principal, request.url, request.secret);
  if (!(await guardDependency('storage', () => deps.store.isVerified(verificationKey, deps.clock.now())))) {
    const failure = await runChallenge(deps, request.url, id, request.key);
    if (failure === GONE) {
      // 410 Gone: a live subscription of this URL ends with it, so nothing keeps a re-added dot locked out.
      await guardDependency('storage', () => deps.store.deleteSubscription(request.url));
    }
    if (failure) throw callbackEndpointError(failure === GONE ? 'http_4xx' : failure, profile.codes.callbackEndpointError);
    await guardDependency('storage', () => deps.store.markVerified(verificationKey, deps.clock.now()));
  }

  for (let round = 0; round < MAX_PUT_ROUNDS; round++) {
    const writtenAt = deps.clock.now();
    if (isLive(stored, writtenAt) && stored.url !== request.url) throw conflict();
    const { record, expected, refreshed } = plan(request, id, principal, stored, writtenAt, deps.ttlPolicy);
    const put = await guardDependency('storage', () => deps.store.putSubscription(record, writtenAt, expected));
    if (put.ok) {
      if (!refreshed) await deps.onNewSubscription?.();
      return resultOf(record, refreshed);
    }
    stored = put.holder;
  }
  throw new Error('subscribe: the subscription kept changing under concurrent writers');
}

/** The record to write over what is stored, and the condition that it is still stored. */
function plan(
  request: SubscribeRequest,
  id: string,
  principal: string,
  stored: SubscriptionRecord | undefined,
  writtenAt: number,
  ttlPolicy: TtlPolicy | undefined,
): { record: SubscriptionRecord; expected: SubscriptionExpectation; refreshed: boolean } {
  const sameUrl = stored !== undefined && stored.url === request.url;
  const expected: SubscriptionExpectation = !stored
    ? { kind: 'absent' }
    : sameUrl
      ? { kind: 'same', url: stored.url, generation: stored.generation }
      : { kind: 'expired', generation: stored.generation };
  // A refresh: this URL's subscription is still live. After mere expiry only the generation is kept.
  const live = sameUrl && stored.expiresAt > writtenAt ? stored : undefined;
  const rotated = live !== undefined && live.secret !== request.secret;
  const record: SubscriptionRecord = {
    id,
    generation: (sameUrl && stored.generation) || newGeneration(),
    url: request.url,
    name: EVENT_NAME,
    secret: request.secret,
    principal,
    createdAt: live ? live.createdAt : writtenAt,
    refreshedAt: writtenAt,
    expiresAt: writtenAt + grantTtlMs(request.ttlMs, ttlPolicy),
    ...(rotated
      ? { previousSecret: live.secret, previousSecretUntil: writtenAt + Limits.rotationOverlapMs }
      : live?.previousSecret
        ? { previousSecret: live.previousSecret, previousSecretUntil: live.previousSecretUntil }
        : {}),
    ...(live ? { lastDeliveryAt: live.lastDeliveryAt, lastError: live.lastError ?? null } : {}),
  };
  return { record, expected, refreshed: live !== undefined };
}

function resultOf(record: SubscriptionRecord, refreshed: boolean) {
  return {
    id: record.id,
    refreshBefore: new Date(record.expiresAt).toISOString(),
    cursor: null,
    truncated: false as const,
    ...(refreshed
      ? {
          deliveryStatus: {
            active: true,
            lastDeliveryAt: record.lastDeliveryAt ? new Date(record.lastDeliveryAt).toISOString() : null,
            lastError: record.lastError ?? null,
          },
        }
      : {}),
  };
}

/**
 * Idempotent: deletes only a subscription with this exact URL; never touches another callback's.
 * Under sep-3415, nothing to delete answers NotFound (SEP-3415); under chatgpt it is `complete`.
 */
export async function unsubscribe(deps: Pick<SubscriptionDeps, 'store' | 'eventsProfile'>, params: unknown): Promise<void> {
  const profile = profileOf(deps);
  const { url } = parseUnsubscribeParams(params, profile);
  const deleted = await guardDependency('storage', () => deps.store.deleteSubscription(url));
  if (!deleted && profile.unsubscribeNotFound)
    throw new ProtocolFault(profile.codes.notFound, 'no subscription of this callback exists', { kind: 'subscription' });
}

/** The challenge was answered 410: an `http_4xx` failure that also ends the URL's subscription. */
const GONE = 'gone';

/** POSTs a signed verification challenge: undefined when the nonce was echoed, `gone` for a 410, else the failure category. */
export async function runChallenge(
  deps: Pick<SubscriptionDeps, 'webhook' | 'clock'>,
  url: string,
  subscriptionId: string,
  key: Uint8Array,
): Promise<FailureReason | typeof GONE | undefined> {
  const nonce = newChallengeNonce();
  const msgId = newVerificationMessageId();
  const timestamp = Math.floor(timeOfDay(deps.clock) / 1000);
  const body = new TextEncoder().encode(JSON.stringify({ type: 'verification', challenge: nonce }));
  let response: WebhookResponse;
  try {
    response = await deps.webhook.post({ url, body, headers: signedHeaders([key], msgId, timestamp, body, subscriptionId) });
  } catch (error) {
    // No POST could start: the request's deadline left no time for one (adapters/deadline.ts, a
    // starved machine). To the subscriber that is no answer within the deadline: EV-CHAL-9's
    // `timeout`, not an internal error.
    if ((error as Error | undefined)?.name === 'TimeoutError') return 'timeout';
    throw error;
  }
  if (response.kind === 'failure') return response.reason === 'bad_response' ? 'challenge_failed' : response.reason;
  if (response.status >= 500) return 'http_5xx';
  if (response.status === 410) return GONE;
  if (response.status >= 400) return 'http_4xx';
  if (response.status < 200 || response.status >= 300) return 'challenge_failed';
  let echoed: unknown;
  try {
    echoed = (JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(response.body)) as { challenge?: unknown })?.challenge;
  } catch {
    return 'challenge_failed';
  }
  return typeof echoed === 'string' && constantTimeEqual(echoed, nonce) ? undefined : 'challenge_failed';
}
