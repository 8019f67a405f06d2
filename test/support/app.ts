/**
 * Builds the whole HTTP surface (`createApp`) in-process over the in-memory fakes, with helpers to
 * send requests and read answers (JSON or the SSE `data:` lines the SDK may answer with). Shared by
 * the fuzz and bad-input tests; no network, no real clock waits. The request shapes are
 * test/support/rpc.ts's, re-exported here.
 */
import fc from 'fast-check';
import { createApp, type App, type HttpConfig } from '../../lambda/http/app';
import type { Logger } from '../../lambda/log';
import { echoChallenge, fakeOutbox, FakeClock, FakeQueue, FakeStore, ScriptedWebhookClient, T0 } from './fakes';
import type { AccessStore, SubscriptionRecord, WebhookClient } from '../../lambda/ports';
import { EventsProfiles, type EventsProfileName } from '../../lambda/core/protocol';
import { modernBody, modernHeaders } from './rpc';

export { MODERN, MODERN_META, messageInit, modernBody, modernHeaders, modernInit } from './rpc';

export const API_KEY = 'test-api-key-0123456789abcdef';
export const BASE = 'https://dmdot.example';
export const LEGACY = '2025-11-25';
/** A valid secret: whsec_ + base64 of 32 bytes. */
export const SECRET = `whsec_${Buffer.alloc(32, 7).toString('base64')}`;

export interface LogLine {
  level: 'info' | 'warn' | 'error';
  event: string;
  fields: Record<string, unknown>;
}

export interface TestApp {
  app: App;
  store: FakeStore;
  queue: FakeQueue;
  clock: FakeClock;
  webhook: WebhookClient;
  logs: LogLine[];
}

/** A callback that always passes the challenge (any number of times). */
export const echoingWebhook: WebhookClient = { post: async (request) => echoChallenge(request) };

export function buildApp(
  config: Partial<HttpConfig> = {},
  options: {
    deliveryWaitMs?: number;
    webhook?: WebhookClient;
    clock?: FakeClock;
    access?: AccessStore;
    eventsProfile?: EventsProfileName;
    store?: FakeStore;
    inbox?: boolean;
  } = {},
): TestApp {
  const store = options.store ?? new FakeStore();
  const queue = new FakeQueue();
  const clock = options.clock ?? new FakeClock();
  const webhook = options.webhook ?? new ScriptedWebhookClient();
  const logs: LogLine[] = [];
  const log: Logger = {
    info: (event, fields = {}) => void logs.push({ level: 'info', event, fields }),
    warn: (event, fields = {}) => void logs.push({ level: 'warn', event, fields }),
    error: (event, fields = {}) => void logs.push({ level: 'error', event, fields }),
  };
  const app = createApp(
    {
      store,
      outbox: fakeOutbox(store, queue),
      webhook,
      clock,
      deliveryWaitMs: options.deliveryWaitMs ?? 0,
      retryDelaysS: [1, 4, 30, 120, 600],
      urlPolicy: { allowLoopbackCallbacks: false },
      version: '0.0.0-test',
      log,
      ...(options.access ? { access: options.access } : {}),
      ...(options.eventsProfile ? { eventsProfile: EventsProfiles[options.eventsProfile] } : {}),
      idempotency: store,
      ...(options.inbox ? { inbox: store } : {}),
    },
    { apiKey: API_KEY, allowedOrigins: [], allowedHosts: undefined, ...config },
  );
  return { app, store, queue, clock, webhook, logs };
}

/** A live subscription, so that sends get past "no subscription" (the fake queue accepts them). */
export function liveSubscription(now: number = T0): SubscriptionRecord {
  return {
    id: 'sub_0123456789abcdef0123456789abcdef',
    generation: 'gen-live',
    url: 'https://dot.example/hook',
    name: 'message.created',
    secret: SECRET,
    principal: 'p',
    createdAt: now,
    refreshedAt: now,
    expiresAt: now + 7 * 24 * 3600 * 1000,
  };
}

export interface Answer {
  status: number;
  headers: Headers;
  text: string;
  /** The parsed JSON body, or the JSON of SSE `data:` lines (one value or an array), or undefined. */
  json: unknown;
  /** True when the body was not empty and could not be read as JSON or SSE JSON. */
  unreadable: boolean;
}

/** Reads a response body as JSON, or as SSE whose `data:` lines hold JSON. */
export async function readAnswer(response: Response): Promise<Answer> {
  const text = await response.text();
  let json: unknown;
  let unreadable = false;
  if (text.length > 0) {
    try {
      json = JSON.parse(text);
    } catch {
      const data = text
        .split(/\r?\n/)
        .filter((line) => line.startsWith('data:'))
        .map((line) => line.slice(5).trim());
      try {
        const values = data.map((d) => JSON.parse(d) as unknown);
        json = values.length === 1 ? values[0] : values.length > 1 ? values : undefined;
        unreadable = values.length === 0;
      } catch {
        unreadable = true;
      }
    }
  }
  return { status: response.status, headers: response.headers, text, json, unreadable };
}

export interface Send {
  method?: string;
  path?: string;
  /** Query string without '?', e.g. `key=...`; defaults to the valid key. Pass '' for none. */
  query?: string;
  headers?: Record<string, string>;
  body?: BodyInit | null;
}

export const keyQuery = (key: string = API_KEY) => `key=${encodeURIComponent(key)}`;

export function request({ method = 'POST', path = '/mcp', query, headers = {}, body }: Send): Request {
  const q = query ?? keyQuery();
  const url = `${BASE}${path}${q ? `?${q}` : ''}`;
  const init: RequestInit & { duplex?: 'half' } = { method, headers };
  if (body !== undefined && body !== null && method !== 'GET' && method !== 'HEAD') {
    init.body = body;
    if (body instanceof ReadableStream) init.duplex = 'half';
  }
  return new Request(url, init);
}

export async function send(app: App, options: Send): Promise<Answer> {
  return readAnswer(await app.handle(request(options)));
}

/** Headers for a legacy-era call (no Mcp-Method; MCP-Protocol-Version after initialize). */
export function legacyHeaders(extra: Record<string, string> = {}): Record<string, string> {
  return { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...extra };
}

export function rpcModern(app: App, method: string, params: Record<string, unknown> = {}, headers: Record<string, string> = {}): Promise<Answer> {
  return send(app, { headers: modernHeaders(method, headers), body: modernBody(method, params) });
}

export function rpcLegacy(app: App, method: string, params: Record<string, unknown> = {}, headers: Record<string, string> = {}): Promise<Answer> {
  return send(app, {
    headers: legacyHeaders({ 'mcp-protocol-version': LEGACY, ...headers }),
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
  });
}

/** A body stream of `total` bytes in chunks, with no Content-Length (chunked upload). */
export function streamOf(total: number, chunk = 64 * 1024, fill = 0x20): ReadableStream<Uint8Array> {
  let sent = 0;
  return new ReadableStream<Uint8Array>({
    pull(controller) {
      if (sent >= total) {
        controller.close();
        return;
      }
      const n = Math.min(chunk, total - sent);
      sent += n;
      controller.enqueue(new Uint8Array(n).fill(fill));
    },
  });
}

/** True when the text looks like it carries a stack trace. */
export function hasStackTrace(text: string): boolean {
  return /\n\s{2,}at\s/.test(text) || /^\s{4}at /m.test(text) || /\bat .+\.(ts|js):\d+:\d+/.test(text);
}

/** The JSON-RPC error code of a single answer, if any. */
export function rpcErrorCode(json: unknown): number | undefined {
  const error = (json as { error?: { code?: unknown } } | undefined)?.error;
  return typeof error?.code === 'number' ? error.code : undefined;
}

/** Whether `value` is a JSON-RPC 2.0 response (result or error). */
export function isRpcResponse(value: unknown): boolean {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return false;
  const v = value as Record<string, unknown>;
  if (v.jsonrpc !== '2.0' || !('id' in v)) return false;
  if ('result' in v) return !('error' in v);
  const error = v.error as { code?: unknown; message?: unknown } | undefined;
  return !!error && typeof error === 'object' && Number.isInteger(error.code) && typeof error.message === 'string';
}

/** A single, well-formed JSON-RPC request (not a notification): it must get a response with its id. */
export function wellFormedRequestId(parsed: unknown): string | number | undefined {
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) return undefined;
  const m = parsed as Record<string, unknown>;
  if (m.jsonrpc !== '2.0' || typeof m.method !== 'string' || 'result' in m || 'error' in m) return undefined;
  if (typeof m.id === 'string' || (typeof m.id === 'number' && Number.isSafeInteger(m.id))) return m.id;
  return undefined;
}

/**
 * POST /mcp with a valid key and a JSON content type: JSON-RPC responses, or 202 and nothing.
 * `parsed` is what was sent (anything, when the body was not JSON); a well-formed request gets
 * exactly one response, carrying its id.
 */
export function expectRpcResponses(answer: Answer, parsed: unknown): void {
  const id = wellFormedRequestId(parsed);
  if (answer.status === 202) {
    expect(answer.text).toBe('');
    expect(id).toBeUndefined();
    return;
  }
  const values = Array.isArray(answer.json) ? (answer.json as unknown[]) : [answer.json];
  expect(values.length).toBeGreaterThan(0);
  for (const value of values) {
    if (!isRpcResponse(value)) throw new Error(`not a JSON-RPC response (HTTP ${answer.status}): ${answer.text.slice(0, 300)}`);
  }
  if (id !== undefined) {
    expect(values).toHaveLength(1);
    const responseId = (values[0] as { id: unknown }).id;
    if (responseId !== null || 'result' in (values[0] as object)) expect(responseId).toBe(id);
  }
}

/**
 * -32603 is for internal faults, with a generic sentence naming the request id (`requestId` is
 * the pattern of ids on that surface). One known exception comes from the SDK itself
 * (modelcontextprotocol/typescript-sdk#2284, open): schema-invalid params of a built-in method
 * (initialize, tools/list) answer -32603 with the schema issues as the message. Tolerated and
 * counted: returns how many of the answer's values were that; nothing of ours may produce it.
 */
export function expectGenericInternalErrors(answer: Answer, requestId: string): number {
  const generic = new RegExp(`^(Internal error \\(request ${requestId}\\)\\.|The (storage|queue) is unavailable; try again shortly\\.)$`);
  let sdkSchemaAnswers = 0;
  for (const value of Array.isArray(answer.json) ? answer.json : [answer.json]) {
    if (rpcErrorCode(value) !== -32603) continue;
    const message = (value as { error: { message: string } }).error.message;
    if (/^\[\s*\{[\s\S]*"code": "invalid_type"/.test(message)) {
      sdkSchemaAnswers++;
      continue;
    }
    expect(message).toMatch(generic);
  }
  return sdkSchemaAnswers;
}

/** The fast-check seed of the fuzz and property tests: fixed, or FC_SEED=<n> to explore others. */
export const FUZZ_SEED = process.env.FC_SEED !== undefined && process.env.FC_SEED !== '' ? Number(process.env.FC_SEED) : 0x0d07_2026;

/**
 * fast-check parameters for `numRuns` runs with the fuzz seed. A failure stops at the first
 * counterexample (shrinking 100 KB strings is slow; FC_SHRINK=1 turns it on) and is reported with
 * the seed, the path and a counterexample cut to 2,000 characters.
 */
export function fuzzParams<T>(numRuns: number): fc.Parameters<T> {
  return {
    seed: FUZZ_SEED,
    numRuns,
    endOnFailure: process.env.FC_SHRINK !== '1',
    reporter: (details) => {
      if (!details.failed) return;
      const shown = details.counterexample === null ? 'none' : fc.stringify(details.counterexample);
      const cut = shown.length > 2000 ? `${shown.slice(0, 2000)}… (${shown.length} characters)` : shown;
      const cause = details.errorInstance instanceof Error ? details.errorInstance.message : String(details.errorInstance);
      throw new Error(
        `Property failed after ${details.numRuns} run(s); replay with FC_SEED=${details.seed} (path "${details.counterexamplePath ?? ''}").\n` +
          `Counterexample: ${cut}\nCause: ${cause.length > 4000 ? `${cause.slice(0, 4000)}…` : cause}`,
      );
    },
  };
}
