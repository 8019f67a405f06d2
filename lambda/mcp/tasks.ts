/**
 * MCP Tasks for `send_to_dot`: the `io.modelcontextprotocol/tasks` extension of MCP 2026-07-28
 * (SEP-2663, modelcontextprotocol/experimental-ext-tasks). A caller that declares it gets a task
 * instead of the queued text when the delivery is not settled within the wait window; `tasks/get`
 * reports `working` while the event is queued, `completed` with the synchronous path's tool result
 * once settled, and `cancelled` after a `tasks/cancel` that found it unsettled.
 *
 * A task is a view of the event record, nothing more (docs/decisions.md, "Task ids, times and
 * polling" and "Cancel during an attempt").
 *
 * Deliberately not here: storage of its own (no TASK# items); `notifications/tasks`,
 * `subscriptions/listen` (a Lambda cannot hold a stream open) and `input_required`; the legacy era;
 * the `failed` status (a rejected delivery is a `completed` tool result with `isError: true`).
 */
import type { EventRecord } from '../ports';
import { guardDependency, invalidParams, ProtocolFault } from '../core/errors';
import { canonicalJson, sha256Hex } from '../core/identity';
import { toolResultOf } from '../core/answers';
import { outcomeOfRecord, type MessageDeps } from '../core/messages';
import {
  CLIENT_CAPABILITIES_META_KEY,
  ErrorCodes,
  EVENT_ID_PREFIX,
  EventStatus,
  Methods,
  TASK_ID_PREFIX,
  TASK_POLL_INTERVALS,
  TASK_RESULT_TYPE,
  TASKS_EXTENSION,
} from '../core/protocol';
import { constantTimeEqual } from '../core/signing';
import { isObject } from '../core/validation';

/** True when the per-request client capabilities declare the extension: any object there does. */
export function declaresTasks(envelope: unknown): boolean {
  const capabilities = isObject(envelope) ? envelope[CLIENT_CAPABILITIES_META_KEY] : undefined;
  const extensions = isObject(capabilities) ? capabilities.extensions : undefined;
  return isObject(extensions) && isObject(extensions[TASKS_EXTENSION]);
}

// `task_<the event id's 32 hex>_<16 hex tag>`: the event id makes it unguessable and finds the record;
// the tag binds it to its principal, so another one cannot read the task even if it learns the event id.
const TASK_ID_PATTERN = /^task_([0-9a-f]{32})_([0-9a-f]{16})$/;

function tagOf(principal: string, eventId: string): string {
  return sha256Hex(canonicalJson(['task', principal, eventId])).slice(0, 16);
}

export function taskIdOf(principal: string, eventId: string): string {
  if (!eventId.startsWith(EVENT_ID_PREFIX)) throw new Error(`taskIdOf: not an event id: ${eventId}`);
  return `${TASK_ID_PREFIX}${eventId.slice(EVENT_ID_PREFIX.length)}_${tagOf(principal, eventId)}`;
}

/** The event id behind a task id, when the id is well formed and was issued to this principal. */
export function eventIdOfTask(principal: string, taskId: string): string | undefined {
  const match = TASK_ID_PATTERN.exec(taskId);
  if (!match) return undefined;
  const eventId = EVENT_ID_PREFIX + match[1]!;
  return constantTimeEqual(match[2]!, tagOf(principal, eventId)) ? eventId : undefined;
}

export function pollIntervalFor(ageMs: number): number {
  return (TASK_POLL_INTERVALS.find((step) => ageMs < step.untilAgeMs) ?? TASK_POLL_INTERVALS[TASK_POLL_INTERVALS.length - 1]!).pollMs;
}

/** Dropped by a cancel, and not resent by an operator since. */
function wasCancelled(record: EventRecord): boolean {
  const at = record.cancelledAt;
  if (record.status !== EventStatus.dropped || at === undefined) return false;
  return !(record.log ?? []).some((entry) => 'note' in entry && entry.note === 'resent' && entry.at >= at);
}

/** The task view of an event record, as `tasks/get` answers it (the extension's `DetailedTask`; the SDK adds `resultType: "complete"`). */
export function taskOf(record: EventRecord, principal: string, now: number) {
  const outcome = outcomeOfRecord(record);
  const fields = {
    taskId: taskIdOf(principal, record.eventId),
    createdAt: new Date(record.createdAt).toISOString(),
    // A failure time is not stored: a task that ended in a rejection reports its creation time.
    lastUpdatedAt: new Date(record.deliveredAt ?? record.cancelledAt ?? record.createdAt).toISOString(),
    ttlMs: Math.max(0, record.expiresAt - record.createdAt),
    pollIntervalMs: pollIntervalFor(Math.max(0, now - record.createdAt)),
  };
  if (outcome.kind === 'queued') {
    return { ...fields, status: 'working' as const, statusMessage: `${toolResultOf(outcome).content[0]!.text} tasks/cancel stops further attempts.` };
  }
  if (wasCancelled(record)) {
    return { ...fields, status: 'cancelled' as const, statusMessage: `Cancelled: event ${record.eventId} will not be attempted again.` };
  }
  return { ...fields, status: 'completed' as const, result: toolResultOf(outcome) };
}

/**
 * The answer to an unsettled `send_to_dot` for a caller that declared the extension. The record is
 * read back first (a task must resolve on `tasks/get`; a delivery settled meanwhile is answered as a
 * tool result); undefined when it cannot be read: the caller then gets the queued text.
 *
 * The task is the extension's `CreateTaskResult`, plus the queued tool result's `content` and
 * `structuredContent`, which SDK 2.4.0's McpServer needs for a tool with an output schema, and
 * which tell a host that reads only `content` what happened.
 */
export async function taskForQueued(deps: Pick<MessageDeps, 'store' | 'clock'>, principal: string, eventId: string) {
  const now = deps.clock.now();
  const record = await deps.store.getEvent(eventId, now).catch(() => undefined);
  if (!record) return undefined;
  const task = taskOf(record, principal, now);
  if (task.status === 'completed') return task.result;
  if (task.status === 'cancelled') return toolResultOf(outcomeOfRecord(record));
  const { content, structuredContent } = toolResultOf({ kind: 'queued', eventId });
  return { resultType: TASK_RESULT_TYPE, ...task, content, structuredContent };
}

const NOT_FOUND = 'Failed to retrieve task: Task not found';

/** The record behind a task id; every kind of unknown id answers the same -32602, revealing nothing about other callers. */
async function recordOf(deps: Pick<MessageDeps, 'store' | 'clock'>, principal: string, taskId: string): Promise<EventRecord> {
  const eventId = eventIdOfTask(principal, taskId);
  const record = eventId ? await guardDependency('storage', () => deps.store.getEvent(eventId, deps.clock.now())) : undefined;
  if (!record) throw invalidParams(NOT_FOUND);
  return record;
}

/** What a `tasks/*` handler reads of the SDK's request context (`mcpReq`): the envelope and input responses it lifts out of `params`. */
export type TaskContext = { envelope?: unknown; inputResponses?: unknown } | undefined;

/** The extension's three methods for one caller: -32021 without the extension declared, -32602 for a bad task id. */
export function taskMethods(deps: Pick<MessageDeps, 'store' | 'clock'>, principal: string) {
  const begin = (method: string, params: unknown, context: TaskContext): string => {
    if (!declaresTasks(context?.envelope)) {
      throw new ProtocolFault(
        ErrorCodes.missingRequiredClientCapability,
        `Missing required client capability: ${method} needs ${TASKS_EXTENSION} declared in _meta["${CLIENT_CAPABILITIES_META_KEY}"].extensions.`,
        { requiredCapabilities: { extensions: { [TASKS_EXTENSION]: {} } } },
      );
    }
    const taskId = isObject(params) ? params.taskId : undefined;
    if (typeof taskId !== 'string') throw invalidParams(`${method}: params.taskId must be a string.`);
    return taskId;
  };
  return {
    async get(params: unknown, context: TaskContext) {
      const record = await recordOf(deps, principal, begin(Methods.tasksGet, params, context));
      return taskOf(record, principal, deps.clock.now());
    },
    async update(params: unknown, context: TaskContext): Promise<Record<string, never>> {
      const taskId = begin(Methods.tasksUpdate, params, context);
      // send_to_dot never asks for input, so every response is ignored; the shape is still checked.
      const responses = context?.inputResponses ?? (isObject(params) ? params.inputResponses : undefined);
      if (!isObject(responses)) throw invalidParams(`${Methods.tasksUpdate}: params.inputResponses must be an object.`);
      await recordOf(deps, principal, taskId);
      return {};
    },
    async cancel(params: unknown, context: TaskContext): Promise<Record<string, never>> {
      const record = await recordOf(deps, principal, begin(Methods.tasksCancel, params, context));
      if (record.status !== EventStatus.queued) return {};
      // One compare-and-set from `queued`: a delivery that settles meanwhile wins.
      const at = deps.clock.now();
      await guardDependency('storage', () =>
        deps.store.updateEvent(
          record.eventId,
          { status: EventStatus.dropped, cancelledAt: at, appendLog: { at, note: 'cancelled' } },
          { status: EventStatus.queued },
        ),
      );
      return {};
    },
  };
}
