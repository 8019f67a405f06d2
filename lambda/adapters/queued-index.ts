/**
 * The sparse index of `queued` event records on DynamoDB (docs/contract/storage.md): what the
 * reconciler (core/reconcile.ts) reads to find a record that nothing will deliver, without a scan.
 *
 * An EVENT# item carries the two index attributes only while its status is `queued`: the put of a
 * queued record sets them, and every write that moves the status away from `queued` removes them
 * (lambda/adapters/dynamodb-store.ts), so the index holds queued records and nothing else.
 *
 *   queuedShard   S   `Q#0` .. `Q#7`, from the event id's last hex digit: one index partition per
 *                     shard, so the writes of a busy table spread over eight partitions
 *   queuedSince   N   epoch ms since when the record has been `queued` (its creation; a requeue
 *                     by the reconciler, or a resend, starts it again)
 *
 * The index projects keys only (`pk` and the two above): the record's body, and nothing of the
 * subscription (whose item never carries these attributes), ever flows into it.
 *
 * Deliberately not here: any I/O (the store queries it), and the CDK definition (lib/constructs/storage.ts
 * reads these names).
 */

export const QueuedIndex = {
  name: 'queued',
  shardAttribute: 'queuedShard',
  sinceAttribute: 'queuedSince',
  shards: 8,
} as const;

/** The shard of an event id (`evt_` and 32 hex digits): its last digit, modulo the shard count. */
export function queuedShardOf(eventId: string): string {
  const digit = Number.parseInt(eventId.slice(-1), 16);
  return `Q#${(Number.isNaN(digit) ? 0 : digit) % QueuedIndex.shards}`;
}

/** Every shard, for a reader that must see all of them. */
export function queuedShards(): string[] {
  return Array.from({ length: QueuedIndex.shards }, (_, i) => `Q#${i}`);
}
