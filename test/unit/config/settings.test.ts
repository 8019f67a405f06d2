/**
 * The configuration module (lambda/config): one parser per kind of field with one error type,
 * and the typed settings of each entry point. Every bad value is a SettingsError naming the
 * setting (the local runtime exits 2 with it; a Lambda fails its init), and no message quotes a
 * secret.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as field from '../../../lambda/config/fields';
import { SettingsError } from '../../../lambda/config/fields';
import { awsRuntime, cliAwsSettings, deliveryLambdaSettings, localSettings, mcpLambdaSettings } from '../../../lambda/config/settings';
import { clientOptions } from '../../../lambda/handlers/aws-clients';
import { deliveryLambdaFromEnvironment, mcpLambdaFromEnvironment } from '../../support/lambda-environment';

const ROOT = '/project';
const local = (env: Record<string, string | undefined>) => localSettings(env, { projectRoot: ROOT });
const secret = () => `whsec_${randomBytes(32).toString('base64')}`;
const noClients = { dynamodb: {} as never, sqs: {} as never, secrets: { getSecretValue: async () => ({ SecretString: 'k'.repeat(32) }) } };

describe('switches: one rule everywhere', () => {
  test.each([
    [undefined, false],
    ['', false],
    ['0', false],
    ['false', false],
    ['1', true],
    ['true', true],
    ['TRUE', true],
    [' 1 ', true],
  ])('%j is %s', (value, on) => {
    expect(field.flag(value, 'X')).toBe(on);
    expect(local({ DMDOT_ALLOW_LOOPBACK_CALLBACKS: value }).allowLoopbackCallbacks).toBe(on);
    expect(
      deliveryLambdaSettings({ TABLE_NAME: 't', QUEUE_URL: 'q', DEAD_LETTER_QUEUE_URL: 'd', DMDOT_ALLOW_LOOPBACK_CALLBACKS: value }).allowLoopbackCallbacks,
    ).toBe(on);
  });

  test.each(['yes', 'on', '2', 'enabled'])('%j is refused with the setting named, not read as off', (value) => {
    expect(() => local({ DMDOT_ALLOW_LOOPBACK_CALLBACKS: value })).toThrow(
      `DMDOT_ALLOW_LOOPBACK_CALLBACKS must be 1 or true (on), or 0, false or empty (off), got "${value}"`,
    );
  });
});

describe('required values of the Lambdas', () => {
  test('a missing required variable is a SettingsError naming it', () => {
    expect(() => field.required(undefined, 'TABLE_NAME')).toThrow(SettingsError);
    expect(() => field.required('  ', 'TABLE_NAME')).toThrow(/TABLE_NAME/);
    expect(field.required(' t ', 'TABLE_NAME')).toBe('t');
  });

  test('the MCP Lambda refuses to start without TABLE_NAME or QUEUE_URL, or with a bad value', () => {
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

  test('the MCP Lambda reads the manifest from a file of its asset, relative to the task root', () => {
    const root = mkdtempSync(join(tmpdir(), 'dmdot-task-'));
    writeFileSync(join(root, 'pup-manifest.json'), '{ "name" : "x" }');
    const settings = mcpLambdaSettings({ TABLE_NAME: 't', QUEUE_URL: 'q', PUP_MANIFEST_FILE: 'pup-manifest.json', LAMBDA_TASK_ROOT: root });
    expect(settings.pupManifest).toBe('{ "name" : "x" }');
    expect(() => mcpLambdaSettings({ TABLE_NAME: 't', QUEUE_URL: 'q', PUP_MANIFEST_FILE: 'nope.json', LAMBDA_TASK_ROOT: root })).toThrow(
      /PUP_MANIFEST_FILE .* cannot be read/,
    );
  });

  test('the AWS runtime facts come from the environment once: region, endpoint, FIPS, credentials, function name', () => {
    expect(
      awsRuntime({
        AWS_REGION: 'eu-west-1',
        AWS_ENDPOINT_URL: 'http://all',
        AWS_ENDPOINT_URL_SECRETS_MANAGER: 'http://sm',
        AWS_USE_FIPS_ENDPOINT: 'true',
        AWS_ACCESS_KEY_ID: 'AKID',
        AWS_SECRET_ACCESS_KEY: 'secret',
        AWS_SESSION_TOKEN: 'token',
        AWS_LAMBDA_FUNCTION_NAME: 'fn',
      }),
    ).toEqual({
      region: 'eu-west-1',
      secretsManagerEndpoint: 'http://sm',
      useFips: true,
      credentials: { accessKeyId: 'AKID', secretAccessKey: 'secret', sessionToken: 'token' },
      functionName: 'fn',
    });
    expect(awsRuntime({}).region).toBe('us-east-1');
    expect(awsRuntime({ AWS_ENDPOINT_URL: 'http://all', AWS_IGNORE_CONFIGURED_ENDPOINT_URLS: 'true' }).secretsManagerEndpoint).toBeUndefined();
  });
});

describe('the local runtime', () => {
  test('DEL-PIPE-5, HTTP-12, LIM-10, LOCAL-8, LOCAL-10, LOCAL-11, LOCAL-12, LOCAL-13, LOCAL-14: defaults: 127.0.0.1:8787, the state directory under the project root, no switches', () => {
    expect(local({})).toMatchObject({
      host: '127.0.0.1',
      port: 8787,
      stateDir: '/project/.dm-dot',
      allowLoopbackCallbacks: false,
      retryDelaysS: [1, 4, 30, 120, 600],
      deliveryWaitMs: 3000,
      deliveryConcurrency: 8,
      allowedOrigins: [],
      allowedHosts: [],
      pupSecrets: { secrets: [] },
      warnings: [],
    });
  });

  test('LOCAL-10: a relative DMDOT_STATE_DIR is taken from the project root, an absolute one as is', () => {
    expect(local({ DMDOT_STATE_DIR: 'state' }).stateDir).toBe('/project/state');
    expect(local({ DMDOT_STATE_DIR: '/var/dm-dot' }).stateDir).toBe('/var/dm-dot');
  });

  test('an API key shorter than 16 characters is refused, one shorter than 32 accepted with a warning; neither quoted', () => {
    expect(() => local({ MCP_API_KEY: 'short-key' })).toThrow(/MCP_API_KEY is 9 characters; it must have at least 16/);
    try {
      local({ MCP_API_KEY: 'short-key' });
    } catch (error) {
      expect((error as Error).message).not.toContain('short-key');
    }
    const warned = local({ MCP_API_KEY: 'sixteen-chars-ok-now' });
    expect(warned.apiKey).toBe('sixteen-chars-ok-now');
    expect(warned.warnings.join('\n')).toMatch(/MCP_API_KEY has 20 characters; 32 or more are recommended/);
    expect(warned.warnings.join('\n')).not.toContain('sixteen-chars-ok-now');
    expect(local({ MCP_API_KEY: 'k'.repeat(32) }).warnings).toEqual([]);
  });

  test('a HOST other than loopback is accepted with a warning', () => {
    expect(local({ HOST: '0.0.0.0' }).warnings.join('\n')).toMatch(/HOST=0.0.0.0 listens beyond this machine/);
    for (const host of ['127.0.0.1', 'localhost', '::1']) expect(local({ HOST: host }).warnings).toEqual([]);
  });

  test.each([
    ['PORT', 'x', /PORT must be an integer from 0 to 65535/],
    ['PORT', '70000', /PORT/],
    ['DMDOT_RETRY_DELAYS', '1,-1', /DMDOT_RETRY_DELAYS/],
    ['DMDOT_RETRY_DELAYS', '1,50000', /DMDOT_RETRY_DELAYS/],
    ['DMDOT_DELIVERY_WAIT_MS', '4001', /DMDOT_DELIVERY_WAIT_MS must be an integer from 0 to 4000/],
    ['DMDOT_DELIVERY_CONCURRENCY', '0', /DMDOT_DELIVERY_CONCURRENCY/],
    ['DMDOT_ALLOWED_ORIGINS', 'https://example.com/path', /DMDOT_ALLOWED_ORIGINS/],
    ['DMDOT_ALLOWED_HOSTS', 'https://tunnel.example', /DMDOT_ALLOWED_HOSTS/],
  ])('HTTP-15: %s=%j is a SettingsError naming it', (name, value, message) => {
    expect(() => local({ [name]: value })).toThrow(SettingsError);
    expect(() => local({ [name]: value })).toThrow(message);
  });

  test('LOCAL-12: fractions of a second are a valid retry schedule (tests run fast schedules)', () => {
    expect(local({ DMDOT_RETRY_DELAYS: '0.05, 0.1' }).retryDelaysS).toEqual([0.05, 0.1]);
  });
});

describe('TTL policy', () => {
  const ttl = (d?: string, m?: string) => field.ttlPolicy(d, m, 'DMDOT_TTL_DEFAULT_MS / DMDOT_TTL_MAX_MS');
  test('defaults are 7 days each', () => expect(ttl()).toEqual({ defaultMs: 604_800_000, maxMs: 604_800_000 }));
  test('a cap alone lowers the default to it', () => expect(ttl(undefined, '3600000')).toEqual({ defaultMs: 3_600_000, maxMs: 3_600_000 }));
  test('both given', () => expect(ttl('600000', '3600000')).toEqual({ defaultMs: 600_000, maxMs: 3_600_000 }));
  test.each([
    ['abc', undefined],
    [undefined, '604800001'],
    ['7200000', '3600000'],
    ['59999', undefined],
  ])('default %s, cap %s is a SettingsError naming both variables', (d, m) => {
    expect(() => ttl(d, m)).toThrow(/DMDOT_TTL_DEFAULT_MS \/ DMDOT_TTL_MAX_MS/);
  });
});

describe('PUP-4: pup: PUP_SIGNING_SECRETS / PUP_ROTATED_AT / PUP_MANIFEST_FILE', () => {
  test('unset: no secrets (the POST routes answer 503) and the default manifest', () => {
    expect(local({}).pupSecrets).toEqual({ secrets: [] });
    expect(local({}).pupManifest).toBeUndefined();
  });

  test('one secret; two with a rotation time, current first, spaces trimmed', () => {
    const a = secret();
    const b = secret();
    expect(field.pupSecrets(` ${a} `, undefined)).toEqual({ secrets: [a] });
    expect(field.pupSecrets(`${a}, ${b}`, '2026-11-30T12:00:00Z')).toEqual({ secrets: [a, b], rotatedAt: Date.UTC(2026, 10, 30, 12) });
    expect(field.pupSecrets(a, '2026-11-30T13:00:00+01:00')).toEqual({ secrets: [a], rotatedAt: Date.UTC(2026, 10, 30, 12) });
  });

  test.each([
    ['a malformed secret', () => field.pupSecrets('whsec_bm90LWVub3VnaA==', undefined), /PUP_SIGNING_SECRETS/],
    ['two secrets without PUP_ROTATED_AT', () => field.pupSecrets(`${secret()},${secret()}`, undefined), /PUP_ROTATED_AT/],
    ['three secrets', () => field.pupSecrets(`${secret()},${secret()},${secret()}`, '2026-11-30T12:00:00Z'), /at most 2/],
    ['a rotation time without a zone', () => field.pupSecrets(secret(), '2026-11-30T12:00:00'), /PUP_ROTATED_AT/],
    ['an impossible date', () => field.pupSecrets(secret(), '2026-02-31T12:00:00Z'), /PUP_ROTATED_AT/],
  ])('%s is a SettingsError naming the setting', (_label, run, name) => {
    expect(run).toThrow(SettingsError);
    expect(run).toThrow(name);
  });

  test('the message never quotes a secret', () => {
    const bad = 'whsec_bm90LWVub3VnaA==';
    expect(() => field.pupSecrets(`${secret()},${bad}`, '2026-11-30T12:00:00Z')).toThrow(/secret 2/);
    try {
      field.pupSecrets(`${secret()},${bad}`, '2026-11-30T12:00:00Z');
    } catch (error) {
      expect((error as Error).message).not.toContain('bm90LWVub3VnaA');
    }
  });

  const dir = mkdtempSync(join(tmpdir(), 'dmdot-manifest-'));
  const file = (name: string, content: string) => {
    const path = join(dir, name);
    writeFileSync(path, content);
    return path;
  };

  test('PUP-5: a JSON object file is kept byte for byte; a relative path is taken from the project root', () => {
    const content = '{ "name" : "x" }\n';
    expect(local({ PUP_MANIFEST_FILE: file('ok.json', content) }).pupManifest).toBe(content);
    expect(localSettings({ PUP_MANIFEST_FILE: 'ok.json' }, { projectRoot: dir }).pupManifest).toBe(content);
  });

  test.each([
    ['a missing file', () => ({ PUP_MANIFEST_FILE: join(dir, 'nope.json') }), /PUP_MANIFEST_FILE .* cannot be read/],
    ['a file that is not JSON', () => ({ PUP_MANIFEST_FILE: file('bad.json', '{"name":') }), /PUP_MANIFEST_FILE .* is not valid JSON/],
    ['a JSON array', () => ({ PUP_MANIFEST_FILE: file('array.json', '[1]') }), /must hold a JSON object/],
  ])('%s is a SettingsError naming the setting', (_label, env, message) => {
    expect(() => local(env())).toThrow(SettingsError);
    expect(() => local(env())).toThrow(message);
  });
});

describe('the CLI', () => {
  test('CLI-13: --aws defaults from the environment: the stack DmDot, no resources named', () => {
    expect(cliAwsSettings({})).toEqual({ stack: 'DmDot' });
    expect(cliAwsSettings({ DMDOT_STACK: 'Mine', DMDOT_TABLE: 't', AWS_REGION: 'eu-west-1' })).toEqual({ stack: 'Mine', table: 't', region: 'eu-west-1' });
  });
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

describe('DMDOT_EVENTS_PROFILE (docs/contract/events.md, profiles)', () => {
  test('EV-PROF-6: chatgpt by default, sep-3415 when asked, anything else refused naming the setting', () => {
    const base = { TABLE_NAME: 't', QUEUE_URL: 'q' };
    expect(mcpLambdaSettings(base).eventsProfile).toBe('chatgpt');
    expect(mcpLambdaSettings({ ...base, DMDOT_EVENTS_PROFILE: 'SEP-3415' }).eventsProfile).toBe('sep-3415');
    expect(localSettings({ DMDOT_EVENTS_PROFILE: 'sep-3415' }, { projectRoot: tmpdir() }).eventsProfile).toBe('sep-3415');
    expect(() => mcpLambdaSettings({ ...base, DMDOT_EVENTS_PROFILE: 'openai' })).toThrow(/DMDOT_EVENTS_PROFILE must be one of chatgpt, sep-3415/);
  });
});

describe('DMDOT_INBOX (docs/contract/mcp.md, the inbox)', () => {
  test('INBOX-1: off by default, on with 1 or true, anything else refused naming the setting', () => {
    const base = { TABLE_NAME: 't', QUEUE_URL: 'q' };
    expect(mcpLambdaSettings(base).inbox).toBe(false);
    expect(mcpLambdaSettings({ ...base, DMDOT_INBOX: '1' }).inbox).toBe(true);
    expect(localSettings({ DMDOT_INBOX: 'true' }, { projectRoot: tmpdir() }).inbox).toBe(true);
    expect(() => localSettings({ DMDOT_INBOX: 'on' }, { projectRoot: tmpdir() })).toThrow(/DMDOT_INBOX must be 1 or true/);
  });
});
