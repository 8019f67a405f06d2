/**
 * One Lambda handler of dm-dot, bundled the same way for every function: Node.js 24 on arm64,
 * esbuild with the options of lib/bundling.ts, the AWS SDK bundled at the versions the tests ran
 * against, and its own log group and role.
 *
 * The role is built here rather than by `lambda.Function` so that it starts empty: no AWS managed
 * policy (AWSLambdaBasicExecutionRole allows writing to every log group of the account), only
 * `logs:CreateLogStream` / `logs:PutLogEvents` on this function's own log group. Callers add the
 * data-plane grants.
 *
 * The afterBundling hook builds the chunks (lib/bundling.ts) and copies `assetFiles` (the pup
 * manifest: a file known at synth belongs in the code, not in the 4 KB environment). The asset is
 * hashed from the bundling output (`NodejsFunction`'s default), so a changed file is a new asset.
 * It also gets a `package.json` that names its module type: without it Node has to work out the
 * format of `index.js` itself (measured on Node 20: about 1.3x slower to import).
 *
 * Deliberately not here: VPC attachment (the MCP function calls dot callbacks on the internet),
 * X-Ray tracing, reserved concurrency (new accounts often have a concurrency quota of 10, and
 * reserving part of it fails the deploy), and `NODE_OPTIONS=--enable-source-maps` (lib/bundling.ts).
 */
import { RemovalPolicy, Validations } from 'aws-cdk-lib';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import { LogLevel, NodejsFunction, type NodejsFunctionProps, OutputFormat } from 'aws-cdk-lib/aws-lambda-nodejs';
import * as logs from 'aws-cdk-lib/aws-logs';
import { Construct } from 'constructs';
import * as path from 'node:path';
import { ASSET_PACKAGE_JSON, BUNDLE_ROOT, chunkEsbuildCommand, lambdaBundle, shellQuote, type LambdaChunk } from '../bundling';

export interface HandlerFunctionProps extends Required<Pick<NodejsFunctionProps, 'description' | 'memorySize' | 'timeout' | 'environment'>> {
  /** Entry file, relative to the repository root (for example `lambda/handlers/mcp.ts`). */
  readonly entry: string;
  readonly logRetention: logs.RetentionDays;
  /** Parts of the code built as files of their own beside index.js (lib/bundling.ts). */
  readonly chunks?: readonly LambdaChunk[];
  /** Files copied beside index.js (found under `LAMBDA_TASK_ROOT`): name in the asset -> absolute path of the source. */
  readonly assetFiles?: Readonly<Record<string, string>>;
}

/**
 * The shell command that copies one file into the bundling output. A source inside the project is
 * addressed through `inputDir` (what bundling in a container sees as the project), anything else by
 * its absolute path (local bundling, the way this project builds: esbuild is a dev dependency).
 */
export function copyIntoAssetCommand(source: string, name: string, inputDir: string, outputDir: string): string {
  const relative = path.relative(BUNDLE_ROOT, source);
  const inside = relative !== '' && !relative.startsWith('..') && !path.isAbsolute(relative);
  const from = inside ? path.posix.join(inputDir, ...relative.split(path.sep)) : source;
  return `cp ${shellQuote(from)} ${shellQuote(path.posix.join(outputDir, name))}`;
}

export class HandlerFunction extends Construct {
  readonly function: NodejsFunction;
  readonly role: iam.Role;
  readonly logGroup: logs.LogGroup;

  constructor(scope: Construct, id: string, props: HandlerFunctionProps) {
    super(scope, id);

    this.logGroup = new logs.LogGroup(this, 'Logs', {
      retention: props.logRetention,
      // Logs expire anyway; leaving empty groups behind after `cdk destroy` helps nobody.
      removalPolicy: RemovalPolicy.DESTROY,
    });

    this.role = new iam.Role(this, 'Role', {
      assumedBy: new iam.ServicePrincipal('lambda.amazonaws.com'),
      description: `${props.description} (execution role)`,
    });
    this.logGroup.grantWrite(this.role);

    const spec = lambdaBundle(BUNDLE_ROOT, props.chunks ?? []);
    this.function = new NodejsFunction(this, 'Function', {
      entry: path.join(BUNDLE_ROOT, props.entry),
      handler: 'handler',
      projectRoot: BUNDLE_ROOT,
      depsLockFilePath: path.join(BUNDLE_ROOT, 'package-lock.json'),
      description: props.description,
      runtime: lambda.Runtime.NODEJS_24_X,
      architecture: lambda.Architecture.ARM_64,
      memorySize: props.memorySize,
      timeout: props.timeout,
      role: this.role,
      logGroup: this.logGroup,
      environment: props.environment,
      // lib/bundling.ts's description as `NodejsFunction` bundling options (CDK runs esbuild's command line).
      bundling: {
        format: OutputFormat.CJS,
        target: spec.target,
        minify: spec.minify,
        sourceMap: spec.sourceMap,
        sourcesContent: spec.sourcesContent,
        mainFields: [...spec.mainFields],
        // `--alias:from=to`, once per alias (CDK repeats a key given an array).
        esbuildArgs: { '--alias': Object.entries(spec.alias).map(([from, to]) => `${from}=${to}`) },
        bundleAwsSDK: true,
        externalModules: spec.chunks.map((chunk) => chunk.importPath),
        logLevel: LogLevel.WARNING,
        commandHooks: {
          beforeBundling: () => [],
          beforeInstall: () => [],
          afterBundling: (inputDir: string, outputDir: string) => [
            `echo '${ASSET_PACKAGE_JSON.trim()}' > "${outputDir}/package.json"`,
            ...spec.chunks.map((chunk) => chunkEsbuildCommand(spec, chunk, inputDir, outputDir)),
            ...Object.entries(props.assetFiles ?? {}).map(([name, source]) => copyIntoAssetCommand(source, name, inputDir, outputDir)),
          ],
        },
      },
    });

    Validations.of(this.function).acknowledge({
      id: 'AwsSolutions-L1',
      reason:
        'Pinned to nodejs24.x on purpose: the Node version the bundles target and their tests start them on. ' +
        'Moving to a newer runtime is a tested change, not an automatic one.',
    });
  }
}
