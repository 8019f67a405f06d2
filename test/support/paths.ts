/**
 * Where the repository is, for tests that read sources, spawn entry points or build bundles.
 * One definition, so a test file can move between folders without its paths going wrong.
 */
import { resolve } from 'node:path';
import { localSettings, type LocalSettings } from '../../lambda/config/settings';

export const ROOT = resolve(__dirname, '..', '..');

/** The local runtime's settings as `npm start` reads them from an empty environment, with overrides. */
export function testLocalSettings(overrides: Partial<LocalSettings> = {}): LocalSettings {
  return { ...localSettings({}, { projectRoot: ROOT }), ...overrides };
}
