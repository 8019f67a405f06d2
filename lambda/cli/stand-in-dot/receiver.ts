/**
 * The webhook receiver of `dm-dot dot` on 127.0.0.1: answers the signed challenge, verifies every
 * delivery over its raw bytes (Standard Webhooks) with the current secret or one still in its
 * overlap, answers with the status and after the delay `--status` and `--delay` ask for, drops a
 * repeat of a `webhook-id` it acknowledged already, and prints each delivery with its event id,
 * latency and attempt number. A delivery whose request the server closed before the answer (its
 * deadline passed) is reported as such, never as received.
 * Attempt numbers count as docs/operating.md ("How attempts are numbered") says, a POST the server
 * hung up on included.
 *
 * Deliberately not here: the subscription (subscription.ts) and the command (commands/dot.ts).
 */
import { once } from 'node:events';
import type http from 'node:http';
import type { AddressInfo } from 'node:net';
import { type InboundHeaders, verifyInbound } from '../../core/inbound';
import { Limits, WebhookHeaders } from '../../core/protocol';
import { classify } from '../../core/retry-policy';
import { readCapped } from '../../core/capped-body';
import { OperationError } from '../errors';

const PATH = '/dot';

export interface Received {
  eventId: string;
  message: string;
  latencyMs: number | null;
  attempt: number;
  answered: number | null;
  hungUp: boolean;
}

export interface ReceiverOptions {
  port: number;
  status: number;
  delayMs: number;
  /** A line for stderr (`dm-dot dot: …`). */
  say(line: string): void;
  /** A received message for stdout (stderr with --json). */
  print(line: string): void;
  /** This dot answered 410 to `eventId`: the server ends the subscription. */
  gone(eventId: string): void;
}

export class Receiver {
  readonly received: Received[] = [];
  callbackUrl = '';
  private secret = '';
  /** Secrets accepted besides the current one: the previous one during the server's overlap, or one a failed refresh may have left the server holding. */
  private others: { secret: string; until: number }[] = [];
  /** webhook-ids answered 2xx: a repeat is acknowledged again and not printed twice. */
  private readonly acknowledged = new Set<string>();
  /** The POSTs of each event id in its current round. */
  private readonly attempts = new Map<string, number>();
  private server: http.Server | undefined;
  private stopping = false;

  constructor(private readonly options: ReceiverOptions) {}

  /** The secret deliveries are signed with from now on. */
  use(secret: string): void {
    this.secret = secret;
  }

  /** Accepts `secret` besides the current one until `until` (epoch ms). */
  acceptAlso(secret: string, until: number): void {
    this.others.push({ secret, until });
  }

  async listen(): Promise<void> {
    const { createServer } = await import('node:http');
    const server = createServer((req, res) => void this.receive(req, res).catch(() => res.destroy()));
    try {
      await once(server.listen(this.options.port, '127.0.0.1'), 'listening');
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EADDRINUSE') throw error;
      throw new OperationError(`port ${this.options.port} on 127.0.0.1 is in use: pass --port N (0 picks a free one)`, 'port_in_use');
    }
    this.server = server;
    this.callbackUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}${PATH}`;
  }

  /** Stops answering: a 410 this dot answers after this ends nothing more. */
  stop(): void {
    this.stopping = true;
  }

  close(): Promise<void> {
    const server = this.server;
    if (!server) return Promise.resolve();
    return new Promise<void>((done) => {
      server.close(() => done());
      server.closeAllConnections();
    });
  }

  private nextAttempt(id: string): number {
    const attempt = (this.attempts.get(id) ?? 0) + 1;
    this.attempts.set(id, attempt);
    return attempt;
  }

  private async receive(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const reply = (status: number, body: unknown = {}) => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(body));
    };
    if (req.method !== 'POST' || new URL(req.url ?? '/', 'http://x').pathname !== PATH) return reply(404, { error: 'not found' });
    const arrived = Date.now();
    // The server closing the request before the answer (its deadline passed) is seen here.
    let hungUp = false;
    res.once('close', () => {
      if (!res.writableFinished) hungUp = true;
    });
    const raw = await readCapped(req, Limits.requestBodyMaxBytes);
    if (raw === undefined) return reply(413);
    const headers = {
      id: String(req.headers[WebhookHeaders.id] ?? ''),
      timestamp: String(req.headers[WebhookHeaders.timestamp] ?? ''),
      signature: String(req.headers[WebhookHeaders.signature] ?? ''),
    };
    if (!this.verifies(raw, headers)) {
      this.options.say(`refused a request with a missing or wrong signature (webhook-id ${headers.id.slice(0, 64) || 'none'})`);
      return reply(401, { error: 'bad signature' });
    }
    let body: { type?: unknown; challenge?: unknown; timestamp?: unknown; data?: { message?: unknown } };
    try {
      body = JSON.parse(raw.toString('utf8'));
    } catch {
      return reply(400, { error: 'not JSON' });
    }
    if (body.type === 'verification') return reply(200, { challenge: body.challenge });

    const id = headers.id;
    if (this.acknowledged.has(id)) {
      // The server sent it again: its answer to the acknowledged attempt never reached it.
      this.options.say(`dropped a duplicate of ${id} (attempt ${this.nextAttempt(id)}; already acknowledged)`);
      return reply(200);
    }
    const attempt = this.nextAttempt(id);
    const { status, delayMs } = this.options;
    if (delayMs > 0) await new Promise((done) => setTimeout(done, delayMs));
    const message = typeof body.data?.message === 'string' ? body.data.message : '';
    const latencyMs = typeof body.timestamp === 'string' ? arrived - Date.parse(body.timestamp) : null;
    if (hungUp || res.destroyed || req.socket.destroyed) {
      this.received.push({ eventId: id, message, latencyMs, attempt, answered: null, hungUp: true });
      this.options.say(
        `${id} (attempt ${attempt}) arrived, but the server had already hung up before this dot answered (--delay ${delayMs} ms is longer than it ` +
          'waits): the server takes it as a timeout and tries again later; the message was not received',
      );
      return;
    }
    const accepted = status >= 200 && status < 300;
    if (accepted) this.acknowledged.add(id);
    // A failure the server does not retry (its own rule) ends the round: a resend or a redrive starts at attempt 1 again.
    if (classify({ kind: 'response', status, body: new Uint8Array() }, arrived).kind === 'permanent') this.attempts.delete(id);
    this.received.push({ eventId: id, message, latencyMs, attempt, answered: status, hungUp: false });
    this.options.print(
      accepted ? `${id}  ${latencyMs ?? '?'} ms  ${attempt > 1 ? `(attempt ${attempt})  ` : ''}${message}` : `${id}  answered ${status} (attempt ${attempt})`,
    );
    reply(status);
    if (status === 410 && !this.stopping) this.options.gone(id);
  }

  /** Standard Webhooks over the raw bytes, by the core's one verifier: the current secret, or another one still in its overlap. */
  private verifies(raw: Buffer, headers: InboundHeaders): boolean {
    const now = Date.now();
    this.others = this.others.filter((o) => o.until > now);
    return [this.secret, ...this.others.map((o) => o.secret)].some((secret) => verifyInbound({ secrets: [secret] }, headers, raw, now).ok);
  }
}
