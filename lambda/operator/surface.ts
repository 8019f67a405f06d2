/**
 * The operator surface every backing offers the CLI's commands: the running local server's admin
 * routes, a stopped server's database opened as operator (cli/local-server/local-operator.ts), or
 * the stack's table and queue with `--aws` (cli/aws/stack-operator.ts). Here, below the backings
 * and the module that picks one (cli/backings.ts), so that neither imports the other's to name it.
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
