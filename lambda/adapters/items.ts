/**
 * Item keys and TTL rules shared by the storage adapters (docs/contract/storage.md): one table, partition key `pk`,
 * TTL attribute `ttl` in epoch seconds. DynamoDB deletes expired items lazily, so liveness is
 * always decided from the record's own expiry, never from the item's presence.
 *
 * Deliberately not here: any I/O.
 */
import { Limits } from '../core/protocol';
import type { ReplayClaim } from '../ports';

export const ItemKeys = {
  subscription: 'SUBSCRIPTION',
  event: (eventId: string) => `EVENT#${eventId}`,
  verified: (key: string) => `VERIFIED#${key}`,
  replay: (webhookId: string) => `REPLAY#${webhookId}`,
  /** The stored answer to an inbound (pup) event delivery, by its webhook-id (docs/contract/pup.md). */
  inboundAnswer: (deliveryId: string) => `ANSWER#${deliveryId}`,
  // Access (core/access.ts): the deployment's identity, the senders, their per-minute counters.
  deployment: 'DEPLOYMENT',
  sender: (name: string) => `SENDER#${name}`,
  rate: (name: string, window: number) => `RATE#${name}#${window}`,
} as const;

/** The fields of a SENDER# item, in the order a listing shows them. */
export function byName<T extends { name: string }>(senders: T[]): T[] {
  return senders.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

export function isLive(expiresAt: unknown, now: number): boolean {
  return typeof expiresAt === 'number' && expiresAt > now;
}

export function ttlOfSubscription(expiresAt: number): number {
  return Math.ceil((expiresAt + Limits.subscriptionItemGraceMs) / 1000);
}

export function ttlOfEvent(expiresAt: number): number {
  return Math.ceil(expiresAt / 1000);
}

/** The order `Store.listEvents` returns: newest first, ties broken by id so the order is stable. */
export function newestFirst<T extends { createdAt: number; eventId: string }>(events: T[]): T[] {
  return events.sort((a, b) => b.createdAt - a.createdAt || (a.eventId < b.eventId ? -1 : a.eventId > b.eventId ? 1 : 0));
}

/**
 * What a claim of an inbound id that is held found (Store.claimReplayId), from the stored claim (on
 * DynamoDB the ALL_OLD of the failed put): this request's own when it carries this token.
 */
export function replayClaimOf(stored: Record<string, unknown> | undefined, token: string, request: string): ReplayClaim {
  if (stored?.token === token) return { claimed: true };
  if (stored?.request !== request) return { claimed: false, sameRequest: false };
  if (typeof stored.answerStatus === 'number' && typeof stored.answerBody === 'string') {
    return { claimed: false, sameRequest: true, answer: { status: stored.answerStatus, body: stored.answerBody } };
  }
  return { claimed: false, sameRequest: true };
}
