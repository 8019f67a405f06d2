/**
 * The core stays pure: nothing under lambda/core may import an AWS SDK, Lambda or middy module,
 * a network or file-system module of Node, or anything from the adapters, handlers, local
 * runtime, HTTP or MCP layers. Imports are read with the TypeScript pre-processor, so static,
 * type-only, side-effect, re-export, require and dynamic imports all count and comments do not.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import * as ts from 'typescript';

const LAMBDA_DIR = resolve(__dirname, '../../lambda');
const CORE_DIR = join(LAMBDA_DIR, 'core');

const FORBIDDEN_PACKAGES: RegExp[] = [
  /^@aws-sdk\//,
  /^aws-lambda(\/|$)/,
  /^@middy\//,
  /^(node:)?(http|https|net|tls|dns|fs)(\/|$)/,
];
const FORBIDDEN_LAYERS = ['adapters', 'handlers', 'local', 'http', 'mcp'];

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

/** Why `specifier`, imported by the file at `fromFile`, breaks the boundary; undefined when it does not. */
function violation(specifier: string, fromFile: string): string | undefined {
  if (FORBIDDEN_PACKAGES.some((pattern) => pattern.test(specifier))) return `imports ${specifier}`;
  if (specifier.startsWith('.')) {
    const target = relative(LAMBDA_DIR, resolve(dirname(fromFile), specifier));
    const layer = target.split(sep)[0];
    if (layer !== undefined && FORBIDDEN_LAYERS.includes(layer)) return `imports ${specifier} (lambda/${layer})`;
  }
  return undefined;
}

function violationsIn(source: string, fromFile: string): string[] {
  return importsOf(source).flatMap((specifier) => {
    const why = violation(specifier, fromFile);
    return why ? [why] : [];
  });
}

describe('core import boundary', () => {
  const files = sourceFiles(CORE_DIR);

  test('lambda/core has source files to check', () => {
    const names = files.map((file) => relative(CORE_DIR, file));
    expect(names).toEqual(expect.arrayContaining(['delivery.ts', 'messages.ts', 'signing.ts', 'subscriptions.ts', 'validation.ts']));
  });

  test('no file under lambda/core imports a forbidden module or layer', () => {
    const found = files.flatMap((file) =>
      violationsIn(readFileSync(file, 'utf8'), file).map((why) => `${relative(LAMBDA_DIR, file)} ${why}`),
    );
    expect(found).toEqual([]);
  });
});

describe('the boundary checker itself', () => {
  const CORE_FILE = join(CORE_DIR, 'example.ts');
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
    ["import https from 'https';", 'https'],
    ["import { connect } from 'node:net';", 'node:net'],
    ["import { connect } from 'net';", 'net'],
    ["import { connect } from 'node:tls';", 'node:tls'],
    ["import { connect } from 'tls';", 'tls'],
    ["import { lookup } from 'node:dns';", 'node:dns'],
    ["import { lookup } from 'dns/promises';", 'dns/promises'],
    ["import { readFileSync } from 'node:fs';", 'node:fs'],
    ["import { readFile } from 'fs/promises';", 'fs/promises'],
    ["import { FileStore } from '../adapters/file-store';", 'adapters'],
    ["import { handler } from '../handlers/delivery';", 'handlers'],
    ["import { start } from '../local/runtime';", 'local'],
    ["import { app } from '../http/app';", 'http layer'],
    ["import { server } from '../mcp/server';", 'mcp layer'],
    ["export { FileStore } from '../adapters/file-store';", 'a re-export'],
    ["import '../adapters/file-store';", 'a side-effect import'],
    ["const fs = require('fs');", 'require'],
    ["const sqs = await import('@aws-sdk/client-sqs');", 'a dynamic import'],
    ["import {\n  request,\n} from 'node:https';", 'a multi-line import'],
  ])('flags %s (%s)', (line, _label) => {
    expect(violationsIn(`${VALID}\n${line}`, CORE_FILE)).toHaveLength(1);
  });

  test('a comment mentioning a forbidden module is not an import', () => {
    expect(violationsIn(`${VALID}\n// import { readFileSync } from 'node:fs';`, CORE_FILE)).toEqual([]);
  });

  test('a module whose name only starts like a forbidden one is allowed', () => {
    expect(violationsIn("import x from 'fsevents-like';\nimport y from './http-date';", CORE_FILE)).toEqual([]);
  });
});
