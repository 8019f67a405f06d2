/**
 * How the Lambda bundles are built: one description that lib/constructs/handler-function.ts turns
 * into `NodejsFunction` bundling options and that the bench and the bundle test turn into esbuild
 * API options, so what is measured and asserted is what the stack deploys, not a look-alike.
 *
 * Each choice and what it buys is in docs/performance.md ("What each change is"): source maps
 * written but never loaded at run time, the AWS SDK's ES builds (`mainFields`), two aliases that
 * keep code out of the bundles (ajv, and the credential providers other than the environment's),
 * and the MCP function's chunks, each one more esbuild entry with the same options.
 *
 * Deliberately not here: anything of CDK (this module is imported by the bench and by tests, which
 * must not load aws-cdk-lib), the asset's other copied files (handler-function.ts writes them), and
 * externals (the AWS SDK is bundled at the locked versions).
 */
import * as path from 'node:path';

/** The repository root: entries, aliases and the lock file resolve from here. */
export const BUNDLE_ROOT = path.resolve(__dirname, '..');

/** The module the MCP SDK imports its runtime-specific defaults from (`DefaultJsonSchemaValidator`, `process`). */
export const MCP_SDK_SHIMS = '@modelcontextprotocol/server/_shims';
/** dm-dot's replacement for it, relative to the repository root. */
export const MCP_SDK_SHIMS_REPLACEMENT = 'lambda/mcp/sdk-shims.ts';
/** The AWS SDK's default credential chain, which every client imports statically. */
export const AWS_CREDENTIAL_CHAIN = '@aws-sdk/credential-provider-node';
/** dm-dot's replacement for it (the environment only, as on Lambda), relative to the repository root. */
export const AWS_CREDENTIAL_CHAIN_REPLACEMENT = 'lambda/handlers/env-credentials.ts';

/** The `package.json` written next to `index.js` in each asset: the runtime need not guess the module format. */
export const ASSET_PACKAGE_JSON = '{"type":"commonjs"}\n';

/** Code of a function built as a file of its own and loaded with `require()` on first use. */
export interface LambdaChunk {
  /** The import path as written in the source (`require('./mcp-storage')`): external in `index.js`. */
  readonly importPath: string;
  /** Its entry, relative to the repository root. */
  readonly entry: string;
  /** The file beside `index.js` that `require(importPath)` finds at run time. */
  readonly file: string;
  /** Its module format, when not the bundle's own (an `--import` entry must be an ES module). */
  readonly format?: 'esm';
}

/**
 * The MCP function's storage (DynamoDB and SQS clients and adapters): `index.js` keeps
 * `require("./mcp-storage")`, which lambda/handlers/mcp-lambda.ts runs on the first request that
 * needs storage, so a cold start's first `tools/list` neither parses nor evaluates that code.
 */
export const MCP_STORAGE_CHUNK: LambdaChunk = { importPath: './mcp-storage', entry: 'lambda/handlers/mcp-storage.ts', file: 'mcp-storage.js' };

/**
 * The MCP function's after-response extension (lambda/handlers/after-response.ts), loaded before
 * the runtime by `NODE_OPTIONS=--import` (AFTER_RESPONSE_NODE_OPTIONS): an ES module, so that its
 * top-level await registers the extension during Init. Nothing in index.js imports it by this path.
 */
export const AFTER_RESPONSE_CHUNK: LambdaChunk = {
  importPath: './after-response.mjs',
  entry: 'lambda/handlers/after-response-entry.mjs',
  file: 'after-response.mjs',
  format: 'esm',
};

export const AFTER_RESPONSE_NODE_OPTIONS = `--import=/var/task/${AFTER_RESPONSE_CHUNK.file}`;

/** The one bundling description of every function; the MCP function passes its chunks (none for the others). */
export function lambdaBundle(root: string = BUNDLE_ROOT, chunks: readonly LambdaChunk[] = []) {
  const alias: Readonly<Record<string, string>> = {
    [MCP_SDK_SHIMS]: path.join(root, MCP_SDK_SHIMS_REPLACEMENT),
    [AWS_CREDENTIAL_CHAIN]: path.join(root, AWS_CREDENTIAL_CHAIN_REPLACEMENT),
  };
  return {
    chunks,
    platform: 'node' as const,
    format: 'cjs' as const,
    target: 'node24' as const,
    minify: true,
    sourceMap: true,
    // Stack traces need the mappings only; the sources would triple the map's size.
    sourcesContent: false,
    mainFields: ['module', 'main'] as readonly string[],
    alias,
  };
}
export type LambdaBundle = ReturnType<typeof lambdaBundle>;

/**
 * A chunk as an esbuild command line, for the stack's afterBundling hook (CDK runs esbuild's
 * command line for `index.js` with the same options: aws-lambda-nodejs's `buildEsbuildArgs`).
 */
export function chunkEsbuildCommand(spec: LambdaBundle, chunk: LambdaChunk, inputDir: string, outputDir: string): string {
  return [
    shellQuote(path.join(inputDir, 'node_modules', '.bin', 'esbuild')),
    shellQuote(path.join(inputDir, chunk.entry)),
    '--bundle',
    `--target=${spec.target}`,
    `--platform=${spec.platform}`,
    `--format=${chunk.format ?? spec.format}`,
    shellQuote(`--outfile=${path.join(outputDir, chunk.file)}`),
    ...(spec.minify ? ['--minify'] : []),
    ...(spec.sourceMap ? ['--sourcemap'] : []),
    ...(spec.sourcesContent ? [] : ['--sources-content=false']),
    `--main-fields=${spec.mainFields.join(',')}`,
    ...Object.entries(spec.alias).map(([from, to]) => shellQuote(`--alias:${from}=${to}`)),
    '--log-level=warning',
  ].join(' ');
}

/**
 * One argument for the shell that runs the bundling hooks (bash for local bundling, sh in a
 * container): double quotes, with the four characters that stay special inside them escaped.
 */
export function shellQuote(value: string): string {
  return `"${value.replace(/(["\\$`])/g, '\\$1')}"`;
}
