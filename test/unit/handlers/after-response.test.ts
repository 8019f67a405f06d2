/**
 * The after-response extension (lambda/handlers/after-response.ts) against a stand-in of Lambda's
 * Extensions API on loopback: it registers for INVOKE, asks for the next event at once (that ends
 * Init), and after an INVOKE asks for the next one only once the handler answered and the work it
 * started settled. Every check waits on a fact (the stand-in's log of calls), never on a sleep.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { register } from '../../../lambda/handlers/after-response';

interface StandIn {
  api: string;
  log: string[];
  registrations: { name: string | undefined; body: string }[];
  /** Answers the pending next call with this event. */
  push(event: object): void;
  nextCalls(): number;
  /** Resolves once the extension has made `n` next calls. */
  untilNext(n: number): Promise<void>;
  /** One round trip to the stand-in: a next call made before it has arrived by the time it ends. */
  ping(): Promise<void>;
  close(): Promise<void>;
}

async function standIn(options: { refuse?: boolean } = {}): Promise<StandIn> {
  const log: string[] = [];
  const registrations: StandIn['registrations'] = [];
  let pending: ServerResponse | undefined;
  let nextCalls = 0;
  let waiting: (() => void) | undefined;
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (req.method === 'POST' && req.url === '/2020-01-01/extension/register') {
        registrations.push({ name: req.headers['lambda-extension-name'] as string | undefined, body: Buffer.concat(chunks).toString('utf8') });
        if (options.refuse) return void res.writeHead(403).end('{"errorType":"Extension.RegistrationNotAllowed"}');
        res.writeHead(200, { 'lambda-extension-identifier': 'ext-1', 'content-type': 'application/json' }).end('{}');
        return;
      }
      if (req.method === 'GET' && req.url === '/2020-01-01/extension/event/next' && req.headers['lambda-extension-identifier'] === 'ext-1') {
        nextCalls += 1;
        log.push(`next ${nextCalls}`);
        pending = res;
        waiting?.();
        return;
      }
      if (req.url === '/ping') return void res.writeHead(204).end();
      res.writeHead(404).end();
    });
  });
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  const api = `127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    api,
    log,
    registrations,
    push(event) {
      const res = pending!;
      pending = undefined;
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(event));
    },
    nextCalls: () => nextCalls,
    async close() {
      pending?.destroy();
      server.closeAllConnections();
      await new Promise<void>((done) => server.close(() => done()));
    },
    async untilNext(n: number) {
      while (nextCalls < n) await new Promise<void>((resume) => (waiting = resume));
    },
    async ping() {
      await fetch(`http://${api}/ping`).then((r) => r.arrayBuffer());
    },
  };
}

const INVOKE = { eventType: 'INVOKE', requestId: 'r-1', deadlineMs: Date.now() + 15_000 };

test('DEL-PIPE-22: registers for INVOKE under its file name and asks for the next event at once (Init ends)', async () => {
  const api = await standIn();
  try {
    const extension = await register(api.api);
    expect(extension).toBeDefined();
    expect(api.registrations).toEqual([{ name: 'after-response.mjs', body: '{"events":["INVOKE"]}' }]);
    await api.untilNext(1);
    expect(api.nextCalls()).toBe(1);
  } finally {
    await api.close();
  }
});

test('DEL-PIPE-22: after an INVOKE it asks for the next event only once the handler answered and the work it started settled', async () => {
  const api = await standIn();
  try {
    const extension = (await register(api.api))!;
    await api.untilNext(1);
    api.push(INVOKE);
    // The handler: starts work that outlives its answer, then answers.
    let finish: () => void = () => undefined;
    const work = extension.run(() => new Promise<string>((resolve) => (finish = () => resolve('settled'))));
    api.log.push('answered');
    extension.invocationEnded();
    // The work settles after the answer; only then may the environment be frozen. A next call made
    // at the answer would have reached the stand-in within these round trips.
    for (let i = 0; i < 3; i++) await api.ping();
    api.log.push('work settled');
    finish();
    await expect(work).resolves.toBe('settled');
    await api.untilNext(2);
    expect(api.log).toEqual(['next 1', 'answered', 'work settled', 'next 2']);
  } finally {
    await api.close();
  }
});

test('DEL-PIPE-22: work that fails still releases the environment; its rejection reaches the caller unchanged', async () => {
  const api = await standIn();
  try {
    const extension = (await register(api.api))!;
    await api.untilNext(1);
    api.push(INVOKE);
    const work = extension.run(() => Promise.reject(new Error('storage down')));
    extension.invocationEnded();
    await expect(work).rejects.toThrow('storage down');
    await api.untilNext(2);
    expect(api.nextCalls()).toBe(2);
  } finally {
    await api.close();
  }
});

test('DEL-PIPE-22: a refused registration leaves no extension (the answer then waits for the attempt) and says so once', async () => {
  const api = await standIn({ refuse: true });
  try {
    const reports: string[] = [];
    await expect(register(api.api, (line) => void reports.push(line))).resolves.toBeUndefined();
    expect(reports).toEqual(['after_response_unavailable']);
    expect(api.nextCalls()).toBe(0);
  } finally {
    await api.close();
  }
});
