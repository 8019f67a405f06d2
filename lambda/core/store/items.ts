/**
 * What the Store (./store.ts) writes into the item table: the item keys, the `ttl` of each kind of
 * item (epoch seconds, read by the sweeps) and the two sparse indexes (docs/contract/storage.md,
 * STORE-IDX-1 and STORE-IDX-4).
 *
 * Deliberately not here: any I/O, and the CDK definition (lib/constructs/storage.ts reads these names).
 */
import { Limits } from '../protocol';
import type { IndexDefinition } from './table';

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
  idempotency: (caller: string, key: string) => `IDEMPOTENCY#${caller}#${key}`,
} as const;

export const QueuedIndex = {
  name: 'queued',
  partition: 'queuedShard',
  sort: 'queuedSince',
  sortType: 'N',
  projection: 'keys',
  shards: 8,
} as const satisfies IndexDefinition & { shards: number };

export const PendingIndex = {
  name: 'pending',
  partition: 'pendingShard',
  sort: 'pendingKey',
  sortType: 'S',
  projection: 'all',
  /** The one partition of the inbox. */
  shard: 'INBOX',
} as const satisfies IndexDefinition & { shard: string };

export const TableIndexes: readonly IndexDefinition[] = [QueuedIndex, PendingIndex];

/** Attributes the table stores that are no part of any record: what a read leaves out. */
export const storageAttributes: ReadonlySet<string> = new Set(['ttl', ...TableIndexes.flatMap((index) => [index.partition, index.sort])]);

/** The shard of an event id (`evt_` and 32 hex digits): its last digit, modulo the shard count. */
export function queuedShardOf(eventId: string): string {
  const digit = Number.parseInt(eventId.slice(-1), 16);
  return `Q#${(Number.isNaN(digit) ? 0 : digit) % QueuedIndex.shards}`;
}

export function queuedShards(): string[] {
  return Array.from({ length: QueuedIndex.shards }, (_, i) => `Q#${i}`);
}

/** The pending index's sort key of an event: creation time first, then the id. */
export function pendingKeyOf(createdAt: number, eventId: string): string {
  return `${String(Math.max(0, Math.floor(createdAt))).padStart(16, '0')}#${eventId}`;
}

export function isLive(expiresAt: unknown, now: number): boolean {
  return typeof expiresAt === 'number' && expiresAt > now;
}

export const ttl = {
  subscription: (expiresAt: number) => Math.ceil((expiresAt + Limits.subscriptionItemGraceMs) / 1000),
  of: (expiresAt: number) => Math.ceil(expiresAt / 1000),
};

/** The order `Store.listEvents` returns: newest first, ties broken by id so the order is stable. */
export function newestFirst<T extends { createdAt: number; eventId: string }>(events: T[]): T[] {
  return events.sort((a, b) => b.createdAt - a.createdAt || (a.eventId < b.eventId ? -1 : a.eventId > b.eventId ? 1 : 0));
}

/** A record as the Store returns it: the item without its storage-only attributes. */
export function recordOf<T>(item: Record<string, unknown>): T {
  const record: Record<string, unknown> = {};
  for (const [field, value] of Object.entries(item)) if (!storageAttributes.has(field)) record[field] = value;
  return record as T;
}
