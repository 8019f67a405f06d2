/**
 * The Lambda bundles as the stack deploys them, for the bench (test/bench/sections/bundles.ts and
 * aws-calls.ts) and the tests of the built assets (test/build/bundles.test.ts,
 * test/integration/bundle-send.test.ts): built with lib/bundling.ts's options into the asset
 * layout (`index.js`, its chunks, their maps, `package.json` naming CommonJS), and started cold in a fresh Node process
 * with the environment the synthesized template gives each function plus the variables Lambda
 * itself sets, against a fake AWS endpoint (127.0.0.1; Secrets Manager answers the API key).
 *
 * A cold start here is what the runtime does on a new execution environment, minus the process
 * start both sides share: `require('index.js')` (the init phase) and the first invocation (for the
 * MCP Lambda an authenticated `tools/list` through API Gateway's payload 2.0 event), timed inside
 * the child.
 *
 * Deliberately not here: the Lambda runtime's own bootstrap, code download, network to AWS, and
 * any assertion (callers decide what a number means).
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { build, type BuildOptions, type Metafile } from 'esbuild';
import { ASSET_PACKAGE_JSON, BUNDLE_ROOT, lambdaBundle, type LambdaBundle, type LambdaChunk } from '../../lib/bundling';
import { testNode } from '../tools/test-node.cjs';
import type { FakeSecretsManager } from '../support/fake-secrets-manager';
import { eventFromRequest } from '../support/apigw';
import { inTaskRoot } from '../support/task-root';

export const ROOT = BUNDLE_ROOT;
export const MODERN_PROTOCOL = '2026-07-28';

/**
 * The size budgets of the bundles, in bytes of every JavaScript file of the asset (`index.js` and
 * its chunks). The delivery worker builds only the events' part of the Store and no zod (288.4 KiB):
 * its budget is 295 KiB (docs/decisions.md, "Ports by consumer").
 */
export const BUNDLE_BUDGET_BYTES = { mcp: 700 * 1024, delivery: 295 * 1024, reconciler: 300 * 1024 } as const;

/**
 * The same bundle through the esbuild API (what CDK's local bundling runs as a command line):
 * bundle everything (`bundleAwsSDK: true`), write `index.js` and its map into `outDir`.
 */
function esbuildOptionsOf(spec: LambdaBundle, outDir: string, root: string = BUNDLE_ROOT) {
  return {
    absWorkingDir: root,
    bundle: true,
    platform: spec.platform,
    format: spec.format,
    target: spec.target,
    minify: spec.minify,
    // CDK's `sourceMap: true` with the default mode is esbuild's `--sourcemap` (linked).
    sourcemap: spec.sourceMap ? ('linked' as const) : false,
    sourcesContent: spec.sourcesContent,
    mainFields: [...spec.mainFields],
    alias: { ...spec.alias },
    external: spec.chunks.map((chunk) => chunk.importPath),
    outfile: join(outDir, 'index.js'),
    logLevel: 'warning' as const,
  };
}

/** A chunk through the esbuild API: the same options, its own entry and file, nothing external. */
function chunkEsbuildOptionsOf(spec: LambdaBundle, chunk: LambdaChunk, outDir: string, root: string = BUNDLE_ROOT) {
  return {
    ...esbuildOptionsOf(spec, outDir, root),
    format: chunk.format ?? spec.format,
    external: [] as string[],
    entryPoints: [join(root, chunk.entry)],
    outfile: join(outDir, chunk.file),
  };
}

export interface BuiltBundle {
  dir: string;
  /** `index.js`, what the runtime loads. */
  file: string;
  /** Every JavaScript file of the asset (index.js and its chunks): what the budgets count. */
  bytes: number;
  /** `index.js` alone: what a cold start parses before its first answer. */
  indexBytes: number;
  /** The text of every JavaScript file of the asset. */
  text: string;
  /** Of all builds (index.js and chunks), merged. */
  metafile: Metafile;
  /** The chunk files beside index.js. */
  chunkFiles: string[];
}

function writeAsset(outDir: string, metafile: Metafile, chunkFiles: string[] = []): BuiltBundle {
  // As the stack's afterBundling hook does: the asset names its module type.
  writeFileSync(join(outDir, 'package.json'), ASSET_PACKAGE_JSON);
  const file = join(outDir, 'index.js');
  const index = readFileSync(file, 'utf8');
  const texts = [index, ...chunkFiles.map((f) => readFileSync(f, 'utf8'))];
  const text = texts.join('\n');
  const bytes = texts.reduce((sum, t) => sum + Buffer.byteLength(t), 0);
  return { dir: outDir, file, bytes, indexBytes: Buffer.byteLength(index), text, metafile, chunkFiles };
}

function mergeMetafiles(metafiles: Metafile[]): Metafile {
  return { inputs: Object.assign({}, ...metafiles.map((m) => m.inputs)), outputs: Object.assign({}, ...metafiles.map((m) => m.outputs)) };
}

/**
 * One entry (a file, relative to the repository root or absolute, or source text resolved from the
 * root) built with the stack's options, and the spec's chunks beside it (as the stack's hook builds them).
 */
export async function buildLambdaBundle(outDir: string, entry: { file: string } | { contents: string }, spec: LambdaBundle): Promise<BuiltBundle> {
  mkdirSync(outDir, { recursive: true });
  const options: BuildOptions = { ...esbuildOptionsOf(spec, outDir), metafile: true, write: true };
  const result = await build(
    'file' in entry
      ? { ...options, entryPoints: [resolve(ROOT, entry.file)] }
      : { ...options, stdin: { contents: entry.contents, resolveDir: ROOT, sourcefile: 'entry.ts', loader: 'ts' } },
  );
  const chunks = await Promise.all(spec.chunks.map((chunk) => build({ ...chunkEsbuildOptionsOf(spec, chunk, outDir), metafile: true, write: true })));
  return writeAsset(
    outDir,
    mergeMetafiles([result.metafile!, ...chunks.map((c) => c.metafile!)]),
    spec.chunks.map((chunk) => join(outDir, chunk.file)),
  );
}

/**
 * The bare MCP SDK v2 server written the usual way (one tool with a classic zod schema), the
 * baseline of the MCP cold start: a web-standard handler, no auth, no AWS.
 */
export const BARE_SDK_SERVER = `
import { createMcpHandler, McpServer } from '@modelcontextprotocol/server';
import { z } from 'zod';
const mcp = createMcpHandler(() => {
  const server = new McpServer({ name: 'bare', version: '0.0.0' }, { capabilities: { tools: { listChanged: false } } });
  server.registerTool('echo', { description: 'Echo a message.', inputSchema: z.object({ message: z.string() }) }, async ({ message }) => ({
    content: [{ type: 'text', text: message }],
  }));
  return server;
}, { responseMode: 'json' });
export const handler = (request: Request) => mcp.fetch(request);
`;

/** The baseline bundled "the usual way": esbuild's defaults for a Node CommonJS bundle (what `NodejsFunction` does untuned). */
export async function buildBaselineBundle(outDir: string): Promise<BuiltBundle> {
  mkdirSync(outDir, { recursive: true });
  const result = await build({
    absWorkingDir: ROOT,
    stdin: { contents: BARE_SDK_SERVER, resolveDir: ROOT, sourcefile: 'bare.ts', loader: 'ts' },
    bundle: true,
    platform: 'node',
    format: 'cjs',
    target: lambdaBundle().target,
    outfile: join(outDir, 'index.js'),
    metafile: true,
    logLevel: 'warning',
  });
  return writeAsset(outDir, result.metafile!);
}

// ---------------------------------------------------------------------------------------------
// Environments
// ---------------------------------------------------------------------------------------------

export interface StackEnvironments {
  mcp: Record<string, string>;
  delivery: Record<string, string>;
}

/**
 * Each function's `Environment.Variables` from the synthesized template (cdk.json's context, no
 * bundling), references replaced by plausible values. Loads aws-cdk-lib: a few seconds.
 */
export async function stackEnvironments(): Promise<StackEnvironments> {
  const { synthesize, resource } = await import('../cdk/synth');
  const synth = synthesize({ bundle: false });
  try {
    const { template } = synth;
    // A plausible value for a reference, by what it refers to (a new secret or queue needs no edit here).
    const exampleOf = (ref: string): string | undefined => {
      switch (template.Resources[ref]?.Type) {
        case 'AWS::DynamoDB::Table':
          return `DmDot-${ref}-EXAMPLE`;
        case 'AWS::SQS::Queue':
          return `https://sqs.us-east-1.amazonaws.com/123456789012/DmDot-${ref}-EXAMPLE`;
        case 'AWS::SecretsManager::Secret':
          return `arn:aws:secretsmanager:us-east-1:123456789012:secret:${ref}-AbCdEf`;
        default:
          return undefined;
      }
    };
    const variablesOf = (prefix: string): Record<string, string> => {
      const variables = (resource(template, 'AWS::Lambda::Function', prefix).Properties.Environment?.Variables ?? {}) as Record<string, unknown>;
      return Object.fromEntries(
        Object.entries(variables).map(([name, value]) => {
          if (typeof value === 'string') return [name, value];
          const ref = (value as { Ref?: string }).Ref;
          const example = ref === undefined ? undefined : exampleOf(ref);
          if (example === undefined) throw new Error(`no example value for ${name} = ${JSON.stringify(value)}`);
          return [name, example];
        }),
      );
    };
    return { mcp: variablesOf('McpFunction'), delivery: variablesOf('DeliveryFunction') };
  } finally {
    synth.cleanup();
  }
}

/** The execution role's credentials as the bundles see them; the fake Secrets Manager verifies signatures with them. */
export const LAMBDA_TEST_CREDENTIALS = {
  accessKeyId: 'ASIABENCHEXAMPLE0000',
  secretAccessKey: 'bench-secret-access-key',
  sessionToken: 'bench-session-token',
} as const;

/**
 * What the Lambda runtime adds to a function's own variables
 * (https://docs.aws.amazon.com/lambda/latest/dg/configuration-envvars.html#configuration-envvars-runtime),
 * with every AWS endpoint pointed at `awsEndpoint` (AWS_ENDPOINT_URL_*) and nothing of this
 * machine's environment but PATH.
 */
export function lambdaRuntimeEnvironment(functionName: string, awsEndpoint: string): Record<string, string> {
  return {
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    LANG: 'en_US.UTF-8',
    TZ: ':UTC',
    AWS_REGION: 'us-east-1',
    AWS_DEFAULT_REGION: 'us-east-1',
    AWS_EXECUTION_ENV: `AWS_Lambda_nodejs${LAMBDA_RUNTIME_MAJOR}.x`,
    AWS_LAMBDA_FUNCTION_NAME: functionName,
    AWS_LAMBDA_FUNCTION_MEMORY_SIZE: '512',
    AWS_LAMBDA_FUNCTION_VERSION: '$LATEST',
    AWS_LAMBDA_INITIALIZATION_TYPE: 'on-demand',
    AWS_ACCESS_KEY_ID: LAMBDA_TEST_CREDENTIALS.accessKeyId,
    AWS_SECRET_ACCESS_KEY: LAMBDA_TEST_CREDENTIALS.secretAccessKey,
    AWS_SESSION_TOKEN: LAMBDA_TEST_CREDENTIALS.sessionToken,
    AWS_ENDPOINT_URL: awsEndpoint,
    AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
  };
}

/**
 * Gives the fake Secrets Manager every secret the MCP function reads at init, as the stack's
 * secrets hold them: the API key, and the pup signing secrets (JSON) when the function names them.
 */
export function seedDeployedSecrets(secrets: FakeSecretsManager, mcpEnvironment: Record<string, string>, apiKey: string): void {
  const keyArn = mcpEnvironment.API_KEY_SECRET_ARN;
  if (!keyArn) throw new Error('the MCP function has no API_KEY_SECRET_ARN');
  secrets.setSecret(apiKey, keyArn);
  const pupArn = mcpEnvironment.PUP_SECRET_ARN;
  if (pupArn) secrets.setSecret(JSON.stringify({ secrets: [`whsec_${randomBytes(32).toString('base64')}`] }), pupArn);
}

// ---------------------------------------------------------------------------------------------
// Cold start in a fresh process
// ---------------------------------------------------------------------------------------------

/** The Node major of the Lambda runtime the stack deploys, from the bundles' esbuild target. */
export const LAMBDA_RUNTIME_MAJOR = Number(lambdaBundle().target.replace(/^node/, ''));

/**
 * The Node to start a bundle on: test/tools' (test/tools/test-node.cjs: the Lambda runtime's major
 * where a package of it exists for this machine, else this machine's Node when it is 22 or later),
 * or this Node when there is none. `isLambdaMajor` says whether it is the deployed runtime's major.
 */
export function lambdaNodeBinary(): { path: string; version: string; isLambdaMajor: boolean } {
  const node = testNode() ?? { path: process.execPath, version: process.version };
  return { path: node.path, version: node.version, isLambdaMajor: Number(node.version.replace(/^v/, '').split('.')[0]) === LAMBDA_RUNTIME_MAJOR };
}

/** What the child reports. */
export interface ColdStart {
  /** `require(index.js)`: the init phase. */
  loadMs: number;
  /** The first invocation, from call to settled answer. */
  firstRequestMs: number;
  /** load + first request. */
  totalMs: number;
  /** The first answer, for the caller to check (status and body). */
  answer: { status: number; body: string };
  /** After the first answer, `then`'s require and call (what a later request pays once), when asked. */
  thenMs?: number;
}

/** After the first answer: require a module of the asset and call one of its exports (timed apart). */
export interface ThenStep {
  require: string;
  call: string;
  args: unknown[];
}

/**
 * `apigw`: `handler(event, context)` with a payload 2.0 event (the MCP Lambda); `sqs`: with an
 * SQS batch (the Delivery Lambda); `fetch`: `handler(new Request(...))` (the bare baseline).
 */
export type InvokeMode = 'apigw' | 'sqs' | 'fetch';

/** Prefixes the child's timing line: the function's own output (logs, EMF metrics) shares stdout. */
const MARK = 'dm-dot-cold-start:';

const CHILD = `
const MARK = ${JSON.stringify(MARK)};
const { performance } = require('node:perf_hooks');
const [file, mode, payload, then] = process.argv.slice(1);
const context = { awsRequestId: 'bench', functionName: process.env.AWS_LAMBDA_FUNCTION_NAME, getRemainingTimeInMillis: () => 10000, callbackWaitsForEmptyEventLoop: true };
(async () => {
  const t0 = performance.now();
  const mod = require(file);
  const t1 = performance.now();
  let answer;
  if (mode === 'fetch') {
    const init = JSON.parse(payload);
    const response = await mod.handler(new Request(init.url, { method: 'POST', headers: init.headers, body: init.body }));
    answer = { status: response.status, body: await response.text() };
  } else {
    const result = await mod.handler(JSON.parse(payload), context);
    answer = mode === 'sqs' ? { status: 200, body: JSON.stringify(result) } : { status: result.statusCode, body: result.body };
  }
  const t2 = performance.now();
  let thenMs;
  if (then) {
    const step = JSON.parse(then);
    const t3 = performance.now();
    require(step.require)[step.call](...step.args);
    thenMs = performance.now() - t3;
  }
  process.stdout.write('\\n' + MARK + JSON.stringify({ loadMs: t1 - t0, firstRequestMs: t2 - t1, totalMs: t2 - t0, answer, thenMs }) + '\\n');
  process.exit(0);
})().catch((error) => {
  process.stderr.write(String(error && error.stack || error));
  process.exit(2);
});
`;

export function coldStart(
  nodeBinary: string,
  file: string,
  mode: InvokeMode,
  payload: string,
  env: Record<string, string>,
  timeoutMs = 30_000,
  then?: ThenStep,
): Promise<ColdStart> {
  return new Promise((done, fail) => {
    const childEnv = inTaskRoot(env, dirname(file));
    const child = spawn(nodeBinary, ['-e', CHILD, file, mode, payload, ...(then ? [JSON.stringify(then)] : [])], {
      cwd: ROOT,
      env: childEnv,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (out += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (err += chunk));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.once('error', (error) => {
      clearTimeout(timer);
      fail(error);
    });
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      if (code !== 0) return fail(new Error(`cold start of ${file} exited with ${code ?? signal}: ${err.trim().slice(0, 400)}`));
      try {
        const line = out.split('\n').findLast((l) => l.startsWith(MARK));
        if (line === undefined) throw new Error('no timing line');
        done(JSON.parse(line.slice(MARK.length)) as ColdStart);
      } catch {
        fail(new Error(`cold start of ${file} printed no timing: ${out.slice(0, 200)} ${err.slice(0, 200)}`));
      }
    });
  });
}

/** Headers and body of an authenticated 2026-07-28 `tools/list`. */
export function toolsListRequest(url: string, apiKey?: string): { url: string; headers: Record<string, string>; body: string } {
  return {
    url,
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': MODERN_PROTOCOL,
      'mcp-method': 'tools/list',
      ...(apiKey ? { authorization: `Bearer ${apiKey}` } : {}),
    },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'tools/list',
      params: { _meta: { 'io.modelcontextprotocol/protocolVersion': MODERN_PROTOCOL, 'io.modelcontextprotocol/clientCapabilities': {} } },
    }),
  };
}

/** The payload 2.0 event API Gateway hands the MCP Lambda for that request. */
export async function toolsListEvent(apiKey: string): Promise<string> {
  const init = toolsListRequest('https://abc123.execute-api.us-east-1.amazonaws.com/mcp', apiKey);
  return JSON.stringify(await eventFromRequest(new Request(init.url, { method: 'POST', headers: init.headers, body: init.body })));
}

/** Names of the tools in a JSON-RPC `tools/list` answer body (empty when it is not one). */
export function toolNames(body: string): string[] {
  try {
    const parsed = JSON.parse(body) as { result?: { tools?: Array<{ name?: string }> } };
    return (parsed.result?.tools ?? []).map((t) => String(t.name));
  } catch {
    return [];
  }
}

/** Inputs of a bundle whose path matches. */
export function inputsMatching(bundle: BuiltBundle, pattern: RegExp): string[] {
  return Object.keys(bundle.metafile.inputs).filter((input) => pattern.test(input));
}
