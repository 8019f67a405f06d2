// Runs the project's own CDK CLI (node_modules/aws-cdk) from the repository root with everything
// that would reach the network switched off: telemetry, the version check, npm's update notifier and
// notices. Arguments pass through unchanged: `node test/tools/cdk.mjs synth --quiet`.
//
// `synth` needs no AWS account: the stack is environment-agnostic. For synth only, a region is
// filled in when none is set (and DMDOT_SYNTH_REGION_ASSUMED=1 tells the app it was not given, so
// it checks nothing against it) and the EC2 instance metadata lookup is switched off, so a machine
// without credentials does not wait on 169.254.169.254. Other commands (deploy, diff, destroy)
// keep the caller's AWS settings as they are.
//
// What a person reads: a bad setting is the app's one `dm-dot: …` sentence (bin/dm-dot.ts), without
// the CDK CLI's "Subprocess exited with error 1" after it; a synth that worked says which templates
// it wrote, and where (on stderr: stdout stays the CLI's).
import { spawn } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import { constants } from 'node:os';
import { dirname, isAbsolute, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const cli = join(root, 'node_modules', 'aws-cdk', 'bin', 'cdk');
const args = process.argv.slice(2);
const command = args.find((a) => !a.startsWith('-'));
const synth = command === 'synth' || command === 'synthesize';
const offlineOnly = synth || command === 'ls' || command === 'list';

const env = {
  ...process.env,
  CDK_DISABLE_CLI_TELEMETRY: 'true',
  CDK_DISABLE_VERSION_CHECK: '1',
  npm_config_update_notifier: 'false',
};
if (offlineOnly) {
  env.AWS_EC2_METADATA_DISABLED ??= 'true';
  if (!env.AWS_REGION && !env.AWS_DEFAULT_REGION) {
    env.AWS_REGION = 'us-east-1';
    env.DMDOT_SYNTH_REGION_ASSUMED = '1';
  }
}

/** `--output DIR` / `-o DIR` / `--output=DIR`, else cdk.json's default. */
function outputDir() {
  for (let i = 0; i < args.length; i++) {
    if (args[i] === '--output' || args[i] === '-o') return args[i + 1];
    if (args[i].startsWith('--output=')) return args[i].slice('--output='.length);
  }
  return 'cdk.out';
}

const started = Date.now();
const child = spawn(process.execPath, [cli, ...args, ...(args.includes('--notices') ? [] : ['--no-notices'])], {
  cwd: root,
  env,
  stdio: ['inherit', 'inherit', 'pipe'],
});
let sentence = false;
let pending = '';
child.stderr.setEncoding('utf8').on('data', (chunk) => {
  pending += chunk;
  const lines = pending.split('\n');
  pending = lines.pop();
  for (const line of lines) {
    if (line.startsWith('dm-dot: ')) sentence = true;
    // The app said why in one sentence; the CLI's line about its subprocess adds nothing.
    else if (sentence && /: Subprocess exited with error \d+$/.test(line)) continue;
    process.stderr.write(`${line}\n`);
  }
});
for (const signal of ['SIGINT', 'SIGTERM']) process.on(signal, () => child.kill(signal));
child.on('close', (code, signal) => {
  if (pending) process.stderr.write(pending);
  if (code === 0 && synth) {
    const dir = outputDir();
    const abs = isAbsolute(dir) ? dir : join(root, dir);
    let written = [];
    try {
      written = readdirSync(abs).filter((f) => f.endsWith('.template.json') && statSync(join(abs, f)).mtimeMs >= started - 1000);
    } catch {
      // No output folder: nothing to name.
    }
    const where = relative(process.cwd(), abs) || '.';
    if (written.length)
      process.stderr.write(`dm-dot: synthesized ${written.map((f) => join(where, f)).join(', ')} (cdk-nag checks passed; npx cdk deploy deploys it)\n`);
  }
  // Stopped by a signal (ours forwarded, or from outside): said, and the shell's 128 + n.
  if (code === null) process.stderr.write(`dm-dot: the CDK CLI was stopped by ${signal}\n`);
  process.exit(code ?? 128 + (constants.signals[signal] ?? 0));
});
