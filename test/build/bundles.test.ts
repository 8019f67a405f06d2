/**
 * The size budgets of the Lambda bundles (cold start grows with the bytes loaded), built once each with the options the stack deploys
 * (lib/bundling.ts) into the asset layout: MCP at most 700 KiB, delivery at most 295 KiB; no ajv
 * in the MCP bundle (the `_shims` alias), none of the default credential chain beyond the
 * environment (the credential alias), and no source maps loaded at run time (no NODE_OPTIONS in
 * the synthesized functions' environment, no run-time source map support in the code). Then both
 * bundles are started the way Lambda starts them (a fresh process on the Lambda runtime's Node major, the stack's environment,
 * a fake Secrets Manager on 127.0.0.1): the aliases must not break the first request.
 *
 * Why the alias checks compare export names with the real modules: an alias that no longer
 * matches what the SDK imports would either fail the build or quietly bring ajv back; the MCP SDK
 * and the AWS SDK clients are pinned to exact versions in package.json, and this is the test that
 * fails when an upgrade changes either module.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import {
  AWS_CREDENTIAL_CHAIN,
  AWS_CREDENTIAL_CHAIN_REPLACEMENT,
  lambdaBundle,
  AFTER_RESPONSE_CHUNK,
  MCP_STORAGE_CHUNK,
  MCP_SDK_SHIMS,
  MCP_SDK_SHIMS_REPLACEMENT,
} from '../../lib/bundling';
import {
  BUNDLE_BUDGET_BYTES,
  buildLambdaBundle,
  coldStart,
  inputsMatching,
  LAMBDA_TEST_CREDENTIALS,
  lambdaRuntimeEnvironment,
  lambdaNodeBinary,
  seedDeployedSecrets,
  stackEnvironments,
  toolNames,
  toolsListEvent,
  type BuiltBundle,
  type StackEnvironments,
} from '../bench/lambda-bundles';
import { startFakeSecretsManager, type FakeSecretsManager } from '../support/fake-secrets-manager';

/** ajv as the MCP SDK ships it (inlined into an `ajvProvider` chunk) or as a package of its own. */
const AJV_INPUTS = /ajvProvider|node_modules\/ajv(-formats)?\//;
/** A sentence of ajv's code generator: survives minification, found in the bundle before the alias. */
const AJV_TEXT = 'CodeGen: name must be a valid identifier';
/** The default chain's providers beyond the environment, and the STS/SSO clients they bring. */
const CHAIN_INPUTS =
  /@aws-sdk\/(credential-provider-(node|ini|sso|process|web-identity|http)|client-sso|client-sts|nested-clients|token-providers)\/|@smithy\/credential-provider-imds\//;

let root: string;
let mcp: BuiltBundle;
let delivery: BuiltBundle;
let reconciler: BuiltBundle;
let environments: StackEnvironments;

beforeAll(async () => {
  root = mkdtempSync(join(tmpdir(), 'dm-dot-bundles-'));
  [mcp, delivery, reconciler, environments] = await Promise.all([
    buildLambdaBundle(join(root, 'mcp'), { file: 'lambda/handlers/mcp.ts' }, lambdaBundle(undefined, [MCP_STORAGE_CHUNK, AFTER_RESPONSE_CHUNK])),
    buildLambdaBundle(join(root, 'delivery'), { file: 'lambda/handlers/delivery.ts' }, lambdaBundle()),
    buildLambdaBundle(join(root, 'reconciler'), { file: 'lambda/handlers/reconciler.ts' }, lambdaBundle()),
    stackEnvironments(),
  ]);
}, 120_000);

afterAll(() => rmSync(root, { recursive: true, force: true }));

describe('size budgets', () => {
  test(`the MCP bundle is at most ${BUNDLE_BUDGET_BYTES.mcp / 1024} KiB`, () => {
    expect(mcp.bytes).toBeGreaterThan(100 * 1024); // it really is the MCP Lambda (SDK, AWS clients)
    expect(mcp.bytes).toBeLessThanOrEqual(BUNDLE_BUDGET_BYTES.mcp);
  });

  test(`the delivery bundle is at most ${BUNDLE_BUDGET_BYTES.delivery / 1024} KiB`, () => {
    expect(delivery.bytes).toBeGreaterThan(50 * 1024);
    expect(delivery.bytes).toBeLessThanOrEqual(BUNDLE_BUDGET_BYTES.delivery);
  });

  test(`the reconciler bundle is at most ${BUNDLE_BUDGET_BYTES.reconciler / 1024} KiB, with neither the MCP SDK nor the HTTP app in it`, () => {
    expect(reconciler.bytes).toBeGreaterThan(50 * 1024); // the DynamoDB and SQS clients
    expect(reconciler.bytes).toBeLessThanOrEqual(BUNDLE_BUDGET_BYTES.reconciler);
    expect(inputsMatching(reconciler, /@modelcontextprotocol\/|lambda\/http\/|lambda\/mcp\//)).toEqual([]);
  });

  test("the workers build only the events' part of the Store, and no zod (docs/decisions.md, ports by consumer)", () => {
    // What the output holds: a module esbuild read and then shook out entirely (store.ts, which the DynamoDB adapter imports) has no bytes in it.
    const bundled = (bundle: BuiltBundle, pattern: RegExp) =>
      Object.values(bundle.metafile.outputs).flatMap((output) =>
        Object.entries(output.inputs).flatMap(([input, { bytesInOutput }]) => (bytesInOutput > 0 && pattern.test(input) ? [input] : [])),
      );
    for (const bundle of [delivery, reconciler]) {
      expect(bundled(bundle, /lambda\/core\/store\/event-store\.ts$/)).toHaveLength(1);
      expect(bundled(bundle, /lambda\/core\/store\/store\.ts$|node_modules\/zod\//)).toEqual([]);
    }
  });

  test('the MCP storage code is a file of its own: index.js holds no DynamoDB or SQS client, mcp-storage.js holds both', () => {
    const inputsOf = (file: string) => Object.keys(Object.entries(mcp.metafile.outputs).find(([out]) => out.endsWith(file))![1].inputs);
    const sdk = /node_modules\/@(aws-sdk\/client-(dynamodb|sqs)|smithy)\//;
    expect(mcp.chunkFiles.map((f) => f.split('/').pop())).toEqual(['mcp-storage.js', 'after-response.mjs']);
    // The extension the function preloads holds nothing of AWS or of the app: node:http only.
    expect(inputsOf('/after-response.mjs').filter((i) => /node_modules\//.test(i))).toEqual([]);
    expect(inputsOf('/index.js').filter((i) => sdk.test(i))).toEqual([]);
    expect(inputsOf('/mcp-storage.js').filter((i) => /client-dynamodb\//.test(i)).length).toBeGreaterThan(0);
    expect(inputsOf('/mcp-storage.js').filter((i) => /client-sqs\//.test(i)).length).toBeGreaterThan(0);
    // index.js loads it by the path the stack's asset has beside it.
    expect(readFileSync(mcp.file, 'utf8')).toContain('require("./mcp-storage")');
  });

  test('Secrets Manager is read without the AWS SDK: no Secrets Manager client in either file', () => {
    expect(inputsMatching(mcp, /@aws-sdk\/client-secrets-manager\//)).toEqual([]);
    expect(inputsMatching(mcp, /lambda\/adapters\/secrets-manager\.ts$/)).toHaveLength(1);
  });

  test('the AWS SDK comes in through its ES builds (mainFields module first), which esbuild can tree-shake', () => {
    for (const bundle of [mcp, delivery]) {
      expect(inputsMatching(bundle, /node_modules\/@aws-sdk\/client-dynamodb\/dist-es\//).length).toBeGreaterThan(0);
      expect(inputsMatching(bundle, /node_modules\/@aws-sdk\/[^/]+\/dist-cjs\//)).toEqual([]);
    }
  });
});

describe('ajv stays out of the MCP bundle', () => {
  test('no ajv input and no ajv code', () => {
    expect(inputsMatching(mcp, AJV_INPUTS)).toEqual([]);
    expect(mcp.text).not.toContain(AJV_TEXT);
  });

  test('because the alias matched: the replacement shim is in the bundle, with the SDK lighter validator', () => {
    expect(inputsMatching(mcp, /lambda\/mcp\/sdk-shims\.ts$/)).toHaveLength(1);
    expect(inputsMatching(mcp, /@modelcontextprotocol\/server\/dist\/cfWorkerProvider-/)).toHaveLength(1);
  });

  test('the check can fail: without the alias the same build holds ajv', async () => {
    const spec = lambdaBundle();
    const { [MCP_SDK_SHIMS]: _dropped, ...otherAliases } = spec.alias;
    const without = await buildLambdaBundle(
      join(root, 'mcp-with-ajv'),
      { contents: "export * from '@modelcontextprotocol/server';" },
      { ...spec, alias: otherAliases },
    );
    expect(inputsMatching(without, AJV_INPUTS).length).toBeGreaterThan(0);
    expect(without.text).toContain(AJV_TEXT);
  });

  test("the replacement exports exactly what the SDK's own Node shim exports", () => {
    const real = require(MCP_SDK_SHIMS) as Record<string, unknown>;
    const ours = require(join('../..', MCP_SDK_SHIMS_REPLACEMENT)) as Record<string, unknown>;
    expect(Object.keys(ours).sort()).toEqual(Object.keys(real).sort());
    expect(typeof ours.DefaultJsonSchemaValidator).toBe('function');
    // It still validates (draft 2020-12), so the alias changes size, not behaviour.
    const Validator = ours.DefaultJsonSchemaValidator as new () => { getValidator(schema: unknown): (value: unknown) => { valid: boolean } };
    const check = new Validator().getValidator({ type: 'object', properties: { n: { type: 'number' } }, required: ['n'] });
    expect(check({ n: 1 }).valid).toBe(true);
    expect(check({ n: 'one' }).valid).toBe(false);
  });
});

describe('credentials: the environment only', () => {
  test('no provider of the default chain beyond the environment in either bundle', () => {
    for (const bundle of [mcp, delivery]) {
      expect(inputsMatching(bundle, CHAIN_INPUTS)).toEqual([]);
      expect(inputsMatching(bundle, /lambda\/handlers\/env-credentials\.ts$/)).toHaveLength(1);
      expect(inputsMatching(bundle, /@aws-sdk\/credential-provider-env\//).length).toBeGreaterThan(0);
    }
  });

  test("the replacement offers the chain's defaultProvider, reading the environment", async () => {
    const real = require(AWS_CREDENTIAL_CHAIN) as Record<string, unknown>;
    const ours = require(join('../..', AWS_CREDENTIAL_CHAIN_REPLACEMENT)) as { defaultProvider: () => () => Promise<{ accessKeyId: string }> };
    expect(typeof real.defaultProvider).toBe('function');
    expect(typeof ours.defaultProvider).toBe('function');
    const saved = { id: process.env.AWS_ACCESS_KEY_ID, secret: process.env.AWS_SECRET_ACCESS_KEY };
    try {
      process.env.AWS_ACCESS_KEY_ID = 'ASIATESTTESTTEST';
      process.env.AWS_SECRET_ACCESS_KEY = 'test-secret';
      await expect(ours.defaultProvider()()).resolves.toEqual(expect.objectContaining({ accessKeyId: 'ASIATESTTESTTEST' }));
    } finally {
      for (const [name, value] of [
        ['AWS_ACCESS_KEY_ID', saved.id],
        ['AWS_SECRET_ACCESS_KEY', saved.secret],
      ] as const) {
        if (value === undefined) delete process.env[name];
        else process.env[name] = value;
      }
    }
  });
});

describe('source maps: written, never loaded at run time', () => {
  test("DEL-PIPE-22: NODE_OPTIONS only preloads the MCP function's after-response extension: never --enable-source-maps", () => {
    expect(environments.mcp.NODE_OPTIONS).toBe('--import=/var/task/after-response.mjs');
    expect(Object.keys(environments.delivery)).not.toContain('NODE_OPTIONS');
    for (const variables of [environments.mcp, environments.delivery]) expect(JSON.stringify(variables)).not.toContain('source-map');
    // The environments are the real ones: the handlers' contract is in them.
    expect(environments.mcp).toEqual(expect.objectContaining({ TABLE_NAME: expect.any(String), API_KEY_SECRET_ARN: expect.any(String) }));
    expect(environments.delivery).toEqual(expect.objectContaining({ DEAD_LETTER_QUEUE_URL: expect.any(String) }));
  });

  test('the bundles do not turn source maps on themselves, and link the map for offline decoding', () => {
    for (const bundle of [mcp, delivery]) {
      expect(bundle.text).not.toContain('setSourceMapsEnabled');
      expect(inputsMatching(bundle, /node_modules\/source-map-support\//)).toEqual([]);
      expect(readFileSync(bundle.file, 'utf8')).toMatch(/\/\/# sourceMappingURL=index\.js\.map\s*$/);
      for (const chunk of bundle.chunkFiles) {
        const name = chunk.split('/').pop()!.replace(/\./g, '\\.');
        expect(readFileSync(chunk, 'utf8')).toMatch(new RegExp(`//# sourceMappingURL=${name}\\.map\\s*$`));
      }
    }
  });
});

describe('the bundles start as Lambda starts them', () => {
  let secrets: FakeSecretsManager;
  const apiKey = `bundle-${randomBytes(18).toString('base64url')}`;

  beforeAll(async () => {
    secrets = await startFakeSecretsManager(environments.mcp.API_KEY_SECRET_ARN, { credentials: LAMBDA_TEST_CREDENTIALS });
    seedDeployedSecrets(secrets, environments.mcp, apiKey);
  });
  afterAll(() => secrets?.stop());

  test('MCP: load, then an authenticated tools/list answers send_to_dot (the key read through Secrets Manager)', async () => {
    const env = { ...lambdaRuntimeEnvironment('dm-dot-mcp', secrets.endpoint), ...environments.mcp };
    const started = await coldStart(lambdaNodeBinary().path, mcp.file, 'apigw', await toolsListEvent(apiKey), env);
    expect({ status: started.answer.status, tools: toolNames(started.answer.body) }).toEqual({ status: 200, tools: ['send_to_dot'] });
    expect(secrets.calls()).toBeGreaterThanOrEqual(1);
  }, 40_000);

  test('delivery: load, then an empty batch answers no failures', async () => {
    const env = { ...lambdaRuntimeEnvironment('dm-dot-delivery', 'http://127.0.0.1:9'), ...environments.delivery };
    const started = await coldStart(lambdaNodeBinary().path, delivery.file, 'sqs', JSON.stringify({ Records: [] }), env);
    expect(JSON.parse(started.answer.body)).toEqual({ batchItemFailures: [] });
  }, 40_000);
});
