/**
 * The Delivery Lambda stays small (docs/performance.md, cold start and bundle sizes): nothing reachable from
 * lambda/handlers/delivery.ts may import the MCP SDK, classic zod (`zod`, `zod/v4`; `zod/mini`
 * is fine), the HTTP app or the MCP server. Two checks: a walk of our own sources (read each
 * file, follow relative imports; type-only imports are erased and skipped), and what esbuild
 * actually puts in the bundle.
 */
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { build } from 'esbuild';

const ROOT = resolve(__dirname, '../..');
const FORBIDDEN_PACKAGES = [/^@modelcontextprotocol\//, /^zod$/, /^zod\/v4$/, /^zod\/v3$/, /^zod\/(v4\/)?classic(\/|$)/];
const FORBIDDEN_DIRS = ['lambda/http/', 'lambda/mcp/'];

/** Specifiers of value imports: `import … from`, side-effect `import '…'`, `export … from`, `import()`, `require()`. */
function specifiersOf(source: string): string[] {
  const found: string[] = [];
  const statement = /(?:^|[;\n])\s*(import|export)\s+(type\s+)?([^;'"]*?\bfrom\s+)?['"]([^'"]+)['"]/g;
  for (const match of source.matchAll(statement)) {
    const typeOnly = match[2] !== undefined;
    if (!typeOnly && (match[3] !== undefined || match[1] === 'import')) found.push(match[4]!);
  }
  for (const match of source.matchAll(/\b(?:import|require)\(\s*['"]([^'"]+)['"]\s*\)/g)) found.push(match[1]!);
  return found;
}

function resolveRelative(fromFile: string, specifier: string): string {
  const base = resolve(dirname(fromFile), specifier);
  for (const candidate of [base, `${base}.ts`, `${base}.tsx`, join(base, 'index.ts')]) {
    if (existsSync(candidate) && !candidate.endsWith('/') && /\.(ts|tsx|json)$/.test(candidate)) return candidate;
  }
  throw new Error(`cannot resolve ${specifier} from ${relative(ROOT, fromFile)}`);
}

function importGraph(entry: string): { files: string[]; packages: Map<string, string> } {
  const files = new Set<string>();
  const packages = new Map<string, string>();
  const pending = [resolve(ROOT, entry)];
  while (pending.length > 0) {
    const file = pending.pop()!;
    if (files.has(file)) continue;
    files.add(file);
    if (file.endsWith('.json')) continue;
    for (const specifier of specifiersOf(readFileSync(file, 'utf8'))) {
      if (specifier.startsWith('.')) pending.push(resolveRelative(file, specifier));
      else if (!packages.has(specifier)) packages.set(specifier, relative(ROOT, file));
    }
  }
  return { files: [...files].map((f) => relative(ROOT, f)).sort(), packages };
}

function violations(graph: ReturnType<typeof importGraph>): string[] {
  const bad: string[] = [];
  for (const [specifier, importer] of graph.packages) {
    if (FORBIDDEN_PACKAGES.some((p) => p.test(specifier))) bad.push(`${importer} imports ${specifier}`);
  }
  for (const file of graph.files) if (FORBIDDEN_DIRS.some((d) => file.startsWith(d))) bad.push(`reaches ${file}`);
  return bad;
}

test('the walker finds value imports and skips type-only ones', () => {
  const source = [
    "import a from './a';",
    "import type { B } from './b';",
    "import { type C, d } from './c';",
    "export { e } from './e';",
    "export type { F } from './f';",
    "import './side-effect';",
    "import {\n  g,\n  h,\n} from '@scope/pkg';",
    "const lazy = await import('./lazy');",
  ].join('\n');
  expect(specifiersOf(source).sort()).toEqual(['./a', './c', './e', './lazy', './side-effect', '@scope/pkg'].sort());
});

test('ARCH-8: the delivery handler never reaches the MCP SDK, classic zod, lambda/http or lambda/mcp', () => {
  const graph = importGraph('lambda/handlers/delivery.ts');
  // The walk really covers the worker: the core, the adapters and the entry's own factory.
  expect(graph.files).toEqual(
    expect.arrayContaining([
      'lambda/handlers/delivery-lambda.ts',
      'lambda/core/delivery.ts',
      'lambda/adapters/sqs-queue.ts',
      'lambda/adapters/guarded-https.ts',
    ]),
  );
  expect(violations(graph)).toEqual([]);
});

test('the check would catch it: the MCP handler does reach the SDK', () => {
  const graph = importGraph('lambda/handlers/mcp.ts');
  expect(violations(graph).some((v) => v.includes('@modelcontextprotocol/'))).toBe(true);
});

test('the esbuild bundle of the delivery handler holds no MCP SDK and no classic zod', async () => {
  const result = await build({
    absWorkingDir: ROOT,
    entryPoints: ['lambda/handlers/delivery.ts'],
    bundle: true,
    platform: 'node',
    target: 'node20',
    format: 'cjs',
    minify: true,
    write: false,
    metafile: true,
    logLevel: 'silent',
  });
  const inputs = Object.keys(result.metafile.inputs);
  expect(inputs.filter((i) => i.includes('node_modules/@modelcontextprotocol/'))).toEqual([]);
  expect(inputs.filter((i) => /node_modules\/zod\/(v4\/classic|v3|index\.)/.test(i))).toEqual([]);
  expect(inputs.filter((i) => i.startsWith('lambda/http/') || i.startsWith('lambda/mcp/'))).toEqual([]);
});
