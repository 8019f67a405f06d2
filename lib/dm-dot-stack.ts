/**
 * The dm-dot AWS stack (SPEC 1): HTTP API -> MCP function -> DynamoDB table and SQS delivery queue
 * -> delivery function -> dot callback, with a dead-letter queue, alarms and outputs for the
 * operator. This file is wiring only; the API and the function conventions live in their own
 * constructs next to it.
 *
 * Grants are the narrowest that match what each handler does:
 *   MCP function      table Get/Put/Update/Delete, the table key, SendMessage on the delivery
 *                     queue, read of the API key secret and of pup's signing secrets. Nothing on
 *                     the dead-letter queue.
 *   delivery function table Get/Update/Delete (Delete: a 410 ends the subscription; it never
 *                     creates an item, so no Put), the table key, consume the delivery queue (event
 *                     source), SendMessage on the dead-letter queue. No secret.
 *
 * Deliberately not here: `DMDOT_ALLOW_LOOPBACK_CALLBACKS` (SPEC 7, local runtime only), any secret
 * value (Secrets Manager generates the API key and holds pup's secrets; none appears in the
 * template), cross-region or multi-account concerns (the stack is environment-agnostic).
 */
import { CfnOutput, Duration, Fn, RemovalPolicy, Stack, type StackProps, Validations } from 'aws-cdk-lib';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import { SnsAction } from 'aws-cdk-lib/aws-cloudwatch-actions';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as kms from 'aws-cdk-lib/aws-kms';
import { SqsEventSource } from 'aws-cdk-lib/aws-lambda-event-sources';
import * as secretsmanager from 'aws-cdk-lib/aws-secretsmanager';
import * as sns from 'aws-cdk-lib/aws-sns';
import { EmailSubscription } from 'aws-cdk-lib/aws-sns-subscriptions';
import * as sqs from 'aws-cdk-lib/aws-sqs';
import type { Construct } from 'constructs';
import { RECEIVE_LIMIT_AWS_MARGIN, receiveLimit } from '../lambda/core/delivery';
import { DmDotDashboard } from './dashboard';
import { MCP_DATA_CHUNK } from './bundling';
import { HandlerFunction } from './handler-function';
import { McpHttpApi } from './http-api';
import { assertEnvironmentFits } from './lambda-environment';
import type { DmDotSettings } from './settings';

export interface DmDotStackProps extends StackProps {
  readonly settings: DmDotSettings;
}

/** Timeouts, sizes and limits of the AWS resources, in one place. */
export const Sizing = {
  /** Auth + Secrets Manager at cold start + store + enqueue + at most 4 s of waiting (SPEC 6.2). */
  mcpTimeout: Duration.seconds(10),
  mcpMemoryMiB: 512,
  /** A batch of 10 is sent concurrently, each request with a 5 s deadline (SPEC 7), plus margin. */
  deliveryTimeout: Duration.seconds(15),
  deliveryMemoryMiB: 256,
  /** AWS's guidance for an SQS event source: visibility timeout of at least 6x the function timeout. */
  visibilityTimeoutFactor: 6,
  batchSize: 10,
  deadLetterRetention: Duration.days(14),
  /** Generated API key: 48 letters and digits, about 285 bits. */
  apiKeyLength: 48,
} as const;

const DYNAMODB_ACTIONS = {
  mcp: ['dynamodb:GetItem', 'dynamodb:PutItem', 'dynamodb:UpdateItem', 'dynamodb:DeleteItem'],
  delivery: ['dynamodb:GetItem', 'dynamodb:UpdateItem', 'dynamodb:DeleteItem'],
} as const;

/**
 * SQS's own redrive (maxReceiveCount) sits RECEIVE_LIMIT_AWS_MARGIN receives above the receive on
 * which the worker dead-letters a message itself, with a reason (both from lambda/core/delivery.ts).
 * Receives that never reach the handler (throttled invocations, a crash before it runs) still count,
 * and AWS recommends a maxReceiveCount of at least 5 so that throttling alone does not move messages
 * to the dead-letter queue
 * (https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-configure.html, "maxReceiveCount").
 */
export function redriveMaxReceiveCount(retryDelaysS: readonly number[]): number {
  return receiveLimit(retryDelaysS) + RECEIVE_LIMIT_AWS_MARGIN;
}

/** The pup secret before the operator configures it: parses as "no secrets" (the POST routes answer 503). */
export const PUP_SECRET_TEMPLATE = '{"secrets":[]}';

/** The key permissions aws-cdk-lib's `grantReadWriteData` gives for a customer-managed table key. */
const TABLE_KEY_ACTIONS = ['kms:Decrypt', 'kms:DescribeKey', 'kms:Encrypt', 'kms:ReEncrypt*', 'kms:GenerateDataKey*'];

export class DmDotStack extends Stack {
  readonly table: dynamodb.Table;
  readonly queue: sqs.Queue;
  readonly deadLetterQueue: sqs.Queue;
  readonly apiKeySecret: secretsmanager.Secret;
  readonly pupSecret: secretsmanager.Secret;
  readonly mcp: HandlerFunction;
  readonly delivery: HandlerFunction;
  readonly http: McpHttpApi;
  readonly alarms: cloudwatch.Alarm[];
  readonly alarmTopic?: sns.Topic;
  readonly dashboard: DmDotDashboard;

  constructor(scope: Construct, id: string, props: DmDotStackProps) {
    super(scope, id, {
      description: 'dm-dot: an MCP server that sends signed webhooks to one ChatGPT dot',
      ...props,
    });
    const { settings } = props;

    // --- Storage: one table, encrypted with a key of our own (it holds the dots' signing secrets).
    const tableKey = new kms.Key(this, 'TableKey', {
      description: 'dm-dot: encrypts the subscription and delivery table',
      enableKeyRotation: true,
      // The table is retained; its key must outlive the stack with it or the data is unreadable.
      removalPolicy: RemovalPolicy.RETAIN,
    });
    this.table = new dynamodb.Table(this, 'Table', {
      partitionKey: { name: 'pk', type: dynamodb.AttributeType.STRING },
      billingMode: dynamodb.BillingMode.PAY_PER_REQUEST,
      timeToLiveAttribute: 'ttl',
      pointInTimeRecoverySpecification: { pointInTimeRecoveryEnabled: true },
      encryption: dynamodb.TableEncryption.CUSTOMER_MANAGED,
      encryptionKey: tableKey,
      removalPolicy: RemovalPolicy.RETAIN,
    });

    // --- Delivery queue and dead-letter queue.
    this.deadLetterQueue = new sqs.Queue(this, 'DeadLetterQueue', {
      encryption: sqs.QueueEncryption.SQS_MANAGED,
      enforceSSL: true,
      retentionPeriod: Sizing.deadLetterRetention,
    });
    this.queue = new sqs.Queue(this, 'DeliveryQueue', {
      encryption: sqs.QueueEncryption.SQS_MANAGED,
      enforceSSL: true,
      visibilityTimeout: Duration.seconds(Sizing.deliveryTimeout.toSeconds() * Sizing.visibilityTimeoutFactor),
      retentionPeriod: mainQueueRetention(settings.retryDelaysS),
      deadLetterQueue: { queue: this.deadLetterQueue, maxReceiveCount: redriveMaxReceiveCount(settings.retryDelaysS) },
    });

    // --- The API key: generated by Secrets Manager, so no value ever passes through the template.
    this.apiKeySecret = new secretsmanager.Secret(this, 'ApiKey', {
      description: 'dm-dot: API key for /mcp and /v1/messages (query parameter key or Bearer token)',
      generateSecretString: {
        passwordLength: Sizing.apiKeyLength,
        excludePunctuation: true,
        includeSpace: false,
      },
    });
    Validations.of(this.apiKeySecret).acknowledge({
      id: 'AwsSolutions-SMG4',
      reason:
        'Rotation is a deliberate operator action: a new key changes the principal and therefore every ' +
        'subscription id (SPEC 4.2), and the dot has to be reconnected with the new URL. The README documents the steps.',
    });

    // --- pup's signing secrets (SPEC 8). Created holding no secret: the JSON template parses as an
    // empty list (the generated `unused` key is random filler Secrets Manager requires), so the pup
    // POST routes answer 503 until the operator puts the secrets in (README "Using dm-dot from pup").
    this.pupSecret = new secretsmanager.Secret(this, 'PupSigningSecrets', {
      description: 'dm-dot: pup signing secrets as {"secrets":[current, previous]}, each a whsec_ string from pup',
      generateSecretString: { secretStringTemplate: PUP_SECRET_TEMPLATE, generateStringKey: 'unused' },
    });
    Validations.of(this.pupSecret).acknowledge({
      id: 'AwsSolutions-SMG4',
      reason:
        'pup issues these signing secrets, not AWS: a rotation is the operator putting the new value from pup into ' +
        'the secret (with the previous one kept for the 10-minute overlap, SPEC 8). A rotation Lambda could not ask pup for one.',
    });

    // --- Functions.
    const mcpEnvironment: Record<string, string> = {
      TABLE_NAME: this.table.tableName,
      QUEUE_URL: this.queue.queueUrl,
      API_KEY_SECRET_ARN: this.apiKeySecret.secretArn,
      PUP_SECRET_ARN: this.pupSecret.secretArn,
      DMDOT_DELIVERY_WAIT_MS: String(settings.deliveryWaitMs),
      // The inline first attempt times attempt 2 from the schedule (SPEC 6.2 step 3).
      DMDOT_RETRY_DELAYS: settings.retryDelaysS.join(','),
      DMDOT_TTL_DEFAULT_MS: String(settings.ttlDefaultMs),
      DMDOT_TTL_MAX_MS: String(settings.ttlMaxMs),
      DMDOT_ALLOWED_ORIGINS: settings.allowedOrigins.join(','),
      ...(settings.pupManifestJson === undefined ? {} : { PUP_MANIFEST_JSON: settings.pupManifestJson }),
    };
    // HandlerFunction adds nothing to it (source maps are no longer loaded at run time).
    assertEnvironmentFits('MCP', mcpEnvironment, {
      PUP_MANIFEST_JSON: 'pupManifestFile',
      DMDOT_ALLOWED_ORIGINS: 'allowedOrigins',
    });
    this.mcp = new HandlerFunction(this, 'Mcp', {
      entry: 'lambda/handlers/mcp.ts',
      description: 'dm-dot: MCP endpoint, send_to_dot and MCP Events subscriptions',
      memorySize: Sizing.mcpMemoryMiB,
      timeout: Sizing.mcpTimeout,
      logRetention: settings.logRetention,
      environment: mcpEnvironment,
      chunks: [MCP_DATA_CHUNK],
    });
    this.delivery = new HandlerFunction(this, 'Delivery', {
      entry: 'lambda/handlers/delivery.ts',
      description: 'dm-dot: signs and delivers queued events to the dot callback',
      memorySize: Sizing.deliveryMemoryMiB,
      timeout: Sizing.deliveryTimeout,
      logRetention: settings.logRetention,
      environment: {
        TABLE_NAME: this.table.tableName,
        QUEUE_URL: this.queue.queueUrl,
        // The name lambda/handlers/delivery-lambda.ts reads (the first brief said DLQ_URL).
        DEAD_LETTER_QUEUE_URL: this.deadLetterQueue.queueUrl,
        DMDOT_RETRY_DELAYS: settings.retryDelaysS.join(','),
      },
    });
    // maxConcurrency caps the delivery instances at once, and so the POSTs in flight at the one dot
    // (each instance sends its batch concurrently) and the account concurrency the MCP function has
    // to share; SQS event sources accept 2..1000 (lib/settings.ts).
    this.delivery.function.addEventSource(
      new SqsEventSource(this.queue, {
        batchSize: Sizing.batchSize,
        reportBatchItemFailures: true,
        maxConcurrency: settings.deliveryMaxConcurrency,
      }),
    );

    // --- Grants (see the header for the full picture).
    this.table.grant(this.mcp.role, ...DYNAMODB_ACTIONS.mcp);
    this.table.grant(this.delivery.role, ...DYNAMODB_ACTIONS.delivery);
    for (const fn of [this.mcp, this.delivery]) {
      tableKey.grant(fn.role, ...TABLE_KEY_ACTIONS);
      for (const action of ['kms:ReEncrypt*', 'kms:GenerateDataKey*']) {
        Validations.of(fn.role).acknowledge({
          id: `AwsSolutions-IAM5[Action::${action}]`,
          reason:
            'The key permissions aws-cdk-lib grants for reading and writing a DynamoDB table encrypted with a ' +
            'customer-managed key, limited to that one key (the resource is its ARN, not a wildcard).',
        });
      }
    }
    this.queue.grantSendMessages(this.mcp.role);
    this.deadLetterQueue.grantSendMessages(this.delivery.role);
    this.apiKeySecret.grantRead(this.mcp.role);
    this.pupSecret.grantRead(this.mcp.role);

    // --- HTTP API.
    this.http = new McpHttpApi(this, 'Http', {
      handler: this.mcp.function,
      allowedOrigins: settings.allowedOrigins,
      throttleRateLimit: settings.throttleRateLimit,
      throttleBurstLimit: settings.throttleBurstLimit,
      logRetention: settings.logRetention,
    });

    // --- Alarms, optionally mailed. Each fires on one breaching period; no data is not a breach.
    const alarm = (id: string, alarmDescription: string, metric: cloudwatch.IMetric, threshold: number) =>
      new cloudwatch.Alarm(this, id, {
        alarmDescription,
        metric,
        threshold,
        evaluationPeriods: 1,
        comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
        treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
      });
    this.alarms = [
      alarm(
        'DeadLetterAlarm',
        'dm-dot: an event could not be delivered and waits in the dead-letter queue (14 days). See RedriveCommand.',
        this.deadLetterQueue.metricApproximateNumberOfMessagesVisible({ period: Duration.minutes(1), statistic: cloudwatch.Stats.MAXIMUM }),
        1,
      ),
      alarm(
        'DeliveryErrorsAlarm',
        'dm-dot: the delivery function failed (crash or timeout), not a refused callback.',
        this.delivery.function.metricErrors({ period: Duration.minutes(5), statistic: cloudwatch.Stats.SUM }),
        1,
      ),
      alarm(
        'Api5xxAlarm',
        'dm-dot: the HTTP API answered 5xx at least 5 times in 5 minutes.',
        this.http.api.metricServerError({ period: Duration.minutes(5), statistic: cloudwatch.Stats.SUM }),
        5,
      ),
    ];
    if (settings.alarmEmail) {
      // Alarm messages carry alarm names and metric values only; CloudWatch cannot publish to a topic
      // encrypted with the AWS managed SNS key, so the topic stays unencrypted but refuses plain HTTP.
      const topic = new sns.Topic(this, 'AlarmTopic', { displayName: 'dm-dot alarms', enforceSSL: true });
      topic.addSubscription(new EmailSubscription(settings.alarmEmail));
      for (const alarm of this.alarms) alarm.addAlarmAction(new SnsAction(topic));
      // enforceSSL gives the topic a policy of its own, and a topic policy replaces the default one that
      // let the account's services publish: without this Allow every alarm fails with "not authorized to
      // perform: SNS:Publish" and no mail is ever sent
      // (https://repost.aws/knowledge-center/cloudwatch-receive-sns-for-alarm-trigger). Scoped to this
      // account and these alarms against the confused deputy
      // (https://docs.aws.amazon.com/sns/latest/dg/sns-access-policy-use-cases.html).
      topic.addToResourcePolicy(
        new iam.PolicyStatement({
          sid: 'AllowThisStacksAlarmsToPublish',
          effect: iam.Effect.ALLOW,
          principals: [new iam.ServicePrincipal('cloudwatch.amazonaws.com')],
          actions: ['sns:Publish'],
          resources: [topic.topicArn],
          conditions: {
            StringEquals: { 'aws:SourceAccount': this.account },
            ArnEquals: { 'aws:SourceArn': this.alarms.map((a) => a.alarmArn) },
          },
        }),
      );
      this.alarmTopic = topic;
    }

    // --- Dashboard (README "Operating dm-dot").
    this.dashboard = new DmDotDashboard(this, 'Dashboard', {
      mcp: this.mcp.function,
      delivery: this.delivery.function,
      api: this.http.api,
      queue: this.queue,
      deadLetterQueue: this.deadLetterQueue,
      table: this.table,
    });

    // --- Outputs for the operator (README "Deploy to AWS").
    const region = this.region;
    new CfnOutput(this, 'McpEndpoint', {
      description: 'MCP endpoint (no key in it): ChatGPT connects with the API key added as the query parameter "key"',
      value: this.http.mcpUrl,
    });
    new CfnOutput(this, 'ApiKeySecretArn', {
      description: 'Secrets Manager secret that holds the API key',
      value: this.apiKeySecret.secretArn,
    });
    new CfnOutput(this, 'GetApiKeyCommand', {
      description: 'Prints the API key',
      value: Fn.join('', [
        'aws secretsmanager get-secret-value --secret-id ',
        this.apiKeySecret.secretArn,
        ' --query SecretString --output text --region ',
        region,
      ]),
    });
    new CfnOutput(this, 'PupSecretArn', {
      description: 'Secrets Manager secret that holds pup\'s signing secrets ({"secrets":[...]}); empty until you put them in',
      value: this.pupSecret.secretArn,
    });
    new CfnOutput(this, 'DashboardUrl', {
      description: 'CloudWatch dashboard: deliveries, latency, attempts, dead letters, requests, throttles',
      value: this.dashboard.url,
    });
    // `dm-dot <command> --aws --stack NAME` reads these three (DescribeStacks).
    new CfnOutput(this, 'TableName', {
      description: 'DynamoDB table: the subscription and the delivery log (dm-dot events / subscription --aws)',
      value: this.table.tableName,
    });
    new CfnOutput(this, 'DeliveryQueueUrl', {
      description: 'SQS delivery queue (dm-dot redrive --aws moves dead letters back here)',
      value: this.queue.queueUrl,
    });
    new CfnOutput(this, 'DeadLetterQueueUrl', {
      description: 'Events that could not be delivered stay here for 14 days',
      value: this.deadLetterQueue.queueUrl,
    });
    new CfnOutput(this, 'RedriveCommand', {
      description: 'Moves dead-lettered events back to the delivery queue for another round of attempts',
      value: Fn.join('', [
        'aws sqs start-message-move-task --source-arn ',
        this.deadLetterQueue.queueArn,
        ' --destination-arn ',
        this.queue.queueArn,
        ' --region ',
        region,
      ]),
    });
  }
}

/**
 * The delivery queue must keep a message for its whole retry schedule; four days (the SQS
 * default) covers the default schedule of about 13 minutes many times over.
 */
function mainQueueRetention(retryDelaysS: readonly number[]): Duration {
  const scheduleS = retryDelaysS.reduce((sum, d) => sum + d, 0);
  const days = Math.min(14, Math.max(4, Math.ceil(scheduleS / 86_400) + 1));
  return Duration.days(days);
}
