/**
 * Restores the outbox invariant at a server's start: every live `queued` event record has a job.
 * The outbox writes a record and its job in one transaction, so only an imported state directory
 * (or a record written by hand) can break it. A queued record without a job gets one from its kept
 * bytes (`body`), due now; one without kept bytes cannot be sent and is marked `failed`, and both
 * are reported by event id.
 *
 * Deliberately not here: jobs without a record (the worker restores the record when it meets
 * one, as the Delivery Lambda does), and settled records (they have no job by design).
 */
import { EventStatus } from '../../core/protocol';
import type { DeliveryJob, EventRecord } from '../../ports';
import { ItemKeys, QueuedIndex, isLive } from '../../core/store/items';
import { getItem, idList, recordOf, storageKey, write, type Databases } from './environment';
import { hasJobInTxn, putJobInTxn } from './jobs';
import { failQueuedInTxn } from './table';

export interface RepairReport {
  /** Given a job from their kept bytes. */
  requeued: string[];
  /** Marked failed: no kept bytes to send. */
  failed: string[];
  /** One line for the log, when anything was repaired. */
  line?: string;
}

export async function repairQueuedWithoutJobs(dbs: Databases, now: number): Promise<RepairReport> {
  // Found from the index of queued events (not every event), then re-checked inside the write:
  // the search holds no writer lock.
  const candidates: string[] = [];
  for (const [, , key] of dbs.indexes.get(QueuedIndex.name)!.getKeys()) {
    const eventId = eventIdOf(dbs, key);
    if (eventId === undefined || hasJobInTxn(dbs, eventId)) continue;
    const item = dbs.items.get(key);
    if (item?.status === EventStatus.queued && isLive(item.expiresAt, now)) candidates.push(eventId);
  }
  if (candidates.length === 0) return { requeued: [], failed: [] };
  const report = await write(dbs, () => {
    const requeued: string[] = [];
    const failed: string[] = [];
    for (const eventId of candidates) {
      const item = getItem(dbs, ItemKeys.event(eventId));
      if (!item || item.status !== EventStatus.queued || hasJobInTxn(dbs, eventId)) continue;
      const record = recordOf<EventRecord>(item);
      if (typeof record.body === 'string' && typeof record.subscriptionId === 'string') {
        const job: DeliveryJob = {
          eventId,
          subscriptionId: record.subscriptionId,
          body: record.body,
          ...(record.generation !== undefined ? { generation: record.generation } : {}),
        };
        putJobInTxn(dbs, job, now, now);
        requeued.push(eventId);
      } else if (failQueuedInTxn(dbs, eventId, now)) failed.push(eventId);
    }
    return { requeued, failed };
  });
  const parts = [
    report.requeued.length > 0 ? `${report.requeued.length} queued again from their kept bytes (${idList(report.requeued)})` : '',
    report.failed.length > 0 ? `${report.failed.length} marked failed, having no kept bytes to send (${idList(report.failed)})` : '',
  ].filter((part) => part !== '');
  return parts.length > 0 ? { ...report, line: `queued events without a delivery job: ${parts.join('; ')}` } : report;
}

/** The event id of an EVENT# items key (read from the item when the key is a hash). */
function eventIdOf(dbs: Databases, key: string): string | undefined {
  const prefix = ItemKeys.event('');
  const plain = key.slice(prefix.length);
  if (storageKey(ItemKeys.event(plain)) === key) return plain;
  const eventId = dbs.items.get(key)?.eventId;
  return typeof eventId === 'string' ? eventId : undefined;
}
