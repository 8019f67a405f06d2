#!/usr/bin/env node
/**
 * Writes the table of docs/testing.md that says which test files check each rule of the contract.
 * Nothing in the table is written by hand: the rules come from docs/contract/*.md and the test
 * files from the test titles that name them.
 *
 *   node test/tools/rule-table.mjs           rewrites the table in docs/testing.md
 *   node test/tools/rule-table.mjs --check   exits 1, printing the first difference, when the
 *                                            page is not what the line above would write
 *   node test/tools/rule-table.mjs --json    prints what it found, as JSON, and writes nothing
 *
 * A rule is every identifier written in bold on a page of docs/contract (`**HTTP-9**`, as a
 * bullet, a table row or inside a bullet); the page's first `# ` heading is its title. A test
 * title is the first argument of `describe`, `it` or `test` (with `.skip`, `.only`,
 * `.concurrent`, `.todo`, `.failing`, and `.each(...)(...)`) when it is a string or a template
 * literal (read as written, `${...}` and all), in every `*.test.ts` under test/ and in the shared
 * suites (`*.contract.ts`, `*-suite.ts`) that test files run. A title names the rule ids it
 * contains, usually first: `'DEL-OUT-3: a put that failed ...'` or `'HTTP-2, HTTP-6: ...'`. A
 * shared suite is credited to the suite's file, and the table says which test files run it.
 *
 * The Note column comes from test/tools/rule-notes.json (`{"HTTP-7": "why ..."}`). It fails
 * (exit 1, nothing written) when a rule is named by no title and has no note, when a title names
 * an id the contract does not define, or when a note belongs to no rule.
 *
 * The TypeScript compiler (a devDependency already) parses the test files; nothing else is used.
 */
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
export const DOC = 'docs/testing.md';
export const NOTES = 'test/tools/rule-notes.json';
export const START = '<!-- rule-table:start -->';
export const END = '<!-- rule-table:end -->';
const COMMAND = 'node test/tools/rule-table.mjs';

const ID = '[A-Z][A-Z0-9]*(?:-[A-Z0-9]+)*-[0-9]+';
/** What is not searched for tests: installed packages, and the benchmark (no tests there). */
const SKIP_DIRS = new Set(['node_modules']);
const SKIP_PATHS = new Set(['test/bench', 'test/tools/node_modules']);

const posix = (path) => path.split(sep).join('/');

/** Numeric-aware order of ids and paths: DEL-PIPE-2 before DEL-PIPE-10. */
const collator = new Intl.Collator('en', { numeric: true });

// ---------------------------------------------------------------------------------------------
// The contract

/**
 * The pages of docs/contract in the order of the README's index (the README first), each with
 * its title and its rules in the order they appear.
 */
export function readContract(root = ROOT) {
  const dir = join(root, 'docs/contract');
  const files = readdirSync(dir).filter((f) => f.endsWith('.md'));
  const readme = files.includes('README.md') ? readFileSync(join(dir, 'README.md'), 'utf8') : '';
  const indexed = [...readme.matchAll(/^\| \[[^\]]*\]\(([a-z0-9-]+\.md)\)/gm)].map((m) => m[1]);
  const order = [...new Set(['README.md', ...indexed, ...files.sort()])].filter((f) => files.includes(f));

  const pages = [];
  const rules = new Map();
  const errors = [];
  for (const file of order) {
    const text = readFileSync(join(dir, file), 'utf8');
    const heading = /^# (.+)$/m.exec(text);
    if (!heading) errors.push(`docs/contract/${file} has no "# " heading to title it`);
    const page = { file: `docs/contract/${file}`, link: `contract/${file}`, title: heading ? heading[1].trim() : file, rules: [] };
    // Code spans and fenced blocks may show ids as examples; they define nothing.
    const prose = text.replace(/^```[\s\S]*?^```/gm, '').replace(/`[^`\n]*`/g, '');
    for (const m of prose.matchAll(new RegExp(`\\*\\*(${ID})\\*\\*( \\(retired\\))?`, 'g'))) {
      const id = m[1];
      if (rules.has(id)) {
        errors.push(`${id} is defined twice: in ${rules.get(id).page.file} and ${page.file}`);
        continue;
      }
      const rule = { id, page, retired: Boolean(m[2]) };
      rules.set(id, rule);
      page.rules.push(rule);
    }
    pages.push(page);
  }
  return { pages, rules, errors };
}

// ---------------------------------------------------------------------------------------------
// The test titles

const TEST_FUNCTIONS = new Set(['describe', 'it', 'test']);
const MODIFIERS = new Set(['skip', 'only', 'concurrent', 'todo', 'failing', 'each']);

/** `test`, `it.skip`, `test.concurrent.each`: the names along the callee, or undefined. */
function calleeChain(node, aliases) {
  const names = [];
  while (ts.isPropertyAccessExpression(node)) {
    names.unshift(node.name.text);
    node = node.expression;
  }
  if (!ts.isIdentifier(node)) return undefined;
  const root = TEST_FUNCTIONS.has(node.text) ? node.text : aliases.get(node.text);
  if (!root || !names.every((name) => MODIFIERS.has(name))) return undefined;
  return [root, ...names];
}

/**
 * Local names for a test function, such as
 * `const suite: ... = RUN_HERE ? describe : () => undefined` (a file whose suite runs only when
 * it is the file under test) or `const inNamespaces = works ? it : it.skip`: their titles are
 * read as titles of the function they stand for.
 */
function aliasesOf(source) {
  const aliases = new Map();
  const unwrap = (node) => {
    while (node && (ts.isParenthesizedExpression(node) || ts.isAsExpression(node) || ts.isSatisfiesExpression?.(node))) node = node.expression;
    return node;
  };
  const visit = (node) => {
    if (ts.isVariableDeclaration(node) && ts.isIdentifier(node.name) && node.initializer) {
      const init = unwrap(node.initializer);
      const branches = ts.isConditionalExpression(init) ? [init.whenTrue, init.whenFalse] : [init];
      for (const branch of branches.map(unwrap)) {
        const chain = calleeChain(branch, new Map());
        if (chain && !chain.includes('each')) aliases.set(node.name.text, chain[0]);
      }
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return aliases;
}

/** The title a call to a test function is given, or undefined when the call is not one. */
function titleOf(call, source, aliases) {
  let callee = call.expression;
  let each = false;
  if (ts.isCallExpression(callee)) {
    callee = callee.expression; // test.each(table)(title, fn)
    each = true;
  } else if (ts.isTaggedTemplateExpression(callee)) {
    callee = callee.tag; // test.each`table`(title, fn)
    each = true;
  }
  const chain = calleeChain(callee, aliases);
  if (!chain || each !== (chain.at(-1) === 'each')) return undefined;
  const first = call.arguments[0];
  if (!first) return undefined;
  if (ts.isStringLiteral(first) || ts.isNoSubstitutionTemplateLiteral(first)) return first.text;
  if (ts.isTemplateExpression(first)) return first.getText(source).slice(1, -1);
  return undefined;
}

/** Every test title of one file, with its line. */
export function titlesOf(path, text) {
  const source = ts.createSourceFile(path, text, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS);
  const aliases = aliasesOf(source);
  const titles = [];
  const visit = (node) => {
    if (ts.isCallExpression(node)) {
      const title = titleOf(node, source, aliases);
      if (title !== undefined) {
        const line = source.getLineAndCharacterOfPosition(node.getStart(source)).line + 1;
        titles.push({ title, line });
      }
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return titles;
}

const isShared = (path) => path.endsWith('.contract.ts') || path.endsWith('-suite.ts');
const isTestFile = (path) => path.endsWith('.test.ts') || isShared(path);

/** Every test file and shared suite under test/, as repository paths, sorted. */
export function testFiles(root = ROOT) {
  const out = [];
  const walk = (dir) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) {
        const rel = posix(relative(root, path));
        if (!SKIP_DIRS.has(entry.name) && !SKIP_PATHS.has(rel)) walk(path);
      } else if (entry.isFile() && isTestFile(entry.name)) {
        out.push(posix(relative(root, path)));
      }
    }
  };
  walk(join(root, 'test'));
  return out.sort(collator.compare);
}

/**
 * The test files that run each shared suite: those that call one of its `describe...` functions
 * (`describePupDoor(...)`), not those that only borrow a helper from it.
 */
function runnersOf(files, texts) {
  const runners = new Map();
  for (const suite of files.filter(isShared)) {
    const entries = [...texts.get(suite).matchAll(/^export function (describe\w*)/gm)].map((m) => m[1]);
    const calls = entries.map((name) => new RegExp(`\\b${name}\\s*\\(`));
    runners.set(
      suite,
      files.filter((file) => file.endsWith('.test.ts') && calls.some((call) => call.test(texts.get(file)))),
    );
  }
  return runners;
}

/**
 * The ids a title names: every id whose area (the part before its first `-`) is one the contract
 * uses, and every id of the list a title starts with (`ID, ID: ...`). Other words that look like
 * ids (`SHA-256`, `UTF-8`) are left alone.
 */
export function idsIn(title, areas) {
  const ids = new Set();
  for (const m of title.matchAll(new RegExp(`\\b${ID}\\b`, 'g'))) {
    if (areas.has(m[0].split('-')[0])) ids.add(m[0]);
  }
  const lead = new RegExp(`^\\s*(${ID}(?:\\s*(?:,|and)\\s*${ID})*)\\s*[:(]`).exec(title);
  if (lead) for (const m of lead[1].matchAll(new RegExp(ID, 'g'))) ids.add(m[0]);
  return [...ids];
}

// ---------------------------------------------------------------------------------------------
// The table

/** Everything the table is made of, and what is wrong with it. */
export function analyse(root = ROOT) {
  const contract = readContract(root);
  const errors = [...contract.errors];
  const areas = new Set([...contract.rules.keys()].map((id) => id.split('-')[0]));

  const files = testFiles(root);
  const texts = new Map(files.map((file) => [file, readFileSync(join(root, file), 'utf8')]));
  const runners = runnersOf(files, texts);

  /** id -> Set of files whose titles name it */
  const checkedBy = new Map();
  const unknown = [];
  let titleCount = 0;
  let titlesWithIds = 0;
  for (const file of files) {
    for (const { title, line } of titlesOf(file, texts.get(file))) {
      titleCount += 1;
      const ids = idsIn(title, areas);
      if (ids.length > 0) titlesWithIds += 1;
      for (const id of ids) {
        const rule = contract.rules.get(id);
        if (!rule || rule.retired) {
          unknown.push({ id, file, line, title, retired: Boolean(rule) });
          continue;
        }
        if (!checkedBy.has(id)) checkedBy.set(id, new Set());
        checkedBy.get(id).add(file);
      }
    }
  }
  for (const u of unknown) {
    errors.push(
      `${u.file}:${u.line}: the title names ${u.id}, which ${u.retired ? 'is retired' : 'no page of docs/contract defines'}: ${JSON.stringify(u.title)}`,
    );
  }

  const notesText = readFileSync(join(root, NOTES), 'utf8');
  let notes = {};
  try {
    notes = JSON.parse(notesText);
  } catch (error) {
    errors.push(`${NOTES} is not JSON: ${error.message}`);
  }
  const stale = Object.keys(notes).filter((id) => !contract.rules.has(id));
  for (const id of stale) errors.push(`${NOTES} has a note for ${id}, which no page of docs/contract defines`);
  for (const [id, note] of Object.entries(notes)) {
    if (typeof note !== 'string' || note.trim() === '') errors.push(`${NOTES}: the note for ${id} is not a sentence`);
  }

  const rows = [];
  const missingNotes = [];
  for (const rule of contract.rules.values()) {
    const by = [...(checkedBy.get(rule.id) ?? [])].sort(collator.compare);
    const note = typeof notes[rule.id] === 'string' ? notes[rule.id].trim() : '';
    if (by.length === 0 && !rule.retired && !note) missingNotes.push(rule.id);
    rows.push({ id: rule.id, page: rule.page.file, retired: rule.retired, checkedBy: by, note });
  }
  for (const id of missingNotes) {
    errors.push(`${id} is named by no test title and has no note in ${NOTES} saying why`);
  }

  const sharedRunners = Object.fromEntries([...runners].map(([suite, by]) => [suite, by.sort(collator.compare)]));
  return {
    pages: contract.pages.map((p) => ({ file: p.file, link: p.link, title: p.title, rules: p.rules.map((r) => r.id) })),
    rows,
    sharedRunners,
    files: files.length,
    titles: titleCount,
    titlesWithIds,
    unknownIds: unknown,
    missingNotes,
    staleNotes: stale,
    errors,
  };
}

const cell = (text) => text.replace(/\|/g, '\\|').replace(/\s*\n\s*/g, ' ');
const plural = (n, one, many) => `${n} ${n === 1 ? one : many}`;

/** Wraps prose at about 100 columns, as the rest of the page is. */
function wrap(text, width = 100) {
  const lines = [];
  let line = '';
  for (const word of text.split(/\s+/).filter(Boolean)) {
    if (line && line.length + 1 + word.length > width) {
      lines.push(line);
      line = word;
    } else {
      line = line ? `${line} ${word}` : word;
    }
  }
  if (line) lines.push(line);
  return lines.join('\n');
}

const list = (items) => (items.length <= 1 ? items.join('') : `${items.slice(0, -1).join(', ')} and ${items.at(-1)}`);

/** The text between the two markers (the markers excluded). */
export function renderTable(analysis) {
  const live = analysis.rows.filter((r) => !r.retired);
  const named = live.filter((r) => r.checkedBy.length > 0);
  const none = live.filter((r) => r.checkedBy.length === 0);
  const retired = analysis.rows.filter((r) => r.retired);
  const byId = new Map(analysis.rows.map((r) => [r.id, r]));

  const out = [];
  let intro =
    `The contract has ${plural(live.length, 'rule id', 'rule ids')}: ${named.length} ${named.length === 1 ? 'is' : 'are'} named by at least ` +
    `one test title, ${none.length} by none` +
    (none.length > 0 ? ` (${list(none.map((r) => r.id))})` : '') +
    '.';
  if (retired.length > 0) intro += ` ${plural(retired.length, 'rule is', 'rules are')} retired.`;
  out.push(wrap(intro));
  const shared = Object.entries(analysis.sharedRunners).filter(([, by]) => by.length > 0);
  if (shared.length > 0) {
    out.push('');
    out.push('Shared suites are credited to their own file; these test files run them:');
    out.push('');
    for (const [suite, by] of shared) out.push(wrap(`- \`${suite}\`: ${list(by.map((f) => `\`${f}\``))}`).replace(/\n/g, '\n  '));
  }
  for (const page of analysis.pages) {
    out.push('');
    out.push(`### [${page.title}](${page.link})`);
    out.push('');
    if (page.rules.length === 0) {
      out.push('This page defines no rule.');
      continue;
    }
    out.push('| Rule | Checked by | Note |');
    out.push('|---|---|---|');
    for (const id of page.rules) {
      const row = byId.get(id);
      const by = row.retired ? 'retired' : row.checkedBy.length > 0 ? row.checkedBy.map((f) => `\`${f}\``).join(', ') : 'not checked by a test';
      out.push(`| ${id} | ${by} |${row.note ? ` ${cell(row.note)} ` : ' '}|`);
    }
  }
  return `${out.join('\n')}\n`;
}

/** The whole page as this script writes it, from the page as it is. */
export function renderPage(current, analysis) {
  const start = current.indexOf(START);
  const end = current.indexOf(END);
  if (start < 0 || end < start) {
    throw new Error(`${DOC} has no "${START}" ... "${END}" pair of markers to write the table between`);
  }
  return `${current.slice(0, start + START.length)}\n${renderTable(analysis)}${current.slice(end)}`;
}

/** `undefined` when the two texts are equal, else the first line that differs, both ways. */
export function firstDifference(actual, expected) {
  if (actual === expected) return undefined;
  const a = actual.split('\n');
  const e = expected.split('\n');
  let i = 0;
  while (i < a.length && i < e.length && a[i] === e[i]) i += 1;
  const show = (line) => (line === undefined ? '(end of file)' : JSON.stringify(line));
  return `${DOC}:${i + 1} differs:\n  on the page:      ${show(a[i])}\n  would be written: ${show(e[i])}`;
}

function main(argv) {
  const check = argv.includes('--check');
  const json = argv.includes('--json');
  const bad = argv.filter((a) => a !== '--check' && a !== '--json');
  if (bad.length > 0) {
    process.stderr.write(`unknown argument ${bad[0]}\nusage: ${COMMAND} [--check | --json]\n`);
    return 2;
  }
  const analysis = analyse();
  const path = join(ROOT, DOC);
  const current = readFileSync(path, 'utf8');
  let expected;
  try {
    expected = renderPage(current, analysis);
  } catch (error) {
    analysis.errors.push(error.message);
  }
  if (json) {
    const difference = expected === undefined ? undefined : firstDifference(current, expected);
    process.stdout.write(`${JSON.stringify({ ...analysis, upToDate: expected !== undefined && !difference, difference }, null, 2)}\n`);
    return 0;
  }
  if (analysis.errors.length > 0) {
    process.stderr.write(`${analysis.errors.join('\n')}\n${DOC} was not ${check ? 'checked' : 'written'}.\n`);
    return 1;
  }
  if (check) {
    const difference = firstDifference(current, expected);
    if (difference) {
      process.stderr.write(`${difference}\nThe rule table of ${DOC} is out of date: run \`${COMMAND}\` and commit the result.\n`);
      return 1;
    }
    return 0;
  }
  if (expected !== current) writeFileSync(path, expected);
  const rows = analysis.rows.filter((r) => !r.retired);
  const named = rows.filter((r) => r.checkedBy.length > 0).length;
  process.stdout.write(
    `${DOC}: ${rows.length} rules, ${named} named by a test title, ${rows.length - named} by none` +
      ` (${analysis.titlesWithIds} of ${analysis.titles} titles in ${analysis.files} files name a rule)` +
      `${expected === current ? ', unchanged' : ', written'}\n`,
  );
  return 0;
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  process.exitCode = main(process.argv.slice(2));
}
