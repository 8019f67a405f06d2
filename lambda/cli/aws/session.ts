/**
 * `--aws`: the operator's AWS session for one command. It builds the SDK clients it is asked for
 * (loaded only then: nothing of the AWS SDK is on the start-up path of the CLI), with the
 * operator's own credentials and region as any AWS tool finds them, unless a test injected its
 * own through the io; reads the stack's outputs once (DescribeStacks); and finds each resource:
 * its flag, then its DMDOT_* setting, then the stack output.
 *
 * Outputs the stack has (lib/dm-dot-stack.ts): TableName, DeliveryQueueUrl, DeadLetterQueueUrl,
 * McpEndpoint, ApiKeySecretArn, PupSecretArn, McpFunctionName, AlarmNames.
 *
 * Deliberately not here: what a command does with them, and credentials (the SDK's own chain).
 */
import type { CliAwsSettings } from '../../config/settings';
import type { Context } from '../context';
import { OperationError } from '../errors';
import type { AwsClients, SendsCommands } from '../io';

export type OutputName = 'TableName' | 'DeliveryQueueUrl' | 'DeadLetterQueueUrl' | 'McpEndpoint' | 'ApiKeySecretArn' | 'PupSecretArn' | 'McpFunctionName' | 'AlarmNames';

export interface AwsFlags {
  stack?: string;
  region?: string;
  table?: string;
  'queue-url'?: string;
  'dlq-url'?: string;
}

/** AWS SDK errors as one line naming the error (the core's one description); the context scrubs it before printing. */
import { describeCause as describeAwsError } from '../../core/answers';
export { describeAwsError };

type Kind = keyof AwsClients;

async function build(kind: Kind, region: string | undefined): Promise<SendsCommands & { destroy?(): void }> {
  // On Node 20 the SDK warns, nine lines per process, that its releases after early January 2027
  // need Node 22. dm-dot pins every SDK package to an exact version, so no later release reaches
  // it unnoticed: the pins move together with the engines field (docs/decisions.md). The SDK's
  // own switch for it; an operator who set it to anything else still sees the warning.
  process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
  const config = region ? { region } : {};
  switch (kind) {
    case 'dynamodb':
      return new (await import('@aws-sdk/client-dynamodb')).DynamoDBClient(config);
    case 'sqs':
      return new (await import('@aws-sdk/client-sqs')).SQSClient(config);
    case 'cloudformation':
      return new (await import('@aws-sdk/client-cloudformation')).CloudFormationClient(config);
    case 'cloudwatch':
      return new (await import('@aws-sdk/client-cloudwatch')).CloudWatchClient(config);
    case 'lambda':
      return new (await import('@aws-sdk/client-lambda')).LambdaClient(config);
    case 'secretsManager':
      return new (await import('@aws-sdk/client-secrets-manager')).SecretsManagerClient(config);
  }
}

export class AwsSession {
  readonly stack: string;
  readonly region: string | undefined;
  private readonly clients = new Map<Kind, Promise<SendsCommands & { destroy?(): void }>>();
  private outputsRead: Promise<Record<string, string>> | undefined;

  constructor(
    private readonly ctx: Context,
    private readonly flags: AwsFlags,
    private readonly settings: CliAwsSettings = ctx.settings.aws(),
  ) {
    this.stack = flags.stack ?? settings.stack;
    this.region = flags.region ?? settings.region;
  }

  client(kind: Kind): Promise<SendsCommands> {
    const injected = this.ctx.io.aws?.[kind];
    if (injected) return Promise.resolve(injected);
    let client = this.clients.get(kind);
    if (!client) {
      client = build(kind, this.region);
      this.clients.set(kind, client);
    }
    return client;
  }

  /** The stack's outputs (DescribeStacks, once). */
  outputs(): Promise<Record<string, string>> {
    return (this.outputsRead ??= (async () => {
      const { DescribeStacksCommand } = await import('@aws-sdk/client-cloudformation');
      const client = await this.client('cloudformation');
      let result: { Stacks?: { Outputs?: { OutputKey?: string; OutputValue?: string }[] }[] };
      try {
        result = await this.ctx.progress(`reading the outputs of stack ${this.stack}`, client.send(new DescribeStacksCommand({ StackName: this.stack })));
      } catch (error) {
        throw new OperationError(`could not read stack ${this.stack}: ${describeAwsError(error)} (name another with --stack or DMDOT_STACK)`, 'stack_unreadable');
      }
      const outputs: Record<string, string> = {};
      for (const output of result.Stacks?.[0]?.Outputs ?? []) if (output.OutputKey && output.OutputValue) outputs[output.OutputKey] = output.OutputValue;
      return outputs;
    })());
  }

  /** One stack output; `instead` names the flag that can stand in for it. */
  async output(name: OutputName, instead?: string): Promise<string> {
    const value = (await this.outputs())[name];
    if (!value) throw new OperationError(`stack ${this.stack} has no output ${name}${instead ? `; pass ${instead} instead` : ' (deploy the current version of the stack)'}`, 'missing_output');
    return value;
  }

  table(): Promise<string> {
    const given = this.flags.table ?? this.settings.table;
    return given ? Promise.resolve(given) : this.output('TableName', '--table (or DMDOT_TABLE)');
  }

  queueUrl(): Promise<string> {
    const given = this.flags['queue-url'] ?? this.settings.queueUrl;
    return given ? Promise.resolve(given) : this.output('DeliveryQueueUrl', '--queue-url (or DMDOT_QUEUE_URL)');
  }

  deadLetterQueueUrl(): Promise<string> {
    const given = this.flags['dlq-url'] ?? this.settings.deadLetterQueueUrl;
    return given ? Promise.resolve(given) : this.output('DeadLetterQueueUrl', '--dlq-url (or DMDOT_DLQ_URL)');
  }

  /** Closes the clients this session built (not the injected ones). */
  async close(): Promise<void> {
    for (const client of this.clients.values()) (await client.catch(() => undefined))?.destroy?.();
    this.clients.clear();
  }
}

/** Runs `work` with a session, closed afterwards. */
export async function withAws<T>(ctx: Context, flags: AwsFlags, work: (session: AwsSession) => Promise<T>): Promise<T> {
  const session = new AwsSession(ctx, flags);
  try {
    return await work(session);
  } finally {
    await session.close();
  }
}
