/**
 * The table "Which tests check which rule" of docs/testing.md is written by
 * test/tools/rule-table.mjs from the rule ids of docs/contract/*.md and the test titles that name
 * them. This file runs the script as a reviewer would and fails, naming the command to run, when:
 * - the page is not what the script would write (a title gained or lost an id, a rule was added);
 * - a test title names an id that no page of the contract defines (a typo, or a retired rule);
 * - a rule that no title names has no note in test/tools/rule-notes.json saying why, or a note
 *   belongs to no rule.
 * It also pins how the script reads titles, on a small fixture.
 *
 * Deliberately not here: whether a title's test really checks the rule it names (a reviewer's
 * judgement), and the hand-written prose around the table.
 */
import { spawnSync } from 'node:child_process';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

const ROOT = resolve(__dirname, '../..');
const SCRIPT = join(ROOT, 'test/tools/rule-table.mjs');
const REGENERATE = 'node test/tools/rule-table.mjs';

interface Analysis {
  rows: { id: string; checkedBy: string[]; note: string; retired: boolean }[];
  unknownIds: { id: string; file: string; line: number; title: string }[];
  missingNotes: string[];
  staleNotes: string[];
  errors: string[];
  upToDate: boolean;
  difference?: string;
}

function run(args: string[], input?: string) {
  return spawnSync(process.execPath, args, { cwd: ROOT, input, encoding: 'utf8', timeout: 60_000, maxBuffer: 64 * 1024 * 1024 });
}

let analysis: Analysis;

beforeAll(() => {
  const result = run([SCRIPT, '--json']);
  if (result.status !== 0) throw new Error(`${REGENERATE} --json failed (${result.status}):\n${result.stderr}`);
  analysis = JSON.parse(result.stdout) as Analysis;
});

test('no test title names an id the contract does not define', () => {
  const lines = analysis.unknownIds.map((u) => `${u.file}:${u.line}: ${u.id} in ${JSON.stringify(u.title)}`);
  expect({ unknownIds: lines, hint: 'fix the title, or define the rule in docs/contract' }).toEqual({ unknownIds: [], hint: expect.any(String) });
});

test('every rule is named by a test title or has a note in test/tools/rule-notes.json saying why not', () => {
  expect({ missingNotes: analysis.missingNotes, hint: 'name the rule in the title of the test that checks it, or add a note' }).toEqual({
    missingNotes: [],
    hint: expect.any(String),
  });
  expect({ staleNotes: analysis.staleNotes, hint: 'test/tools/rule-notes.json has notes for ids the contract does not define' }).toEqual({
    staleNotes: [],
    hint: expect.any(String),
  });
});

test(`docs/testing.md holds the table that ${REGENERATE} writes`, () => {
  expect(analysis.errors).toEqual([]);
  if (!analysis.upToDate) {
    throw new Error(`The rule table of docs/testing.md is out of date. Run \`${REGENERATE}\` and commit the result.\n${analysis.difference ?? ''}`);
  }
  const check = run([SCRIPT, '--check']);
  expect({ status: check.status, stderr: check.stderr }).toEqual({ status: 0, stderr: '' });
});

test('the script reads titles in every form the tests use, and only ids of the contract’s areas', () => {
  const fixture = [
    "describe('DEL-OUT-3: a block', () => {",
    "  it('HTTP-2, HTTP-6: two ids', () => {});",
    "  test.each([1, 2])('MCP-10: %s with each', () => {});",
    "  it.skip('TOOL-7: skipped', () => {});",
    "  test.concurrent.each`a`('LIM-1: tagged each', () => {});",
    '  it(`EV-SUB-3: ${"template"} literal`, () => {});',
    "  it('SHA-256 and UTF-8 are not rules; STORE-2 mid-title is', () => {});",
    '  it(name, () => {});',
    "  expect(/x/.test('not a title'));",
    '});',
    'const suite = RUN ? describe : () => undefined;',
    "suite('CLI-1: an alias of describe', () => {});",
  ].join('\n');
  const probe = [
    `import { titlesOf, idsIn } from ${JSON.stringify(pathToFileURL(SCRIPT).href)};`,
    "let text = '';",
    "process.stdin.on('data', (d) => (text += d)).on('end', () => {",
    "  const areas = new Set(['DEL', 'HTTP', 'MCP', 'TOOL', 'LIM', 'EV', 'STORE', 'CLI']);",
    "  const titles = titlesOf('fixture.test.ts', text).map(({ title }) => ({ title, ids: idsIn(title, areas) }));",
    '  process.stdout.write(JSON.stringify(titles));',
    '});',
  ].join('\n');
  const result = run(['--input-type=module', '-e', probe], fixture);
  expect(result.stderr).toBe('');
  expect(JSON.parse(result.stdout)).toEqual([
    { title: 'DEL-OUT-3: a block', ids: ['DEL-OUT-3'] },
    { title: 'HTTP-2, HTTP-6: two ids', ids: ['HTTP-2', 'HTTP-6'] },
    { title: 'MCP-10: %s with each', ids: ['MCP-10'] },
    { title: 'TOOL-7: skipped', ids: ['TOOL-7'] },
    { title: 'LIM-1: tagged each', ids: ['LIM-1'] },
    { title: 'EV-SUB-3: ${"template"} literal', ids: ['EV-SUB-3'] },
    { title: 'SHA-256 and UTF-8 are not rules; STORE-2 mid-title is', ids: ['STORE-2'] },
    { title: 'CLI-1: an alias of describe', ids: ['CLI-1'] },
  ]);
});
