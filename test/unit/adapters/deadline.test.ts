/**
 * The request deadline (lambda/adapters/deadline.ts) and the budgets of core/budgets.ts, one
 * rule a test: calls inside a deadline carry an abort signal for what is left,
 * calls outside carry none, a call with nothing left never starts, a waiter gives up at the
 * deadline, and a POST only starts with time left to record its outcome.
 * The end-to-end behaviour against stalled endpoints is test/integration/deadlines.test.ts.
 */
import {
  callOptions,
  DeadlineExceeded,
  deadlineLeftMs,
  keepingBack,
  runWithDeadline,
  webhookWithinDeadline,
  withDeadlines,
  withinDeadline,
} from '../../../lambda/adapters/deadline';
import { Budgets, deliveryDeadline, mcpDeadline } from '../../../lambda/core/budgets';
import { Limits } from '../../../lambda/core/protocol';
import type { WebhookRequest, WebhookResponse } from '../../../lambda/ports';

/** A stand-in SDK client that records the options of each send. */
function recordingClient() {
  const seen: unknown[] = [];
  const client = {
    send: async (_command: unknown, options?: unknown) => {
      seen.push(options);
      return 'answer';
    },
  };
  return { client, seen };
}

describe('runWithDeadline and callOptions', () => {
  test('outside a deadline there is nothing left to measure and no signal', () => {
    expect(deadlineLeftMs()).toBeUndefined();
    expect(callOptions()).toEqual({});
  });

  test('inside, the time left is what remains, awaited calls included', async () => {
    await runWithDeadline(Date.now() + 1_000, async () => {
      await new Promise((r) => setTimeout(r, 10));
      const left = deadlineLeftMs()!;
      expect(left).toBeGreaterThan(0);
      expect(left).toBeLessThanOrEqual(1_000);
      expect(callOptions().abortSignal).toBeInstanceOf(AbortSignal);
    });
  });

  test('a passed deadline: the call does not start (DeadlineExceeded, named like an SDK timeout)', async () => {
    await runWithDeadline(Date.now() - 1, async () => {
      expect(deadlineLeftMs()).toBe(0);
      expect(() => callOptions()).toThrow(DeadlineExceeded);
      expect(() => callOptions()).toThrow(expect.objectContaining({ name: 'TimeoutError' }));
    });
  });

  test('the signal fires when the deadline passes', async () => {
    await runWithDeadline(Date.now() + 50, async () => {
      const { abortSignal } = callOptions();
      await new Promise((r) => setTimeout(r, 120));
      expect(abortSignal!.aborted).toBe(true);
    });
  });

  test('a cap shorter than the deadline wins; outside a deadline the cap alone applies', async () => {
    const capped = callOptions(30);
    await new Promise((r) => setTimeout(r, 80));
    expect(capped.abortSignal!.aborted).toBe(true);
  });

  test('two concurrent requests keep their own deadlines', async () => {
    const lefts = await Promise.all([
      runWithDeadline(Date.now() + 100, async () => {
        await new Promise((r) => setTimeout(r, 5));
        return deadlineLeftMs()!;
      }),
      runWithDeadline(Date.now() + 10_000, async () => {
        await new Promise((r) => setTimeout(r, 5));
        return deadlineLeftMs()!;
      }),
    ]);
    expect(lefts[0]).toBeLessThanOrEqual(100);
    expect(lefts[1]).toBeGreaterThan(1_000);
  });
});

describe('withDeadlines: every send of a client carries the deadline', () => {
  test('inside a deadline send gets an abort signal; outside it gets no options', async () => {
    const { client, seen } = recordingClient();
    withDeadlines(client);
    await client.send('cmd');
    await runWithDeadline(Date.now() + 1_000, () => client.send('cmd'));
    expect(seen[0]).toEqual({});
    expect((seen[1] as { abortSignal?: unknown }).abortSignal).toBeInstanceOf(AbortSignal);
  });

  test('with no time left the send is refused without reaching the client', async () => {
    const { client, seen } = recordingClient();
    withDeadlines(client);
    await expect(runWithDeadline(Date.now() - 1, () => client.send('cmd'))).rejects.toBeInstanceOf(DeadlineExceeded);
    expect(seen).toHaveLength(0);
  });

  test("a caller's own options win, and applying it twice wraps once", async () => {
    const { client, seen } = recordingClient();
    withDeadlines(withDeadlines(client));
    const own = new AbortController().signal;
    await runWithDeadline(Date.now() + 1_000, () => client.send('cmd', { abortSignal: own }));
    expect(seen).toEqual([{ abortSignal: own }]);
  });
});

describe('withinDeadline: a shared wait ends at the caller deadline', () => {
  test('a promise that settles in time gives its value', async () => {
    expect(await runWithDeadline(Date.now() + 1_000, () => withinDeadline(Promise.resolve('key'), undefined))).toBe('key');
  });

  test('a promise that never settles gives the fallback at the deadline', async () => {
    const never = new Promise<string>(() => undefined);
    expect(await runWithDeadline(Date.now() + 30, () => withinDeadline(never, 'fallback'))).toBe('fallback');
  });

  test('a late rejection after the fallback is swallowed (no unhandled rejection)', async () => {
    const late = new Promise<string>((_, reject) => setTimeout(() => reject(new Error('late')), 40));
    expect(await runWithDeadline(Date.now() + 10, () => withinDeadline(late, 'fallback'))).toBe('fallback');
    await new Promise((r) => setTimeout(r, 60));
  });
});

describe('budgets', () => {
  test("DEL-PIPE-9: an MCP request must be done 800 ms before docs/contract/delivery.md's 5 s", () => {
    expect(Limits.requestMs).toBe(5_000);
    expect(mcpDeadline(1_000)).toBe(1_000 + 4_200);
    // A test's injected budget moves only the end; the answer's reserve stays 800 ms.
    expect(mcpDeadline(1_000, 2_000)).toBe(1_000 + 1_200);
  });

  test("the delivery deadline is the Lambda context's remaining time less a reserve", () => {
    expect(deliveryDeadline(1_000, 15_000)).toBe(1_000 + 15_000 - Budgets.deliveryEndReserveMs);
    // Without a context (tests, local use): room for one full POST and its writes.
    expect(deliveryDeadline(0, undefined)).toBeGreaterThan(Limits.outboundDeadlineMs);
  });
});

describe('webhookWithinDeadline: a POST gets the time left less the reserve, or does not start', () => {
  function recordingWebhook() {
    const requests: WebhookRequest[] = [];
    const answer: WebhookResponse = { kind: 'response', status: 200, body: new Uint8Array() };
    return { requests, client: { post: async (request: WebhookRequest) => (requests.push(request), answer) } };
  }
  const request: WebhookRequest = { url: 'https://dot.example/hook', headers: {}, body: new Uint8Array() };

  test('outside a deadline the request is passed on unchanged', async () => {
    const inner = recordingWebhook();
    await webhookWithinDeadline(inner.client, 3_000).post(request);
    expect(inner.requests).toEqual([request]);
  });

  test('with plenty of time the guard keeps its 5 s', async () => {
    const inner = recordingWebhook();
    await runWithDeadline(Date.now() + 60_000, () => webhookWithinDeadline(inner.client, 3_000).post(request));
    expect(inner.requests[0]!.timeoutMs).toBe(Limits.outboundDeadlineMs);
  });

  test('late in the deadline the POST gets what is left less the reserve', async () => {
    const inner = recordingWebhook();
    await runWithDeadline(Date.now() + 5_000, () => webhookWithinDeadline(inner.client, 3_000).post(request));
    expect(inner.requests[0]!.timeoutMs).toBeLessThanOrEqual(2_000);
    expect(inner.requests[0]!.timeoutMs).toBeGreaterThanOrEqual(Budgets.minPostMs);
  });

  test('with too little left no POST starts: DeadlineExceeded, and nothing is sent', async () => {
    const inner = recordingWebhook();
    await expect(runWithDeadline(Date.now() + 3_500, () => webhookWithinDeadline(inner.client, 3_000).post(request))).rejects.toBeInstanceOf(DeadlineExceeded);
    expect(inner.requests).toHaveLength(0);
  });

  test("a caller's short timeoutMs (under the floor) is kept when the deadline leaves room", async () => {
    const inner = recordingWebhook();
    await runWithDeadline(Date.now() + 60_000, () => webhookWithinDeadline(inner.client, 3_000).post({ ...request, timeoutMs: 300 }));
    expect(inner.requests[0]!.timeoutMs).toBe(300);
  });

  test("a caller's shorter timeoutMs is kept", async () => {
    const inner = recordingWebhook();
    await runWithDeadline(Date.now() + 60_000, () => webhookWithinDeadline(inner.client, 3_000).post({ ...request, timeoutMs: 1_500 }));
    expect(inner.requests[0]!.timeoutMs).toBe(1_500);
  });
});

describe('keepingBack: the outbox keeps time for its compensation (DEL-OUT-2)', () => {
  test('calls inside see a deadline reserveMs earlier and a per-attempt requestTimeout; the caller keeps the rest', async () => {
    const { client, seen } = recordingClient();
    withDeadlines(client);
    await runWithDeadline(Date.now() + 3_000, async () => {
      await keepingBack(1_000, Budgets.outboxAttemptMs, async () => {
        expect(deadlineLeftMs()).toBeLessThanOrEqual(2_000);
        expect(deadlineLeftMs()).toBeGreaterThan(1_500);
        await client.send('PutItem');
      });
      // After it, the whole deadline again: the compensation's own time.
      expect(deadlineLeftMs()).toBeGreaterThan(2_500);
      await client.send('UpdateItem');
    });
    expect(seen[0]).toEqual({ abortSignal: expect.any(AbortSignal), requestTimeout: Budgets.outboxAttemptMs });
    expect(seen[1]).toEqual({ abortSignal: expect.any(AbortSignal) });
  });

  test('with less than the reserve left, nothing inside starts', async () => {
    const { client } = recordingClient();
    withDeadlines(client);
    await runWithDeadline(Date.now() + 500, async () => {
      await expect(keepingBack(1_000, Budgets.outboxAttemptMs, () => client.send('SendMessage'))).rejects.toBeInstanceOf(DeadlineExceeded);
    });
  });

  test('outside a deadline only the attempt cap applies', async () => {
    const { client, seen } = recordingClient();
    withDeadlines(client);
    await keepingBack(1_000, 800, () => client.send('SendMessage'));
    expect(seen[0]).toEqual({ requestTimeout: 800 });
    expect(deadlineLeftMs()).toBeUndefined();
  });

  test('the split fits: two attempts and the reserve inside the MCP deadline, after the answer reserve', () => {
    const mcpBudget = Limits.requestMs - Budgets.mcpAnswerReserveMs;
    expect(2 * Budgets.outboxAttemptMs + Budgets.outboxCompensationReserveMs).toBeLessThan(mcpBudget);
  });
});
