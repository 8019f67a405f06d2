/**
 * `dm-dot send`'s idempotency key (docs/contract/http.md, IDEM-9): every message carries a fresh
 * key, and a lost answer (a connection reset, a 409 in_progress) is asked for again with the same
 * key, at most twice more; a server nobody listens on is not asked again.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Context } from '../../../lambda/cli/context';
import type { Target } from '../../../lambda/cli/local-server/target';
import { SEND_TRIES, sendMessage } from '../../../lambda/cli/send-message';

type Behaviour = 'reset' | { status: number; body: unknown; headers?: Record<string, string> };

async function server(script: Behaviour[]) {
  const keys: (string | undefined)[] = [];
  const srv = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      keys.push(req.headers['idempotency-key'] as string | undefined);
      const next = script.shift() ?? { status: 500, body: {} };
      if (next === 'reset') {
        req.socket.destroy();
        return;
      }
      res.writeHead(next.status, { 'content-type': 'application/json', ...(next.headers ?? {}) });
      res.end(JSON.stringify(next.body));
    });
  });
  await new Promise<void>((done) => srv.listen(0, '127.0.0.1', done));
  const base = `http://127.0.0.1:${(srv.address() as AddressInfo).port}`;
  return { base, keys, close: () => new Promise<void>((done) => srv.close(() => done())) };
}

const target = (base: string): Target => ({ base, key: 'k', local: false });
const ctx = { scrub: (text: string) => text } as unknown as Context;
const EVENT = 'evt_0123456789abcdef0123456789abcdef';
const waits: number[] = [];
const wait = async (ms: number) => void waits.push(ms);

describe('IDEM-9: dm-dot send and its idempotency key', () => {
  beforeEach(() => {
    waits.length = 0;
  });

  test('each message carries a fresh printable key', async () => {
    const s = await server([
      { status: 202, body: { eventId: EVENT, status: 'queued' } },
      { status: 202, body: { eventId: EVENT, status: 'queued' } },
    ]);
    await sendMessage(ctx, target(s.base), 'one', { wait });
    await sendMessage(ctx, target(s.base), 'two', { wait });
    await s.close();
    expect(s.keys).toHaveLength(2);
    expect(s.keys[0]).toMatch(/^[\x21-\x7e]{1,255}$/);
    expect(s.keys[0]).not.toBe(s.keys[1]);
  });

  test('a connection reset is asked again with the same key, and the answer then counts', async () => {
    const s = await server(['reset', { status: 200, body: { eventId: EVENT, status: 'delivered' } }]);
    const outcome = await sendMessage(ctx, target(s.base), 'hi', { wait });
    await s.close();
    expect(outcome).toMatchObject({ status: 'delivered', eventId: EVENT });
    expect(s.keys).toHaveLength(2);
    expect(s.keys[1]).toBe(s.keys[0]);
  });

  test('a 409 in_progress is waited out (Retry-After) and asked again with the same key', async () => {
    const s = await server([
      { status: 409, body: { error: { code: 'in_progress', message: 'busy' } }, headers: { 'retry-after': '2' } },
      { status: 202, body: { eventId: EVENT, status: 'queued' } },
    ]);
    const outcome = await sendMessage(ctx, target(s.base), 'hi', { wait });
    await s.close();
    expect(outcome).toMatchObject({ status: 'queued', eventId: EVENT });
    expect(waits).toEqual([2000]);
    expect(new Set(s.keys).size).toBe(1);
  });

  test(`at most ${SEND_TRIES} tries: then the message may or may not have been accepted, and it says so`, async () => {
    const s = await server(['reset', 'reset', 'reset', { status: 202, body: { eventId: EVENT, status: 'queued' } }]);
    const outcome = await sendMessage(ctx, target(s.base), 'hi', { wait });
    await s.close();
    expect(s.keys).toHaveLength(SEND_TRIES);
    expect(outcome).toMatchObject({ status: 'not_accepted', reason: 'unreachable', message: expect.stringMatching(/may or may not have been accepted/) });
  });

  test('nobody listening is not asked again', async () => {
    const s = await server([]);
    await s.close();
    const outcome = await sendMessage(ctx, target(s.base), 'hi', { wait });
    expect(outcome).toMatchObject({ status: 'not_accepted', reason: 'unreachable', message: expect.stringMatching(/^no server at/) });
  });

  test('INBOX-5: a kept answer is reported as kept', async () => {
    const s = await server([{ status: 202, body: { eventId: EVENT, status: 'kept' } }]);
    const outcome = await sendMessage(ctx, target(s.base), 'hi', { wait });
    await s.close();
    expect(outcome).toMatchObject({ status: 'kept', eventId: EVENT, message: expect.stringMatching(/inbox/) });
  });
});
