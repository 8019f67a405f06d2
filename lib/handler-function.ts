/**
 * One Lambda handler of dm-dot, bundled the same way for both functions: Node.js 22 on arm64,
 * esbuild (minified, CommonJS, external source map without sources), the AWS SDK bundled at the
 * versions the tests ran against, and its own log group and role.
 *
 * The role is built here rather than by `lambda.Function` so that it starts empty: no AWS managed
 * policy (AWSLambdaBasicExecutionRole allows writing to every log group of the account), only
 * `logs:CreateLogStream` / `logs:PutLogEvents` on this function's own log group. Callers add the
 * data-plane grants.
 *
 * The asset gets a `package.json` that names its module type. Without it the runtime looks for the
 * nearest one and Node has to work out the format of `index.js` itself (TOOLCHAIN: about 1.3x
 * slower to import).
 *
 * Deliberately not here: VPC attachment (the MCP function calls dot callbacks on the internet),
 * X-Ray tracing, reserved concurrency (new accounts often have a concurrency quota of 10, and
 * reserving part of it fails the deploy).
 */
import { Duration, RemovalPolicy, Validations } from 'aws-cdk-lib';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import { LogLevel, NodejsFunction, OutputFormat } from 'aws-cdk-lib/aws-lambda-nodejs';
import * as logs from 'aws-cdk-lib/aws-logs';
import { Construct } from 'constructs';
import * as path from 'node:path';

/** The repository root: bundling resolves entries, the lock file and tsconfig from here. */
export const PROJECT_ROOT = path.resolve(__dirname, '..');

export interface HandlerFunctionProps {
  /** Entry file, relative to the repository root (for example `lambda/handlers/mcp.ts`). */
  readonly entry: string;
  readonly description: string;
  readonly memorySize: number;
  readonly timeout: Duration;
  readonly environment: Record<string, string>;
  readonly logRetention: logs.RetentionDays;
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

    this.function = new NodejsFunction(this, 'Function', {
      entry: path.join(PROJECT_ROOT, props.entry),
      handler: 'handler',
      projectRoot: PROJECT_ROOT,
      depsLockFilePath: path.join(PROJECT_ROOT, 'package-lock.json'),
      description: props.description,
      runtime: lambda.Runtime.NODEJS_22_X,
      architecture: lambda.Architecture.ARM_64,
      memorySize: props.memorySize,
      timeout: props.timeout,
      role: this.role,
      logGroup: this.logGroup,
      environment: { ...props.environment, NODE_OPTIONS: '--enable-source-maps' },
      bundling: {
        format: OutputFormat.CJS,
        target: 'node22',
        minify: true,
        sourceMap: true,
        // Stack traces need the mappings only; the sources would triple the map's size.
        sourcesContent: false,
        // Bundle the SDK at the locked versions instead of relying on the runtime's copy.
        bundleAwsSDK: true,
        logLevel: LogLevel.WARNING,
        commandHooks: {
          beforeBundling: () => [],
          beforeInstall: () => [],
          afterBundling: (_inputDir: string, outputDir: string) => [
            `echo '{"type":"commonjs"}' > "${outputDir}/package.json"`,
          ],
        },
      },
    });

    Validations.of(this.function).acknowledge({
      id: 'AwsSolutions-L1',
      reason:
        'Pinned to nodejs22.x on purpose: the Node version the handlers and their end-to-end tests run on. ' +
        'Moving to a newer runtime is a tested change, not an automatic one.',
    });
  }
}
