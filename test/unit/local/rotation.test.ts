/**
 * A local key rotation, in the order that keeps every key working (lambda/local/runtime.ts): the
 * server serves the new key before the `api-key` file shows it, and a file that cannot be written
 * undoes the rotation. The key file's writer is wrapped so the test looks at the server at the
 * very moment the file holds the new key (the race end to end is too narrow to catch reliably).
 */
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { localSettings } from '../../../lambda/config/settings';
import { keyHashOf } from '../../../lambda/core/access';
import { startLocal, type LocalRuntime } from '../../../lambda/local/runtime';
import type { Logger } from '../../../lambda/ports';
import { modernBody, modernHeaders } from '../../support/app';
import { ROOT } from '../../support/paths';

const hooks: { afterWrite?: (key: string) => Promise<void>; failWrite?: boolean } = {};

jest.mock('../../../lambda/adapters/state-files', () => {
  const actual = jest.requireActual('../../../lambda/adapters/state-files');
  return {
    ...actual,
    rotateApiKeyFile: async (stateDir: string, key: string) => {
      if (hooks.failWrite) throw new Error('disk full (test)');
      const written = await actual.rotateApiKeyFile(stateDir, key);
      await hooks.afterWrite?.(written.key);
      return written;
    },
  };
});

const silent: Logger = { info: () => undefined, warn: () => undefined, error: () => undefined };

let stateDir: string;
let runtime: LocalRuntime;
beforeEach(async () => {
  stateDir = await mkdtemp(join(tmpdir(), 'dmdot-rotation-'));
  const settings = localSettings({ HOST: '127.0.0.1', PORT: '0', DMDOT_STATE_DIR: stateDir }, { projectRoot: ROOT });
  runtime = await startLocal({ settings, log: silent, announce: () => undefined });
});
afterEach(async () => {
  hooks.afterWrite = undefined;
  hooks.failWrite = false;
  await runtime.stop();
  await rm(stateDir, { recursive: true, force: true });
});

const host = () => `127.0.0.1:${runtime.port}`;
const fileKey = async () => (await readFile(join(stateDir, 'api-key'), 'utf8')).trim();

/** tools/list with `key`, straight into the app the server serves now. */
async function listWith(key: string): Promise<number> {
  const url = `http://${host()}/mcp?key=${encodeURIComponent(key)}`;
  const request = new Request(url, { method: 'POST', headers: modernHeaders('tools/list'), body: modernBody('tools/list') });
  return (await runtime.app().handle(request, { host: host() })).status;
}

async function rotate(): Promise<{ status: number; body: any }> {
  const token = (await readFile(join(stateDir, 'admin-token'), 'utf8')).trim();
  const response = await fetch(`http://${host()}/admin/key`, { method: 'POST', headers: { authorization: `Bearer ${token}` } });
  return { status: response.status, body: await response.json() };
}

test('HTTP-KEY-ROT-2: the moment the api-key file holds the new key, the server accepts it', async () => {
  const old = await fileKey();
  expect(await listWith(old)).toBe(200);
  const seen: number[] = [];
  hooks.afterWrite = async (key) => {
    seen.push(await listWith(key));
  };
  expect((await rotate()).status).toBe(200);
  expect(seen).toEqual([200]);
  expect(await listWith(await fileKey())).toBe(200);
  expect(await listWith(old)).toBe(401);
});

test('HTTP-KEY-ROT-2: a key file that cannot be written undoes the rotation: the old key stays in force everywhere', async () => {
  const old = await fileKey();
  hooks.failWrite = true;
  const refused = await rotate();
  expect(refused.status).toBe(503);
  expect(await fileKey()).toBe(old);
  expect(await listWith(old)).toBe(200);
  expect((await runtime.db.store.getDeployment())?.keyHash).toBe(keyHashOf(old));
});
