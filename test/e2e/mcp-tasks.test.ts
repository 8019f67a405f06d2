/**
 * MCP Tasks end to end (the `io.modelcontextprotocol/tasks` extension of MCP 2026-07-28,
 * https://github.com/modelcontextprotocol/experimental-ext-tasks, specification/draft/tasks.md):
 * the real local runtime with a short wait window, a real dot that answers only after 2.5 s, and
 * the official MCP client declaring the extension in its per-request client capabilities.
 *
 * `@modelcontextprotocol/client` 2.4.0 sends the declaration but has no task support: it refuses a
 * `resultType: "task"` answer (UNSUPPORTED_RESULT_TYPE) before the caller sees it. The test reads
 * that one answer from the wire through the transport's `fetch` option and drives `tasks/get` with
 * the client's own `request` (a custom method; its result is `complete`).
 *
 * Whoever delivers (the worker, or an inline first attempt on the MCP side) does not matter here:
 * only the outcome, the task view of it and the copies the dot received are checked.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import * as z from 'zod';
import { newSecret, queueOf, startReceiver, startServer, until, waitFor, type RunningServer } from '../support/e2e';
import { measureCpuWait } from '../support/cpu-wait';

const TASKS = 'io.modelcontextprotocol/tasks';
const WAIT_MS = 300;
const DOT_DELAY_MS = 2_500;

const Task = z.looseObject({
  taskId: z.string(),
  status: z.enum(['working', 'input_required', 'completed', 'failed', 'cancelled']),
  createdAt: z.string(),
  lastUpdatedAt: z.string(),
  ttlMs: z.number().nullable(),
  pollIntervalMs: z.number().optional(),
});
const TaskAnswer = Task.extend({ result: z.looseObject({ content: z.array(z.looseObject({ text: z.string() })), isError: z.boolean() }).optional() });
const Subscribed = z.looseObject({ id: z.string() });

interface Wire {
  method: string;
  elapsedMs: number;
  /** How long this process and the server waited for a CPU meanwhile (the machine's load, test/support/cpu-wait.ts). */
  cpuWaitMs: number;
  body: any;
}

/** The official client, pinned to 2026-07-28, optionally declaring the Tasks extension; every JSON-RPC answer is kept as sent on the wire. */
async function connect(server: RunningServer, declareTasks: boolean) {
  const wire: Wire[] = [];
  const recordingFetch = async (url: string | URL | Request, init?: RequestInit) => {
    const cpuWait = measureCpuWait([process.pid, server.child.pid]);
    const started = Date.now();
    const response = await fetch(url, init);
    const text = await response.clone().text();
    const elapsedMs = Date.now() - started;
    const cpuWaitMs = cpuWait.stop();
    const sent = typeof init?.body === 'string' ? JSON.parse(init.body) : undefined;
    if (sent?.method && text.startsWith('{')) wire.push({ method: sent.method, elapsedMs, cpuWaitMs, body: JSON.parse(text) });
    return response;
  };
  const client = new Client(
    { name: 'e2e-tasks', version: '1.0.0' },
    { versionNegotiation: { mode: { pin: '2026-07-28' } }, capabilities: declareTasks ? { extensions: { [TASKS]: {} } } : {} },
  );
  await client.connect(new StreamableHTTPClientTransport(new URL(`${server.mcpUrl}?key=${encodeURIComponent(server.key)}`), { fetch: recordingFetch }));
  return { client, wire };
}

/** Subscribes the dot at `url` through the official client, without the extension. */
async function subscribeDot(server: RunningServer, url: string): Promise<void> {
  const { client } = await connect(server, false);
  await client.request(
    { method: 'events/subscribe', params: { name: 'message.created', arguments: {}, delivery: { mode: 'webhook', url, secret: newSecret() } } },
    Subscribed,
  );
  await client.close();
}

describe('TASK-2: MCP Tasks: a slow dot and a short wait window', () => {
  let server: RunningServer;
  let receiver: Awaited<ReturnType<typeof startReceiver>>;

  before(async () => {
    server = await startServer({ DMDOT_DELIVERY_WAIT_MS: String(WAIT_MS) });
    receiver = await startReceiver((r) =>
      r.json?.type === 'verification' ? { status: 200, body: JSON.stringify({ challenge: r.json.challenge }) } : { status: 200, delayMs: DOT_DELAY_MS },
    );
    await subscribeDot(server, receiver.url('/dot'));
  });

  after(async () => {
    await receiver.close();
    assert.equal(await server.stop(), 0);
  });

  it('TASK-2: server/discover advertises the extension', async () => {
    const { client } = await connect(server, true);
    assert.deepEqual((client.getServerCapabilities() as { extensions?: object }).extensions, {
      'io.modelcontextprotocol/events': {},
      [TASKS]: {},
    });
    await client.close();
  });

  it('TASK-4, TASK-6, TOOL-12: tools/call answers a task at once; tasks/get is working, then completed with the delivered result', async () => {
    const { client, wire } = await connect(server, true);
    const before = receiver.events().length;

    // The client refuses the task answer (no task support in SDK 2.4.0); the wire holds it.
    await client.callTool({ name: 'send_to_dot', arguments: { message: 'slow hello' } }).catch(() => undefined);
    const call = wire.find((w) => w.method === 'tools/call');
    assert.ok(call, 'the tools/call answer was seen on the wire');
    const task = Task.parse(call.body.result);
    assert.equal(call.body.result.resultType, 'task');
    assert.equal(task.status, 'working');
    assert.ok(call.elapsedMs < 1_000 + call.cpuWaitMs, `answered in ${call.elapsedMs} ms (waited ${call.cpuWaitMs} ms for a CPU), well under a second`);
    assert.match(task.taskId, /^task_[0-9a-f]{32}_[0-9a-f]{16}$/);
    const eventId: string = call.body.result.structuredContent.eventId;
    assert.match(eventId, /^evt_[0-9a-f]{32}$/);

    const first = TaskAnswer.parse(await client.request({ method: 'tasks/get', params: { taskId: task.taskId } }, TaskAnswer));
    assert.equal(first.status, 'working', 'the dot has not answered yet');

    // Poll as the extension asks: no faster than the task's pollIntervalMs. The deadline leaves
    // room for a delayed safety-net attempt after an inline attempt cut short by the wait window.
    let done = first;
    const deadline = Date.now() + 60_000;
    while (done.status === 'working' && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, done.pollIntervalMs ?? 1_000));
      done = await client.request({ method: 'tasks/get', params: { taskId: task.taskId } }, TaskAnswer);
    }
    assert.equal(done.status, 'completed');
    assert.equal(done.taskId, task.taskId);
    assert.equal(done.result?.isError, false);
    assert.equal(done.result?.content[0]?.text, `ChatGPT accepted event ${eventId} for asynchronous processing by your dot.`);

    // However many attempts reached the dot, every copy is the one event.
    const copies = receiver.events().slice(before);
    assert.ok(copies.length >= 1);
    for (const copy of copies) {
      assert.equal(copy.headers['webhook-id'], eventId);
      assert.equal(copy.json.eventId, eventId);
      assert.equal(copy.json.data.message, 'slow hello');
    }

    // tasks/update and tasks/cancel are acknowledged; a cancel cannot unsend, the task stays completed.
    const ack = await client.request({ method: 'tasks/update', params: { taskId: task.taskId, inputResponses: {} } }, z.looseObject({}));
    assert.deepEqual(
      Object.keys(ack).filter((key) => key !== '_meta'),
      [],
      'an empty acknowledgement',
    );
    await client.request({ method: 'tasks/cancel', params: { taskId: task.taskId } }, z.looseObject({}));
    assert.equal((await client.request({ method: 'tasks/get', params: { taskId: task.taskId } }, TaskAnswer)).status, 'completed');
    await client.close();
  });

  it('TASK-3, TOOL-12: without the extension the same call keeps the queued text', async () => {
    const { client, wire } = await connect(server, false);
    const result = await client.callTool({ name: 'send_to_dot', arguments: { message: 'slow again' } });
    const structured = result.structuredContent as { eventId: string; status: string };
    assert.equal(result.isError, false);
    assert.equal(structured.status, 'queued');
    assert.equal(
      (result.content as { text: string }[])[0]!.text,
      `Event ${structured.eventId} is queued: the dot has not acknowledged it yet, and delivery will be retried automatically.`,
    );
    assert.equal(wire.find((w) => w.method === 'tools/call')?.body.result.resultType, 'complete');
    await waitFor('the queued event to reach the dot', () => receiver.events().some((e) => e.json.eventId === structured.eventId), 60_000);
    await client.close();
  });

  it('TASK-2: tasks/get from a client that does not declare the extension is -32021', async () => {
    const { client } = await connect(server, false);
    const error = await client
      .request({ method: 'tasks/get', params: { taskId: `task_${'0'.repeat(32)}_${'0'.repeat(16)}` } }, TaskAnswer)
      .catch((e: unknown) => e);
    assert.equal((error as { code?: number }).code, -32021);
    await client.close();
  });

  it("the runtime no longer prints the SDK's responseMode warning; its other output still appears", () => {
    const output = [...server.stdout, ...server.stderr];
    assert.equal(output.filter((line) => line.includes("responseMode: 'json'")).length, 0, output.join('\n'));
    assert.ok(server.stdout.some((line) => /^dm-dot listening on /.test(line)));
    assert.ok(
      server.stderr.some((line) => line.includes('"event":"request"')),
      'the request log lines still go to stderr',
    );
  });
});

describe('MCP Tasks: tasks/cancel of an unsettled task (TASK-8)', () => {
  const RETRY_S = 2;
  let server: RunningServer;
  let receiver: Awaited<ReturnType<typeof startReceiver>>;

  before(async () => {
    server = await startServer({ DMDOT_DELIVERY_WAIT_MS: String(WAIT_MS), DMDOT_RETRY_DELAYS: `${RETRY_S},${RETRY_S},${RETRY_S}` });
    // The dot refuses every message with 503: the event stays queued for a retry RETRY_S later.
    receiver = await startReceiver((r) =>
      r.json?.type === 'verification' ? { status: 200, body: JSON.stringify({ challenge: r.json.challenge }) } : { status: 503 },
    );
    await subscribeDot(server, receiver.url('/dot'));
  });

  after(async () => {
    await receiver.close();
    assert.equal(await server.stop(), 0);
  });

  it('DEL-PIPE-12, TASK-8: the task reads cancelled, the answer is an empty acknowledgement, and the dot gets no further attempt', async () => {
    const { client, wire } = await connect(server, true);
    await client.callTool({ name: 'send_to_dot', arguments: { message: 'never mind' } }).catch(() => undefined);
    const call = wire.find((w) => w.method === 'tools/call');
    assert.ok(call, 'the tools/call answer was seen on the wire');
    const task = Task.parse(call.body.result);
    assert.equal(task.status, 'working');
    const eventId: string = call.body.result.structuredContent.eventId;
    await waitFor('the first (refused) attempt', () => receiver.events().filter((e) => e.json?.eventId === eventId).length === 1, 10_000);

    const ack = await client.request({ method: 'tasks/cancel', params: { taskId: task.taskId } }, z.looseObject({}));
    assert.deepEqual(
      Object.keys(ack).filter((key) => key !== '_meta'),
      [],
      'an empty acknowledgement',
    );
    const cancelled = await client.request({ method: 'tasks/get', params: { taskId: task.taskId } }, TaskAnswer);
    assert.equal(cancelled.status, 'cancelled');
    assert.equal(cancelled.taskId, task.taskId);

    // The worker's run of the retry finds the event cancelled and ends the job without a POST (a
    // line it does not log): the queue is empty, no attempt is left to come.
    await until('the job ended', async () => (await queueOf(server)).queued === 0 || undefined, 10 * RETRY_S * 1_000);
    assert.equal(receiver.events().filter((e) => e.json?.eventId === eventId).length, 1, 'no attempt after the cancel');
    assert.equal((await client.request({ method: 'tasks/get', params: { taskId: task.taskId } }, TaskAnswer)).status, 'cancelled');

    // A second cancel is acknowledged and changes nothing.
    await client.request({ method: 'tasks/cancel', params: { taskId: task.taskId } }, z.looseObject({}));
    assert.equal((await client.request({ method: 'tasks/get', params: { taskId: task.taskId } }, TaskAnswer)).status, 'cancelled');
    await client.close();
  });
});
