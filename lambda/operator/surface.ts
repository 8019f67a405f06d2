/**
 * The operator surface every backing (the running server, its stopped database, the stack with
 * `--aws`) offers the CLI's commands; here, below the backings, so that none imports another's.
 *
 * Deliberately not here: any backing, and choosing one.
 */
import type { EventStatus } from '../core/protocol';
import type { ResendResult } from './actions';
import type { EventDetail, EventView, SubscriptionView } from './views';

export interface Operator {
  via: 'server' | 'database' | 'aws';
  /** Where the answers come from, for the text output: "the running server at http://…". */
  where: string;
  listEvents(status?: EventStatus): Promise<EventView[]>;
  showEvent(eventId: string): Promise<EventDetail | null>;
  resendEvent(eventId: string): Promise<ResendResult>;
  showSubscription(): Promise<SubscriptionView | null>;
  /** Clears only the subscription `expectedId` (the one shown and confirmed). */
  clearSubscription(expectedId: string): Promise<{ cleared: boolean; id: string | null }>;
}
