/**
 * Which layer of lambda/ may import which, as one table, checked over every source file.
 *
 * A layer is the first folder under lambda/ (core, config, operator, adapters, mcp, http,
 * handlers, local, cli); the files at lambda/'s root are `ports` (ports.ts) and `support` (log,
 * metrics, version). The rules the table encodes:
 * - the core is pure: it knows the ports it talks through and nothing of AWS, Lambda, files or
 *   the network;
 * - adapters implement ports and know the core's constants, never the protocol layers or config;
 * - the protocol layers (mcp, http) know the core and ports, never an adapter;
 * - the composition roots (handlers for AWS, local for one machine, cli) wire the rest together,
 *   and none of them reaches into another;
 * - nothing imports an entry point (the modules a Lambda, `npm start` or the CLI runs).
 *
 * Imports are read with the TypeScript pre-processor, so static, type-only, side-effect,
 * re-export, require and dynamic imports all count and comments do not.
 *
 * No import cycle either, inside a layer or across layers: a circle means two modules that
 * cannot be read (or loaded) one without the other, so one of them holds what both need.
 *
 * Deliberately not here: how a layer arranges its own files beyond having no circle, and test files.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { basename, dirname, join, relative, resolve, sep } from 'node:path';
import * as ts from 'typescript';

const LAMBDA_DIR = resolve(__dirname, '../../lambda');

type Layer = 'core' | 'ports' | 'config' | 'operator' | 'adapters' | 'mcp' | 'http' | 'support' | 'handlers' | 'local' | 'cli';

/** Layer → the other layers it may import. */
export const MAY_IMPORT: Record<Layer, readonly Layer[]> = {
  core: ['ports'],
  ports: [],
  config: ['core'],
  support: ['ports'],
  operator: ['core', 'ports'],
  adapters: ['core', 'ports'],
  mcp: ['core', 'ports'],
  http: ['core', 'ports', 'mcp'],
  handlers: ['core', 'ports', 'config', 'adapters', 'mcp', 'http', 'support'],
  local: ['core', 'ports', 'config', 'operator', 'adapters', 'mcp', 'http', 'support'],
  cli: ['core', 'ports', 'config', 'operator', 'adapters', 'support'],
};

/** Packages a layer may not import: AWS and Lambda belong to adapters and composition roots. */
const AWS = [/^@aws-sdk\//, /^@smithy\//, /^aws-lambda(\/|$)/, /^@middy\//, /^aws4$/];
const IO = [/^(node:)?(http|https|net|tls|dns|fs|child_process)(\/|$)/];
const MCP_SDK = [/^@modelcontextprotocol\//];
const DATABASE = [/^lmdb$/];
const FORBIDDEN_PACKAGES: Record<Layer, RegExp[]> = {
  core: [...AWS, ...IO, ...MCP_SDK, ...DATABASE],
  ports: [...AWS, ...IO, ...MCP_SDK, ...DATABASE],
  config: [...AWS, ...MCP_SDK, ...DATABASE],
  support: [...AWS, ...MCP_SDK, ...DATABASE],
  operator: [...AWS, ...IO, ...MCP_SDK, ...DATABASE],
  adapters: [...MCP_SDK],
  mcp: [...AWS, ...IO, ...DATABASE],
  http: [...AWS, ...DATABASE],
  handlers: [...DATABASE],
  local: [...AWS],
  cli: [...MCP_SDK],
};

/** The modules something outside runs: a Lambda handler, `npm start`, the CLI bundle and its launcher. */
export const ENTRY_POINTS = ['handlers/mcp.ts', 'handlers/delivery.ts', 'handlers/reconciler.ts', 'local/main.ts', 'cli/entry.ts', 'cli/dm-dot.mjs'];

const SUPPORT_FILES = new Set(['log', 'metrics', 'version']);

/** The layer of a path relative to lambda/ (undefined outside lambda/, e.g. package.json). */
function layerOf(relativePath: string): Layer | undefined {
  if (relativePath.startsWith('..')) return undefined;
  const [first, ...rest] = relativePath.split(sep);
  if (rest.length === 0) {
    const name = withoutExtension(basename(first ?? ''));
    if (name === 'ports') return 'ports';
    if (SUPPORT_FILES.has(name)) return 'support';
    return undefined;
  }
  return first as Layer;
}

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return /\.(c|m)?(t|j)sx?$/.test(entry.name) ? [path] : [];
  });
}

function importsOf(source: string): string[] {
  return ts.preProcessFile(source, true, true).importedFiles.map((file) => file.fileName);
}

function withoutExtension(path: string): string {
  return path.replace(/\.(c|m)?(t|j)sx?$/, '');
}

/** Why `specifier`, imported by `fromFile` (absolute), breaks the table; undefined when it does not. */
export function violation(specifier: string, fromFile: string): string | undefined {
  const from = layerOf(relative(LAMBDA_DIR, fromFile));
  if (from === undefined) return `${relative(LAMBDA_DIR, fromFile)} is in no layer of the table`;
  if (!specifier.startsWith('.')) {
    const pattern = FORBIDDEN_PACKAGES[from].find((p) => p.test(specifier));
    return pattern ? `imports ${specifier} (no ${from} module may)` : undefined;
  }
  const target = relative(LAMBDA_DIR, resolve(dirname(fromFile), specifier));
  if (ENTRY_POINTS.some((entry) => withoutExtension(entry) === withoutExtension(target.split(sep).join('/')))) {
    return `imports the entry point ${specifier}`;
  }
  const to = layerOf(target);
  if (to === undefined || to === from) return undefined;
  return MAY_IMPORT[from].includes(to) ? undefined : `imports ${specifier} (${from} may not import ${to})`;
}

function violationsIn(source: string, fromFile: string): string[] {
  return importsOf(source).flatMap((specifier) => {
    const why = violation(specifier, fromFile);
    return why ? [why] : [];
  });
}

describe('the layer table', () => {
  const files = sourceFiles(LAMBDA_DIR);

  test('every source file under lambda/ belongs to a layer of the table', () => {
    const outside = files.map((file) => relative(LAMBDA_DIR, file)).filter((path) => layerOf(path) === undefined || !(layerOf(path)! in MAY_IMPORT));
    expect(outside).toEqual([]);
  });

  test('every layer of the table has source files, and every entry point exists', () => {
    const layers = new Set(files.map((file) => layerOf(relative(LAMBDA_DIR, file))));
    expect([...layers].sort()).toEqual(Object.keys(MAY_IMPORT).sort());
    const paths = new Set(files.map((file) => relative(LAMBDA_DIR, file).split(sep).join('/')));
    expect(ENTRY_POINTS.filter((entry) => !paths.has(entry))).toEqual([]);
  });

  test('LOCAL-5: no source file imports a layer or a package its row does not allow, nor an entry point', () => {
    const found = files.flatMap((file) => violationsIn(readFileSync(file, 'utf8'), file).map((why) => `${relative(LAMBDA_DIR, file)} ${why}`));
    expect(found).toEqual([]);
  });
});

/** Module (relative to lambda/, no extension) -> the modules of ours it imports; packages are left out. */
function importGraph(files: Array<{ path: string; source: string }>): Map<string, string[]> {
  const known = new Set(files.map((file) => withoutExtension(relative(LAMBDA_DIR, file.path))));
  const graph = new Map<string, string[]>();
  for (const file of files) {
    const from = withoutExtension(relative(LAMBDA_DIR, file.path));
    const targets = importsOf(file.source)
      .filter((specifier) => specifier.startsWith('.'))
      .map((specifier) => withoutExtension(relative(LAMBDA_DIR, resolve(dirname(file.path), specifier))))
      .map((target) => (known.has(target) ? target : join(target, 'index')))
      .filter((target) => known.has(target));
    graph.set(from, [...new Set(targets)]);
  }
  return graph;
}

/** Every import cycle, each as its modules in import order starting from the smallest name (Tarjan's components). */
export function importCycles(graph: Map<string, string[]>): string[][] {
  let next = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const components: string[][] = [];
  const visit = (node: string) => {
    index.set(node, next);
    low.set(node, next);
    next++;
    stack.push(node);
    onStack.add(node);
    for (const to of graph.get(node) ?? []) {
      if (!index.has(to)) {
        visit(to);
        low.set(node, Math.min(low.get(node)!, low.get(to)!));
      } else if (onStack.has(to)) {
        low.set(node, Math.min(low.get(node)!, index.get(to)!));
      }
    }
    if (low.get(node) === index.get(node)) {
      const component: string[] = [];
      let member: string;
      do {
        member = stack.pop()!;
        onStack.delete(member);
        component.push(member);
      } while (member !== node);
      const selfImport = (graph.get(node) ?? []).includes(node);
      if (component.length > 1 || selfImport) components.push(component.sort());
    }
  };
  for (const node of [...graph.keys()].sort()) if (!index.has(node)) visit(node);
  return components;
}

describe('no import cycle', () => {
  test('no module of lambda/ reaches itself through its imports (type-only and dynamic imports count)', () => {
    const files = sourceFiles(LAMBDA_DIR).map((path) => ({ path, source: readFileSync(path, 'utf8') }));
    const cycles = importCycles(importGraph(files)).map((members) => members.join(' <-> '));
    expect(cycles).toEqual([]);
  });

  test('the cycle finder finds a circle of three, a self-import and none in a chain', () => {
    const graph = new Map([
      ['a', ['b']],
      ['b', ['c']],
      ['c', ['a', 'd']],
      ['d', ['e']],
      ['e', []],
      ['s', ['s']],
    ]);
    expect(importCycles(graph)).toEqual([['a', 'b', 'c'], ['s']]);
    expect(
      importCycles(
        new Map([
          ['x', ['y']],
          ['y', []],
        ]),
      ),
    ).toEqual([]);
  });

  test('the graph resolves relative specifiers to files, folders to their index, and leaves packages out', () => {
    const at = (path: string) => join(LAMBDA_DIR, path);
    const graph = importGraph([
      { path: at('cli/operator.ts'), source: "import type { X } from './local/operator';\nimport { z } from 'zod/mini';" },
      { path: at('cli/local/operator.ts'), source: "import type { Operator } from '../operator';\nconst e = await import('../../adapters/embedded');" },
      { path: at('adapters/embedded/index.ts'), source: '' },
    ]);
    expect(graph.get('cli/operator')).toEqual(['cli/local/operator']);
    expect(graph.get('cli/local/operator')).toEqual(['cli/operator', 'adapters/embedded/index']);
    expect(importCycles(graph)).toEqual([['cli/local/operator', 'cli/operator']]);
  });
});

describe('the checker itself', () => {
  const at = (path: string) => join(LAMBDA_DIR, path);
  const CORE_FILE = at('core/example.ts');
  const VALID = [
    "import { createHash } from 'node:crypto';",
    "import type { Store } from '../ports';",
    "import { Limits } from './protocol';",
    "import * as z from 'zod/mini';",
  ].join('\n');

  test('the valid fixture passes', () => {
    expect(violationsIn(VALID, CORE_FILE)).toEqual([]);
  });

  test.each([
    ["import { DynamoDBClient } from '@aws-sdk/client-dynamodb';", '@aws-sdk'],
    ["import type { SQSEvent } from 'aws-lambda';", 'aws-lambda'],
    ["import middy from '@middy/core';", '@middy'],
    ["import { request } from 'node:http';", 'node:http'],
    ["import { request } from 'http';", 'http'],
    ["import https from 'node:https';", 'node:https'],
    ["import { connect } from 'node:net';", 'node:net'],
    ["import { connect } from 'tls';", 'tls'],
    ["import { lookup } from 'dns/promises';", 'dns/promises'],
    ["import { readFileSync } from 'node:fs';", 'node:fs'],
    ["import { readFile } from 'fs/promises';", 'fs/promises'],
    ["import { open } from 'lmdb';", 'lmdb'],
    ["import { McpServer } from '@modelcontextprotocol/server';", 'the MCP SDK'],
    ["import { DynamoDbStore } from '../adapters/dynamodb-store';", 'adapters'],
    ["import { mcpLambdaSettings } from '../config/settings';", 'config'],
    ["import { handler } from '../handlers/delivery';", 'handlers'],
    ["import { start } from '../local/runtime';", 'local'],
    ["import { app } from '../http/app';", 'http layer'],
    ["import { server } from '../mcp/server';", 'mcp layer'],
    ["import { createLogger } from '../log';", 'support'],
    ["export { DynamoDbStore } from '../adapters/dynamodb-store';", 'a re-export'],
    ["import '../adapters/dynamodb-store';", 'a side-effect import'],
    ["const fs = require('fs');", 'require'],
    ["const sqs = await import('@aws-sdk/client-sqs');", 'a dynamic import'],
    ["import {\n  request,\n} from 'node:https';", 'a multi-line import'],
  ])('core: flags %s (%s)', (line, _label) => {
    expect(violationsIn(`${VALID}\n${line}`, CORE_FILE)).toHaveLength(1);
  });

  test.each([
    ['adapters/x.ts', "import { createApp } from '../http/app';"],
    ['adapters/x.ts', "import { mcpLambdaSettings } from '../config/settings';"],
    ['adapters/embedded/x.ts', "import { createMcpEndpoint } from '../../mcp/server';"],
    ['mcp/x.ts', "import { DynamoDbStore } from '../adapters/dynamodb-store';"],
    ['http/x.ts', "import { SQSClient } from '@aws-sdk/client-sqs';"],
    ['operator/x.ts', "import { open } from 'lmdb';"],
    ['config/x.ts', "import { Store } from '../ports';"],
    ['handlers/x.ts', "import { startLocal } from '../local/runtime';"],
    ['local/x.ts', "import { mcpLambdaFromSettings } from '../handlers/mcp-lambda';"],
    ['cli/x.ts', "import { startLocal } from '../local/runtime';"],
    ['cli/commands/x.ts', "import { createApp } from '../../http/app';"],
    ['local/x.ts', "import './main';"],
    ['handlers/x.ts', "import { handler } from './mcp';"],
    ['cli/x.ts', "import './entry';"],
  ])('%s: flags %s', (file, line) => {
    expect(violationsIn(line, at(file))).toHaveLength(1);
  });

  test.each([
    ['adapters/embedded/x.ts', "import { Limits } from '../../core/protocol';\nimport type { Store } from '../../ports';\nimport { open } from 'lmdb';"],
    ['http/x.ts', "import { createMcpEndpoint } from '../mcp/server';\nimport type { McpHttpHandler } from '@modelcontextprotocol/server';"],
    ['cli/local/x.ts', "const embedded = await import('../../adapters/embedded');\nimport { localSettings } from '../../config/settings';"],
    [
      'local/x.ts',
      "import { createApp } from '../http/app';\nimport { openEmbeddedDatabase } from '../adapters/embedded';\nimport { createLogger } from '../log';",
    ],
    ['handlers/x.ts', "import { mcpLambdaFromSettings } from './mcp-lambda';\nimport { DynamoDbStore } from '../adapters/dynamodb-store';"],
  ])('%s: allows its row', (file, source) => {
    expect(violationsIn(source, at(file))).toEqual([]);
  });

  test('a comment mentioning a forbidden module is not an import', () => {
    expect(violationsIn(`${VALID}\n// import { readFileSync } from 'node:fs';`, CORE_FILE)).toEqual([]);
  });

  test('a module whose name only starts like a forbidden one is allowed', () => {
    expect(violationsIn("import x from 'fsevents-like';\nimport y from './http-date';", CORE_FILE)).toEqual([]);
  });
});
