/**
 * test/tools/decode-stack.mjs, as docs/performance.md tells operators to use it: a small entry that throws is
 * bundled with the stack's options (lib/bundling.ts: minified, linked map without sources), run
 * without --enable-source-maps as on Lambda, and its stack trace, which points into the minified
 * index.js, is decoded back to the TypeScript file, line and column. Bad input gets a clear error.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { lambdaBundle } from '../../lib/bundling';
import { buildLambdaBundle, type BuiltBundle } from '../bench/lambda-bundles';

const ROOT = resolve(__dirname, '../..');
const SCRIPT = join(ROOT, 'test/tools/decode-stack.mjs');

// The error is made on line 4: the line the decoded trace must name.
const THROWER = [
  'export function deepInside(value: number): number {',
  '  const doubled = value * 2;',
  '  if (doubled > 10) {',
  '    throw new Error(`too big: ${doubled}`);',
  '  }',
  '  return doubled;',
  '}',
  'export const handler = () => deepInside(21);',
  '',
].join('\n');

let dir: string;
let bundle: BuiltBundle;
let stack: string;

function decode(args: string[], input?: string) {
  return spawnSync(process.execPath, [SCRIPT, ...args], { input, encoding: 'utf8', timeout: 20_000 });
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'dm-dot-decode-'));
  mkdirSync(join(dir, 'src'));
  writeFileSync(join(dir, 'src', 'thrower.ts'), THROWER);
  bundle = await buildLambdaBundle(join(dir, 'asset'), { file: join(dir, 'src', 'thrower.ts') }, lambdaBundle());
  const run = spawnSync(process.execPath, ['-e', `try { require(${JSON.stringify(bundle.file)}).handler() } catch (e) { process.stdout.write(e.stack) }`], {
    encoding: 'utf8',
    env: { PATH: process.env.PATH ?? '' },
  });
  stack = run.stdout;
}, 60_000);

afterAll(() => rmSync(dir, { recursive: true, force: true }));

test('without --enable-source-maps the trace points into the minified bundle', () => {
  expect(stack).toContain('too big: 42');
  expect(stack).toMatch(/index\.js:1:\d+/);
  expect(stack).not.toContain('thrower.ts');
});

test('decoded, it names the TypeScript source, line and column of the throw', () => {
  const result = decode([`${bundle.file}.map`], stack);
  expect(result.status).toBe(0);
  expect(result.stdout).toContain('too big: 42');
  expect(result.stdout).toMatch(/src\/thrower\.ts:4:\d+/);
  expect(result.stdout).not.toMatch(/index\.js:1:\d+/);
});

test('the trace may come from a file, and lines the map does not cover stay as they were', () => {
  const file = join(dir, 'trace.txt');
  const foreign = '    at Module._compile (node:internal/modules/cjs/loader:1554:14)';
  writeFileSync(file, `${stack}\n${foreign}\n`);
  const result = decode([`${bundle.file}.map`, file]);
  expect(result.status).toBe(0);
  expect(result.stdout).toMatch(/src\/thrower\.ts:4:\d+/);
  expect(result.stdout).toContain(foreign);
});

test('several maps: frames of each file are decoded by its own map (the MCP asset has index.js and mcp-storage.js)', async () => {
  const { build } = await import('esbuild');
  const other = join(dir, 'other-src', 'other.ts');
  mkdirSync(join(dir, 'other-src'));
  writeFileSync(other, "\nexport const handler = () => {\n  throw new Error('from the other file');\n};\n");
  const outfile = join(dir, 'asset', 'mcp-storage.js');
  await build({
    entryPoints: [other],
    bundle: true,
    platform: 'node',
    format: 'cjs',
    minify: true,
    sourcemap: 'linked',
    sourcesContent: false,
    outfile,
    logLevel: 'warning',
  });
  const run = spawnSync(process.execPath, ['-e', `try { require(${JSON.stringify(outfile)}).handler() } catch (e) { process.stdout.write(e.stack) }`], {
    encoding: 'utf8',
  });
  expect(run.stdout).toMatch(/mcp-storage\.js:1:\d+/);
  const result = decode([`${bundle.file}.map`, `${outfile}.map`], `${stack}\n${run.stdout}`);
  expect(result.status).toBe(0);
  expect(result.stdout).toMatch(/src\/thrower\.ts:4:\d+/);
  expect(result.stdout).toMatch(/other-src\/other\.ts:3:\d+/);
  expect(result.stdout).not.toMatch(/(index|mcp-storage)\.js:1:\d+/);
});

test('two trace files: a clear error, exit 2', () => {
  const result = decode([`${bundle.file}.map`, join(dir, 'a.txt'), join(dir, 'b.txt')]);
  expect(result.status).toBe(2);
  expect(result.stderr).toContain('one stack trace file at most');
});

test('no map given: usage on stderr, exit 2', () => {
  const result = decode([], 'x');
  expect(result.status).toBe(2);
  expect(result.stderr).toMatch(/missing the source map[\s\S]*usage:/);
});

test('a file that is not a source map: a clear error, exit 2', () => {
  const result = decode([bundle.file], stack);
  expect(result.status).toBe(2);
  expect(result.stderr).toMatch(/cannot read the source map|is not a version 3 source map/);
});

test('a map that does not exist: a clear error, exit 2', () => {
  const result = decode([join(dir, 'missing.map')], stack);
  expect(result.status).toBe(2);
  expect(result.stderr).toContain('cannot read the source map');
});
