/**
 * The dm-dot AWS stack (docs/contract/architecture.md): HTTP API -> MCP function -> DynamoDB table and SQS delivery queue
 * -> delivery function -> dot callback, with a dead-letter queue, alarms, a dashboard and the
 * outputs the operator and the operator CLI (`dm-dot <command> --aws`) read. This file is wiring
 * only; each part is a construct of lib/constructs/ whose header says what it grants and why:
 *
 *   storage.ts            the table and its KMS key, and `grantItems` (key usable through DynamoDB only)
 *   secrets.ts            the API key (generated) and pup's signing secrets (empty until configured)
 *   delivery-pipeline.ts  the delivery queue, the dead-letter queue and the delivery function
 *   mcp-function.ts       the MCP function, its environment and its grants
 *   http-api.ts           the HTTP API, its routes, throttling and access logs
 *   observability.ts      the alarms, the optional e-mail topic and the dashboard
 *
 * Resources that hold data, a secret or an identity keep the logical IDs earlier deployments gave
 * them (constructs/logical-ids.ts), so an upgrade replaces none of them.
 *
 * Deliberately not here: `DMDOT_ALLOW_LOOPBACK_CALLBACKS` (docs/contract/outbound-guard.md, local runtime only), any secret
 * value (Secrets Manager generates the API key and holds pup's secrets; none appears in the
 * template), cross-region or multi-account concerns (the stack is environment-agnostic).
 */
import { CfnOutput, Fn, Stack, type StackProps } from 'aws-cdk-lib';
import type { Construct } from 'constructs';
import { DeliveryPipeline } from './constructs/delivery-pipeline';
import { McpHttpApi } from './constructs/http-api';
import { McpFunction } from './constructs/mcp-function';
import { Observability } from './constructs/observability';
import { Secrets } from './constructs/secrets';
import { Storage } from './constructs/storage';
import type { DmDotSettings } from './settings';

export interface DmDotStackProps extends StackProps {
  readonly settings: DmDotSettings;
}

export class DmDotStack extends Stack {
  readonly storage: Storage;
  readonly secrets: Secrets;
  readonly delivery: DeliveryPipeline;
  readonly mcp: McpFunction;
  readonly http: McpHttpApi;
  readonly observability: Observability;

  constructor(scope: Construct, id: string, props: DmDotStackProps) {
    super(scope, id, {
      description: 'dm-dot: an MCP server that sends signed webhooks to one ChatGPT dot',
      ...props,
    });
    const { settings } = props;

    this.storage = new Storage(this, 'Storage');
    this.secrets = new Secrets(this, 'Secrets');
    this.delivery = new DeliveryPipeline(this, 'Delivery', {
      storage: this.storage,
      retryDelaysS: settings.retryDelaysS,
      maxConcurrency: settings.deliveryMaxConcurrency,
      logRetention: settings.logRetention,
    });
    this.mcp = new McpFunction(this, 'Mcp', { storage: this.storage, delivery: this.delivery, secrets: this.secrets, settings });
    this.http = new McpHttpApi(this, 'Http', {
      handler: this.mcp.function,
      allowedOrigins: settings.allowedOrigins,
      throttleRateLimit: settings.throttleRateLimit,
      throttleBurstLimit: settings.throttleBurstLimit,
      logRetention: settings.logRetention,
    });
    this.observability = new Observability(this, 'Observability', {
      mcp: this.mcp.function,
      delivery: this.delivery.worker.function,
      api: this.http.api,
      queue: this.delivery.queue,
      deadLetterQueue: this.delivery.deadLetterQueue,
      table: this.storage.table,
      retryDelaysS: settings.retryDelaysS,
      ...(settings.alarmEmail ? { alarmEmail: settings.alarmEmail } : {}),
    });

    this.addOutputs();
  }

  /** docs/deploying-aws.md; `dm-dot <command> --aws --stack NAME` reads them with DescribeStacks. */
  private addOutputs(): void {
    const { apiKey, pupSigningSecrets } = this.secrets;
    const { queue, deadLetterQueue } = this.delivery;
    const output = (id: string, description: string, value: string) => new CfnOutput(this, id, { description, value });

    output('McpEndpoint', 'MCP endpoint (no key in it): ChatGPT connects with the API key added as the query parameter "key"', this.http.mcpUrl);
    output('ApiKeySecretArn', 'Secrets Manager secret that holds the API key', apiKey.secretArn);
    output(
      'GetApiKeyCommand',
      'Prints the API key',
      Fn.join('', ['aws secretsmanager get-secret-value --secret-id ', apiKey.secretArn, ' --query SecretString --output text --region ', this.region]),
    );
    output(
      'PupSecretArn',
      'Secrets Manager secret that holds pup\'s signing secrets ({"secrets":[...]}); empty until you put them in',
      pupSigningSecrets.secretArn,
    );
    output('DashboardUrl', 'CloudWatch dashboard: deliveries, latency, attempts, dead letters, requests, throttles', this.observability.dashboard.url);
    output('TableName', 'DynamoDB table: the subscription and the delivery log (dm-dot events / subscription --aws)', this.storage.table.tableName);
    output('DeliveryQueueUrl', 'SQS delivery queue (dm-dot redrive --aws moves dead letters back here)', queue.queueUrl);
    output('DeadLetterQueueUrl', 'Events that could not be delivered stay here for 14 days', deadLetterQueue.queueUrl);
    output(
      'RedriveCommand',
      'Moves dead-lettered events back to the delivery queue for another round of attempts',
      Fn.join('', ['aws sqs start-message-move-task --source-arn ', deadLetterQueue.queueArn, ' --destination-arn ', queue.queueArn, ' --region ', this.region]),
    );
    // After a new API key, `dm-dot key rotate --aws` recycles this function's execution environments
    // (each reads the key once, at cold start).
    output('McpFunctionName', 'The MCP function (dm-dot key rotate --aws recycles its execution environments)', this.mcp.function.functionName);
    output('AlarmNames', "The stack's CloudWatch alarms, comma-separated (dm-dot status --aws reads their state)", this.observability.alarmNames);
  }
}
