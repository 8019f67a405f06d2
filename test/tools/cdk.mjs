// Runs the project's own CDK CLI (node_modules/aws-cdk) from the repository root with everything
// that would reach the network switched off: telemetry, the version check, npm's update notifier and
// notices. Arguments pass through unchanged: `node test/tools/cdk.mjs synth --quiet`.
//
// `synth` needs no AWS account: the stack is environment-agnostic. For synth only, a region is
// filled in when none is set and the EC2 instance metadata lookup is switched off, so a machine
// without credentials does not wait on 169.254.169.254. Other commands (deploy, diff, destroy)
// keep the caller's AWS settings as they are.
import { spawn } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const cli = join(root, 'node_modules', 'aws-cdk', 'bin', 'cdk');
const args = process.argv.slice(2);
const command = args.find((a) => !a.startsWith('-'));
const offlineOnly = command === 'synth' || command === 'synthesize' || command === 'ls' || command === 'list';

const env = {
  ...process.env,
  CDK_DISABLE_CLI_TELEMETRY: 'true',
  CDK_DISABLE_VERSION_CHECK: '1',
  npm_config_update_notifier: 'false',
};
if (offlineOnly) {
  env.AWS_EC2_METADATA_DISABLED ??= 'true';
  if (!env.AWS_REGION && !env.AWS_DEFAULT_REGION) env.AWS_REGION = 'us-east-1';
}

const child = spawn(process.execPath, [cli, ...args, ...(args.includes('--notices') ? [] : ['--no-notices'])], {
  cwd: root,
  env,
  stdio: 'inherit',
});
for (const signal of ['SIGINT', 'SIGTERM']) process.on(signal, () => child.kill(signal));
child.on('exit', (code, signal) => process.exit(code ?? (signal ? 1 : 0)));
