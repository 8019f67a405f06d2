/**
 * MCP Tasks (`io.modelcontextprotocol/tasks`, MCP 2026-07-28; the extension text is
 * https://github.com/modelcontextprotocol/experimental-ext-tasks, specification/draft/tasks.md):
 * the task id, the task view of an event record, and the wire answers of tools/call, tasks/get,
 * tasks/update and tasks/cancel through the whole HTTP app over the in-memory fakes. The shapes
 * are checked against schemas written here from the extension's TypeScript interfaces.
 */
import { createMcpHandler, McpServer } from '@modelcontextprotocol/server';
import * as z from 'zod';
import { principalOf } from '../../../lambda/core/identity';
import { Limits, TASKS_EXTENSION } from '../../../lambda/core/protocol';
import { createMcpEndpoint } from '../../../lambda/mcp/server';
import { toolResultOf } from '../../../lambda/core/answers';
import { declaresTasks, eventIdOfTask, pollIntervalFor, taskForQueued, taskIdOf, taskMethods, taskOf } from '../../../lambda/mcp/tasks';
import type { EventRecord, WebhookClient } from '../../../lambda/ports';
import { API_KEY, buildApp, liveSubscription, MODERN, rpcLegacy, send, modernHeaders, type TestApp } from '../../support/app';
import { FakeClock, FakeStore, respond, T0 } from '../../support/fakes';

const EVENT_ID = `evt_${'ab'.repeat(16)}`;
const PRINCIPAL = principalOf(API_KEY);
const DAY = 24 * 3600 * 1000;

const WITH_TASKS = {
  'io.modelcontextprotocol/protocolVersion': MODERN,
  'io.modelcontextprotocol/clientCapabilities': { extensions: { [TASKS_EXTENSION]: {} } },
};
const WITHOUT_TASKS = { 'io.modelcontextprotocol/protocolVersion': MODERN, 'io.modelcontextprotocol/clientCapabilities': {} };

// The extension's `Task`, `DetailedTask` and `CreateTaskResult`, as its text defines them.
const Iso = z.string().refine((s) => !Number.isNaN(Date.parse(s)) && new Date(s).toISOString() === s, 'ISO 8601 time');
const TaskShape = {
  taskId: z.string(),
  statusMessage: z.string().optional(),
  createdAt: Iso,
  lastUpdatedAt: Iso,
  ttlMs: z.number().int().nullable(),
  pollIntervalMs: z.number().int().optional(),
};
const ToolResultSchema = z.object({
  content: z.array(z.object({ type: z.literal('text'), text: z.string() })),
  isError: z.boolean(),
  structuredContent: z.object({ eventId: z.string(), status: z.enum(['delivered', 'queued', 'failed']) }),
});
const CreateTaskResultSchema = z.object({ ...TaskShape, resultType: z.literal('task'), status: z.literal('working') });
const GetTaskResultSchema = z.discriminatedUnion('status', [
  z.object({ ...TaskShape, resultType: z.literal('complete'), status: z.literal('working') }),
  z.object({ ...TaskShape, resultType: z.literal('complete'), status: z.literal('completed'), result: ToolResultSchema }),
]);

function record(overrides: Partial<EventRecord> = {}): EventRecord {
  return { eventId: EVENT_ID, status: 'queued', subscriptionId: 'sub_x', attempts: 1, createdAt: T0, expiresAt: T0 + 7 * DAY, ...overrides };
}

describe('TASK-2: declaring the extension (per-request client capabilities)', () => {
  test('an empty object under extensions["io.modelcontextprotocol/tasks"] declares it', () => {
    expect(declaresTasks(WITH_TASKS)).toBe(true);
  });

  test.each([
    ['no envelope', undefined],
    ['no client capabilities', { 'io.modelcontextprotocol/protocolVersion': MODERN }],
    ['empty client capabilities', WITHOUT_TASKS],
    ['another extension only', { 'io.modelcontextprotocol/clientCapabilities': { extensions: { 'io.modelcontextprotocol/events': {} } } }],
    ['true instead of an object', { 'io.modelcontextprotocol/clientCapabilities': { extensions: { [TASKS_EXTENSION]: true } } }],
    ['the extension at the top level of the capabilities', { 'io.modelcontextprotocol/clientCapabilities': { [TASKS_EXTENSION]: {} } }],
  ])('%s does not declare it', (_name, envelope) => {
    expect(declaresTasks(envelope)).toBe(false);
  });
});

describe('task ids: derived from the event id and bound to the principal', () => {
  test('the id maps back to its event id for the principal that created it', () => {
    const taskId = taskIdOf(PRINCIPAL, EVENT_ID);
    expect(taskId).toMatch(/^task_[0-9a-f]{32}_[0-9a-f]{16}$/);
    expect(taskId).toContain('ab'.repeat(16));
    expect(eventIdOfTask(PRINCIPAL, taskId)).toBe(EVENT_ID);
  });

  test('the same event gives the same id (deterministic: no mapping is stored)', () => {
    expect(taskIdOf(PRINCIPAL, EVENT_ID)).toBe(taskIdOf(PRINCIPAL, EVENT_ID));
  });

  test('another principal cannot map the id, nor derive the same one', () => {
    const taskId = taskIdOf(PRINCIPAL, EVENT_ID);
    expect(eventIdOfTask(principalOf('another-key'), taskId)).toBeUndefined();
    expect(taskIdOf(principalOf('another-key'), EVENT_ID)).not.toBe(taskId);
  });

  test('a changed tag, a changed event part and malformed ids map to nothing', () => {
    const taskId = taskIdOf(PRINCIPAL, EVENT_ID);
    const flip = (s: string, i: number) => s.slice(0, i) + (s[i] === '0' ? '1' : '0') + s.slice(i + 1);
    expect(eventIdOfTask(PRINCIPAL, flip(taskId, taskId.length - 1))).toBeUndefined();
    expect(eventIdOfTask(PRINCIPAL, flip(taskId, 5))).toBeUndefined();
    for (const bad of ['', EVENT_ID, 'task_', `${taskId}0`, taskId.toUpperCase(), ` ${taskId}`, taskId.replace('task_', 'evt_')]) {
      expect(eventIdOfTask(PRINCIPAL, bad)).toBeUndefined();
    }
  });

  test('deriving a task id from something that is not an event id is a programming error', () => {
    expect(() => taskIdOf(PRINCIPAL, 'sub_123')).toThrow(/not an event id/);
  });
});

describe('TASK-5: the task view of an event record', () => {
  test('TASK-5, TOOL-11: queued is working, with the queued sentence, times and the record lifetime as ttlMs', () => {
    const task = taskOf(record(), PRINCIPAL, T0 + 2_000);
    expect(task).toEqual({
      taskId: taskIdOf(PRINCIPAL, EVENT_ID),
      status: 'working',
      statusMessage: `Event ${EVENT_ID} is queued: the dot has not acknowledged it yet, and delivery will be retried automatically. tasks/cancel stops further attempts.`,
      createdAt: new Date(T0).toISOString(),
      lastUpdatedAt: new Date(T0).toISOString(),
      ttlMs: 7 * DAY,
      pollIntervalMs: 1_000,
    });
  });

  test('STORE-4, TASK-4: ttlMs follows the record: a record kept 15 days gives a 15-day task', () => {
    expect(taskOf(record({ expiresAt: T0 + 15 * DAY }), PRINCIPAL, T0).ttlMs).toBe(15 * DAY);
  });

  test('TASK-6: delivered is completed with the synchronous tool result, updated at delivery', () => {
    const task = taskOf(record({ status: 'delivered', deliveredAt: T0 + 2_500 }), PRINCIPAL, T0 + 3_000);
    expect(task.status).toBe('completed');
    expect(task).toMatchObject({ lastUpdatedAt: new Date(T0 + 2_500).toISOString() });
    expect(task.status === 'completed' && task.result).toEqual(toolResultOf({ kind: 'delivered', eventId: EVENT_ID }));
    expect(task.status === 'completed' && task.result.content[0]!.text).toBe(`ChatGPT accepted event ${EVENT_ID} for asynchronous processing by your dot.`);
  });

  test('TASK-6: failed is completed (not the failed status) with the rejection as an isError tool result', () => {
    const task = taskOf(record({ status: 'failed', lastError: 'http_4xx' }), PRINCIPAL, T0);
    expect(task.status).toBe('completed');
    if (task.status !== 'completed') return;
    expect(task.result).toEqual(toolResultOf({ kind: 'failed', eventId: EVENT_ID, reason: 'http_4xx' }));
    expect(task.result.isError).toBe(true);
    expect(task.result.content[0]!.text).toMatch(/rejected: the callback refused it \(HTTP 4xx\)/);
  });

  test('dropped is completed with the subscription-ended failure text', () => {
    const task = taskOf(record({ status: 'dropped' }), PRINCIPAL, T0);
    expect(task.status === 'completed' && task.result.isError).toBe(true);
    expect(task.status === 'completed' && task.result.content[0]!.text).toMatch(/subscription ended/);
  });

  test('the suggested poll interval grows with the age of the event', () => {
    expect([0, 9_999, 10_000, 119_999, 120_000, 10 * DAY].map(pollIntervalFor)).toEqual([1_000, 1_000, 5_000, 5_000, 30_000, 30_000]);
  });
});

describe('taskForQueued: the answer when the wait window ended', () => {
  const deps = (store: FakeStore) => ({ store, clock: new FakeClock() });

  test('TASK-4: a queued record gives a CreateTaskResult, read back first (durably created)', async () => {
    const store = new FakeStore();
    store.events.set(EVENT_ID, record());
    const answer = await taskForQueued(deps(store), PRINCIPAL, EVENT_ID);
    expect(CreateTaskResultSchema.parse(answer)).toMatchObject({ taskId: taskIdOf(PRINCIPAL, EVENT_ID) });
    // The Task fields, plus the two tool-result fields SDK 2.4.0 needs on a tools/call result.
    expect(Object.keys(answer!).sort()).toEqual(
      ['content', 'createdAt', 'lastUpdatedAt', 'pollIntervalMs', 'resultType', 'status', 'statusMessage', 'structuredContent', 'taskId', 'ttlMs'].sort(),
    );
    const queued = toolResultOf({ kind: 'queued', eventId: EVENT_ID });
    expect(answer).toMatchObject({ content: queued.content, structuredContent: queued.structuredContent });
    expect(store.callsOf('getEvent')).toHaveLength(1);
  });

  test('a record settled in the meantime gives the plain tool result instead', async () => {
    const store = new FakeStore();
    store.events.set(EVENT_ID, record({ status: 'delivered', deliveredAt: T0 }));
    expect(await taskForQueued(deps(store), PRINCIPAL, EVENT_ID)).toEqual(toolResultOf({ kind: 'delivered', eventId: EVENT_ID }));
  });

  test('an unreadable record gives no task at all (the caller falls back to the queued text)', async () => {
    const store = new FakeStore();
    store.events.set(EVENT_ID, record());
    store.failing.add('getEvent');
    expect(await taskForQueued(deps(store), PRINCIPAL, EVENT_ID)).toBeUndefined();
  });
});

describe('taskMethods: principal binding and bad input', () => {
  const declared = (params: unknown, inputResponses?: unknown) => [params, { envelope: WITH_TASKS, inputResponses }] as const;

  test('a task is readable only by the principal that created it', async () => {
    const store = new FakeStore();
    store.events.set(EVENT_ID, record());
    const taskId = taskIdOf(PRINCIPAL, EVENT_ID);
    await expect(taskMethods({ store, clock: new FakeClock() }, PRINCIPAL).get(...declared({ taskId }))).resolves.toMatchObject({ status: 'working' });
    await expect(taskMethods({ store, clock: new FakeClock() }, principalOf('other')).get(...declared({ taskId }))).rejects.toMatchObject({
      code: -32602,
      message: 'Failed to retrieve task: Task not found',
    });
  });

  test.each([
    ['no params', undefined],
    ['no taskId', {}],
    ['a numeric taskId', { taskId: 42 }],
  ])('tasks/get with %s is -32602 naming params.taskId', async (_name, params) => {
    const methods = taskMethods({ store: new FakeStore(), clock: new FakeClock() }, PRINCIPAL);
    await expect(methods.get(...declared(params))).rejects.toMatchObject({ code: -32602, message: 'tasks/get: params.taskId must be a string.' });
  });
});

/** A callback that never accepts: the event stays queued whoever attempts it (worker or inline). */
const failingCallback: WebhookClient = { post: async () => respond(503) };

function appWithSubscription(): TestApp {
  const t = buildApp({}, { deliveryWaitMs: 0, webhook: failingCallback });
  t.store.subscription = liveSubscription();
  return t;
}

function rpc(t: TestApp, method: string, params: Record<string, unknown>, meta: object = WITH_TASKS, headers: Record<string, string> = {}) {
  // Mcp-Name mirrors params.taskId on tasks/* (the extension's routing header) and the tool name on tools/call.
  const name: Record<string, string> =
    typeof params.taskId === 'string' ? { 'mcp-name': params.taskId } : method === 'tools/call' ? { 'mcp-name': String(params.name) } : {};
  return send(t.app, {
    headers: modernHeaders(method, { ...name, ...headers }),
    body: JSON.stringify({ jsonrpc: '2.0', id: 7, method, params: { ...params, _meta: meta } }),
  });
}

const callSend = (t: TestApp, meta: object = WITH_TASKS) => rpc(t, 'tools/call', { name: 'send_to_dot', arguments: { message: 'hello dot' } }, meta);

async function createdTask(t: TestApp): Promise<{ taskId: string; eventId: string }> {
  const answer = await callSend(t);
  expect(answer.status).toBe(200);
  const result = CreateTaskResultSchema.parse((answer.json as { result: unknown }).result);
  const [eventId] = [...t.store.events.keys()];
  return { taskId: result.taskId, eventId: eventId! };
}

const resultOf = (answer: { json: unknown }) => (answer.json as { result: Record<string, unknown> }).result;
const errorOf = (answer: { json: unknown }) => (answer.json as { error: { code: number; message: string; data?: unknown } }).error;

describe('TASK-1: over the wire (2026-07-28), through the whole app', () => {
  test('MCP-2, TASK-1: server/discover advertises the extension next to the events one', async () => {
    const answer = await rpc(buildApp(), 'server/discover', {}, WITHOUT_TASKS);
    expect(resultOf(answer).capabilities).toEqual({
      tools: { listChanged: false },
      events: {},
      extensions: { 'io.modelcontextprotocol/events': {}, 'io.modelcontextprotocol/tasks': {} },
    });
  });

  test('legacy initialize does not advertise it (no per-request capabilities to declare it with)', async () => {
    const answer = await rpcLegacy(buildApp().app, 'initialize', { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 't', version: '1' } });
    expect((resultOf(answer).capabilities as { extensions: object }).extensions).toEqual({ 'io.modelcontextprotocol/events': {} });
  });

  test('DEL-PIPE-6, MCP-8, TASK-4, TOOL-12: a queued send answers a task to a caller that declares the extension', async () => {
    const t = appWithSubscription();
    const answer = await callSend(t);
    const result = resultOf(answer);
    expect(CreateTaskResultSchema.parse(result)).toMatchObject({ resultType: 'task', status: 'working', ttlMs: Limits.eventRecordMs });
    const [eventId] = [...t.store.events.keys()];
    expect(eventIdOfTask(PRINCIPAL, result.taskId as string)).toBe(eventId);
    expect(result.statusMessage).toContain(eventId);
    expect(result.structuredContent).toEqual({ eventId, status: 'queued' });
  });

  test('TASK-3, TOOL-11, TOOL-12: the same send without the extension keeps the queued text', async () => {
    const t = appWithSubscription();
    const result = resultOf(await callSend(t, WITHOUT_TASKS));
    const [eventId] = [...t.store.events.keys()];
    expect(result).toMatchObject({
      resultType: 'complete',
      isError: false,
      structuredContent: { eventId, status: 'queued' },
      content: [{ type: 'text', text: `Event ${eventId} is queued: the dot has not acknowledged it yet, and delivery will be retried automatically.` }],
    });
    expect(result).not.toHaveProperty('taskId');
  });

  test('a send that fails validation stays an ordinary tool error even with the extension', async () => {
    const t = appWithSubscription();
    const answer = await rpc(t, 'tools/call', { name: 'send_to_dot', arguments: { message: '  ' } });
    expect(resultOf(answer)).toMatchObject({ resultType: 'complete', isError: true });
  });

  test('TASK-6: tasks/get: working while queued, then completed with the delivered tool result', async () => {
    const t = appWithSubscription();
    const { taskId, eventId } = await createdTask(t);
    const working = GetTaskResultSchema.parse(resultOf(await rpc(t, 'tasks/get', { taskId })));
    expect(working).toMatchObject({ taskId, status: 'working' });

    // The worker (or the inline attempt) settles the event; the task reads the same record.
    Object.assign(t.store.events.get(eventId)!, { status: 'delivered', deliveredAt: t.clock.now() + 2_500 });
    const completed = GetTaskResultSchema.parse(resultOf(await rpc(t, 'tasks/get', { taskId })));
    expect(completed).toMatchObject({
      taskId,
      status: 'completed',
      result: {
        isError: false,
        structuredContent: { eventId, status: 'delivered' },
        content: [{ type: 'text', text: `ChatGPT accepted event ${eventId} for asynchronous processing by your dot.` }],
      },
    });
  });

  test('TASK-6: tasks/get: a rejected delivery completes with isError and the failure text', async () => {
    const t = appWithSubscription();
    const { taskId, eventId } = await createdTask(t);
    Object.assign(t.store.events.get(eventId)!, { status: 'failed', lastError: 'http_4xx' });
    const completed = GetTaskResultSchema.parse(resultOf(await rpc(t, 'tasks/get', { taskId })));
    expect(completed).toMatchObject({ status: 'completed', result: { isError: true, structuredContent: { eventId, status: 'failed' } } });
  });

  test('TASK-2: tasks/get from a request that does not declare the extension is -32021 naming it', async () => {
    const t = appWithSubscription();
    const { taskId } = await createdTask(t);
    for (const method of ['tasks/get', 'tasks/cancel', 'tasks/update']) {
      const error = errorOf(await rpc(t, method, { taskId, inputResponses: {} }, WITHOUT_TASKS));
      expect(error).toMatchObject({ code: -32021, data: { requiredCapabilities: { extensions: { 'io.modelcontextprotocol/tasks': {} } } } });
      expect(error.message).toMatch(/^Missing required client capability/);
    }
  });

  test('TASK-1: an unknown, malformed or expired task id is -32602 "Task not found"', async () => {
    const t = appWithSubscription();
    const { taskId } = await createdTask(t);
    const unknown = taskIdOf(PRINCIPAL, `evt_${'cd'.repeat(16)}`);
    for (const id of [unknown, 'task_nonsense']) {
      expect(errorOf(await rpc(t, 'tasks/get', { taskId: id }))).toEqual({ code: -32602, message: 'Failed to retrieve task: Task not found' });
    }
    // The task lives as long as the event record, and no longer.
    t.clock.advance(Limits.eventRecordMs);
    expect(errorOf(await rpc(t, 'tasks/get', { taskId }))).toEqual({ code: -32602, message: 'Failed to retrieve task: Task not found' });
  });

  test('HTTP-19: a storage outage on tasks/get is -32603 with the generic sentence', async () => {
    const t = appWithSubscription();
    const { taskId } = await createdTask(t);
    t.store.failing.add('getEvent');
    expect(errorOf(await rpc(t, 'tasks/get', { taskId }))).toEqual({ code: -32603, message: 'The storage is unavailable; try again shortly.' });
    expect(t.logs.some((l) => l.event === 'dependency_unavailable' && l.fields.where === 'tasks/get')).toBe(true);
  });

  test("the task id must match Mcp-Name (the extension's routing header, checked by the SDK)", async () => {
    const t = appWithSubscription();
    const { taskId } = await createdTask(t);
    const answer = await rpc(t, 'tasks/get', { taskId }, WITH_TASKS, { 'mcp-name': 'task_other' });
    expect(errorOf(answer).code).toBe(-32020);
  });

  test('MCP-8, TASK-7: tasks/update is acknowledged with an empty complete result and changes nothing', async () => {
    const t = appWithSubscription();
    const { taskId } = await createdTask(t);
    const writes = t.store.writes.length;
    const answer = await rpc(t, 'tasks/update', { taskId, inputResponses: { name: { action: 'accept', content: { x: 1 } } } });
    expect(resultOf(answer)).toEqual({ resultType: 'complete', _meta: expect.any(Object) });
    expect(t.store.writes.length).toBe(writes);
  });

  test('TASK-7: tasks/update without inputResponses, or for an unknown task, is -32602', async () => {
    const t = appWithSubscription();
    const { taskId } = await createdTask(t);
    expect(errorOf(await rpc(t, 'tasks/update', { taskId }))).toEqual({ code: -32602, message: 'tasks/update: params.inputResponses must be an object.' });
    const unknown = taskIdOf(PRINCIPAL, `evt_${'cd'.repeat(16)}`);
    expect(errorOf(await rpc(t, 'tasks/update', { taskId: unknown, inputResponses: {} }))).toEqual({
      code: -32602,
      message: 'Failed to retrieve task: Task not found',
    });
  });

  test('TASK-8: tasks/cancel of an unsettled task is an empty acknowledgement; the event is dropped and the task reads cancelled', async () => {
    const t = appWithSubscription();
    const { taskId, eventId } = await createdTask(t);
    expect(resultOf(await rpc(t, 'tasks/cancel', { taskId }))).toEqual({ resultType: 'complete', _meta: expect.any(Object) });
    expect(t.store.events.get(eventId)).toMatchObject({ status: 'dropped', cancelledAt: t.clock.now() });
    expect(t.store.events.get(eventId)!.log).toEqual([{ at: t.clock.now(), note: 'cancelled' }]);
    expect(resultOf(await rpc(t, 'tasks/get', { taskId }))).toMatchObject({ taskId, status: 'cancelled' });
    const unknown = taskIdOf(PRINCIPAL, `evt_${'cd'.repeat(16)}`);
    expect(errorOf(await rpc(t, 'tasks/cancel', { taskId: unknown }))).toEqual({ code: -32602, message: 'Failed to retrieve task: Task not found' });
  });

  test('TASK-9: tasks/cancel of a settled task is an empty acknowledgement that changes nothing', async () => {
    const t = appWithSubscription();
    const { taskId, eventId } = await createdTask(t);
    Object.assign(t.store.events.get(eventId)!, { status: 'delivered', deliveredAt: t.clock.now() });
    const writes = t.store.writes.length;
    expect(resultOf(await rpc(t, 'tasks/cancel', { taskId }))).toEqual({ resultType: 'complete', _meta: expect.any(Object) });
    expect(t.store.writes.length).toBe(writes);
    expect(resultOf(await rpc(t, 'tasks/get', { taskId }))).toMatchObject({ status: 'completed' });
  });

  test('TASK-8: an attempt in flight when the task was cancelled lands as it settled: the task then reads completed', async () => {
    const t = appWithSubscription();
    const { taskId, eventId } = await createdTask(t);
    await rpc(t, 'tasks/cancel', { taskId });
    // The worker's POST was already out; its 2xx is recorded over dropped (core/delivery.ts).
    Object.assign(t.store.events.get(eventId)!, { status: 'delivered', deliveredAt: t.clock.now(), attempts: 1 });
    expect(resultOf(await rpc(t, 'tasks/get', { taskId }))).toMatchObject({ status: 'completed', result: { isError: false } });
  });

  test('when the record cannot be read back, the caller gets the queued text, not a task', async () => {
    const t = appWithSubscription();
    // Reads fail from the start: the wait reads nothing and the task read-back fails too.
    t.store.failing.add('getEvent');
    const result = resultOf(await callSend(t));
    expect(result).toMatchObject({ resultType: 'complete', isError: false, structuredContent: { status: 'queued' } });
    expect(t.logs.some((l) => l.event === 'task_not_created')).toBe(true);
  });
});

describe('legacy era: no tasks', () => {
  test('TASK-3: a legacy tools/call that carries the capability in _meta still gets the queued text', async () => {
    const t = appWithSubscription();
    const capabilities = { 'io.modelcontextprotocol/clientCapabilities': WITH_TASKS['io.modelcontextprotocol/clientCapabilities'] };
    const answer = await rpcLegacy(t.app, 'tools/call', { name: 'send_to_dot', arguments: { message: 'hi' }, _meta: capabilities });
    const result = resultOf(answer);
    expect(result).toMatchObject({ isError: false, structuredContent: { status: 'queued' } });
    expect(result).not.toHaveProperty('resultType');
  });

  test('tasks/get is not a method there (-32601)', async () => {
    const answer = await rpcLegacy(buildApp().app, 'tasks/get', { taskId: taskIdOf(PRINCIPAL, EVENT_ID) });
    expect(errorOf(answer).code).toBe(-32601);
  });
});

describe("the SDK's responseMode warning", () => {
  afterEach(() => jest.restoreAllMocks());

  const SDK_JSON_MODE_WARNING =
    "responseMode: 'json' drops mid-call notifications. subscriptions/listen streams are always served over SSE regardless; other notifications emitted before a result are dropped.";

  test('control: the SDK prints it when a handler is created with responseMode json', () => {
    const warn = jest.spyOn(console, 'warn').mockImplementation(() => undefined);
    createMcpHandler(() => new McpServer({ name: 'x', version: '1' }), { responseMode: 'json' });
    expect(warn).toHaveBeenCalledWith(SDK_JSON_MODE_WARNING);
  });

  test('createMcpEndpoint prints nothing: it keeps the default response mode and needs no filter', () => {
    const warn = jest.spyOn(console, 'warn').mockImplementation(() => undefined);
    const log = jest.spyOn(console, 'log').mockImplementation(() => undefined);
    createMcpEndpoint({ ...buildApp(), deliveryWaitMs: 0, version: '0', log: { info() {}, warn() {}, error() {} } } as never);
    expect(warn).not.toHaveBeenCalled();
    expect(log).not.toHaveBeenCalled();
  });

  test('the default mode still answers plain JSON on 2026-07-28: dm-dot emits no notification before a result', async () => {
    const t = appWithSubscription();
    for (const [method, params] of [
      ['tools/list', {}],
      ['events/list', {}],
      ['tools/call', { name: 'send_to_dot', arguments: { message: 'hi' } }],
    ] as const) {
      const answer = await rpc(t, method, params);
      expect(answer.headers.get('content-type')).toMatch(/^application\/json/);
    }
  });
});
