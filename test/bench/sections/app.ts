/**
 * In-process app: `createApp(...).handle(Request)` for tools/list, server/discover, events/list
 * and tools/call send_to_dot, over in-memory fakes (FakeStore, and the outbox AWS uses over a
 * FakeQueue), vs a trivial `new Response('{}')` handler fed the same freshly built Request. The
 * send's inline first attempt goes to a fake webhook client that answers 200 at once, so the
 * figure is the app's own work on the send path (validation, the record and job, signing, the
 * commit), with no network.
 *
 * Deliberately not here: HTTP parsing, sockets and real storage (the loopback and Lambda
 * sections have them), and answers that are errors (each case is checked once before timing).
 */
import { randomBytes } from 'node:crypto';
import { principalOf } from '../../../lambda/core/identity';
import { EVENT_NAME, TOOL_NAME } from '../../../lambda/core/protocol';
import { createApp } from '../../../lambda/http/app';
import type { McpDeps } from '../../../lambda/mcp/server';
import { systemClock, type SubscriptionRecord, type WebhookClient } from '../../../lambda/ports';
import { FakeQueue, FakeStore, fakeOutbox } from '../../support/fakes';
import { newSecret, pairedAsync, rpcBody, rpcHeaders, silentLog, type Section } from '../support';

export const appSection: Section = {
  key: 'app',
  title: 'in-process app',
  budgetMs: 40_000,
  async run(bench) {
    const key = randomBytes(24).toString('base64url');
    const store = new FakeStore();
    const now = Date.now();
    const subscription: SubscriptionRecord = {
      id: 'sub_bench',
      generation: 'gen-bench',
      url: 'https://dot.example.com/hook',
      name: EVENT_NAME,
      secret: newSecret(),
      principal: principalOf(key),
      createdAt: now,
      refreshedAt: now,
      expiresAt: now + 24 * 3600_000,
    };
    store.subscription = subscription;
    const queue = new FakeQueue();
    const ok = { kind: 'response', status: 200, body: new Uint8Array() } as const;
    // The dot: answers every event 200 at once (no subscribe happens here, so no challenge).
    const webhook: WebhookClient = { post: async () => ok };
    const deps: McpDeps = {
      store,
      outbox: fakeOutbox(store, queue),
      webhook,
      clock: systemClock,
      deliveryWaitMs: 50,
      retryDelaysS: [1, 4, 30, 120, 600],
      urlPolicy: { allowLoopbackCallbacks: false },
      version: '0.0.0-bench',
      log: silentLog,
    };
    const app = createApp(deps, { apiKey: key, allowedOrigins: [] });
    bench.cleanup(() => app.close());
    // Every request leaves call records, an event and a job behind in the fakes; forget them now and then.
    let sinceReset = 0;
    const resetFakes = () => {
      if (++sinceReset < 200) return;
      sinceReset = 0;
      store.calls.length = 0;
      store.events.clear();
      queue.jobs.length = 0;
      queue.delays.length = 0;
    };

    const trivial = async (request: Request): Promise<Response> => {
      void request;
      return new Response('{}', { headers: { 'content-type': 'application/json' } });
    };

    const cases: Array<{ label: string; method: string; params?: Record<string, unknown>; name?: string; check: (body: any) => boolean }> = [
      { label: 'tools/list', method: 'tools/list', check: (b) => b.result?.tools?.length === 1 },
      { label: 'server/discover', method: 'server/discover', check: (b) => b.result?.capabilities?.events !== undefined },
      { label: 'events/list', method: 'events/list', check: (b) => Array.isArray(b.result?.events) },
      {
        label: 'tools/call send_to_dot',
        method: 'tools/call',
        params: { name: TOOL_NAME, arguments: { message: 'Hello from the benchmark.' } },
        name: TOOL_NAME,
        check: (b) => b.result?.structuredContent?.status === 'delivered',
      },
    ];

    for (const c of cases) {
      const body = rpcBody(c.method, c.params);
      const headers = rpcHeaders(c.method, key, c.name);
      const makeRequest = () => new Request('http://localhost/mcp', { method: 'POST', headers, body });
      // Sanity check first: a benchmark of error answers would be meaningless.
      const first = await app.handle(makeRequest());
      const answer = (await first.json()) as any;
      if (first.status !== 200 || !c.check(answer)) throw new Error(`${c.label}: unexpected answer ${first.status} ${JSON.stringify(answer).slice(0, 200)}`);

      const result = await pairedAsync(
        async () => {
          const response = await app.handle(makeRequest());
          await response.arrayBuffer();
          resetFakes();
        },
        async () => {
          const response = await trivial(makeRequest());
          await response.arrayBuffer();
        },
        { samples: 1500, batch: 1, warmup: 150, rounds: 5, maxMs: 6_000 },
      );
      bench.timeRow(`app ${c.label}`, result.subject, 'Request + new Response("{}")', result.baseline);
    }
  },
};
