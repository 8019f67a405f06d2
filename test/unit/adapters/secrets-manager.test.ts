/**
 * The Secrets Manager reader without the SDK (lambda/adapters/secrets-manager.ts): the request it
 * sends (checked by the fake, which recomputes every signature with the SDK's own signer), the
 * answers and errors it reads, the SDK-like retries, timeouts and abort, and the endpoint it picks
 * (the partition table held to the SDK's).
 */
import { awsRuntime } from '../../../lambda/config/settings';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { partition } from '@aws-sdk/core/client';
import {
  createSecretsManagerReader,
  defaultEndpoint,
  dnsSuffixOf,
  PARTITIONS,
  secretsManagerFromRuntime,
  type SecretsManagerOptions,
} from '../../../lambda/adapters/secrets-manager';
import { startFakeSecretsManager, TEST_CREDENTIALS, testSecretsReader, type FakeSecretsManager } from '../../support/fake-secrets-manager';

const ARN = 'arn:aws:secretsmanager:us-east-1:000000000000:secret:dm-dot-api-key-TeSt01';

/** A scripted endpoint: each request takes the next answer (the last repeats); every request is kept. */
async function scripted(answers: Array<{ status: number; body?: string; headers?: Record<string, string> } | 'hang' | 'reset'>) {
  const requests: Array<{ method?: string; url?: string; headers: http.IncomingHttpHeaders; body: string }> = [];
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString('utf8')));
    req.on('end', () => {
      requests.push({ method: req.method, url: req.url, headers: req.headers, body });
      const answer = answers.length > 1 ? answers.shift()! : answers[0]!;
      if (answer === 'hang') return;
      if (answer === 'reset') return void req.socket.destroy();
      res.writeHead(answer.status, { 'content-type': 'application/x-amz-json-1.1', ...answer.headers });
      res.end(answer.body ?? '');
    });
  });
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  return {
    endpoint: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    requests,
    stop: () =>
      new Promise<void>((done) => {
        server.close(() => done());
        server.closeAllConnections();
      }),
  };
}

/** Runs `check` against a scripted endpoint and always stops it. */
async function withScripted(answers: Parameters<typeof scripted>[0], check: (server: Awaited<ReturnType<typeof scripted>>) => Promise<void>): Promise<void> {
  const server = await scripted(answers);
  try {
    await check(server);
  } finally {
    await server.stop();
  }
}

const reader = (endpoint: string, options: Partial<SecretsManagerOptions> = {}) =>
  createSecretsManagerReader({ region: 'us-east-1', endpoint, credentials: () => TEST_CREDENTIALS, random: () => 0, ...options });

const errorJson = (type: string) => JSON.stringify({ __type: type, message: `about ${ARN}` });

describe('against the fake Secrets Manager (signatures recomputed with the SDK signer)', () => {
  let fake: FakeSecretsManager;
  beforeAll(async () => {
    fake = await startFakeSecretsManager(ARN);
  });
  afterAll(() => fake.stop());

  test('reads a SecretString by ARN, with a signature the SDK signer agrees with', async () => {
    fake.setSecret('the-value');
    await expect(testSecretsReader(fake.endpoint).getSecretValue({ SecretId: ARN })).resolves.toEqual({ SecretString: 'the-value' });
    expect(fake.badSignatures()).toBe(0);
  });

  test('the check can fail: other credentials do not verify (403 InvalidSignatureException, not retried)', async () => {
    const before = fake.badSignatures();
    const wrong = reader(fake.endpoint, { credentials: () => ({ ...TEST_CREDENTIALS, secretAccessKey: 'not-the-secret' }) });
    await expect(wrong.getSecretValue({ SecretId: ARN })).rejects.toMatchObject({ name: 'InvalidSignatureException', status: 403 });
    expect(fake.badSignatures()).toBe(before + 1);
  });

  test('a missing secret is ResourceNotFoundException, named as the SDK names it, message free of the ARN', async () => {
    const error = await testSecretsReader(fake.endpoint)
      .getSecretValue({ SecretId: `${ARN}-gone` })
      .catch((e: Error) => e);
    expect(error).toMatchObject({ name: 'ResourceNotFoundException' });
    expect((error as Error).message).not.toContain(ARN);
  });

  test('secretsManagerFromRuntime(awsRuntime(env)): AWS_ENDPOINT_URL_SECRETS_MANAGER and the credentials of the environment', async () => {
    fake.setSecret('from-env');
    const env = {
      AWS_REGION: 'us-east-1',
      AWS_ENDPOINT_URL: 'http://127.0.0.1:9',
      AWS_ENDPOINT_URL_SECRETS_MANAGER: fake.endpoint,
      AWS_ACCESS_KEY_ID: TEST_CREDENTIALS.accessKeyId,
      AWS_SECRET_ACCESS_KEY: TEST_CREDENTIALS.secretAccessKey,
      AWS_SESSION_TOKEN: TEST_CREDENTIALS.sessionToken,
    };
    await expect(secretsManagerFromRuntime(awsRuntime(env)).getSecretValue({ SecretId: ARN })).resolves.toEqual({ SecretString: 'from-env' });
  });
});

describe('the request and the answer', () => {
  test('POST / with the JSON 1.1 target, the secret id as JSON, under a configured base path', async () => {
    await withScripted([{ status: 200, body: JSON.stringify({ SecretString: 'x', ARN }) }], async (server) => {
      await reader(`${server.endpoint}/base/`).getSecretValue({ SecretId: ARN });
      const [request] = server.requests;
      expect(request).toMatchObject({ method: 'POST', url: '/base/', body: JSON.stringify({ SecretId: ARN }) });
      expect(request!.headers).toMatchObject({
        'content-type': 'application/x-amz-json-1.1',
        'x-amz-target': 'secretsmanager.GetSecretValue',
        'x-amz-security-token': TEST_CREDENTIALS.sessionToken,
        host: new URL(server.endpoint).host,
      });
      expect(request!.headers.authorization).toMatch(
        /^AWS4-HMAC-SHA256 Credential=AKIDTESTEXAMPLE\/\d{8}\/us-east-1\/secretsmanager\/aws4_request, SignedHeaders=[^,]*host;[^,]*x-amz-target, Signature=[0-9a-f]{64}$/,
      );
    });
  });

  test('SecretBinary is base64 in the answer and bytes in the result', async () => {
    await withScripted([{ status: 200, body: JSON.stringify({ SecretBinary: Buffer.from('binary key').toString('base64') }) }], async (server) => {
      const value = await reader(server.endpoint).getSecretValue({ SecretId: ARN });
      expect(Buffer.from(value.SecretBinary!).toString('utf8')).toBe('binary key');
      expect(value.SecretString).toBeUndefined();
    });
  });

  test.each([
    ['namespace#Code', { body: errorJson('com.amazonaws.secretsmanager#AccessDeniedException') }, 'AccessDeniedException'],
    ['Code:http://… (the old form)', { body: errorJson('AccessDeniedException:http://internal.amazon.com/coral/') }, 'AccessDeniedException'],
    ['the x-amzn-ErrorType header first', { body: errorJson('Other'), headers: { 'x-amzn-errortype': 'DecryptionFailure:http://x/' } }, 'DecryptionFailure'],
    ['no type at all', { body: 'not json' }, 'Http400'],
  ])('error code from %s', async (_name, answer, code) => {
    await withScripted([{ status: 400, ...answer }], async (server) => {
      await expect(reader(server.endpoint).getSecretValue({ SecretId: ARN })).rejects.toMatchObject({ name: code, status: 400 });
      expect(server.requests).toHaveLength(1);
    });
  });

  test('a 200 that is not a JSON object is an error, not an empty secret', async () => {
    await withScripted([{ status: 200, body: '<html>' }], async (server) => {
      await expect(reader(server.endpoint).getSecretValue({ SecretId: ARN })).rejects.toMatchObject({ name: 'UnreadableAnswer' });
    });
  });

  test('an answer over 1 MiB is cut off (a secret is at most 64 KiB)', async () => {
    await withScripted([{ status: 200, body: JSON.stringify({ SecretString: 'x'.repeat(1100 * 1024) }) }], async (server) => {
      await expect(reader(server.endpoint, { maxAttempts: 1 }).getSecretValue({ SecretId: ARN })).rejects.toMatchObject({ name: 'ResponseTooLarge' });
    });
  });

  test('no credentials in the environment: CredentialsProviderError, and no request', async () => {
    await withScripted([{ status: 200, body: '{}' }], async (server) => {
      const reader = secretsManagerFromRuntime(awsRuntime({ AWS_REGION: 'us-east-1', AWS_ENDPOINT_URL: server.endpoint }));
      await expect(reader.getSecretValue({ SecretId: ARN })).rejects.toMatchObject({ name: 'CredentialsProviderError' });
      expect(server.requests).toHaveLength(0);
    });
  });
});

describe('retries (the SDK standard mode: throttling, 5xx and the network; 3 attempts)', () => {
  test('throttling, then a 500, then the value', async () => {
    await withScripted(
      [
        { status: 400, body: errorJson('ThrottlingException') },
        { status: 500, body: errorJson('InternalServiceError') },
        { status: 200, body: '{"SecretString":"third time"}' },
      ],
      async (server) => {
        await expect(reader(server.endpoint).getSecretValue({ SecretId: ARN })).resolves.toEqual({ SecretString: 'third time' });
        expect(server.requests).toHaveLength(3);
      },
    );
  });

  test('three 500s: the last error, after exactly three attempts', async () => {
    await withScripted([{ status: 503, body: errorJson('ServiceUnavailable') }], async (server) => {
      await expect(reader(server.endpoint).getSecretValue({ SecretId: ARN })).rejects.toMatchObject({ name: 'ServiceUnavailable', status: 503 });
      expect(server.requests).toHaveLength(3);
    });
  });

  test('a cut connection is retried', async () => {
    await withScripted(['reset', { status: 200, body: '{"SecretString":"after reset"}' }], async (server) => {
      await expect(reader(server.endpoint).getSecretValue({ SecretId: ARN })).resolves.toEqual({ SecretString: 'after reset' });
      expect(server.requests).toHaveLength(2);
    });
  });

  test('nobody listening: three refused connections, then the error code of the last', async () => {
    await expect(reader('http://127.0.0.1:9').getSecretValue({ SecretId: ARN })).rejects.toMatchObject({ name: 'ECONNREFUSED' });
  });

  test('a stalled attempt ends at the attempt timeout and the next attempt answers', async () => {
    await withScripted(['hang', { status: 200, body: '{"SecretString":"second"}' }], async (server) => {
      await expect(reader(server.endpoint, { attemptTimeoutMs: 200 }).getSecretValue({ SecretId: ARN })).resolves.toEqual({ SecretString: 'second' });
      expect(server.requests).toHaveLength(2);
    });
  });

  test('the abort signal ends the whole call (no further attempt) with its reason', async () => {
    await withScripted(['hang'], async (server) => {
      const error = await reader(server.endpoint)
        .getSecretValue({ SecretId: ARN }, { abortSignal: AbortSignal.timeout(150) })
        .catch((e: Error) => e);
      expect((error as Error).name).toBe('TimeoutError');
      expect(server.requests).toHaveLength(1);
    });
  });

  test('the abort signal also ends a backoff between attempts, with its reason', async () => {
    await withScripted([{ status: 400, body: errorJson('ThrottlingException') }], async (server) => {
      // random() = 1: the full 500 ms throttling backoff; the signal fires during it.
      const slow = reader(server.endpoint, { random: () => 1 });
      const error = await slow.getSecretValue({ SecretId: ARN }, { abortSignal: AbortSignal.timeout(150) }).catch((e: Error) => e);
      expect((error as Error).name).toBe('TimeoutError');
      expect(server.requests).toHaveLength(1);
    });
  });

  test('an already aborted signal sends nothing', async () => {
    await withScripted([{ status: 200, body: '{}' }], async (server) => {
      const controller = new AbortController();
      controller.abort();
      await expect(reader(server.endpoint).getSecretValue({ SecretId: ARN }, { abortSignal: controller.signal })).rejects.toBeDefined();
      expect(server.requests).toHaveLength(0);
    });
  });
});

describe('endpoints', () => {
  test("the partition table agrees with the SDK's: one region of each partition, and an unknown one", () => {
    const samples = [
      'us-east-1',
      'mx-central-1',
      'cn-north-1',
      'eusc-de-east-1',
      'us-iso-east-1',
      'us-isob-east-1',
      'eu-isoe-west-1',
      'us-isof-south-1',
      'us-gov-west-1',
      'xx-nowhere-1',
    ];
    for (const region of samples) {
      const sdk = partition(region) as { name: string; dnsSuffix: string };
      expect([region, dnsSuffixOf(region), dnsSuffixOf(region, sdk.name)]).toEqual([region, sdk.dnsSuffix, sdk.dnsSuffix]);
    }
    // Every partition the SDK knows is in the table (a new one fails here).
    const named = new Set(samples.map((region) => (partition(region) as { name: string }).name));
    expect([...named].sort()).toEqual(PARTITIONS.map((p) => p.id).sort());
  });

  test('the ARN names the partition: aws-cn gets amazonaws.com.cn', () => {
    expect(defaultEndpoint('cn-north-1', false, 'aws-cn')).toBe('https://secretsmanager.cn-north-1.amazonaws.com.cn');
    expect(defaultEndpoint('eu-west-1')).toBe('https://secretsmanager.eu-west-1.amazonaws.com');
    expect(defaultEndpoint('us-gov-west-1', true, 'aws-us-gov')).toBe('https://secretsmanager-fips.us-gov-west-1.amazonaws.com');
  });

  const endpointOf = (env: Record<string, string>) => awsRuntime(env).secretsManagerEndpoint;

  test('AWS_ENDPOINT_URL_SECRETS_MANAGER wins over AWS_ENDPOINT_URL; AWS_IGNORE_CONFIGURED_ENDPOINT_URLS turns both off', () => {
    expect(endpointOf({})).toBeUndefined();
    expect(endpointOf({ AWS_ENDPOINT_URL: 'http://all' })).toBe('http://all');
    expect(endpointOf({ AWS_ENDPOINT_URL: 'http://all', AWS_ENDPOINT_URL_SECRETS_MANAGER: 'http://sm' })).toBe('http://sm');
    expect(endpointOf({ AWS_ENDPOINT_URL_SECRETS_MANAGER: '  ' })).toBeUndefined();
    expect(endpointOf({ AWS_ENDPOINT_URL_SECRETS_MANAGER: 'http://sm', AWS_IGNORE_CONFIGURED_ENDPOINT_URLS: 'true' })).toBeUndefined();
  });
});
