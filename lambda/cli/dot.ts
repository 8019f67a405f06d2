/**
 * `dm-dot dot`: a stand-in ChatGPT dot, to see messages arrive without ChatGPT. It starts a
 * webhook receiver on 127.0.0.1, subscribes it through MCP `events/subscribe` with a fresh
 * `whsec_` secret, answers the signed verification challenge, verifies every delivery's
 * signature over the raw bytes with `standardwebhooks`, drops duplicates by `webhook-id`, prints
 * each message with its event id and how long it took, refreshes the subscription before
 * `refreshBefore`, and unsubscribes when stopped (Ctrl-C).
 *
 * `--status` and `--delay` make it answer deliveries with a chosen status after a chosen delay,
 * to watch retries (5xx, 429), permanent failures (4xx; 410 ends the subscription) and timeouts.
 *
 * Subscribing is one plain JSON-RPC POST on the 2026-07-28 (stateless) era with the required
 * `_meta`: no session, no SDK client state, and the exact request ChatGPT-like clients send.
 *
 * Deliberately not here: a public callback (the server must run with
 * DMDOT_ALLOW_LOOPBACK_CALLBACKS=1; the AWS stack never does, so against AWS use a real dot),
 * and printing the secret or the key: neither is ever written anywhere.
 */
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';
import { ErrorCodes, EVENT_NAME, Limits, Methods, SECRET_PREFIX, WebhookHeaders } from '../core/protocol';
import { version } from '../version';
import { integerOption, OperationError, parse, reach, redactor, serverTarget, TARGET_OPTIONS, withProgress, type CliIo, type Command } from './common';

const HELP = `Usage: dm-dot dot [--port N] [--status N] [--delay MS] [--ttl MS] [--url URL] [--key KEY] [--json]

A stand-in ChatGPT dot: listens on http://127.0.0.1:PORT/dot, subscribes to
message.created with a fresh signing secret, verifies every delivery's
signature, prints each message with its event id and latency, refreshes the
subscription before it expires, and unsubscribes on Ctrl-C.

The server must allow loopback callbacks:  DMDOT_ALLOW_LOOPBACK_CALLBACKS=1 npm start

Options:
  --port N      receiver port on 127.0.0.1 (default 8788; 0 picks a free one)
  --status N    answer deliveries with HTTP status N (default 200), e.g. 500 to
                watch retries, 400 for a permanent failure, 410 to end the
                subscription
  --delay MS    wait MS milliseconds before answering (0..60000), e.g. 6000 to
                time out
  --ttl MS      ask for this subscription lifetime (at least 60000)
  --url URL     the server (default: the local server, as npm start runs it)
  --key KEY     the API key (default: MCP_API_KEY, else <state dir>/api-key)
  --json        one JSON line per delivery on stdout
  -h, --help    this help
`;

const DEFAULT_PORT = 8788;
const PATH = '/dot';
const PROTOCOL_VERSION = '2026-07-28';

export const dotCommand: Command = {
  name: 'dot',
  summary: 'a local stand-in dot: receive, verify and print messages',
  async run(argv: string[], io: CliIo): Promise<number> {
    const { values } = parse(argv, {
      ...TARGET_OPTIONS,
      port: { type: 'string' },
      status: { type: 'string' },
      delay: { type: 'string' },
      ttl: { type: 'string' },
    });
    if (values.help) {
      io.out(HELP);
      return 0;
    }
    const port = integerOption(values.port, 'port', 0, 65_535) ?? DEFAULT_PORT;
    const status = integerOption(values.status, 'status', 200, 599) ?? 200;
    const delayMs = integerOption(values.delay, 'delay', 0, 60_000) ?? 0;
    const ttlMs = integerOption(values.ttl, 'ttl', Limits.ttlMinMs, Limits.ttlMaxMs);
    const target = await serverTarget(values, io);
    return new Dot(io, target, { port, status, delayMs, ttlMs, json: !!values.json }).run();
  },
};

interface DotOptions {
  port: number;
  status: number;
  delayMs: number;
  ttlMs: number | undefined;
  json: boolean;
}

export function newSecret(): string {
  return `${SECRET_PREFIX}${randomBytes(32).toString('base64')}`;
}

class Dot {
  private secret = newSecret();
  /** The secret before the last refresh, accepted until the server's rotation overlap ends. */
  private previous: { secret: string; until: number } | undefined;
  /** webhook-ids answered 2xx: a repeat is acknowledged again and not printed twice. */
  private readonly acknowledged = new Set<string>();
  private readonly attempts = new Map<string, number>();
  private callbackUrl = '';
  private refreshTimer: NodeJS.Timeout | undefined;
  private readonly redact: (text: string) => string;

  constructor(
    private readonly io: CliIo,
    private readonly target: { url: string; key: string },
    private readonly options: DotOptions,
  ) {
    this.redact = redactor(target.key);
  }

  async run(): Promise<number> {
    const server = http.createServer((req, res) => void this.receive(req, res));
    await new Promise<void>((done, fail) => {
      server.once('error', (error: NodeJS.ErrnoException) =>
        fail(error.code === 'EADDRINUSE' ? new OperationError(`port ${this.options.port} on 127.0.0.1 is in use: pass --port N (0 picks a free one)`) : error),
      );
      server.listen(this.options.port, '127.0.0.1', () => done());
    });
    const close = () =>
      new Promise<void>((done) => {
        server.close(() => done());
        server.closeAllConnections();
      });
    this.callbackUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}${PATH}`;
    try {
      const granted = await withProgress(this.io, 'subscribing (the server challenges this receiver first)', this.subscribe());
      this.status(`subscribed ${granted.id} for ${this.callbackUrl} (refresh before ${granted.refreshBefore}); waiting for messages, Ctrl-C to stop`);
      this.scheduleRefresh(granted.refreshBefore);
    } catch (error) {
      await close();
      throw error;
    }
    await new Promise<void>((done) => {
      if (!this.io.signal || this.io.signal.aborted) return done();
      this.io.signal.addEventListener('abort', () => done(), { once: true });
    });
    clearTimeout(this.refreshTimer);
    let code = 0;
    try {
      await this.rpc(Methods.eventsUnsubscribe, { name: EVENT_NAME, arguments: {}, delivery: { mode: 'webhook', url: this.callbackUrl } });
      this.status('unsubscribed');
    } catch (error) {
      this.io.err(`dm-dot dot: could not unsubscribe (${this.redact((error as Error).message)}); the subscription expires by itself, or run dm-dot subscription clear\n`);
      code = 1;
    }
    await close();
    return code;
  }

  private status(line: string): void {
    this.io.err(`dm-dot dot: ${line}\n`);
  }

  private async subscribe(): Promise<{ id: string; refreshBefore: string }> {
    const result = (await this.rpc(Methods.eventsSubscribe, {
      name: EVENT_NAME,
      arguments: {},
      delivery: { mode: 'webhook', url: this.callbackUrl, secret: this.secret },
      ...(this.options.ttlMs !== undefined ? { ttlMs: this.options.ttlMs } : {}),
    })) as { id?: unknown; refreshBefore?: unknown };
    if (typeof result.id !== 'string' || typeof result.refreshBefore !== 'string') throw new OperationError('the server answered events/subscribe without id and refreshBefore');
    return { id: result.id, refreshBefore: result.refreshBefore };
  }

  /** Refreshes (same URL, new secret) when 80% of the granted lifetime has passed. */
  private scheduleRefresh(refreshBefore: string, retry = false): void {
    const left = Date.parse(refreshBefore) - Date.now();
    const wait = retry ? Math.min(30_000, Math.max(1000, left / 2)) : Math.max(1000, Math.floor(left * 0.8));
    this.refreshTimer = setTimeout(() => void this.refresh(refreshBefore), Math.min(wait, 2 ** 31 - 1));
  }

  private async refresh(refreshBefore: string): Promise<void> {
    const old = this.secret;
    this.secret = newSecret();
    this.previous = { secret: old, until: Date.now() + Limits.rotationOverlapMs + 60_000 };
    try {
      const granted = await this.subscribe();
      this.status(`refreshed ${granted.id} (refresh before ${granted.refreshBefore})`);
      this.scheduleRefresh(granted.refreshBefore);
    } catch (error) {
      // The server kept the old secret: keep using it, and try again before the expiry.
      this.secret = old;
      this.previous = undefined;
      this.status(`refresh failed (${this.redact((error as Error).message)}); trying again`);
      if (Date.parse(refreshBefore) > Date.now()) this.scheduleRefresh(refreshBefore, true);
    }
  }

  private async rpc(method: string, params: Record<string, unknown>): Promise<unknown> {
    const response = await reach(
      `${this.target.url}/mcp`,
      {
        method: 'POST',
        headers: {
          authorization: `Bearer ${this.target.key}`,
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          'mcp-protocol-version': PROTOCOL_VERSION,
          'mcp-method': method,
        },
        body: JSON.stringify({
          jsonrpc: '2.0',
          id: 1,
          method,
          params: {
            ...params,
            _meta: {
              'io.modelcontextprotocol/protocolVersion': PROTOCOL_VERSION,
              'io.modelcontextprotocol/clientCapabilities': {},
              'io.modelcontextprotocol/clientInfo': { name: 'dm-dot-cli', version },
            },
          },
        }),
      },
      method,
    );
    if (response.status === 401) throw new OperationError('the server refused the API key (pass --key, or check MCP_API_KEY and <state dir>/api-key)');
    const text = await response.text();
    const message = parseRpcAnswer(text);
    if (!message) throw new OperationError(`the server answered ${method} with HTTP ${response.status} and no JSON-RPC message`);
    if (message.error) throw rpcFailure(method, message.error);
    return message.result ?? {};
  }

  private async receive(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const reply = (status: number, body: unknown = {}) => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(body));
    };
    if (req.method !== 'POST' || new URL(req.url ?? '/', 'http://x').pathname !== PATH) return reply(404, { error: 'not found' });
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of req as AsyncIterable<Buffer>) {
      size += chunk.length;
      if (size > Limits.requestBodyMaxBytes) return reply(413);
      chunks.push(chunk);
    }
    const raw = Buffer.concat(chunks);
    const headers = {
      'webhook-id': String(req.headers[WebhookHeaders.id] ?? ''),
      'webhook-timestamp': String(req.headers[WebhookHeaders.timestamp] ?? ''),
      'webhook-signature': String(req.headers[WebhookHeaders.signature] ?? ''),
    };
    if (!this.verifies(raw, headers)) {
      this.status(`refused a request with a missing or wrong signature (webhook-id ${headers['webhook-id'].slice(0, 64) || 'none'})`);
      return reply(401, { error: 'bad signature' });
    }
    let body: { type?: unknown; challenge?: unknown; eventId?: unknown; timestamp?: unknown; data?: { message?: unknown } };
    try {
      body = JSON.parse(raw.toString('utf8'));
    } catch {
      return reply(400, { error: 'not JSON' });
    }
    if (body.type === 'verification') return reply(200, { challenge: body.challenge });

    const id = headers['webhook-id'];
    if (this.acknowledged.has(id)) {
      this.status(`dropped a duplicate of ${id} (already acknowledged)`);
      return reply(200);
    }
    const attempt = (this.attempts.get(id) ?? 0) + 1;
    this.attempts.set(id, attempt);
    if (this.options.delayMs > 0) await new Promise((done) => setTimeout(done, this.options.delayMs));
    const latencyMs = typeof body.timestamp === 'string' ? Date.now() - Date.parse(body.timestamp) : null;
    const accepted = this.options.status >= 200 && this.options.status < 300;
    if (accepted) this.acknowledged.add(id);
    const message = typeof body.data?.message === 'string' ? body.data.message : '';
    if (this.options.json) {
      this.io.out(`${JSON.stringify({ eventId: id, message, latencyMs, attempt, answered: this.options.status })}\n`);
    } else if (accepted) {
      this.io.out(`${id}  ${latencyMs ?? '?'} ms  ${attempt > 1 ? `(attempt ${attempt})  ` : ''}${message}\n`);
    } else {
      this.io.out(`${id}  answered ${this.options.status} (attempt ${attempt})\n`);
    }
    reply(this.options.status);
  }

  /** Standard Webhooks over the raw bytes: the current secret, or the previous one during its overlap. */
  private verifies(raw: Buffer, headers: Record<string, string>): boolean {
    const secrets = [this.secret];
    if (this.previous && this.previous.until > Date.now()) secrets.push(this.previous.secret);
    return secrets.some((secret) => {
      try {
        new Webhook(secret).verify(raw, headers, { jsonParse: false });
        return true;
      } catch {
        return false;
      }
    });
  }
}

interface RpcMessage {
  result?: unknown;
  error?: { code?: number; message?: string; data?: { reason?: string } };
}

/** A JSON answer, or the first `data:` line of an SSE answer (legacy-era servers reply that way). */
export function parseRpcAnswer(text: string): RpcMessage | undefined {
  const candidates = [text, ...text.split('\n').filter((l) => l.startsWith('data:')).map((l) => l.slice(5))];
  for (const candidate of candidates) {
    try {
      const parsed = JSON.parse(candidate) as RpcMessage;
      if (parsed && typeof parsed === 'object' && ('result' in parsed || 'error' in parsed)) return parsed;
    } catch {
      // next candidate
    }
  }
  return undefined;
}

/** What each refusal means for someone running `dm-dot dot`, and what to do about it. */
export function rpcFailure(method: string, error: NonNullable<RpcMessage['error']>): OperationError {
  const { code, message = '' } = error;
  if (code === ErrorCodes.invalidParams && /delivery\.url must use https/.test(message)) {
    return new OperationError(
      'the server refuses loopback callbacks: its switch DMDOT_ALLOW_LOOPBACK_CALLBACKS is off. ' +
        'Restart the local server with DMDOT_ALLOW_LOOPBACK_CALLBACKS=1 npm start (the AWS stack never allows it)',
    );
  }
  if (code === ErrorCodes.subscriptionConflict) {
    return new OperationError(
      'another callback holds the subscription (one dot per deployment). If it is stale, end it with dm-dot subscription clear, then try again',
    );
  }
  if (code === ErrorCodes.callbackEndpointError) {
    return new OperationError(`the server could not verify this receiver (${error.data?.reason ?? 'unknown reason'})`);
  }
  return new OperationError(`${method} failed: ${code ?? '?'} ${message}`);
}
