/**
 * `--aws`: the operator's AWS session for one command. It builds the SDK clients it is asked for
 * (loaded only then), with the operator's own credentials and region unless a test injected its
 * own through the io; reads the stack's outputs once; and finds each resource: its flag, then its
 * DMDOT_* setting, then the output of the stack `--stack` or `--stage` names (options.ts).
 *
 * Deliberately not here: what a command does with them, and credentials (the SDK's own chain).
 */
import { describeCause } from '../../core/answers';
import { SettingsError, stackNameOf, stageName } from '../../config/fields';
import type { CliAwsSettings } from '../../config/settings';
import type { Context } from '../context';
import { OperationError, UsageError } from '../errors';
import type { AwsClients, SendsCommands } from '../io';

/** The stack's outputs (lib/dm-dot-stack.ts). */
type OutputName = 'TableName' | 'DeliveryQueueUrl' | 'DeadLetterQueueUrl' | 'McpEndpoint' | 'ApiKeySecretArn' | 'McpFunctionName' | 'AlarmNames';

/** The options of `--aws` (options.ts). */
export interface AwsFlags {
  aws?: boolean;
  stack?: string;
  stage?: string;
  region?: string;
  table?: string;
  queueUrl?: string;
  dlqUrl?: string;
}

const NETWORK = /\b(ECONNREFUSED|ENOTFOUND|EAI_AGAIN|ETIMEDOUT|ECONNRESET|EHOSTUNREACH|ENETUNREACH|EPIPE)\b/;

/**
 * When no AWS call could be made at all, what is wrong and what to do: no region, no credentials
 * (or expired ones), or an endpoint that cannot be reached. Undefined for an answer from AWS.
 */
export function unusableAws(error: unknown): { code: string; message: string } | undefined {
  const e = error as { name?: string; message?: string; code?: string };
  const message = e.message ?? String(error);
  if (/^Region is missing/i.test(message)) {
    return { code: 'no_region', message: 'no AWS region: pass --region, or set AWS_REGION (or a region in your AWS profile)' };
  }
  if (e.name === 'CredentialsProviderError') {
    return {
      code: 'no_credentials',
      message:
        `no AWS credentials found (${message}): set AWS_PROFILE, sign in (aws sso login, or aws configure), or set AWS_ACCESS_KEY_ID and ` +
        'AWS_SECRET_ACCESS_KEY',
    };
  }
  if (e.name === 'ExpiredTokenException' || e.name === 'ExpiredToken') {
    return { code: 'credentials_expired', message: `your AWS credentials have expired (${e.name}): sign in again (aws sso login) or renew them` };
  }
  if (e.name === 'TimeoutError' || NETWORK.test(`${e.code ?? ''} ${message}`)) {
    return {
      code: 'aws_unreachable',
      message: `the AWS endpoint cannot be reached (${message}): check the network or proxy, the region, and any AWS_ENDPOINT_URL setting`,
    };
  }
  return undefined;
}

/** AWS SDK errors as one line: what is wrong when no call could be made, else the core's one description. The context scrubs it before printing. */
export function describeAwsError(error: unknown): string {
  return unusableAws(error)?.message ?? describeCause(error);
}

/** Runs `work`; its failure becomes an OperationError saying `message(why)`, `why` as describeAwsError says it. */
export async function orFail<T>(work: () => Promise<T>, message: (why: string) => string, code: string): Promise<T> {
  try {
    return await work();
  } catch (error) {
    throw new OperationError(message(describeAwsError(error)), code);
  }
}

type Kind = keyof AwsClients;
type Client = SendsCommands & { destroy?(): void };

const CLIENTS: Record<Kind, () => Promise<new (config: { region?: string }) => Client>> = {
  dynamodb: async () => (await import('@aws-sdk/client-dynamodb')).DynamoDBClient,
  sqs: async () => (await import('@aws-sdk/client-sqs')).SQSClient,
  cloudformation: async () => (await import('@aws-sdk/client-cloudformation')).CloudFormationClient,
  cloudwatch: async () => (await import('@aws-sdk/client-cloudwatch')).CloudWatchClient,
  lambda: async () => (await import('@aws-sdk/client-lambda')).LambdaClient,
  secretsManager: async () => (await import('@aws-sdk/client-secrets-manager')).SecretsManagerClient,
};

async function build(kind: Kind, region: string | undefined): Promise<Client> {
  // docs/decisions.md, "No end-of-life warning from the AWS SDK" (`??=`: a value the operator set stays).
  process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
  return new (await CLIENTS[kind]())(region ? { region } : {});
}

export class AwsSession {
  readonly stack: string;
  readonly region: string | undefined;
  private readonly clients: Partial<Record<Kind, Promise<Client>>> = {};
  private outputsRead: Promise<Record<string, string>> | undefined;

  constructor(
    private readonly ctx: Context,
    private readonly flags: AwsFlags,
    private readonly settings: CliAwsSettings = ctx.settings.aws(),
  ) {
    this.stack = stackOfStage(flags) ?? flags.stack ?? settings.stack;
    this.region = flags.region ?? settings.region;
  }

  client(kind: Kind): Promise<SendsCommands> {
    const injected = this.ctx.io.aws?.[kind];
    return injected ? Promise.resolve(injected) : (this.clients[kind] ??= build(kind, this.region));
  }

  outputs(): Promise<Record<string, string>> {
    return (this.outputsRead ??= (async () => {
      const { DescribeStacksCommand } = await import('@aws-sdk/client-cloudformation');
      const client = await this.client('cloudformation');
      let result: { Stacks?: { Outputs?: { OutputKey?: string; OutputValue?: string }[] }[] };
      try {
        result = await this.ctx.progress(`reading the outputs of stack ${this.stack}`, client.send(new DescribeStacksCommand({ StackName: this.stack })));
      } catch (error) {
        // Only a refusal that is about the stack is answered by naming another one.
        const unusable = unusableAws(error);
        if (unusable) throw new OperationError(`could not read stack ${this.stack}: ${unusable.message}`, unusable.code);
        throw new OperationError(
          `could not read stack ${this.stack}: ${describeAwsError(error)} (name another with --stack or DMDOT_STACK)`,
          'stack_unreadable',
        );
      }
      const outputs: Record<string, string> = {};
      for (const output of result.Stacks?.[0]?.Outputs ?? []) if (output.OutputKey && output.OutputValue) outputs[output.OutputKey] = output.OutputValue;
      return outputs;
    })());
  }

  /** One stack output; `instead` names the flag that can stand in for it. */
  async output(name: OutputName, instead?: string): Promise<string> {
    const value = (await this.outputs())[name];
    if (!value)
      throw new OperationError(
        `stack ${this.stack} has no output ${name}${instead ? `; pass ${instead} instead` : ' (deploy the current version of the stack)'}`,
        'missing_output',
      );
    return value;
  }

  private resource(given: string | undefined, name: OutputName, instead: string): Promise<string> {
    return given ? Promise.resolve(given) : this.output(name, instead);
  }

  table = () => this.resource(this.flags.table ?? this.settings.table, 'TableName', '--table (or DMDOT_TABLE)');
  queueUrl = () => this.resource(this.flags.queueUrl ?? this.settings.queueUrl, 'DeliveryQueueUrl', '--queue-url (or DMDOT_QUEUE_URL)');
  deadLetterQueueUrl = () => this.resource(this.flags.dlqUrl ?? this.settings.deadLetterQueueUrl, 'DeadLetterQueueUrl', '--dlq-url (or DMDOT_DLQ_URL)');

  async queueAttributes(queueUrl: string, names: string[]): Promise<Record<string, string>> {
    const { GetQueueAttributesCommand } = await import('@aws-sdk/client-sqs');
    const client = await this.client('sqs');
    const { Attributes } = await orFail(
      () => client.send(new GetQueueAttributesCommand({ QueueUrl: queueUrl, AttributeNames: names as never })),
      (why) => `could not read queue ${queueUrl}: ${why}`,
      'queue_unreadable',
    );
    return (Attributes ?? {}) as Record<string, string>;
  }

  /** Closes the clients this session built (not the injected ones). */
  async close(): Promise<void> {
    for (const client of Object.values(this.clients)) (await client.catch(() => undefined))?.destroy?.();
  }
}

/** `--stage NAME` as the stack name it stands for; refused beside `--stack`, or when it is no stage name. */
function stackOfStage(flags: AwsFlags): string | undefined {
  if (flags.stage === undefined) return undefined;
  if (flags.stack !== undefined) throw new UsageError('give --stack or --stage, not both (--stage NAME is --stack DmDot-NAME)');
  try {
    return stackNameOf(stageName(flags.stage, '--stage'));
  } catch (error) {
    if (error instanceof SettingsError) throw new UsageError(error.message.replace(' (the stack is named DmDot-<stage>)', ''));
    throw error;
  }
}

export async function withAws<T>(ctx: Context, flags: AwsFlags, work: (session: AwsSession) => Promise<T>): Promise<T> {
  const session = new AwsSession(ctx, flags);
  try {
    return await work(session);
  } finally {
    await session.close();
  }
}
