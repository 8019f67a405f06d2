/**
 * The API key, through the one secret loader (lambda/adapters/secret-loader.ts): one read per cold
 * start, cached; a read that really failed inside a request answers undefined (the app answers
 * 503) and starts a 30 s back-off; a read that ended by its own timeout, or that started outside a
 * request (init, and a freeze after it), starts none; the value is never logged.
 */
import { runWithDeadline } from '../../../../lambda/adapters/deadline';
import { createApiKeyLoader } from '../../../../lambda/adapters/secret-loader';
import { Budgets } from '../../../../lambda/core/budgets';
import { createLogger } from '../../../../lambda/log';
import { startFakeSecretsManager, testSecretsReader } from '../../../support/fake-secrets-manager';
import { awsErrorNaming, fakeSecretsClient, type SecretAnswer } from '../../../support/scripted-secrets-reader';

const API_KEY_READ_CAP_MS = Budgets.secretReadCapMs;
/** A request: the loader's reads inside it carry its deadline, and their real failures back off. */
const inRequest = <T>(fn: () => Promise<T>) => runWithDeadline(Date.now() + 4_200, fn);

const ARN = 'arn:aws:secretsmanager:eu-west-1:000000000000:secret:dm-dot-api-key-AbCdEf';
const KEY = 'the-api-key-value-0123456789';

const fakeClient = (answers: SecretAnswer[]) => fakeSecretsClient(answers);
const awsError = (name: string): Error => awsErrorNaming(ARN, name);

test('ARCH-10: reads the secret once by ARN and caches it', async () => {
  const client = fakeClient([{ SecretString: KEY }]);
  const loader = createApiKeyLoader({ client: client as never, secretArn: ARN });
  expect(await loader.get()).toBe(KEY);
  expect(await loader.get()).toBe(KEY);
  expect(client.getSecretValue).toHaveBeenCalledTimes(1);
  expect(client.calls[0]).toEqual({ SecretId: ARN });
});

test('concurrent first requests share one read', async () => {
  const client = fakeClient([{ SecretString: KEY }]);
  const loader = createApiKeyLoader({ client: client as never, secretArn: ARN });
  expect(await Promise.all([loader.get(), loader.get(), loader.get()])).toEqual([KEY, KEY, KEY]);
  expect(client.getSecretValue).toHaveBeenCalledTimes(1);
});

test('trims the value and accepts a JSON secret with an apiKey field', async () => {
  expect(await createApiKeyLoader({ client: fakeClient([{ SecretString: `  ${KEY}\n` }]) as never, secretArn: ARN }).get()).toBe(KEY);
  expect(await createApiKeyLoader({ client: fakeClient([{ SecretString: JSON.stringify({ apiKey: KEY }) }]) as never, secretArn: ARN }).get()).toBe(KEY);
  expect(await createApiKeyLoader({ client: fakeClient([{ SecretBinary: Buffer.from(KEY) }]) as never, secretArn: ARN }).get()).toBe(KEY);
});

test('no ARN configured: undefined, and Secrets Manager is never called', async () => {
  const client = fakeClient([{ SecretString: KEY }]);
  const loader = createApiKeyLoader({ client: client as never, secretArn: undefined });
  expect(await loader.get()).toBeUndefined();
  expect(await createApiKeyLoader({ client: client as never, secretArn: '  ' }).get()).toBeUndefined();
  expect(client.getSecretValue).not.toHaveBeenCalled();
});

test('HTTP-8: a read that failed inside a request answers undefined and is retried only after 30 s', async () => {
  let now = 1_000_000;
  const client = fakeClient([awsError('AccessDeniedException'), { SecretString: KEY }]);
  const loader = createApiKeyLoader({ client: client as never, secretArn: ARN, now: () => now });
  expect(await inRequest(() => loader.get())).toBeUndefined();
  now += 29_999;
  expect(await inRequest(() => loader.get())).toBeUndefined();
  expect(client.getSecretValue).toHaveBeenCalledTimes(1);
  now += 1;
  expect(await inRequest(() => loader.get())).toBe(KEY);
  expect(client.getSecretValue).toHaveBeenCalledTimes(2);
});

test('a read started outside a request (init) starts no back-off when it fails: the next request reads at once', async () => {
  const client = fakeClient([awsError('InternalServiceError'), { SecretString: KEY }]);
  const loader = createApiKeyLoader({ client: client as never, secretArn: ARN, now: () => 0 });
  expect(await loader.get()).toBeUndefined();
  expect(await inRequest(() => loader.get())).toBe(KEY);
  expect(client.getSecretValue).toHaveBeenCalledTimes(2);
});

test('a read that ended by its own timeout inside a request starts no back-off either', async () => {
  const timeout = Object.assign(new Error('The operation was aborted due to timeout'), { name: 'TimeoutError' });
  const client = fakeClient([timeout, timeout, { SecretString: KEY }]);
  const loader = createApiKeyLoader({ client: client as never, secretArn: ARN, now: () => 0 });
  // The request that met the timeout reads once more within its own deadline, and meets it again.
  expect(await inRequest(() => loader.get())).toBeUndefined();
  expect(await inRequest(() => loader.get())).toBe(KEY);
});

test('a request that was waiting on a shared read that timed out starts a fresh read of its own', async () => {
  const timeout = Object.assign(new Error('timeout'), { name: 'TimeoutError' });
  let release: (value: unknown) => void = () => undefined;
  const calls: number[] = [];
  const client = {
    getSecretValue: (_input: unknown) => {
      calls.push(calls.length);
      if (calls.length === 1) return new Promise((_, reject) => (release = () => reject(timeout)));
      return Promise.resolve({ SecretString: KEY });
    },
  };
  const loader = createApiKeyLoader({ client: client as never, secretArn: ARN });
  void loader.get(); // the init-phase read
  const request = inRequest(() => loader.get());
  await new Promise((r) => setImmediate(r));
  release(undefined);
  await expect(request).resolves.toBe(KEY);
  expect(calls).toHaveLength(2);
});

test('after a freeze right after init (its read overdue at thaw), the next requests get the key: no 503 at all', async () => {
  const sm = await startFakeSecretsManager();
  try {
    sm.setSecret(KEY);
    const loader = createApiKeyLoader({ client: testSecretsReader(sm.endpoint), secretArn: sm.arn });
    void loader.get(); // the init-phase read, as the MCP Lambda starts it
    // The freeze: nothing runs for 3 s, so every timer of that read is overdue at thaw.
    const thaw = Date.now() + 3_000;
    while (Date.now() < thaw) {
      // busy: the event loop is held, as in a frozen execution environment
    }
    const answers: (string | undefined)[] = [];
    for (const pause of [0, 100, 200]) {
      await new Promise((r) => setTimeout(r, pause));
      answers.push(await inRequest(() => loader.get()));
    }
    expect(answers).toEqual([KEY, KEY, KEY]);
  } finally {
    await sm.stop();
  }
});

test('an empty or unusable secret counts as a failure', async () => {
  for (const answer of [{ SecretString: '' }, { SecretString: '{"other":1}' }, { SecretString: '{not json' }, {}]) {
    expect(await createApiKeyLoader({ client: fakeClient([answer]) as never, secretArn: ARN }).get()).toBeUndefined();
  }
});

test('a synchronous throw from the client is a failure too, not a stuck loader', async () => {
  let now = 0;
  let fail = true;
  const client = {
    getSecretValue: jest.fn(() => {
      if (fail) throw new Error('boom');
      return Promise.resolve({ SecretString: KEY });
    }),
  };
  const loader = createApiKeyLoader({ client: client as never, secretArn: ARN, now: () => now });
  expect(await inRequest(() => loader.get())).toBeUndefined();
  fail = false;
  now += 30_000;
  expect(await inRequest(() => loader.get())).toBe(KEY);
});

test('ARCH-10, HTTP-10: never logs the value; registers it for redaction; logs only the error name on failure', async () => {
  const lines: string[] = [];
  const log = createLogger((line) => lines.push(line));
  const redacted: string[] = [];
  let now = 0;
  const client = fakeClient([awsError('ResourceNotFoundException'), { SecretString: KEY }]);
  const loader = createApiKeyLoader({ client: client as never, secretArn: ARN, log, now: () => now, onLoaded: (key) => redacted.push(key) });
  await inRequest(() => loader.get());
  now += 30_000;
  await inRequest(() => loader.get());
  expect(redacted).toEqual([KEY]);
  const all = lines.join('\n');
  expect(all).not.toContain(KEY);
  expect(all).not.toContain(ARN);
  expect(lines.map((l) => JSON.parse(l).event)).toEqual(['api_key_unavailable', 'api_key_loaded']);
  expect(JSON.parse(lines[0]!).cause).toBe('ResourceNotFoundException');
});

describe('deadlines', () => {
  /** A Secrets Manager that never answers, except by honouring the abort signal it is given. */
  function stalledClient() {
    const signals: (AbortSignal | undefined)[] = [];
    return {
      signals,
      getSecretValue: (_input: unknown, options?: { abortSignal?: AbortSignal }) => {
        signals.push(options?.abortSignal);
        return new Promise((_, reject) =>
          options?.abortSignal?.addEventListener('abort', () => reject(Object.assign(new Error('aborted'), { name: 'AbortError' }))),
        );
      },
    };
  }

  test('peek() never starts or waits for a read: undefined until the key is loaded, then the key', async () => {
    const client = fakeClient([{ SecretString: KEY }]);
    const loader = createApiKeyLoader({ client: client as never, secretArn: ARN });
    expect(loader.peek()).toBeUndefined();
    expect(client.getSecretValue).not.toHaveBeenCalled();
    await loader.get();
    expect(loader.peek()).toBe(KEY);
  });

  test('HTTP-8: every read carries an abort signal, so a stalled Secrets Manager ends the read (undefined, 503)', async () => {
    const client = stalledClient();
    const loader = createApiKeyLoader({ client: client as never, secretArn: ARN });
    expect(await loader.get()).toBeUndefined();
    expect(client.signals[0]).toBeInstanceOf(AbortSignal);
    expect(client.signals[0]!.aborted).toBe(true);
  });

  test('a request waits for a read in flight only until its own deadline', async () => {
    const client = stalledClient();
    const loader = createApiKeyLoader({ client: client as never, secretArn: ARN });
    void loader.get(); // the init-phase read, outside any request
    const started = Date.now();
    expect(await runWithDeadline(Date.now() + 50, () => loader.get())).toBeUndefined();
    expect(Date.now() - started).toBeLessThan(API_KEY_READ_CAP_MS);
  });
});
