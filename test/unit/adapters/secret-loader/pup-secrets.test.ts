/**
 * pup's signing secrets, through the one secret loader (lambda/adapters/secret-loader.ts): JSON
 * `{"secrets":[…],"rotatedAt":"…"}` from Secrets Manager by ARN, refreshed while warm (2 min) in
 * the background so a rotation needs no deploy, the last good value kept through failures, and no
 * secret ever logged.
 */
import { randomBytes } from 'node:crypto';
import { createPupSecretsLoader, parsePupSecretString } from '../../../../lambda/adapters/secret-loader';
import { Budgets } from '../../../../lambda/core/budgets';
import type { Logger } from '../../../../lambda/log';
import { runWithDeadline } from '../../../../lambda/adapters/deadline';

const PUP_SECRETS_REFRESH_MS = Budgets.pupSecretsRefreshMs;
const PUP_SECRETS_RETRY_INTERVAL_MS = Budgets.secretRetryIntervalMs;
const inRequest = <T>(fn: () => Promise<T>) => runWithDeadline(Date.now() + 4_200, fn);
import { awsErrorNaming, fakeSecretsClient, type SecretAnswer } from '../../../support/scripted-secrets-reader';

/** A logger that keeps lines as given, with no redaction: what the loader itself passes is checked. */
function rawLog(lines: string[]): Logger {
  const emit =
    (level: string) =>
    (event: string, fields: Record<string, unknown> = {}) =>
      void lines.push(JSON.stringify({ level, event, ...fields }));
  return { info: emit('info'), warn: emit('warn'), error: emit('error') };
}

const ARN = 'arn:aws:secretsmanager:eu-west-1:000000000000:secret:dm-dot-pup-AbCdEf';
const newSecret = () => `whsec_${randomBytes(32).toString('base64')}`;
const A = newSecret();
const B = newSecret();
const C = newSecret();
const ROTATED = '2026-11-30T12:00:00Z';

const fakeClient = (answers: SecretAnswer[]) => fakeSecretsClient(answers);
const awsError = (name: string): Error => awsErrorNaming(ARN, name);

const json = (secrets: string[], rotatedAt?: string) => ({ SecretString: JSON.stringify(rotatedAt ? { secrets, rotatedAt } : { secrets }) });

function clock(start = Date.UTC(2026, 10, 30, 12)) {
  let t = start;
  return { now: () => t, advance: (ms: number) => void (t += ms) };
}

test('PUP-4: reads the secret by ARN and parses current, previous and the rotation time', async () => {
  const client = fakeClient([json([A, B], ROTATED)]);
  const loader = createPupSecretsLoader({ client: client as never, secretArn: ARN });
  expect(await loader.get()).toEqual({ secrets: [A, B], rotatedAt: Date.parse(ROTATED) });
  expect(client.calls).toEqual([{ SecretId: ARN }]);
});

test('within the refresh interval the cached value answers without a call', async () => {
  const c = clock();
  const client = fakeClient([json([A])]);
  const loader = createPupSecretsLoader({ client: client as never, secretArn: ARN, now: c.now });
  await loader.get();
  c.advance(PUP_SECRETS_REFRESH_MS - 1);
  expect(await loader.get()).toEqual({ secrets: [A] });
  expect(client.getSecretValue).toHaveBeenCalledTimes(1);
});

test('PUP-4: after the refresh interval a rotation is picked up without a restart, the old value answering meanwhile', async () => {
  const c = clock();
  const client = fakeClient([json([A]), json([C, A], ROTATED)]);
  const loader = createPupSecretsLoader({ client: client as never, secretArn: ARN, now: c.now });
  await loader.get();
  c.advance(PUP_SECRETS_REFRESH_MS);
  // This request is answered from the cache at once; the refresh runs beside it.
  expect(await loader.get()).toEqual({ secrets: [A] });
  await new Promise((done) => setImmediate(done));
  expect(await loader.get()).toEqual({ secrets: [C, A], rotatedAt: Date.parse(ROTATED) });
  expect(client.getSecretValue).toHaveBeenCalledTimes(2);
});

test('concurrent first requests share one read', async () => {
  const client = fakeClient([json([A])]);
  const loader = createPupSecretsLoader({ client: client as never, secretArn: ARN });
  expect(await Promise.all([loader.get(), loader.get(), loader.get()])).toEqual([{ secrets: [A] }, { secrets: [A] }, { secrets: [A] }]);
  expect(client.getSecretValue).toHaveBeenCalledTimes(1);
});

test('a failed refresh keeps the last good value and retries at most every 30 s', async () => {
  const c = clock();
  const client = fakeClient([json([A]), awsError('InternalServiceError'), json([B])]);
  const loader = createPupSecretsLoader({ client: client as never, secretArn: ARN, now: c.now });
  await inRequest(() => loader.get());
  c.advance(PUP_SECRETS_REFRESH_MS);
  await inRequest(() => loader.get());
  await new Promise((done) => setImmediate(done));
  expect(await inRequest(() => loader.get())).toEqual({ secrets: [A] });
  expect(client.getSecretValue).toHaveBeenCalledTimes(2);
  c.advance(PUP_SECRETS_RETRY_INTERVAL_MS - 1);
  await inRequest(() => loader.get());
  expect(client.getSecretValue).toHaveBeenCalledTimes(2);
  c.advance(1);
  await inRequest(() => loader.get());
  await new Promise((done) => setImmediate(done));
  expect(await loader.get()).toEqual({ secrets: [B] });
});

test('with no good value yet a failure answers undefined (503) and is retried after 30 s', async () => {
  const c = clock();
  const client = fakeClient([awsError('AccessDeniedException'), json([A])]);
  const loader = createPupSecretsLoader({ client: client as never, secretArn: ARN, now: c.now });
  expect(await inRequest(() => loader.get())).toBeUndefined();
  expect(await inRequest(() => loader.get())).toBeUndefined();
  expect(client.getSecretValue).toHaveBeenCalledTimes(1);
  c.advance(PUP_SECRETS_RETRY_INTERVAL_MS);
  expect(await inRequest(() => loader.get())).toEqual({ secrets: [A] });
});

test('no ARN: undefined, no call', async () => {
  const client = fakeClient([json([A])]);
  const loader = createPupSecretsLoader({ client: client as never, secretArn: '  ' });
  expect(await loader.get()).toBeUndefined();
  expect(client.getSecretValue).not.toHaveBeenCalled();
});

test('an empty list is loaded as such (not configured: the routes answer 503)', async () => {
  const loader = createPupSecretsLoader({ client: fakeClient([json([])]) as never, secretArn: ARN });
  expect(await loader.get()).toEqual({ secrets: [] });
});

test('each secret is handed to onLoaded (log redaction)', async () => {
  const seen: string[] = [];
  const loader = createPupSecretsLoader({ client: fakeClient([json([A, B], ROTATED)]) as never, secretArn: ARN, onLoaded: (s) => seen.push(s) });
  await loader.get();
  expect(seen).toEqual([A, B]);
});

describe('unusable secret values are refused with a sentence that quotes no secret', () => {
  test.each([
    ['not JSON', 'whsec_plain'],
    ['no secrets array', '{"current":"x"}'],
    ['a non-string entry', '{"secrets":[42]}'],
    ['a malformed secret', '{"secrets":["whsec_!!"]}'],
    ['three secrets', JSON.stringify({ secrets: [A, B, C], rotatedAt: ROTATED })],
    ['two secrets without rotatedAt', JSON.stringify({ secrets: [A, B] })],
    ['a rotatedAt without a zone', JSON.stringify({ secrets: [A, B], rotatedAt: '2026-11-30T12:00:00' })],
    ['a rotatedAt that is a number', JSON.stringify({ secrets: [A, B], rotatedAt: 1 })],
  ])('%s', async (_label, text) => {
    expect(() => parsePupSecretString(text)).toThrow();
    const lines: string[] = [];
    const loader = createPupSecretsLoader({ client: fakeClient([{ SecretString: text }]) as never, secretArn: ARN, log: rawLog(lines) });
    expect(await loader.get()).toBeUndefined();
    const logged = lines.join('\n');
    expect(logged).toContain('pup_secrets_unavailable');
    for (const secret of [A, B, C]) expect(logged).not.toContain(secret.slice(6, 30));
    expect(logged).not.toContain('whsec_!!');
  });
});

test('no log line holds a secret, on success or failure', async () => {
  const lines: string[] = [];
  const log = rawLog(lines);
  const c = clock();
  const loader = createPupSecretsLoader({
    client: fakeClient([json([A, B], ROTATED), awsError('ThrottlingException')]) as never,
    secretArn: ARN,
    now: c.now,
    log,
  });
  await loader.get();
  c.advance(PUP_SECRETS_REFRESH_MS);
  await loader.get();
  await new Promise((done) => setImmediate(done));
  expect(lines.length).toBeGreaterThanOrEqual(2);
  for (const secret of [A, B]) expect(lines.join('\n')).not.toContain(secret.slice(6, 30));
});

describe('deadlines', () => {
  test('a stalled first read does not hold a request past its deadline: it answers "not configured" (503) in time', async () => {
    const client = { getSecretValue: jest.fn(() => new Promise<never>(() => undefined)) };
    const loader = createPupSecretsLoader({ client, secretArn: ARN });
    const started = Date.now();
    expect(await runWithDeadline(Date.now() + 50, () => loader.get())).toBeUndefined();
    // Bounded by the request's deadline, not by the read (which never settles).
    expect(Date.now() - started).toBeLessThan(5_000);
  });
});
