/**
 * The dm-dot AWS stack (docs/contract/architecture.md): HTTP API -> MCP function -> DynamoDB table and SQS delivery queue
 * -> delivery function -> dot callback, with a dead-letter queue, alarms, a dashboard and the
 * outputs the operator and the operator CLI (`dm-dot <command> --aws`) read. This file is wiring
 * only; each part is a construct of lib/constructs/ whose header says what it grants and why.
 *
 * Deliberately not here: multi-account concerns, and any secret value (secrets.ts: none appears in
 * the template).
 */
import { CfnOutput, Fn, Stack, type StackProps } from 'aws-cdk-lib';
import type { Construct } from 'constructs';
import { ApiCustomDomain } from './constructs/custom-domain';
import { DeliveryPipeline } from './constructs/delivery-pipeline';
import { EdgeDistribution } from './constructs/edge-distribution';
import { McpHttpApi } from './constructs/http-api';
import { McpFunction } from './constructs/mcp-function';
import { Observability } from './constructs/observability';
import { Reconciler } from './constructs/reconciler';
import { Secrets } from './constructs/secrets';
import { Storage } from './constructs/storage';
import type { DmDotSettings } from './settings';

export class DmDotStack extends Stack {
  readonly delivery: DeliveryPipeline;
  readonly mcp: McpFunction;
  readonly observability: Observability;
  /** `-c protection=waf`: CloudFront in front of the API. */
  readonly edge?: EdgeDistribution;

  constructor(scope: Construct, id: string, props: StackProps & { settings: DmDotSettings; webAclArn?: string }) {
    super(scope, id, { description: 'dm-dot: an MCP server that sends signed webhooks to one ChatGPT dot', ...props });
    const { settings } = props;

    const storage = new Storage(this, 'Storage', { tableKey: settings.tableKey });
    const secrets = new Secrets(this, 'Secrets');
    this.delivery = new DeliveryPipeline(this, 'Delivery', { storage, settings });
    const reconciler = new Reconciler(this, 'Reconciler', { storage, delivery: this.delivery, settings });
    this.mcp = new McpFunction(this, 'Mcp', { storage, delivery: this.delivery, secrets, settings });
    const http = new McpHttpApi(this, 'Http', { handler: this.mcp.function, settings });
    // Where the operator points the custom domain (the outputs below).
    let domainTarget: string | undefined;
    const locked = settings.protection?.lockedOrigin;
    const origin = locked && new ApiCustomDomain(this, 'Origin', { http, domain: locked, certificateSetting: 'originCertificateArn' });
    if (settings.protection) {
      if (props.webAclArn === undefined) throw new Error('protection is set but no web ACL was given (lib/app.ts creates the edge stack)');
      this.edge = new EdgeDistribution(this, 'Edge', { api: http.api, webAclArn: props.webAclArn, customDomain: settings.customDomain, lockedOrigin: locked });
      // CloudFront connects only after the domain exists and maps the stage.
      if (origin) this.edge.node.addDependency(origin);
      domainTarget = this.edge.distribution.domainName;
    } else if (settings.customDomain) {
      domainTarget = new ApiCustomDomain(this, 'Domain', { http, domain: settings.customDomain }).domainName.regionalDomainName;
    }
    this.observability = new Observability(this, 'Observability', {
      mcp: this.mcp.function,
      delivery: this.delivery.worker.function,
      api: http.api,
      queue: this.delivery.queue,
      deadLetterQueue: this.delivery.deadLetterQueue,
      table: storage.table,
      reconciler: reconciler.worker.function,
      settings,
    });

    // docs/deploying-aws.md; `dm-dot <command> --aws --stack NAME` reads them with DescribeStacks.
    const { apiKey, pupSigningSecrets } = secrets;
    const { queue, deadLetterQueue } = this.delivery;
    const output = (id: string, description: string, value: string) => new CfnOutput(this, id, { description, value });

    // The connector's address: the custom domain when there is one, else CloudFront's with protection on, else the API's.
    const domain = settings.customDomain;
    const host = domain?.domainName ?? this.edge?.distribution.domainName;
    const mcpUrl = host ? `https://${host}/mcp` : `${http.api.apiEndpoint}/mcp`;
    output('McpEndpoint', 'MCP endpoint (no key in it): ChatGPT connects with the API key added as the query parameter "key"', mcpUrl);
    if (domain && domainTarget) output('CustomDomainTarget', `Point ${domain.domainName} here (CNAME or alias record)`, domainTarget);
    if (locked && origin) {
      // A description must be literal text: the name as configured, not the resource's Ref.
      const description = `Point ${locked.domainName} here (CNAME or alias record): CloudFront's origin, mutual TLS only`;
      output('OriginDomainTarget', description, origin.domainName.regionalDomainName);
    }
    output('ApiKeySecretArn', 'Secrets Manager secret that holds the API key', apiKey.secretArn);
    const getApiKey = `aws secretsmanager get-secret-value --secret-id ${apiKey.secretArn} --query SecretString --output text --region ${this.region}`;
    output('GetApiKeyCommand', 'Prints the API key', getApiKey);
    output(
      'PupSecretArn',
      'Secrets Manager secret that holds pup\'s signing secrets ({"secrets":[...]}); empty until you put them in',
      pupSigningSecrets.secretArn,
    );
    const dashboard = this.observability.dashboard;
    if (dashboard) output('DashboardUrl', 'CloudWatch dashboard: deliveries, latency, attempts, dead letters, requests, throttles', dashboard.url);
    output('TableName', 'DynamoDB table: the subscription and the delivery log (dm-dot events / subscription --aws)', storage.table.tableName);
    output('DeliveryQueueUrl', 'SQS delivery queue (dm-dot redrive --aws moves dead letters back here)', queue.queueUrl);
    output('DeadLetterQueueUrl', 'Events that could not be delivered stay here for 14 days', deadLetterQueue.queueUrl);
    output(
      'RedriveCommand',
      'Moves dead-lettered events back to the delivery queue for another round of attempts',
      `aws sqs start-message-move-task --source-arn ${deadLetterQueue.queueArn} --destination-arn ${queue.queueArn} --region ${this.region}`,
    );
    output('McpFunctionName', 'The MCP function (dm-dot key rotate --aws recycles its execution environments)', this.mcp.function.functionName);
    const alarmNames = this.observability.alarms.map((a) => a.alarmName);
    output('AlarmNames', "The stack's CloudWatch alarms, comma-separated (dm-dot status --aws reads their state)", Fn.join(',', alarmNames));
    output(
      'AlarmTopicArn',
      'SNS topic every alarm notifies (when it fires and when it clears): subscribe an address, a phone or a chat hook to it',
      this.observability.alarmTopic.topicArn,
    );
  }
}
