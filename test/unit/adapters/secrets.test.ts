/**
 * The API key loader (lambda/adapters/secrets.ts): one read per cold start, cached; on failure
 * undefined (the app answers 503) and at most one new read per 30 s; never logs the value.
 */
import { runWithDeadline } from '../../../lambda/adapters/deadline';
import { API_KEY_READ_CAP_MS, createApiKeyLoader } from '../../../lambda/adapters/secrets';
import { createLogger } from '../../../lambda/log';
import { awsErrorNaming, fakeSecretsClient, type SecretAnswer } from '../../support/secrets-manager-fake';

const ARN = 'arn:aws:secretsmanager:eu-west-1:000000000000:secret:dm-dot-api-key-AbCdEf';
const KEY = 'the-api-key-value-0123456789';

const fakeClient = (answers: SecretAnswer[]) => fakeSecretsClient(answers);
const awsError = (name: string): Error => awsErrorNaming(ARN, name);

test('reads the secret once by ARN and caches it', async () => {
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

test('a failed read answers undefined and is retried only after 30 s', async () => {
  let now = 1_000_000;
  const client = fakeClient([awsError('AccessDeniedException'), { SecretString: KEY }]);
  const loader = createApiKeyLoader({ client: client as never, secretArn: ARN, now: () => now });
  expect(await loader.get()).toBeUndefined();
  now += 29_999;
  expect(await loader.get()).toBeUndefined();
  expect(client.getSecretValue).toHaveBeenCalledTimes(1);
  now += 1;
  expect(await loader.get()).toBe(KEY);
  expect(client.getSecretValue).toHaveBeenCalledTimes(2);
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
  expect(await loader.get()).toBeUndefined();
  fail = false;
  now += 30_000;
  expect(await loader.get()).toBe(KEY);
});

test('never logs the value; registers it for redaction; logs only the error name on failure', async () => {
  const lines: string[] = [];
  const log = createLogger((line) => lines.push(line));
  const redacted: string[] = [];
  let now = 0;
  const client = fakeClient([awsError('ResourceNotFoundException'), { SecretString: KEY }]);
  const loader = createApiKeyLoader({ client: client as never, secretArn: ARN, log, now: () => now, onLoaded: (key) => redacted.push(key) });
  await loader.get();
  now += 30_000;
  await loader.get();
  expect(redacted).toEqual([KEY]);
  const all = lines.join('\n');
  expect(all).not.toContain(KEY);
  expect(all).not.toContain(ARN);
  expect(lines.map((l) => JSON.parse(l).event)).toEqual(['api_key_unavailable', 'api_key_loaded']);
  expect(JSON.parse(lines[0]!).cause).toBe('ResourceNotFoundException');
});

describe('deadlines (issue 9 item 2)', () => {
  /** A Secrets Manager that never answers, except by honouring the abort signal it is given. */
  function stalledClient() {
    const signals: (AbortSignal | undefined)[] = [];
    return {
      signals,
      getSecretValue: (_input: unknown, options?: { abortSignal?: AbortSignal }) => {
        signals.push(options?.abortSignal);
        return new Promise((_, reject) => options?.abortSignal?.addEventListener('abort', () => reject(Object.assign(new Error('aborted'), { name: 'AbortError' }))));
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

  test('every read carries an abort signal, so a stalled Secrets Manager ends the read (undefined, 503)', async () => {
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
