/**
 * `cdk synth` works offline: the project's own CLI, through test/tools/cdk.mjs, in a child process
 * with no AWS credentials or configuration, a throwaway HOME, the instance metadata service off and
 * every proxy pointed at a closed local port (anything that tried the network would fail fast).
 *
 * This is also the one synth with aws-cdk-lib's CloudFormation validation on (the in-process tests
 * switch it off to save time); its report must be as empty as cdk-nag's.
 */
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { BUNDLE_ROOT as PROJECT_ROOT } from '../../lib/bundling';
import { type Json, unacknowledgedViolations } from './synth';

const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'dm-dot-offline-synth-'));
afterAll(() => fs.rmSync(scratch, { recursive: true, force: true }));

test('ARCH-2: node test/tools/cdk.mjs synth --quiet exits 0 with no credentials and no network', () => {
  const home = path.join(scratch, 'home');
  const out = path.join(scratch, 'cdk.out');
  fs.mkdirSync(home);
  const deadProxy = 'http://127.0.0.1:9';
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    HOME: home,
    USERPROFILE: home,
    TMPDIR: scratch,
    AWS_EC2_METADATA_DISABLED: 'true',
    AWS_CONFIG_FILE: path.join(home, 'no-aws-config'),
    AWS_SHARED_CREDENTIALS_FILE: path.join(home, 'no-aws-credentials'),
    HTTPS_PROXY: deadProxy,
    HTTP_PROXY: deadProxy,
    https_proxy: deadProxy,
    http_proxy: deadProxy,
    npm_config_cache: path.join(home, '.npm'),
  };
  const started = Date.now();
  const result = spawnSync(process.execPath, [path.join(PROJECT_ROOT, 'test/tools/cdk.mjs'), 'synth', '--quiet', '--output', out], {
    cwd: scratch,
    env,
    encoding: 'utf8',
    // An outer bound for a hung synth, not a speed check: at load 11 beside the suite it took over 150 s.
    timeout: 400_000,
  });
  const detail = `exit ${result.status}${result.error ? ` (${result.error.message})` : ''} after ${Date.now() - started} ms\nstdout:\n${result.stdout}\nstderr:\n${result.stderr}`;
  expect({ status: result.status, detail }).toEqual({ status: 0, detail });

  const template: Json = JSON.parse(fs.readFileSync(path.join(out, 'DmDot.template.json'), 'utf8'));
  expect(Object.keys(template.Outputs)).toContain('McpEndpoint');

  const report: Json = JSON.parse(fs.readFileSync(path.join(out, 'validation-report.json'), 'utf8'));
  expect(unacknowledgedViolations(report)).toEqual([]);
  // --quiet keeps the template off stdout; nothing warns either.
  expect(result.stdout.trim()).toBe('');
  expect(result.stderr).not.toMatch(/warning|error|notice/i);
  // It says what it produced.
  expect(result.stderr).toContain(`dm-dot: synthesized ${path.relative(scratch, path.join(out, 'DmDot.template.json'))}`);
}, 420_000);

test('a bad setting is one sentence on stderr, no stack trace, exit 1 (npm run synth -- -c retryDelays=abc)', () => {
  const result = spawnSync(
    process.execPath,
    [path.join(PROJECT_ROOT, 'test/tools/cdk.mjs'), 'synth', '--quiet', '-c', 'retryDelays=abc', '--output', path.join(scratch, 'bad.out')],
    {
      cwd: scratch,
      env: { PATH: process.env.PATH, HOME: scratch, AWS_EC2_METADATA_DISABLED: 'true' },
      encoding: 'utf8',
      timeout: 150_000,
    },
  );
  expect(result.status).toBe(1);
  expect(result.stdout).toBe('');
  expect(result.stderr).toMatch(/^dm-dot: context retryDelays must be 1 to 20 comma-separated numbers of seconds, each 0\.\.42300 .*, got "abc"\n$/);
}, 180_000);

test('npm run synth is that same quiet synth: the template goes to cdk.out, not the terminal', () => {
  const scripts = (JSON.parse(fs.readFileSync(path.join(PROJECT_ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> }).scripts;
  expect(scripts.synth).toBe('node test/tools/cdk.mjs synth --quiet');
});
