/**
 * No source line in lambda/, lib/ or bin/ is over 160 characters.
 *
 * Biome formats code at 160 columns but leaves string literals and comments as they are, so a long
 * message or comment passes `biome check`; this test is what holds them to the width. It reads the
 * files git tracks, so a build output or a scratch file in the worktree does not count.
 *
 * Deliberately not here: test/ and docs/ (tables of cases and prose read better unwrapped), and how
 * a line is wrapped (string pieces joined with `+`, comments on several lines: the value is the same).
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';

const ROOT = resolve(__dirname, '../..');
const FOLDERS = ['lambda', 'lib', 'bin'];
const MAX_CHARS = 160;

/** Each line over the width, as `file:line (N characters)`; length counts UTF-16 code units (a character outside the BMP counts twice). */
export function longLines(path: string, source: string, max = MAX_CHARS): string[] {
  return source.split('\n').flatMap((line, i) => (line.length > max ? [`${path}:${i + 1} (${line.length} characters)`] : []));
}

function trackedSources(): string[] {
  const out = execFileSync('git', ['ls-files', '-z', '--', ...FOLDERS], { cwd: ROOT, encoding: 'utf8' });
  return out.split('\0').filter((path) => /\.(ts|mjs|cjs)$/.test(path));
}

describe('line length', () => {
  test('longLines names each file:line over the width, and nothing else', () => {
    const source = ['short', 'x'.repeat(MAX_CHARS), 'y'.repeat(MAX_CHARS + 1), ''].join('\n');
    expect(longLines('lambda/a.ts', source)).toEqual([`lambda/a.ts:3 (${MAX_CHARS + 1} characters)`]);
  });

  test(`no tracked source line in ${FOLDERS.join('/, ')}/ is over ${MAX_CHARS} characters`, () => {
    const files = trackedSources();
    expect(files.length).toBeGreaterThan(50);
    const found = files.flatMap((path) => longLines(path, readFileSync(join(ROOT, path), 'utf8')));
    expect(found).toEqual([]);
  });
});
