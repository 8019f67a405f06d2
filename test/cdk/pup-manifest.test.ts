/**
 * The operator's pup manifest (docs/contract/pup.md) travels inside the MCP function's code asset, not in its
 * environment: synthesized twice with esbuild bundling, with two manifests, the asset holds a
 * byte-for-byte copy as `pup-manifest.json`, the environment only names it, the asset hash (and so
 * the deployed code) follows the manifest, and the bundled function finds the file from its task
 * root at cold start.
 */
import { inTaskRoot } from '../support/task-root';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { BUNDLE_ROOT as PROJECT_ROOT } from '../../lib/bundling';
import { copyIntoAssetCommand } from '../../lib/constructs/handler-function';
import { PUP_MANIFEST_ASSET_FILE } from '../../lib/constructs/mcp-function';
import { type Json, type Synthesized, resource, synthesize } from './synth';

// Outside the project (cdk run from another folder), and with a name that needs quoting in the hook.
const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'dm-dot-manifest-'));
const MANIFEST_A = '{\n  "name": "dm-dot",\n  "description": "says \\"hi\\" to the dot"\n}\n';
const MANIFEST_B = '{"name":"dm-dot","description":"another text"}';

let a: Synthesized;
let b: Synthesized;
const fileA = path.join(scratch, 'manifest "a" $HOME.json');
const fileB = path.join(scratch, 'manifest-b.json');

beforeAll(() => {
  fs.writeFileSync(fileA, MANIFEST_A);
  fs.writeFileSync(fileB, MANIFEST_B);
  a = synthesize({ context: { pupManifestFile: fileA } });
  b = synthesize({ context: { pupManifestFile: fileB } });
}, 240_000);

afterAll(() => {
  a?.cleanup();
  b?.cleanup();
  fs.rmSync(scratch, { recursive: true, force: true });
});

const mcpOf = (s: Synthesized) => resource(s.template, 'AWS::Lambda::Function', 'McpFunction');
const deliveryOf = (s: Synthesized) => resource(s.template, 'AWS::Lambda::Function', 'DeliveryFunction');

test('PUP-5: the MCP asset holds the operator`s file byte for byte as pup-manifest.json, beside index.js', () => {
  const dir = a.assetDir(mcpOf(a).id);
  expect(fs.readdirSync(dir)).toEqual(expect.arrayContaining(['index.js', 'mcp-storage.js', 'package.json', PUP_MANIFEST_ASSET_FILE]));
  expect(fs.readFileSync(path.join(dir, PUP_MANIFEST_ASSET_FILE), 'utf8')).toBe(MANIFEST_A);
  expect(fs.readFileSync(path.join(b.assetDir(mcpOf(b).id), PUP_MANIFEST_ASSET_FILE), 'utf8')).toBe(MANIFEST_B);
  // The delivery function never sees it.
  expect(fs.readdirSync(a.assetDir(deliveryOf(a).id))).not.toContain(PUP_MANIFEST_ASSET_FILE);
});

test('the environment names the file, relative to the task root; no PUP_MANIFEST_JSON, no manifest text in the template', () => {
  for (const s of [a, b]) {
    expect(mcpOf(s).Properties.Environment.Variables.PUP_MANIFEST_FILE).toBe('pup-manifest.json');
    const text = JSON.stringify(s.template);
    expect(text).not.toContain('PUP_MANIFEST_JSON');
    expect(text).not.toContain('another text');
    expect(text).not.toContain('says');
  }
  expect(Object.keys(deliveryOf(a).Properties.Environment.Variables)).not.toContain('PUP_MANIFEST_FILE');
});

test('a different manifest is a different MCP asset (its hash follows the bundling output), the delivery asset stays the same', () => {
  const key = (s: Synthesized, id: string): string => s.template.Resources[id].Properties.Code.S3Key;
  expect(key(a, mcpOf(a).id)).not.toBe(key(b, mcpOf(b).id));
  expect(key(a, deliveryOf(a).id)).toBe(key(b, deliveryOf(b).id));
});

test('the bundled MCP function loads with the synthesized environment and finds the manifest from its task root, and only there', () => {
  const dir = a.assetDir(mcpOf(a).id);
  const home = fs.mkdtempSync(path.join(scratch, 'home-'));
  const variables = mcpOf(a).Properties.Environment.Variables as Record<string, Json>;
  const env = Object.fromEntries(Object.entries(variables).map(([name, value]) => [name, typeof value === 'string' ? value : `example-${name.toLowerCase()}`]));
  // Plausible shapes for the references the settings parse.
  env.QUEUE_URL = 'https://sqs.us-east-1.amazonaws.com/123456789012/DmDot-DeliveryQueue-EXAMPLE';
  env.API_KEY_SECRET_ARN = 'arn:aws:secretsmanager:us-east-1:123456789012:secret:ApiKey-EXAMPLE-AbCdEf';
  env.PUP_SECRET_ARN = 'arn:aws:secretsmanager:us-east-1:123456789012:secret:PupSigningSecrets-EXAMPLE-AbCdEf';
  const load = (taskRoot: string) =>
    spawnSync(process.execPath, ['-e', `require(${JSON.stringify(path.join(dir, 'index.js'))}); process.exit(0);`], {
      // Lambda runs the function with its task root as the working directory too.
      cwd: taskRoot,
      env: {
        ...inTaskRoot(env, dir),
        LAMBDA_TASK_ROOT: taskRoot,
        PATH: process.env.PATH,
        HOME: home,
        AWS_REGION: 'us-east-1',
        AWS_ACCESS_KEY_ID: 'ASIAEXAMPLE',
        AWS_SECRET_ACCESS_KEY: 'example',
        AWS_ENDPOINT_URL: 'http://127.0.0.1:9',
        AWS_EC2_METADATA_DISABLED: 'true',
        AWS_CONFIG_FILE: path.join(home, 'none'),
        AWS_SHARED_CREDENTIALS_FILE: path.join(home, 'none'),
      },
      encoding: 'utf8',
      timeout: 20_000,
    });
  const found = load(dir);
  const errors = found.stderr
    .split('\n')
    .filter((line) => /\w*Error\b/.test(line))
    .slice(0, 3)
    .join('\n');
  expect({ status: found.status, errors }).toEqual({ status: 0, errors: '' });
  // Elsewhere the file is missing, and the function refuses to start rather than serve a default.
  const missing = load(home);
  expect(missing.status).not.toBe(0);
  expect(missing.stderr).toMatch(/PUP_MANIFEST_FILE/);
}, 60_000);

describe('the hook command that copies a file into the asset', () => {
  test('a file inside the project is addressed through the bundling input directory (what a bundling container mounts)', () => {
    const inside = path.join(PROJECT_ROOT, 'config', 'pup-manifest.json');
    expect(copyIntoAssetCommand(inside, 'pup-manifest.json', '/asset-input', '/asset-output')).toBe(
      'cp "/asset-input/config/pup-manifest.json" "/asset-output/pup-manifest.json"',
    );
  });

  test('a file elsewhere by its absolute path, quoted for the shell', () => {
    expect(copyIntoAssetCommand('/tmp/my "m" $HOME `x`.json', 'pup-manifest.json', '/in', '/out')).toBe(
      'cp "/tmp/my \\"m\\" \\$HOME \\`x\\`.json" "/out/pup-manifest.json"',
    );
  });
});
