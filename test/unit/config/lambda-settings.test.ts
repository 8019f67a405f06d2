/**
 * Lambda settings from the environment (lambda/handlers/aws.ts and the two factories): required
 * names fail loudly at init, and the loopback switch of SPEC 7 is on only for exactly "1".
 */
import { parseTtlPolicy, SettingsError } from '../../../lambda/config';
import { loopbackAllowed, required } from '../../../lambda/handlers/aws';
import { clientOptions } from '../../../lambda/handlers/aws-clients';
import { deliveryLambdaFromEnvironment } from '../../../lambda/handlers/delivery-lambda';
import { mcpLambdaFromEnvironment } from '../../../lambda/handlers/mcp-lambda';

const noClients = { dynamodb: {} as never, sqs: {} as never, secrets: { getSecretValue: async () => ({ SecretString: 'k'.repeat(32) }) } };

test('DMDOT_ALLOW_LOOPBACK_CALLBACKS allows loopback only when it is exactly "1"', () => {
  expect(loopbackAllowed({ DMDOT_ALLOW_LOOPBACK_CALLBACKS: '1' })).toBe(true);
  for (const value of [undefined, '', '0', 'true', 'yes', ' 1']) expect(loopbackAllowed({ DMDOT_ALLOW_LOOPBACK_CALLBACKS: value })).toBe(false);
});

test('a missing required variable is a SettingsError naming it', () => {
  expect(() => required({}, 'TABLE_NAME')).toThrow(SettingsError);
  expect(() => required({ TABLE_NAME: '  ' }, 'TABLE_NAME')).toThrow(/TABLE_NAME/);
  expect(required({ TABLE_NAME: ' t ' }, 'TABLE_NAME')).toBe('t');
});

test('the MCP Lambda refuses to start without TABLE_NAME or QUEUE_URL', () => {
  expect(() => mcpLambdaFromEnvironment({ QUEUE_URL: 'https://q' }, noClients)).toThrow(/TABLE_NAME/);
  expect(() => mcpLambdaFromEnvironment({ TABLE_NAME: 't' }, noClients)).toThrow(/QUEUE_URL/);
  expect(() => mcpLambdaFromEnvironment({ TABLE_NAME: 't', QUEUE_URL: 'https://q', DMDOT_DELIVERY_WAIT_MS: '9000' }, noClients)).toThrow(SettingsError);
});

test('the Delivery Lambda needs the dead-letter queue URL and a valid retry schedule', () => {
  const env = { TABLE_NAME: 't', QUEUE_URL: 'https://q', DEAD_LETTER_QUEUE_URL: 'https://dlq' };
  expect(() => deliveryLambdaFromEnvironment({ ...env, DEAD_LETTER_QUEUE_URL: undefined }, noClients)).toThrow(/DEAD_LETTER_QUEUE_URL/);
  expect(() => deliveryLambdaFromEnvironment({ ...env, DMDOT_RETRY_DELAYS: '1,x' }, noClients)).toThrow(SettingsError);
  expect(typeof deliveryLambdaFromEnvironment(env, noClients)).toBe('function');
});

test('every AWS client gets bounded timeouts that throw (not only warn) when they pass', () => {
  const { credentials, ...rest } = clientOptions();
  expect(typeof credentials).toBe('function');
  expect(rest).toEqual({ maxAttempts: 3, requestHandler: { connectionTimeout: 1_000, requestTimeout: 2_000, throwOnRequestTimeout: true } });
});

describe('AWS credentials come from the environment only (as Lambda provides them)', () => {
  const saved = { ...process.env };
  afterEach(() => {
    for (const name of ['AWS_ACCESS_KEY_ID', 'AWS_SECRET_ACCESS_KEY', 'AWS_SESSION_TOKEN', 'AWS_PROFILE']) {
      if (saved[name] === undefined) delete process.env[name];
      else process.env[name] = saved[name];
    }
  });

  test('the execution role keys in the environment are the credentials', async () => {
    process.env.AWS_ACCESS_KEY_ID = 'ASIAEXAMPLEEXAMPLE';
    process.env.AWS_SECRET_ACCESS_KEY = 'secret-example';
    process.env.AWS_SESSION_TOKEN = 'token-example';
    await expect(clientOptions().credentials()).resolves.toEqual(
      expect.objectContaining({ accessKeyId: 'ASIAEXAMPLEEXAMPLE', secretAccessKey: 'secret-example', sessionToken: 'token-example' }),
    );
  });

  test('no keys in the environment is a clear error, not a walk through profiles or instance metadata', async () => {
    delete process.env.AWS_ACCESS_KEY_ID;
    delete process.env.AWS_SECRET_ACCESS_KEY;
    process.env.AWS_PROFILE = 'would-be-read-by-the-default-chain';
    await expect(clientOptions().credentials()).rejects.toThrow(/environment variable credentials/);
  });
});

describe('TTL policy settings', () => {
  test('defaults are 7 days each', () => expect(parseTtlPolicy(undefined, undefined)).toEqual({ defaultMs: 604_800_000, maxMs: 604_800_000 }));
  test('a cap alone lowers the default to it', () => expect(parseTtlPolicy(undefined, '3600000')).toEqual({ defaultMs: 3_600_000, maxMs: 3_600_000 }));
  test('both given', () => expect(parseTtlPolicy('600000', '3600000')).toEqual({ defaultMs: 600_000, maxMs: 3_600_000 }));
  test.each([
    ['abc', undefined],
    [undefined, '604800001'],
    ['7200000', '3600000'],
    ['59999', undefined],
  ])('default %s, cap %s is a SettingsError naming both variables', (d, m) => {
    expect(() => parseTtlPolicy(d, m)).toThrow(/DMDOT_TTL_DEFAULT_MS \/ DMDOT_TTL_MAX_MS/);
  });
});
