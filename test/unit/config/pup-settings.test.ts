/**
 * The pup settings (lambda/config.ts): PUP_SIGNING_SECRETS, PUP_ROTATED_AT, PUP_MANIFEST_FILE and
 * the Lambda's PUP_MANIFEST_JSON, each refused at start with a SettingsError naming the setting
 * (the local runtime turns it into exit code 2; test/e2e/pup.test.ts checks that) and never
 * quoting a secret.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadPupManifest, loadSettings, parsePupSecrets, SettingsError } from '../../../lambda/config';

const secret = () => `whsec_${randomBytes(32).toString('base64')}`;

describe('PUP_SIGNING_SECRETS / PUP_ROTATED_AT', () => {
  test('unset: no secrets (the POST routes answer 503)', () => {
    expect(loadSettings({}).pup).toEqual({ secrets: { secrets: [] } });
  });

  test('one secret; two with a rotation time, current first, spaces trimmed', () => {
    const a = secret();
    const b = secret();
    expect(parsePupSecrets(` ${a} `, undefined)).toEqual({ secrets: [a] });
    expect(parsePupSecrets(`${a}, ${b}`, '2026-11-30T12:00:00Z')).toEqual({ secrets: [a, b], rotatedAt: Date.UTC(2026, 10, 30, 12) });
    expect(parsePupSecrets(a, '2026-11-30T13:00:00+01:00')).toEqual({ secrets: [a], rotatedAt: Date.UTC(2026, 10, 30, 12) });
  });

  test.each([
    ['a malformed secret', () => parsePupSecrets('whsec_bm90LWVub3VnaA==', undefined), /PUP_SIGNING_SECRETS/],
    ['two secrets without PUP_ROTATED_AT', () => parsePupSecrets(`${secret()},${secret()}`, undefined), /PUP_ROTATED_AT/],
    ['three secrets', () => parsePupSecrets(`${secret()},${secret()},${secret()}`, '2026-11-30T12:00:00Z'), /at most 2/],
    ['a rotation time without a zone', () => parsePupSecrets(secret(), '2026-11-30T12:00:00'), /PUP_ROTATED_AT/],
    ['a date without a time', () => parsePupSecrets(secret(), '2026-11-30'), /PUP_ROTATED_AT/],
    ['an impossible date', () => parsePupSecrets(secret(), '2026-02-31T12:00:00Z'), /PUP_ROTATED_AT/],
  ])('%s is a SettingsError naming the setting', (_label, run, name) => {
    expect(run).toThrow(SettingsError);
    expect(run).toThrow(name);
  });

  test('the message never quotes a secret', () => {
    const bad = 'whsec_bm90LWVub3VnaA==';
    try {
      parsePupSecrets(`${secret()},${bad}`, '2026-11-30T12:00:00Z');
      throw new Error('expected a SettingsError');
    } catch (error) {
      expect((error as Error).message).toMatch(/secret 2/);
      expect((error as Error).message).not.toContain('bm90LWVub3VnaA');
    }
  });
});

describe('PUP_MANIFEST_FILE / PUP_MANIFEST_JSON', () => {
  const dir = mkdtempSync(join(tmpdir(), 'dmdot-manifest-'));
  const file = (name: string, text: string) => {
    const path = join(dir, name);
    writeFileSync(path, text);
    return path;
  };

  test('unset: undefined (the default manifest is served)', () => {
    expect(loadPupManifest({})).toBeUndefined();
  });

  test('a JSON object file is kept byte for byte', () => {
    const text = '{ "name" : "x" }\n';
    expect(loadPupManifest({ PUP_MANIFEST_FILE: file('ok.json', text) })).toBe(text);
    expect(loadSettings({ PUP_MANIFEST_FILE: file('ok2.json', text) }).pup.manifest).toBe(text);
  });

  test('PUP_MANIFEST_JSON (the Lambda, from CDK context) is kept byte for byte', () => {
    expect(loadPupManifest({ PUP_MANIFEST_JSON: '{"name":"y"}' })).toBe('{"name":"y"}');
  });

  test.each([
    ['a missing file', () => ({ PUP_MANIFEST_FILE: join(dir, 'nope.json') }), /PUP_MANIFEST_FILE .* cannot be read/],
    ['a file that is not JSON', () => ({ PUP_MANIFEST_FILE: file('bad.json', '{"name":') }), /PUP_MANIFEST_FILE .* is not valid JSON/],
    ['a JSON array', () => ({ PUP_MANIFEST_FILE: file('array.json', '[1]') }), /must hold a JSON object/],
    ['inline JSON that is not an object', () => ({ PUP_MANIFEST_JSON: '"x"' }), /PUP_MANIFEST_JSON must hold a JSON object/],
    ['both set', () => ({ PUP_MANIFEST_FILE: file('both.json', '{}'), PUP_MANIFEST_JSON: '{}' }), /both set/],
  ])('%s is a SettingsError naming the setting', (_label, env, message) => {
    expect(() => loadSettings(env())).toThrow(SettingsError);
    expect(() => loadSettings(env())).toThrow(message);
  });
});
