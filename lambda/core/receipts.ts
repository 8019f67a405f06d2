/**
 * Read receipts (docs/contract/http.md, RCPT-1 and RCPT-2): what `GET /v1/messages/{eventId}` tells
 * the key that sent an event, and the connector key.
 *
 * Deliberately not here: authentication (http/app.ts hands in who asks) and the HTTP answer.
 */
import type { Store } from '../ports';
import type { Identity } from './access';
import { guardDependency } from './errors';
import { EVENT_ID_PATTERN } from './identity';
import { CONNECTOR_SENDER } from './protocol';

const iso = (at: number | undefined): string | null => (at === undefined ? null : new Date(at).toISOString());

/**
 * The receipt of `eventId` for `reader`, or undefined when it may not see one: the id is not an
 * event id (nothing is read), no live record has it, or it was sent by another key. Throws
 * DependencyUnavailable('storage') when the record cannot be read.
 */
export async function readReceipt(store: Pick<Store, 'getEvent'>, reader: Pick<Identity, 'role' | 'sender'>, eventId: string, now: number) {
  if (!EVENT_ID_PATTERN.test(eventId)) return undefined;
  const record = await guardDependency('storage', () => store.getEvent(eventId, now));
  if (!record) return undefined;
  // A sender sees its own events only; a sender key can never pass for the connector's name, even
  // one made before that name was reserved.
  if (reader.role !== 'connector' && (record.sender !== reader.sender || reader.sender === CONNECTOR_SENDER)) return undefined;
  return {
    eventId: record.eventId,
    status: record.status,
    sender: record.sender ?? null,
    createdAt: new Date(record.createdAt).toISOString(),
    deliveredAt: iso(record.deliveredAt),
    acknowledgedAt: iso(record.acknowledgedAt),
    attempts: record.attempts,
  };
}
