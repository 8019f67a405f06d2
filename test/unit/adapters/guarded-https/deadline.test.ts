/**
 * docs/contract/outbound-guard.md, the single outbound deadline (connect, TLS, headers, body), exercised through the
 * injectable `timers` option: the default delay is Limits.outboundDeadlineMs, the timer is cleared
 * when the request ends, and firing it during any stage yields 'timeout'. No real waiting, no network.
 */
import { createGuardedWebhookClient, type ConnectRequest, type Connector, type Resolver, type Timers } from '../../../../lambda/adapters/guarded-https';
import { Limits } from '../../../../lambda/core/protocol';
import { canaryConnector, fixedResolver, REFUSED, webhookRequest } from '../../../support/guard';

interface FakeTimers extends Timers {
  scheduled: Array<{ fn: () => void; ms: number; handle: symbol }>;
  cleared: unknown[];
  fire(): void;
}

function fakeTimers(): FakeTimers {
  const scheduled: FakeTimers['scheduled'] = [];
  const cleared: unknown[] = [];
  return {
    scheduled,
    cleared,
    setTimeout(fn, ms) {
      const handle = Symbol('deadline');
      scheduled.push({ fn, ms, handle });
      return handle;
    },
    clearTimeout(handle) {
      cleared.push(handle);
    },
    fire() {
      expect(scheduled).toHaveLength(1);
      // The deadline, then what it schedules: its yield to pending I/O and, with an answer in, the body's grace.
      for (let i = 0; i < scheduled.length; i++) if (!cleared.includes(scheduled[i]!.handle)) scheduled[i]!.fn();
    },
  };
}

function deferred(): { promise: Promise<void>; resolve(): void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}

function rejectOnAbort(signal: AbortSignal): Promise<never> {
  return new Promise((_, reject) =>
    signal.addEventListener('abort', () => reject(Object.assign(new Error('aborted'), { name: 'AbortError', code: 'ABORT_ERR' })), { once: true }),
  );
}

describe('default deadline', () => {
  it('GUARD-9, GUARD-12, LIM-4: schedules exactly one deadline of Limits.outboundDeadlineMs (5 s)', async () => {
    expect(Limits.outboundDeadlineMs).toBe(5_000);
    const timers = fakeTimers();
    const client = createGuardedWebhookClient({
      allowLoopback: false,
      timers,
      resolver: fixedResolver('93.184.216.34').resolver,
      connector: canaryConnector().connector,
    });

    await client.post(webhookRequest('https://dot.example/hook'));

    expect(timers.scheduled.map((t) => t.ms)).toEqual([Limits.outboundDeadlineMs]);
  });

  it('uses the deadlineMs option when given', async () => {
    const timers = fakeTimers();
    const client = createGuardedWebhookClient({
      allowLoopback: false,
      timers,
      deadlineMs: 1234,
      resolver: fixedResolver('93.184.216.34').resolver,
      connector: canaryConnector().connector,
    });

    await client.post(webhookRequest('https://dot.example/hook'));

    expect(timers.scheduled.map((t) => t.ms)).toEqual([1234]);
  });

  it('clears the deadline when a response completes', async () => {
    const timers = fakeTimers();
    const client = createGuardedWebhookClient({
      allowLoopback: false,
      timers,
      resolver: fixedResolver('93.184.216.34').resolver,
      connector: canaryConnector().connector,
    });

    await client.post(webhookRequest('https://dot.example/hook'));

    expect(timers.cleared).toEqual([timers.scheduled[0]!.handle]);
  });

  it('clears the deadline when the destination is refused', async () => {
    const timers = fakeTimers();
    const client = createGuardedWebhookClient({
      allowLoopback: false,
      timers,
      resolver: fixedResolver('10.0.0.1').resolver,
      connector: canaryConnector().connector,
    });

    expect(await client.post(webhookRequest('https://dot.example/hook'))).toEqual(REFUSED);
    expect(timers.cleared).toEqual([timers.scheduled[0]!.handle]);
  });
});

describe('GUARD-9: the deadline covers every stage', () => {
  it('yields timeout when the resolver never answers, and connects to nothing', async () => {
    const timers = fakeTimers();
    const canary = canaryConnector();
    const asked = deferred();
    const hanging: Resolver = () => {
      asked.resolve();
      return new Promise(() => {});
    };
    const client = createGuardedWebhookClient({ allowLoopback: false, timers, resolver: hanging, connector: canary.connector });

    const pending = client.post(webhookRequest('https://dot.example/hook'));
    await asked.promise;
    timers.fire();

    expect(await pending).toEqual({ kind: 'failure', reason: 'timeout' });
    expect(canary.calls).toHaveLength(0);
  });

  it('yields timeout while connecting, and aborts the connector signal', async () => {
    const timers = fakeTimers();
    const seen: ConnectRequest[] = [];
    const connected = deferred();
    const connecting: Connector = (request) => {
      seen.push(request);
      connected.resolve();
      return rejectOnAbort(request.signal);
    };
    const client = createGuardedWebhookClient({ allowLoopback: false, timers, resolver: fixedResolver('93.184.216.34').resolver, connector: connecting });

    const pending = client.post(webhookRequest('https://dot.example/hook'));
    await connected.promise;
    expect(seen).toHaveLength(1);
    expect(seen[0]!.signal.aborted).toBe(false);
    timers.fire();

    expect(await pending).toEqual({ kind: 'failure', reason: 'timeout' });
    expect(seen[0]!.signal.aborted).toBe(true);
  });

  it('yields timeout while the body is read, and destroys the response', async () => {
    const timers = fakeTimers();
    let destroyed = 0;
    const stalled = deferred();
    const stalling: Connector = async ({ signal }) => ({
      status: 200,
      headers: {},
      body: (async function* () {
        yield Buffer.from('partial');
        stalled.resolve();
        await rejectOnAbort(signal);
      })(),
      destroy: () => {
        destroyed++;
      },
    });
    const client = createGuardedWebhookClient({ allowLoopback: false, timers, resolver: fixedResolver('93.184.216.34').resolver, connector: stalling });

    const pending = client.post(webhookRequest('https://dot.example/hook'));
    await stalled.promise;
    timers.fire();

    expect(await pending).toEqual({ kind: 'failure', reason: 'timeout' });
    expect(destroyed).toBe(1);
  });

  it('yields timeout when the body ends quietly after the deadline fired', async () => {
    const timers = fakeTimers();
    const stalled = deferred();
    const quiet: Connector = async ({ signal }) => ({
      status: 200,
      headers: {},
      body: (async function* () {
        yield Buffer.from('partial');
        stalled.resolve();
        await new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
      })(),
      destroy: () => {},
    });
    const client = createGuardedWebhookClient({ allowLoopback: false, timers, resolver: fixedResolver('93.184.216.34').resolver, connector: quiet });

    const pending = client.post(webhookRequest('https://dot.example/hook'));
    await stalled.promise;
    timers.fire();

    expect(await pending).toEqual({ kind: 'failure', reason: 'timeout' });
  });
});

describe('transport errors become categories', () => {
  it.each([
    ['DEPTH_ZERO_SELF_SIGNED_CERT', 'tls_error'],
    ['ERR_TLS_CERT_ALTNAME_INVALID', 'tls_error'],
    ['CERT_HAS_EXPIRED', 'tls_error'],
    ['UNABLE_TO_VERIFY_LEAF_SIGNATURE', 'tls_error'],
    ['ERR_SSL_WRONG_VERSION_NUMBER', 'tls_error'],
    ['EPROTO', 'tls_error'],
    ['ETIMEDOUT', 'timeout'],
    ['ECONNREFUSED', 'connection_refused'],
    ['ECONNRESET', 'connection_refused'],
    ['EHOSTUNREACH', 'connection_refused'],
  ])('maps a connector error %s to %s', async (code, reason) => {
    const failing: Connector = async () => {
      throw Object.assign(new Error(`endpoint said: secret detail ${code}`), { code });
    };
    const client = createGuardedWebhookClient({
      allowLoopback: false,
      timers: fakeTimers(),
      resolver: fixedResolver('93.184.216.34').resolver,
      connector: failing,
    });

    expect(await client.post(webhookRequest('https://dot.example/hook'))).toEqual({ kind: 'failure', reason });
  });

  it('GUARD-9, DEL-PIPE-21: a deadline that fires late keeps an answer whose status line was in: the body gets its grace, the answer counts', async () => {
    const timers = fakeTimers();
    const headersIn = deferred();
    const bodyGate = deferred();
    const late: Connector = async () => {
      headersIn.resolve();
      return {
        status: 200,
        headers: {},
        body: (async function* () {
          await bodyGate.promise;
          yield Buffer.from('{}');
        })(),
        destroy: () => {},
      };
    };
    const client = createGuardedWebhookClient({ allowLoopback: false, timers, resolver: fixedResolver('93.184.216.34').resolver, connector: late });

    const pending = client.post(webhookRequest('https://dot.example/hook'));
    await headersIn.promise;
    await new Promise((resolve) => setImmediate(resolve));
    // The starved loop finally runs the deadline, then its yield: the status line is in, so only the grace is armed.
    timers.scheduled[0]!.fn();
    timers.scheduled[1]!.fn();
    expect(timers.scheduled.map((t) => t.ms)).toEqual([5_000, 0, 250]);
    bodyGate.resolve();
    expect(await pending).toMatchObject({ kind: 'response', status: 200 });
  });
});
