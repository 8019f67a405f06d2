/**
 * Subscribe, refresh and unsubscribe (SPEC 4.2-4.4): validation, the callback challenge with its
 * 24 h verification cache, the single-subscriber rule and the 10-minute secret rotation overlap.
 *
 * Timeline of the one SUBSCRIPTION item (the conditional put enforces it):
 *
 *   absent ──subscribe(url A)──> live(A) ──refresh(A)──> live(A, new secret; old secret signs
 *                                  │                       too until refreshedAt + 10 min)
 *                                  ├─subscribe(url B)──> -32000, A untouched
 *                                  ├─unsubscribe(A)────> absent
 *                                  ├─410 from A (delivery or refresh challenge)──> absent
 *                                  └─expiresAt passes──> counts as absent (DynamoDB deletes later)
 *
 * Deliberately not here: transport details of the challenge (the WebhookClient port), and
 * persistence of anything but the records of ports.ts.
 */
import type { Clock, Store, SubscriptionRecord, WebhookClient } from '../ports';
import { callbackEndpointError, guardDependency, ProtocolFault } from './errors';
import { newChallengeNonce, newVerificationMessageId, subscriptionIdOf, verificationKeyOf } from './identity';
import { ErrorCodes, EVENT_NAME, Limits, WebhookHeaders, type FailureReason } from './protocol';
import { constantTimeEqual, signatureHeader } from './signing';
import { grantTtlMs, parseSubscribeParams, parseUnsubscribeParams, type TtlPolicy, type UrlPolicy } from './validation';

export interface SubscriptionDeps {
  store: Store;
  webhook: WebhookClient;
  clock: Clock;
  urlPolicy: UrlPolicy;
  /** Default and cap of the subscription TTL; 7 days each when absent. */
  ttlPolicy?: TtlPolicy;
}

export interface SubscribeResult {
  id: string;
  refreshBefore: string;
  cursor: null;
  truncated: false;
  deliveryStatus?: { active: boolean; lastDeliveryAt: string | null; lastError: FailureReason | null };
}

const CONFLICT_MESSAGE =
  'A subscription for another callback is active; unsubscribe it or wait for it to expire before subscribing a new callback.';

export async function subscribe(deps: SubscriptionDeps, principal: string, params: unknown): Promise<SubscribeResult> {
  const request = parseSubscribeParams(params, deps.urlPolicy);
  const id = subscriptionIdOf(principal, request.url, EVENT_NAME, {});
  const now = deps.clock.now();

  // Read first so a conflicting callback is refused before anything is sent to the new URL; the
  // conditional put below is what actually enforces the rule under concurrency.
  const current = await guardDependency('storage', () => deps.store.getSubscription(now));
  if (current && current.url !== request.url) throw new ProtocolFault(ErrorCodes.subscriptionConflict, CONFLICT_MESSAGE);

  const verificationKey = verificationKeyOf(principal, request.url);
  const verified = await guardDependency('storage', () => deps.store.isVerified(verificationKey, now));
  if (!verified) {
    const failure = await runChallenge(deps, request.url, id, request.key);
    if (failure === GONE) {
      // Standard Webhooks: 410 Gone means the endpoint is gone for good. A live subscription of
      // this URL (a refresh) ends with it, so nothing keeps a re-added dot locked out.
      await guardDependency('storage', () => deps.store.deleteSubscription(request.url));
      throw callbackEndpointError('http_4xx');
    }
    if (failure) throw callbackEndpointError(failure);
    await guardDependency('storage', () => deps.store.markVerified(verificationKey, deps.clock.now()));
  }

  const writtenAt = deps.clock.now();
  const refreshing = current !== undefined;
  const rotated = refreshing && current.secret !== request.secret;
  const record: SubscriptionRecord = {
    id,
    url: request.url,
    name: EVENT_NAME,
    secret: request.secret,
    principal,
    createdAt: refreshing ? current.createdAt : writtenAt,
    refreshedAt: writtenAt,
    expiresAt: writtenAt + grantTtlMs(request.ttlMs, deps.ttlPolicy),
    ...(rotated
      ? { previousSecret: current.secret, previousSecretUntil: writtenAt + Limits.rotationOverlapMs }
      : refreshing && current.previousSecret
        ? { previousSecret: current.previousSecret, previousSecretUntil: current.previousSecretUntil }
        : {}),
    ...(refreshing ? { lastDeliveryAt: current.lastDeliveryAt, lastError: current.lastError ?? null } : {}),
  };
  const put = await guardDependency('storage', () => deps.store.putSubscription(record, writtenAt));
  if (!put.ok) throw new ProtocolFault(ErrorCodes.subscriptionConflict, CONFLICT_MESSAGE);

  return {
    id,
    refreshBefore: new Date(record.expiresAt).toISOString(),
    cursor: null,
    truncated: false,
    ...(refreshing
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

/** Idempotent: deletes only a subscription with this exact URL; never touches another callback's. */
export async function unsubscribe(deps: Pick<SubscriptionDeps, 'store'>, params: unknown): Promise<void> {
  const { url } = parseUnsubscribeParams(params);
  await guardDependency('storage', () => deps.store.deleteSubscription(url));
}

/** The challenge was answered 410: an `http_4xx` failure that also ends the URL's subscription. */
const GONE = 'gone';

/**
 * POSTs a signed verification challenge to the callback URL exactly as given. Returns undefined
 * when the endpoint echoed the nonce, `gone` for a 410, else the failure category (never
 * endpoint text).
 */
export async function runChallenge(
  deps: Pick<SubscriptionDeps, 'webhook' | 'clock'>,
  url: string,
  subscriptionId: string,
  key: Uint8Array,
): Promise<FailureReason | typeof GONE | undefined> {
  const nonce = newChallengeNonce();
  const msgId = newVerificationMessageId();
  const timestamp = Math.floor(deps.clock.now() / 1000);
  const body = new TextEncoder().encode(JSON.stringify({ type: 'verification', challenge: nonce }));
  const response = await deps.webhook.post({
    url,
    body,
    headers: {
      'content-type': 'application/json',
      [WebhookHeaders.id]: msgId,
      [WebhookHeaders.timestamp]: String(timestamp),
      [WebhookHeaders.signature]: signatureHeader([key], msgId, timestamp, body),
      [WebhookHeaders.subscriptionId]: subscriptionId,
    },
  });
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
