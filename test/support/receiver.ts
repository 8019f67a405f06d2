/**
 * A dot's callback endpoint for tests: node:http on 127.0.0.1 that answers the subscription
 * challenge and records every event delivery with its raw body bytes and headers. Answers to
 * event deliveries are scripted (`respondWith(503, 200)`: first 503, then 200, then the default).
 *
 * Signatures are not checked here: tests verify them with the `standardwebhooks` package over the
 * recorded raw bytes, so a failure says exactly which delivery was wrong.
 *
 * Deliberately not here: TLS (loopback callbacks are allowed over http with
 * DMDOT_ALLOW_LOOPBACK_CALLBACKS=1), and any dm-dot code.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Delivery {
  raw: Buffer;
  headers: Record<string, string>;
  status: number;
}

export interface Receiver {
  /** Callback URL, with a query string that must reach the endpoint unchanged. */
  url: string;
  challenges: Delivery[];
  events: Delivery[];
  respondWith(...statuses: number[]): void;
  /** Default answer to events once the script is used up (200 unless changed). */
  setDefaultStatus(status: number): void;
  reset(): void;
  stop(): Promise<void>;
}

function flatHeaders(headers: http.IncomingHttpHeaders): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers)) if (value !== undefined) out[name] = Array.isArray(value) ? value.join(', ') : value;
  return out;
}

export async function startReceiver(path = '/hooks/dot?route=a%2Fb&x=1'): Promise<Receiver> {
  const challenges: Delivery[] = [];
  const events: Delivery[] = [];
  const script: number[] = [];
  let defaultStatus = 200;
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const raw = Buffer.concat(chunks);
      let parsed: { type?: unknown; challenge?: unknown } | undefined;
      try {
        parsed = JSON.parse(raw.toString('utf8')) as typeof parsed;
      } catch {
        parsed = undefined;
      }
      const headers = flatHeaders(req.headers);
      headers[':path'] = req.url ?? '';
      if (parsed?.type === 'verification') {
        challenges.push({ raw, headers, status: 200 });
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ challenge: parsed.challenge }));
        return;
      }
      const status = script.length > 0 ? script.shift()! : defaultStatus;
      events.push({ raw, headers, status });
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(status >= 200 && status < 300 ? '{}' : '{"error":"scripted"}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}${path}`,
    challenges,
    events,
    respondWith: (...statuses) => {
      script.push(...statuses);
    },
    setDefaultStatus: (status) => {
      defaultStatus = status;
    },
    reset: () => {
      challenges.length = 0;
      events.length = 0;
      script.length = 0;
      defaultStatus = 200;
    },
    stop: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
