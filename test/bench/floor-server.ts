/**
 * The floor of the throughput section: the least a server can do per REST send and still keep
 * the send durable and delivered. A bare `node:http` server that, per `POST /v1/messages`, reads
 * the JSON body, makes one LMDB write (the `lmdb` package dm-dot's embedded database uses, opened
 * the same way: `overlappingSync: false`, so the write's promise resolves once it is committed and
 * fsynced; concurrent writes share one commit), then makes the same webhook POST dm-dot makes (a
 * Standard Webhooks body signed with HMAC-SHA256, a fresh socket per POST as guarded-https.ts
 * does) to FLOOR_RECEIVER_URL, and answers `200 {"eventId","status":"delivered"}` once the
 * receiver has answered 2xx. It prints `floor listening on http://127.0.0.1:<port>/` first, as the
 * local runtime prints its listening line.
 *
 * Deliberately not here: an API key, the address guard, subscriptions, retries, the job table, a
 * second write for the outcome, logs, and bad-input answers beyond a 400: everything dm-dot adds
 * on top is what the section's ratio prices.
 */
import { createHmac, randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { open } from 'lmdb';

const stateDir = process.env.FLOOR_STATE_DIR;
const receiver = process.env.FLOOR_RECEIVER_URL;
const secret = process.env.FLOOR_SECRET;
if (!stateDir || !receiver || !secret?.startsWith('whsec_')) {
  process.stderr.write('floor-server: set FLOOR_STATE_DIR, FLOOR_RECEIVER_URL and FLOOR_SECRET (whsec_…)\n');
  process.exit(2);
}
const key = Buffer.from(secret.slice('whsec_'.length), 'base64');
const db = open<Record<string, unknown>, string>(join(stateDir, 'floor.lmdb'), { overlappingSync: false, noSubdir: true, encoding: 'json' });

function post(body: string, eventId: string): Promise<number> {
  const timestamp = String(Math.floor(Date.now() / 1000));
  const signature = createHmac('sha256', key).update(`${eventId}.${timestamp}.${body}`).digest('base64');
  return new Promise((done, fail) => {
    const req = http.request(
      receiver!,
      {
        method: 'POST',
        agent: false,
        headers: {
          'content-type': 'application/json',
          'content-length': String(Buffer.byteLength(body)),
          'webhook-id': eventId,
          'webhook-timestamp': timestamp,
          'webhook-signature': `v1,${signature}`,
        },
        signal: AbortSignal.timeout(5_000),
      },
      (res) => {
        res.resume();
        res.once('end', () => done(res.statusCode ?? 0));
        res.once('error', fail);
      },
    );
    req.once('error', fail);
    req.end(body);
  });
}

async function send(raw: string): Promise<{ status: number; body: string }> {
  let message: unknown;
  try {
    message = (JSON.parse(raw) as { message?: unknown }).message;
  } catch {
    message = undefined;
  }
  if (typeof message !== 'string') return { status: 400, body: '{"error":{"code":"invalid_input"}}' };
  const eventId = `evt_${randomBytes(16).toString('hex')}`;
  const createdAt = Date.now();
  const body = JSON.stringify({ eventId, name: 'message.created', timestamp: new Date(createdAt).toISOString(), data: { message }, cursor: null });
  await db.put(eventId, { eventId, status: 'queued', createdAt, body });
  const status = await post(body, eventId);
  if (status < 200 || status > 299) return { status: 502, body: JSON.stringify({ error: { code: 'dot_refused', status } }) };
  return { status: 200, body: JSON.stringify({ eventId, status: 'delivered' }) };
}

const server = http.createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    if (req.method !== 'POST' || req.url !== '/v1/messages') {
      res.writeHead(404).end();
      return;
    }
    send(Buffer.concat(chunks).toString('utf8')).then(
      ({ status, body }) => res.writeHead(status, { 'content-type': 'application/json' }).end(body),
      (error: unknown) =>
        res.writeHead(500, { 'content-type': 'application/json' }).end(JSON.stringify({ error: { code: 'internal', message: String(error) } })),
    );
  });
});
server.keepAliveTimeout = 10_000;
server.listen(0, '127.0.0.1', () => {
  process.stdout.write(`floor listening on http://127.0.0.1:${(server.address() as AddressInfo).port}/\n`);
});
const stop = () => {
  server.close(() => db.close().then(() => process.exit(0)));
  server.closeAllConnections();
};
process.once('SIGTERM', stop);
process.once('SIGINT', stop);
