/**
 * The dm-dot stack with cdk.json's defaults, synthesized once (esbuild bundles included) and checked
 * rule by rule against docs/contract: architecture, http, storage, delivery, outbound-guard, pup, limits, the stack's own contract with the handlers,
 * and the logical IDs earlier deployments hold their resources under (the snapshot: see PINNED_BY_ASSERTIONS).
 */
import { inTaskRoot } from '../support/task-root';
import { AwsSolutionsChecks } from 'cdk-nag';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { RECEIVE_LIMIT_AWS_MARGIN, receiveLimit } from '../../lambda/core/delivery';
import { ItemKeys } from '../../lambda/core/store/items';
import { OAUTH_DISCOVERY_PATHS } from '../../lambda/core/protocol';
import { DELIVERY_OUTCOMES, DELIVERY_VIAS, DEPENDENCIES, DimensionName, METRICS_NAMESPACE, MetricName, STATUS_CLASSES } from '../../lambda/metrics';
import { ACCESS_LOG_FIELDS, HEALTHZ_ROUTE, HEALTHZ_THROTTLE, ROUTES } from '../../lib/constructs/http-api';
import { deadLetterAgeAlarmThresholdS, queueAgeAlarmThresholdS } from '../../lib/constructs/observability';
import { PUP_SECRET_TEMPLATE } from '../../lib/constructs/secrets';
import { lambdaBundle } from '../../lib/bundling';
import { LAMBDA_ENVIRONMENT_MAX_BYTES } from '../../lib/lambda-environment';
import { DEFAULTS } from '../../lib/settings';
import { type Json, type Synthesized, acknowledgements, logicalIds, resource, stableTemplate, synthesize, unacknowledgedViolations } from './synth';

let synth: Synthesized;
let template: Json;
const ids = {} as Record<
  'table' | 'key' | 'queue' | 'dlq' | 'secret' | 'pupSecret' | 'mcpFn' | 'deliveryFn' | 'mcpRole' | 'deliveryRole' | 'api' | 'accessLogs' | 'dashboard',
  string
>;

beforeAll(() => {
  synth = synthesize();
  template = synth.template;
  ids.table = resource(template, 'AWS::DynamoDB::Table', 'Table').id;
  ids.key = resource(template, 'AWS::KMS::Key', 'TableKey').id;
  ids.queue = resource(template, 'AWS::SQS::Queue', 'DeliveryQueue').id;
  ids.dlq = resource(template, 'AWS::SQS::Queue', 'DeadLetterQueue').id;
  ids.secret = resource(template, 'AWS::SecretsManager::Secret', 'ApiKey').id;
  ids.pupSecret = resource(template, 'AWS::SecretsManager::Secret', 'PupSigningSecrets').id;
  ids.mcpFn = resource(template, 'AWS::Lambda::Function', 'McpFunction').id;
  ids.deliveryFn = resource(template, 'AWS::Lambda::Function', 'DeliveryFunction').id;
  ids.mcpRole = resource(template, 'AWS::IAM::Role', 'McpRole').id;
  ids.deliveryRole = resource(template, 'AWS::IAM::Role', 'DeliveryRole').id;
  ids.api = resource(template, 'AWS::ApiGatewayV2::Api', 'HttpApi').id;
  ids.accessLogs = resource(template, 'AWS::Logs::LogGroup', 'HttpAccessLogs').id;
  ids.dashboard = resource(template, 'AWS::CloudWatch::Dashboard', 'Dashboard').id;
}, 180_000);

afterAll(() => synth?.cleanup());

const props = (id: string): Json => template.Resources[id].Properties;
const getAtt = (id: string, attr: string) => ({ 'Fn::GetAtt': [id, attr] });
const ref = (id: string) => ({ Ref: id });

/** Every statement of the inline policies attached to a role. */
function statementsOf(roleId: string): Json[] {
  return logicalIds(template, 'AWS::IAM::Policy')
    .map((id) => props(id))
    .filter((p) => JSON.stringify(p.Roles) === JSON.stringify([ref(roleId)]))
    .flatMap((p) => p.PolicyDocument.Statement);
}

/** `action -> resources` for a role, so a test can state exactly what a function may do (conditions: conditionsOf). */
function permissions(roleId: string): Record<string, string[]> {
  const out: Record<string, string[]> = {};
  for (const s of statementsOf(roleId)) {
    expect(s.Effect).toBe('Allow');
    const actions: string[] = [s.Action].flat();
    const resources: string[] = [s.Resource].flat().map((r: Json) => JSON.stringify(r));
    for (const a of actions) out[a] = [...(out[a] ?? []), ...resources].sort();
  }
  return out;
}

/** `action -> condition` for every action of a role whose statement has a condition. */
function conditionsOf(roleId: string): Record<string, Json> {
  const out: Record<string, Json> = {};
  for (const s of statementsOf(roleId)) {
    if (s.Condition === undefined) continue;
    for (const a of [s.Action].flat() as string[]) out[a] = s.Condition;
  }
  return out;
}

/**
 * What the assertions below state, by resource type: the top-level properties (and resource attributes) they pin. The
 * snapshot holds the rest of the template, so each property is pinned once: by an assertion when a rule or a doc
 * names it, by the snapshot otherwise. The snapshot's keys are every resource's logical ID and type, which an upgrade
 * must keep (a new ID replaces the resource: an empty table, a new API key, an alarm without its history).
 */
const PINNED_BY_ASSERTIONS: Record<string, readonly string[]> = {
  'AWS::DynamoDB::Table': [
    'AttributeDefinitions',
    'BillingMode',
    'GlobalSecondaryIndexes',
    'KeySchema',
    'PointInTimeRecoverySpecification',
    'SSESpecification',
    'TimeToLiveSpecification',
    'DeletionPolicy',
    'UpdateReplacePolicy',
  ],
  'AWS::KMS::Key': ['EnableKeyRotation', 'DeletionPolicy', 'UpdateReplacePolicy'],
  'AWS::SecretsManager::Secret': ['GenerateSecretString', 'DeletionPolicy', 'UpdateReplacePolicy'],
  'AWS::SQS::Queue': ['MessageRetentionPeriod', 'RedrivePolicy', 'SqsManagedSseEnabled', 'VisibilityTimeout', 'DeletionPolicy', 'UpdateReplacePolicy'],
  'AWS::SQS::QueuePolicy': ['PolicyDocument', 'Queues'],
  'AWS::Logs::LogGroup': ['RetentionInDays', 'DeletionPolicy', 'UpdateReplacePolicy'],
  'AWS::IAM::Policy': ['PolicyDocument', 'Roles'],
  'AWS::Lambda::Function': ['Architectures', 'Environment', 'Handler', 'LoggingConfig', 'MemorySize', 'Runtime', 'Timeout'],
  'AWS::Lambda::EventSourceMapping': ['BatchSize', 'EventSourceArn', 'FunctionName', 'FunctionResponseTypes', 'ScalingConfig'],
  'AWS::Lambda::EventInvokeConfig': ['FunctionName', 'MaximumRetryAttempts', 'Qualifier'],
  'AWS::Events::Rule': ['ScheduleExpression', 'Targets'],
  'AWS::Lambda::Permission': ['FunctionName', 'Principal', 'SourceArn'],
  'AWS::ApiGatewayV2::Integration': ['IntegrationType', 'IntegrationUri', 'PayloadFormatVersion'],
  'AWS::ApiGatewayV2::Route': ['AuthorizationType', 'RouteKey', 'Target'],
  'AWS::ApiGatewayV2::Stage': ['AccessLogSettings', 'AutoDeploy', 'DefaultRouteSettings', 'RouteSettings', 'StageName'],
  'AWS::CloudWatch::Alarm': [
    'AlarmActions',
    'ComparisonOperator',
    'DatapointsToAlarm',
    'Dimensions',
    'EvaluationPeriods',
    'MetricName',
    'Metrics',
    'Namespace',
    'OKActions',
    'Period',
    'Statistic',
    'Threshold',
    'TreatMissingData',
  ],
  'AWS::CloudWatch::Dashboard': ['DashboardBody', 'DashboardName'],
};

/** The template without what PINNED_BY_ASSERTIONS names, and without the outputs' values (the outputs tests state each). */
function unassertedTemplate(): Json {
  const copy = stableTemplate(template);
  for (const r of Object.values(copy.Resources as Record<string, Json>)) {
    for (const name of PINNED_BY_ASSERTIONS[r.Type] ?? []) {
      delete r[name];
      if (r.Properties) delete r.Properties[name];
    }
    if (r.Properties && Object.keys(r.Properties).length === 0) delete r.Properties;
  }
  for (const output of Object.values(copy.Outputs as Record<string, Json>)) delete output.Value;
  return copy;
}

describe('template', () => {
  test('every logical ID and type, and every property no assertion below states, match the snapshot (asset hashes normalised)', () => {
    expect(unassertedTemplate()).toMatchSnapshot();
  });

  test('each property the snapshot leaves to the assertions is one the template has (no stale name hides a change)', () => {
    const present = new Set<string>();
    for (const r of Object.values(template.Resources as Record<string, Json>)) {
      for (const name of [...Object.keys(r), ...Object.keys(r.Properties ?? {})]) present.add(`${r.Type} ${name}`);
    }
    const missing = Object.entries(PINNED_BY_ASSERTIONS).flatMap(([type, names]) => names.map((n) => `${type} ${n}`).filter((k) => !present.has(k)));
    expect(missing).toEqual([]);
  });
});

describe('ARCH-5: storage (docs/contract/storage.md)', () => {
  test('ARCH-5, STORE-1: table: pk string partition key only, on demand, TTL on `ttl`', () => {
    const table = props(ids.table);
    expect(table.KeySchema).toEqual([{ AttributeName: 'pk', KeyType: 'HASH' }]);
    expect(table.AttributeDefinitions).toEqual([
      { AttributeName: 'pk', AttributeType: 'S' },
      { AttributeName: 'queuedShard', AttributeType: 'S' },
      { AttributeName: 'queuedSince', AttributeType: 'N' },
      { AttributeName: 'pendingShard', AttributeType: 'S' },
      { AttributeName: 'pendingKey', AttributeType: 'S' },
    ]);
    expect(table.BillingMode).toBe('PAY_PER_REQUEST');
    expect(table.TimeToLiveSpecification).toEqual({ AttributeName: 'ttl', Enabled: true });
  });

  test('STORE-IDX-1, STORE-IDX-4: two indexes: `queued` (sharded, sorted by queued time, keys only: no body, no secret) and `pending` (whole items)', () => {
    expect(props(ids.table).GlobalSecondaryIndexes).toEqual([
      {
        IndexName: 'queued',
        KeySchema: [
          { AttributeName: 'queuedShard', KeyType: 'HASH' },
          { AttributeName: 'queuedSince', KeyType: 'RANGE' },
        ],
        Projection: { ProjectionType: 'KEYS_ONLY' },
      },
      {
        IndexName: 'pending',
        KeySchema: [
          { AttributeName: 'pendingShard', KeyType: 'HASH' },
          { AttributeName: 'pendingKey', KeyType: 'RANGE' },
        ],
        Projection: { ProjectionType: 'ALL' },
      },
    ]);
  });

  test('table: point-in-time recovery is on', () => {
    expect(props(ids.table).PointInTimeRecoverySpecification).toEqual({ PointInTimeRecoveryEnabled: true });
  });

  test('table and its key are retained when the stack is deleted or replaced', () => {
    for (const id of [ids.table, ids.key]) {
      expect(template.Resources[id].DeletionPolicy).toBe('Retain');
      expect(template.Resources[id].UpdateReplacePolicy).toBe('Retain');
    }
  });

  test('ARCH-11: table is encrypted with the stack`s customer-managed key, which rotates', () => {
    expect(props(ids.table).SSESpecification).toEqual({
      SSEEnabled: true,
      SSEType: 'KMS',
      KMSMasterKeyId: getAtt(ids.key, 'Arn'),
    });
    expect(props(ids.key).EnableKeyRotation).toBe(true);
  });
});

describe('tearing down (docs/deploying-aws.md "Tearing down")', () => {
  const policies = () =>
    Object.entries(template.Resources as Record<string, Json>).map(([id, r]) => ({
      id,
      type: r.Type as string,
      deletion: r.DeletionPolicy,
      replace: r.UpdateReplacePolicy,
    }));

  test('cdk destroy keeps exactly the table and its KMS key (Retain on delete and on replace), the logical IDs the reattach procedure names', () => {
    const retained = policies().filter((p) => p.deletion === 'Retain' || p.replace === 'Retain');
    expect(retained.map((p) => [p.id, p.type, p.deletion, p.replace]).sort()).toEqual([
      ['TableCD117FA1', 'AWS::DynamoDB::Table', 'Retain', 'Retain'],
      ['TableKeyF581D96F', 'AWS::KMS::Key', 'Retain', 'Retain'],
    ]);
  });

  test('the queues, the secrets and the log groups are deleted with the stack (Delete), as the doc says', () => {
    for (const type of ['AWS::SQS::Queue', 'AWS::SecretsManager::Secret', 'AWS::Logs::LogGroup']) {
      const ofType = policies().filter((p) => p.type === type);
      expect(ofType.length).toBeGreaterThan(0);
      for (const p of ofType) expect([p.id, p.deletion, p.replace]).toEqual([p.id, 'Delete', 'Delete']);
    }
  });

  test('the doc`s table and reattach procedure name what the template holds', () => {
    const doc = fs.readFileSync(path.join(__dirname, '../../docs/deploying-aws.md'), 'utf8');
    const section = /\n## Tearing down\n([\s\S]*?)\n## /.exec(doc)?.[1] ?? '';
    expect(section).toMatch(/DynamoDB table[^\n]*`Retain`[^\n]*\*\*kept\*\*/);
    expect(section).toMatch(/KMS key[^\n]*`Retain`[^\n]*\*\*kept\*\*/);
    expect(section).toMatch(/queue[^\n]*`Delete`[^\n]*deleted/);
    expect(section).toMatch(/secrets[^\n]*`Delete`[^\n]*deleted/);
    expect(section).toMatch(/log groups[^\n]*`Delete`[^\n]*deleted/);
    for (const id of [ids.table, ids.key]) expect(section).toContain(id);
  });
});

describe('queues (docs/contract/delivery.md)', () => {
  test('ARCH-7, LIM-11: dead-letter queue keeps messages 14 days (1,209,600 s)', () => {
    expect(props(ids.dlq).MessageRetentionPeriod).toBe(1_209_600);
  });

  test('DEL-PIPE-19: redrive maxReceiveCount = the worker`s receive limit + AWS`s margin of 5 = 15 with the default schedule', () => {
    // The worker dead-letters a message itself, with a reason, on receive receiveLimit (6 attempts + 4
    // receives that are not attempts); SQS's redrive only catches what the handler never saw, and AWS
    // recommends leaving at least 5 receives for throttling.
    const delays = DEFAULTS.retryDelays.split(',').map(Number);
    expect(receiveLimit(delays)).toBe(10);
    expect(RECEIVE_LIMIT_AWS_MARGIN).toBeGreaterThanOrEqual(5);
    expect(props(ids.queue).RedrivePolicy).toEqual({ deadLetterTargetArn: getAtt(ids.dlq, 'Arn'), maxReceiveCount: 15 });
  });

  test('visibility timeout is at least 6x the delivery function timeout', () => {
    expect(props(ids.queue).VisibilityTimeout).toBeGreaterThanOrEqual(6 * props(ids.deliveryFn).Timeout);
  });

  test('main queue keeps a message longer than its whole retry schedule', () => {
    const scheduleS = DEFAULTS.retryDelays
      .split(',')
      .map(Number)
      .reduce((a, b) => a + b, 0);
    expect(props(ids.queue).MessageRetentionPeriod).toBeGreaterThan(scheduleS + props(ids.queue).VisibilityTimeout);
  });

  test('both queues are encrypted and refuse requests without TLS', () => {
    for (const id of [ids.queue, ids.dlq]) {
      expect(props(id).SqsManagedSseEnabled).toBe(true);
      const policy = logicalIds(template, 'AWS::SQS::QueuePolicy')
        .map((p) => props(p))
        .find((p) => JSON.stringify(p.Queues) === JSON.stringify([ref(id)]));
      expect(policy?.PolicyDocument.Statement).toContainEqual(
        expect.objectContaining({ Effect: 'Deny', Action: 'sqs:*', Condition: { Bool: { 'aws:SecureTransport': 'false' } } }),
      );
    }
  });

  test('ARCH-6, DEL-PIPE-10: event source: the delivery queue, batches of 10, partial batch failures reported, at most 2 instances at once', () => {
    const mappings = logicalIds(template, 'AWS::Lambda::EventSourceMapping').map(props);
    expect(DEFAULTS.deliveryMaxConcurrency).toBe(2);
    expect(mappings).toEqual([
      {
        EventSourceArn: getAtt(ids.queue, 'Arn'),
        FunctionName: ref(ids.deliveryFn),
        BatchSize: 10,
        FunctionResponseTypes: ['ReportBatchItemFailures'],
        ScalingConfig: { MaximumConcurrency: 2 },
      },
    ]);
  });
});

describe('ARCH-10: API key (docs/contract: architecture, http)', () => {
  test('ARCH-10: the secret is generated by Secrets Manager: 43+ letters and digits, no value in the template', () => {
    const secret = props(ids.secret);
    expect(secret.SecretString).toBeUndefined();
    expect(secret.GenerateSecretString).toEqual(expect.objectContaining({ ExcludePunctuation: true, IncludeSpace: false }));
    expect(secret.GenerateSecretString.PasswordLength).toBeGreaterThanOrEqual(43);
    expect(secret.GenerateSecretString.SecretStringTemplate).toBeUndefined();
    expect(JSON.stringify(template)).not.toMatch(/"SecretString"/);
  });

  test('pup`s secret is created holding no secret: a template that parses as an empty list, no value in the template', () => {
    const secret = props(ids.pupSecret);
    expect(secret.SecretString).toBeUndefined();
    expect(secret.GenerateSecretString).toEqual({ SecretStringTemplate: PUP_SECRET_TEMPLATE, GenerateStringKey: 'unused' });
    // What the MCP function reads before the operator puts secrets in: no secrets, so pup's POSTs get 503.
    expect(JSON.parse(secret.GenerateSecretString.SecretStringTemplate)).toEqual({ secrets: [] });
    expect(JSON.stringify(template)).not.toMatch(/whsec_[A-Za-z0-9+/=]{8,}/);
  });

  test('ARCH-10: no API key material anywhere: no key parameter, no key= in any string', () => {
    expect(Object.keys(template.Parameters ?? {})).toEqual(['BootstrapVersion']);
    expect(JSON.stringify(template)).not.toMatch(/[?&]key=/);
    expect(JSON.stringify(template)).not.toMatch(/MCP_API_KEY/);
  });
});

describe('functions', () => {
  test('all three run nodejs24.x on arm64 and never load source maps at run time (stack traces are decoded offline)', () => {
    const functions = logicalIds(template, 'AWS::Lambda::Function');
    expect(functions).toHaveLength(3);
    for (const id of functions) {
      expect(props(id)).toEqual(expect.objectContaining({ Runtime: 'nodejs24.x', Architectures: ['arm64'], Handler: 'index.handler' }));
      expect(JSON.stringify(props(id).Environment.Variables)).not.toContain('source-map');
    }
  });

  test("the bundles target the runtime's Node major, and test/tools installs that major to start them on", () => {
    const major = (props(ids.mcpFn).Runtime as string).replace(/^nodejs(\d+)\.x$/, '$1');
    expect(lambdaBundle().target).toBe(`node${major}`);
    const tools = JSON.parse(fs.readFileSync(path.join(__dirname, '..', 'tools', 'package.json'), 'utf8'));
    const nodes = Object.entries({ ...tools.dependencies, ...tools.devDependencies, ...tools.optionalDependencies }).filter(([name]) => /^node-/.test(name));
    expect(nodes.length).toBeGreaterThan(0);
    for (const [name, version] of nodes) expect(`${name}@${String(version).split('.')[0]}`).toBe(`${name}@${major}`);
  });

  test('timeouts and memory: MCP 15 s (a 5 s request, then an inline attempt that may run on after it), delivery 15 s (5 s deadline per request)', () => {
    expect(props(ids.mcpFn)).toEqual(expect.objectContaining({ Timeout: 15, MemorySize: 512 }));
    expect(props(ids.deliveryFn)).toEqual(expect.objectContaining({ Timeout: 15, MemorySize: 256 }));
    // The reconciler's 60 s timeout is stated with its schedule (DEL-OUT-8 below).
    expect(props(resource(template, 'AWS::Lambda::Function', 'ReconcilerFunction').id).MemorySize).toBe(256);
  });

  test('environment is exactly the handlers` contract', () => {
    expect(props(ids.mcpFn).Environment.Variables).toEqual({
      TABLE_NAME: ref(ids.table),
      QUEUE_URL: ref(ids.queue),
      API_KEY_SECRET_ARN: ref(ids.secret),
      PUP_SECRET_ARN: ref(ids.pupSecret),
      DMDOT_DELIVERY_WAIT_MS: String(DEFAULTS.deliveryWaitMs),
      DMDOT_RETRY_DELAYS: DEFAULTS.retryDelays,
      DMDOT_TTL_DEFAULT_MS: String(DEFAULTS.ttlDefaultMs),
      DMDOT_TTL_MAX_MS: String(DEFAULTS.ttlMaxMs),
      DMDOT_ALLOWED_ORIGINS: '',
      NODE_OPTIONS: '--import=/var/task/after-response.mjs',
    });
    expect(props(ids.deliveryFn).Environment.Variables).toEqual({
      TABLE_NAME: ref(ids.table),
      QUEUE_URL: ref(ids.queue),
      DEAD_LETTER_QUEUE_URL: ref(ids.dlq),
      DMDOT_RETRY_DELAYS: DEFAULTS.retryDelays,
    });
    expect(props(resource(template, 'AWS::Lambda::Function', 'ReconcilerFunction').id).Environment.Variables).toEqual({
      TABLE_NAME: ref(ids.table),
      QUEUE_URL: ref(ids.queue),
      DEAD_LETTER_QUEUE_URL: ref(ids.dlq),
      DMDOT_RETRY_DELAYS: DEFAULTS.retryDelays,
    });
  });

  test('no pup manifest configured: no PUP_MANIFEST_FILE, and no PUP_MANIFEST_JSON anywhere in the template', () => {
    expect(props(ids.mcpFn).Environment.Variables.PUP_MANIFEST_FILE).toBeUndefined();
    expect(JSON.stringify(template)).not.toContain('PUP_MANIFEST_JSON');
  });

  test('the MCP environment, measured as Lambda measures it with each reference at 256 bytes, leaves most of the 4 KB free', () => {
    // About 1,300 bytes today (four references of 256 each); far more would mean something large moved into the environment again.
    expect(synth.stack.mcp.environmentBytes).toBeGreaterThan(400);
    expect(synth.stack.mcp.environmentBytes).toBeLessThan(LAMBDA_ENVIRONMENT_MAX_BYTES / 2);
  });

  test('GUARD-14: DMDOT_ALLOW_LOOPBACK_CALLBACKS is never set (docs/contract/outbound-guard.md)', () => {
    for (const id of logicalIds(template, 'AWS::Lambda::Function')) {
      expect(Object.keys(props(id).Environment?.Variables ?? {})).not.toContain('DMDOT_ALLOW_LOOPBACK_CALLBACKS');
    }
    expect(JSON.stringify(template)).not.toContain('ALLOW_LOOPBACK');
  });

  test('each function logs to its own log group, kept for logRetentionDays (default 30)', () => {
    for (const [fn, prefix] of [
      [ids.mcpFn, 'McpLogs'],
      [ids.deliveryFn, 'DeliveryLogs'],
      [resource(template, 'AWS::Lambda::Function', 'ReconcilerFunction').id, 'ReconcilerFunctionLogs'],
    ] as const) {
      const logs = resource(template, 'AWS::Logs::LogGroup', prefix);
      expect(props(fn).LoggingConfig).toEqual({ LogGroup: ref(logs.id) });
      expect(logs.Properties.RetentionInDays).toBe(DEFAULTS.logRetentionDays);
    }
  });
});

describe('least privilege', () => {
  const at = (id: string, attr = 'Arn') => JSON.stringify(getAtt(id, attr));

  test('roles have no managed policies and no wildcard resources', () => {
    for (const roleId of [ids.mcpRole, ids.deliveryRole]) {
      expect(props(roleId).ManagedPolicyArns).toBeUndefined();
      expect(JSON.stringify(statementsOf(roleId).map((s) => s.Resource))).not.toContain('"*"');
    }
  });

  test('MCP role: its logs, table item CRUD, the table key, send to the delivery queue, read the key and pup secrets', () => {
    const p = permissions(ids.mcpRole);
    const key = at(ids.key);
    expect(p).toEqual({
      'logs:CreateLogStream': [at(resource(template, 'AWS::Logs::LogGroup', 'McpLogs').id)],
      'logs:PutLogEvents': [at(resource(template, 'AWS::Logs::LogGroup', 'McpLogs').id)],
      'dynamodb:GetItem': [at(ids.table)],
      'dynamodb:PutItem': [at(ids.table)],
      'dynamodb:UpdateItem': [at(ids.table)],
      'dynamodb:DeleteItem': [at(ids.table)],
      'kms:Decrypt': [key],
      'kms:DescribeKey': [key],
      'kms:Encrypt': [key],
      'kms:GenerateDataKey*': [key],
      'kms:ReEncrypt*': [key],
      'sqs:SendMessage': [at(ids.queue)],
      'sqs:GetQueueAttributes': [at(ids.queue)],
      'sqs:GetQueueUrl': [at(ids.queue)],
      'secretsmanager:GetSecretValue': [JSON.stringify(ref(ids.secret)), JSON.stringify(ref(ids.pupSecret))].sort(),
      'secretsmanager:DescribeSecret': [JSON.stringify(ref(ids.secret)), JSON.stringify(ref(ids.pupSecret))].sort(),
    });
  });

  const kmsActions = ['kms:Decrypt', 'kms:DescribeKey', 'kms:Encrypt', 'kms:GenerateDataKey*', 'kms:ReEncrypt*'];
  /** kms:ViaService = dynamodb.<the stack's region>.amazonaws.com: the key works only through DynamoDB in this region. */
  const viaDynamoDb = { StringEquals: { 'kms:ViaService': { 'Fn::Join': ['', ['dynamodb.', ref('AWS::Region'), '.amazonaws.com']] } } };

  test('both roles may use the table key only through DynamoDB in the stack`s region (kms:ViaService)', () => {
    for (const roleId of [ids.mcpRole, ids.deliveryRole]) {
      const conditions = conditionsOf(roleId);
      for (const action of kmsActions) expect({ action, condition: conditions[action] }).toEqual({ action, condition: viaDynamoDb });
    }
  });

  test('delivery role: item actions only on SUBSCRIPTION and EVENT#* items (dynamodb:LeadingKeys, every key of a request)', () => {
    const conditions = conditionsOf(ids.deliveryRole);
    const leadingKeys = { 'ForAllValues:StringLike': { 'dynamodb:LeadingKeys': ['SUBSCRIPTION', 'EVENT#*'] } };
    for (const action of ['dynamodb:GetItem', 'dynamodb:UpdateItem', 'dynamodb:DeleteItem']) {
      expect({ action, condition: conditions[action] }).toEqual({ action, condition: leadingKeys });
    }
    // The patterns are the keys the storage adapter writes (lambda/core/store/items.ts), not look-alikes.
    expect(ItemKeys.subscription).toBe('SUBSCRIPTION');
    expect(ItemKeys.event('evt_0')).toBe('EVENT#evt_0');
    // Nothing else of the delivery role is conditional, nothing is left unconditional on the table or key.
    expect(Object.keys(conditions).sort()).toEqual([...kmsActions, 'dynamodb:DeleteItem', 'dynamodb:GetItem', 'dynamodb:UpdateItem'].sort());
  });

  test('MCP role: every item kind (no LeadingKeys), so only its key use carries a condition', () => {
    expect(Object.keys(conditionsOf(ids.mcpRole)).sort()).toEqual([...kmsActions].sort());
  });

  test('pup`s secret: readable by the MCP role only, and no resource policy opens it to anyone else', () => {
    const readers = logicalIds(template, 'AWS::IAM::Policy')
      .filter((id) => JSON.stringify(props(id).PolicyDocument).includes(JSON.stringify(ref(ids.pupSecret))))
      .map((id) => props(id).Roles);
    expect(readers).toEqual([[ref(ids.mcpRole)]]);
    expect(logicalIds(template, 'AWS::SecretsManager::ResourcePolicy')).toEqual([]);
  });

  test('MCP role: nothing on the dead-letter queue, no ChangeMessageVisibility', () => {
    const statements = JSON.stringify(statementsOf(ids.mcpRole));
    expect(statements).not.toContain(ids.dlq);
    expect(statements).not.toContain('ChangeMessageVisibility');
    expect(statements).not.toContain('ReceiveMessage');
  });

  test('delivery role: its logs, table Get/Update/Delete (a 410 ends the subscription), the key, consume the queue, send to the DLQ', () => {
    const p = permissions(ids.deliveryRole);
    const key = at(ids.key);
    expect(p).toEqual({
      'logs:CreateLogStream': [at(resource(template, 'AWS::Logs::LogGroup', 'DeliveryLogs').id)],
      'logs:PutLogEvents': [at(resource(template, 'AWS::Logs::LogGroup', 'DeliveryLogs').id)],
      'dynamodb:GetItem': [at(ids.table)],
      'dynamodb:UpdateItem': [at(ids.table)],
      'dynamodb:DeleteItem': [at(ids.table)],
      'kms:Decrypt': [key],
      'kms:DescribeKey': [key],
      'kms:Encrypt': [key],
      'kms:GenerateDataKey*': [key],
      'kms:ReEncrypt*': [key],
      'sqs:ReceiveMessage': [at(ids.queue)],
      'sqs:ChangeMessageVisibility': [at(ids.queue)],
      'sqs:DeleteMessage': [at(ids.queue)],
      'sqs:GetQueueAttributes': [at(ids.dlq), at(ids.queue)].sort(),
      'sqs:GetQueueUrl': [at(ids.dlq), at(ids.queue)].sort(),
      'sqs:SendMessage': [at(ids.dlq)],
    });
  });

  test('delivery role: no Secrets Manager access, and it never creates an item (no PutItem)', () => {
    expect(JSON.stringify(statementsOf(ids.deliveryRole))).not.toContain('secretsmanager');
    expect(JSON.stringify(statementsOf(ids.deliveryRole))).not.toContain('dynamodb:PutItem');
  });

  test('DEL-OUT-4: reconciler role: its logs, Query on the queued index only, Get/Update on EVENT# items only, the key through DynamoDB, send to both queues; nothing else', () => {
    const role = resource(template, 'AWS::IAM::Role', 'ReconcilerFunctionRole').id;
    const key = at(ids.key);
    const logGroup = at(resource(template, 'AWS::Logs::LogGroup', 'ReconcilerFunctionLogs').id);
    expect(props(role).ManagedPolicyArns).toBeUndefined();
    expect(permissions(role)).toEqual({
      'logs:CreateLogStream': [logGroup],
      'logs:PutLogEvents': [logGroup],
      'dynamodb:Query': [JSON.stringify({ 'Fn::Join': ['', [getAtt(ids.table, 'Arn'), '/index/queued']] })],
      'dynamodb:GetItem': [at(ids.table)],
      'dynamodb:UpdateItem': [at(ids.table)],
      'kms:Decrypt': [key],
      'kms:DescribeKey': [key],
      'kms:Encrypt': [key],
      'kms:GenerateDataKey*': [key],
      'kms:ReEncrypt*': [key],
      'sqs:SendMessage': [at(ids.dlq), at(ids.queue)].sort(),
      'sqs:GetQueueAttributes': [at(ids.dlq), at(ids.queue)].sort(),
      'sqs:GetQueueUrl': [at(ids.dlq), at(ids.queue)].sort(),
    });
    const conditions = conditionsOf(role);
    const leadingKeys = { 'ForAllValues:StringLike': { 'dynamodb:LeadingKeys': ['EVENT#*'] } };
    for (const action of ['dynamodb:GetItem', 'dynamodb:UpdateItem'])
      expect({ action, condition: conditions[action] }).toEqual({ action, condition: leadingKeys });
    for (const action of kmsActions) expect({ action, condition: conditions[action] }).toEqual({ action, condition: viaDynamoDb });
  });

  test('DEL-OUT-4, DEL-OUT-8: the reconciler runs every 5 minutes from a schedule rule, retried neither by the rule nor by Lambda, and only that rule may invoke it', () => {
    const fn = resource(template, 'AWS::Lambda::Function', 'ReconcilerFunction').id;
    const rule = resource(template, 'AWS::Events::Rule', 'ReconcilerSchedule').id;
    expect(props(rule).ScheduleExpression).toBe('rate(5 minutes)');
    expect(props(rule).Targets).toEqual([
      expect.objectContaining({ Arn: getAtt(fn, 'Arn'), RetryPolicy: { MaximumRetryAttempts: 0, MaximumEventAgeInSeconds: 60 } }),
    ]);
    // An EventBridge rule invokes asynchronously: without this Lambda itself retries a failed run twice.
    expect(logicalIds(template, 'AWS::Lambda::EventInvokeConfig').map(props)).toEqual([
      { FunctionName: ref(fn), Qualifier: '$LATEST', MaximumRetryAttempts: 0 },
    ]);
    const invokers = logicalIds(template, 'AWS::Lambda::Permission')
      .map(props)
      .filter((p) => JSON.stringify(p.FunctionName) === JSON.stringify(getAtt(fn, 'Arn')));
    expect(invokers).toEqual([expect.objectContaining({ Principal: 'events.amazonaws.com', SourceArn: getAtt(rule, 'Arn') })]);
    expect(props(fn).Timeout).toBe(60);
  });

  test('ARCH-3: only API Gateway may invoke the MCP function, only for this API', () => {
    const reconcilerFn = resource(template, 'AWS::Lambda::Function', 'ReconcilerFunction').id;
    const permissionsOfMcp = logicalIds(template, 'AWS::Lambda::Permission')
      .map(props)
      .filter((p) => JSON.stringify(p.FunctionName) !== JSON.stringify(getAtt(reconcilerFn, 'Arn')));
    expect(permissionsOfMcp.length).toBeGreaterThan(0);
    for (const p of permissionsOfMcp) {
      expect(p.FunctionName).toEqual(getAtt(ids.mcpFn, 'Arn'));
      expect(p.Principal).toBe('apigateway.amazonaws.com');
      expect(JSON.stringify(p.SourceArn)).toContain(JSON.stringify(ref(ids.api)));
    }
  });
});

describe('HTTP API (docs/contract/http.md)', () => {
  test('ARCH-3, PUP-2, RCPT-1: exactly the fourteen routes (docs/contract/http.md, the pup door of docs/contract/pup.md, OAuth discovery, receipts), each to the MCP function with payload format 2.0', () => {
    const routes = logicalIds(template, 'AWS::ApiGatewayV2::Route').map(props);
    expect(routes.map((r) => r.RouteKey).sort()).toEqual(Object.keys(ROUTES).sort());
    expect(Object.keys(ROUTES).sort()).toEqual(
      [
        'DELETE /mcp',
        'GET /healthz',
        'GET /mcp',
        'POST /mcp',
        'POST /v1/messages',
        'GET /pup/manifest.json',
        'POST /pup/mcp',
        'POST /pup/challenge',
        'POST /pup/events',
        'GET /.well-known/oauth-protected-resource',
        'GET /.well-known/oauth-protected-resource/mcp',
        'GET /.well-known/oauth-authorization-server',
        'GET /.well-known/oauth-authorization-server/mcp',
        'GET /v1/messages/{eventId}',
      ].sort(),
    );
    const integrations = logicalIds(template, 'AWS::ApiGatewayV2::Integration');
    expect(integrations).toHaveLength(1);
    const integration = props(integrations[0] as string);
    expect(integration).toEqual(
      expect.objectContaining({
        IntegrationType: 'AWS_PROXY',
        IntegrationUri: getAtt(ids.mcpFn, 'Arn'),
        PayloadFormatVersion: '2.0',
      }),
    );
    for (const r of routes) {
      expect(r.Target).toEqual({ 'Fn::Join': ['', ['integrations/', ref(integrations[0] as string)]] });
      expect(r.AuthorizationType ?? 'NONE').toBe('NONE');
    }
  });

  test('the OAuth discovery paths an MCP client probes after a 401 reach the function: the paths the app answers', () => {
    // Without these routes API Gateway answers them itself, with a bare 404 that explains nothing.
    const routed = Object.keys(ROUTES)
      .filter((key) => key.startsWith('GET /.well-known/'))
      .map((key) => key.slice('GET '.length));
    expect(routed.sort()).toEqual([...OAUTH_DISCOVERY_PATHS].sort());
    // Public like /healthz, and throttled by the stage's default, not the health check's own limit.
    const stage = props(resource(template, 'AWS::ApiGatewayV2::Stage', 'HttpDefaultStage').id);
    expect(Object.keys(stage.RouteSettings)).toEqual([HEALTHZ_ROUTE]);
  });

  test('default stage is throttled with the context defaults', () => {
    const stage = props(resource(template, 'AWS::ApiGatewayV2::Stage', 'HttpDefaultStage').id);
    expect(stage.StageName).toBe('$default');
    expect(stage.AutoDeploy).toBe(true);
    expect(stage.DefaultRouteSettings).toEqual({
      ThrottlingRateLimit: DEFAULTS.throttleRateLimit,
      ThrottlingBurstLimit: DEFAULTS.throttleBurstLimit,
    });
  });

  test('GET /healthz has its own, lower route throttle (CloudFormation spelling), and only it', () => {
    const stage = props(resource(template, 'AWS::ApiGatewayV2::Stage', 'HttpDefaultStage').id);
    expect(HEALTHZ_ROUTE).toBe('GET /healthz');
    expect(stage.RouteSettings).toEqual({
      'GET /healthz': { ThrottlingRateLimit: HEALTHZ_THROTTLE.rateLimit, ThrottlingBurstLimit: HEALTHZ_THROTTLE.burstLimit },
    });
    expect(HEALTHZ_THROTTLE.rateLimit).toBeLessThan(DEFAULTS.throttleRateLimit);
    expect(HEALTHZ_THROTTLE.burstLimit).toBeLessThan(DEFAULTS.throttleBurstLimit);
  });

  test('the stage is created after the /healthz route: API Gateway refuses route settings for a route it cannot find', () => {
    const stageId = resource(template, 'AWS::ApiGatewayV2::Stage', 'HttpDefaultStage').id;
    const healthz = logicalIds(template, 'AWS::ApiGatewayV2::Route').find((id) => props(id).RouteKey === 'GET /healthz');
    expect(healthz).toBeDefined();
    expect(template.Resources[stageId].DependsOn).toContain(healthz);
  });

  test('EXPO-2, HTTP-10: access logs: JSON to the stack`s log group, never the path as sent or the query string', () => {
    const settings = props(resource(template, 'AWS::ApiGatewayV2::Stage', 'HttpDefaultStage').id).AccessLogSettings;
    expect(settings.DestinationArn).toEqual(getAtt(ids.accessLogs, 'Arn'));
    const format = JSON.parse(settings.Format) as Record<string, string>;
    expect(format).toEqual(ACCESS_LOG_FIELDS);
    expect(format).toEqual(expect.objectContaining({ requestId: '$context.requestId', routeKey: '$context.routeKey' }));
    for (const variable of Object.values(format)) {
      expect(variable).toMatch(/^\$context\.[A-Za-z.]+$/);
      expect(variable.toLowerCase()).not.toMatch(/path|query|requestoverride|responseoverride|request\.|authorizer|customdomain/);
    }
    expect(settings.Format).not.toMatch(/\$input|\$request|querystring|rawQueryString|\$context\.path/i);
    expect(props(ids.accessLogs).RetentionInDays).toBe(DEFAULTS.logRetentionDays);
  });

  test('access logs stay JSON whatever a client sends: every $context variable is on the allow-list of text API Gateway produces itself', () => {
    // API Gateway writes a variable's text into the format unescaped: a user agent holding `"` or `\`
    // would break the line. So only these may appear (reviewed one by one; lib/constructs/http-api.ts says why each is safe).
    const allowed = [
      '$context.requestId',
      '$context.requestTimeEpoch',
      '$context.identity.sourceIp',
      '$context.routeKey',
      '$context.protocol',
      '$context.status',
      '$context.responseLength',
      '$context.responseLatency',
      '$context.integrationStatus',
      '$context.integrationLatency',
      '$context.error.message',
    ];
    expect(Object.values(ACCESS_LOG_FIELDS).sort()).toEqual([...allowed].sort());
    const format: string = props(resource(template, 'AWS::ApiGatewayV2::Stage', 'HttpDefaultStage').id).AccessLogSettings.Format;
    const used = [...format.matchAll(/\$context\.[A-Za-z0-9_.]+/g)].map((m) => m[0]);
    expect(used.length).toBe(Object.keys(ACCESS_LOG_FIELDS).length);
    for (const variable of used) expect(allowed).toContain(variable);
    // Each value is exactly one variable inside quotes: nothing else is spliced into the JSON.
    for (const value of Object.values(JSON.parse(format) as Record<string, string>)) expect(allowed).toContain(value);
    // No client text: no user agent, no path, no query string, no header, no request or integration error text.
    expect(format).not.toMatch(/userAgent|\.path|querystring|header|integrationErrorMessage|integration\.error|\$input|\$request/i);
    // Filled with values of the shapes these variables take, the line parses.
    const sample = format.replace(/\$context\.[A-Za-z0-9_.]+/g, (v) =>
      v === '$context.error.message' ? 'Not Found' : v.endsWith('sourceIp') ? '203.0.113.7' : '-',
    );
    expect(() => JSON.parse(sample)).not.toThrow();
  });

  test('HTTP-12: no CORS configuration while no browser origin is allowed', () => {
    expect(props(ids.api).CorsConfiguration).toBeUndefined();
  });
});

describe('alarms', () => {
  const alarms = () => logicalIds(template, 'AWS::CloudWatch::Alarm').map(props);
  /** The alarm built from metric math whose metrics include one with this name (each name is watched by one alarm). */
  const mathAlarm = (metricName: string, namespace: string): Json => {
    const found = alarms().filter((a: Json) =>
      (a.Metrics ?? []).some((m: Json) => m.MetricStat?.Metric.MetricName === metricName && m.MetricStat?.Metric.Namespace === namespace),
    );
    expect(found).toHaveLength(1);
    return found[0];
  };
  /** `id -> "namespace name dim=value stat period"` for the metrics of a math alarm, and its returned expression. */
  const queries = (alarm: Json) => {
    const metrics: Record<string, string> = {};
    const expressions: Record<string, string> = {};
    for (const m of alarm.Metrics as Json[]) {
      if (m.Expression) expressions[m.Id] = m.Expression;
      else {
        const dims = (m.MetricStat.Metric.Dimensions ?? []).map((d: Json) => `${d.Name}=${JSON.stringify(d.Value)}`);
        metrics[m.Id] = [m.MetricStat.Metric.Namespace, m.MetricStat.Metric.MetricName, ...dims, m.MetricStat.Stat, m.MetricStat.Period].join(' ');
      }
    }
    const returned = (alarm.Metrics as Json[]).filter((m) => m.ReturnData !== false);
    expect(returned).toHaveLength(1);
    return { metrics, expressions, returned: returned[0].Expression as string };
  };
  const defaultDelays = DEFAULTS.retryDelays.split(',').map(Number);

  test('nine alarms, each firing on one breaching period but the two that need more; missing data is a breach only for the reconciler`s silence', () => {
    expect(alarms()).toHaveLength(9);
    const byPeriods = alarms().map((a: Json) => `${a.EvaluationPeriods}/${a.DatapointsToAlarm ?? a.EvaluationPeriods} ${a.TreatMissingData}`);
    expect(byPeriods.sort()).toEqual([...Array(7).fill('1/1 notBreaching'), '3/1 notBreaching', '3/3 breaching'].sort());
  });

  test('ARCH-7, ARCH-ALARM-3: a dead letter fires the alarm for each new letter and it returns to OK: the rise of the depth the reconciler reads every run, never a late SQS minute', () => {
    const alarm = mathAlarm(MetricName.deadLetters, METRICS_NAMESPACE);
    const { metrics, returned } = queries(alarm);
    expect(Object.values(metrics)).toEqual([`${METRICS_NAMESPACE} ${MetricName.deadLetters} Maximum 300`]);
    const [depth] = Object.keys(metrics);
    expect(returned).toBe(`IF(DIFF(${depth}) > 0, DIFF(${depth}), 0)`);
    // Three periods, one breaching: DIFF has the period before it, and a rise is seen whenever its
    // run's line lands in the window; a silent reconciler is ReconcilerSilentAlarm's, not a breach here.
    expect(alarm).toMatchObject({
      ComparisonOperator: 'GreaterThanOrEqualToThreshold',
      Threshold: 1,
      EvaluationPeriods: 3,
      DatapointsToAlarm: 1,
      TreatMissingData: 'notBreaching',
    });
    // No alarm reads SQS's one-minute dead-letter counts (late for a quiet queue), nor the standing count.
    const sqsDeadLetterMetrics = alarms().flatMap((a: Json) => [a, ...(a.Metrics ?? []).map((m: Json) => m.MetricStat?.Metric ?? {})]);
    expect(sqsDeadLetterMetrics.filter((m: Json) => ['NumberOfMessagesSent', 'ApproximateNumberOfMessagesVisible'].includes(m.MetricName))).toEqual([]);
  });

  test('ARCH-ALARM-3: the dead-letter alarm keeps the logical ID the first deployments gave it (its state and history)', () => {
    // The ID the snapshot pins since the first deployments, now holding the reconciler's count.
    expect(template.Resources.DeadLetterAlarmBB7AE56D?.Type).toBe('AWS::CloudWatch::Alarm');
    const metrics = template.Resources.DeadLetterAlarmBB7AE56D.Properties.Metrics as Json[];
    expect(metrics.some((m: Json) => m.MetricStat?.Metric.MetricName === MetricName.deadLetters)).toBe(true);
  });

  test('ARCH-ALARM-7: the reconciler`s failed runs (its Errors >= 1 in 5 minutes) and its silence (no Invocations for 15 minutes, no data a breach)', () => {
    const fn = resource(template, 'AWS::Lambda::Function', 'ReconcilerFunction').id;
    const dimensions = JSON.stringify([{ Name: 'FunctionName', Value: ref(fn) }]);
    const on = (metricName: string) => alarms().filter((a: Json) => a.MetricName === metricName && JSON.stringify(a.Dimensions) === dimensions);
    expect(on('Errors')).toEqual([
      expect.objectContaining({
        Namespace: 'AWS/Lambda',
        Statistic: 'Sum',
        Period: 300,
        ComparisonOperator: 'GreaterThanOrEqualToThreshold',
        Threshold: 1,
        TreatMissingData: 'notBreaching',
      }),
    ]);
    expect(on('Invocations')).toEqual([
      expect.objectContaining({
        Namespace: 'AWS/Lambda',
        Statistic: 'Sum',
        Period: 300,
        EvaluationPeriods: 3,
        DatapointsToAlarm: 3,
        ComparisonOperator: 'LessThanThreshold',
        Threshold: 1,
        TreatMissingData: 'breaching',
      }),
    ]);
  });

  test('ARCH-ALARM-4: the oldest dead letter alarms about 2 days before its 14-day retention ends', () => {
    const alarm = alarms().find((a: Json) => a.MetricName === 'ApproximateAgeOfOldestMessage' && JSON.stringify(a.Dimensions).includes(ids.dlq));
    const threshold = deadLetterAgeAlarmThresholdS(defaultDelays);
    expect(alarm).toMatchObject({
      Namespace: 'AWS/SQS',
      Dimensions: [{ Name: 'QueueName', Value: getAtt(ids.dlq, 'QueueName') }],
      Statistic: 'Maximum',
      Period: 60,
      ComparisonOperator: 'GreaterThanOrEqualToThreshold',
      Threshold: threshold,
      TreatMissingData: 'notBreaching',
    });
    // With the default schedule: 12 days less the hour at most a job spends on the queue before SQS moves it.
    expect(threshold).toBeLessThanOrEqual(12 * 86_400);
    expect(threshold).toBeGreaterThan(11.9 * 86_400);
  });

  test('ARCH-ALARM-2: the delivery queue`s oldest job above the retry schedule`s length (from retryDelays, not a literal)', () => {
    const alarm = alarms().find((a: Json) => a.MetricName === 'ApproximateAgeOfOldestMessage' && JSON.stringify(a.Dimensions).includes(ids.queue));
    const scheduleS = defaultDelays.reduce((a, b) => a + b, 0);
    expect(alarm).toMatchObject({
      Namespace: 'AWS/SQS',
      Dimensions: [{ Name: 'QueueName', Value: getAtt(ids.queue, 'QueueName') }],
      Statistic: 'Maximum',
      Period: 60,
      ComparisonOperator: 'GreaterThanThreshold',
      Threshold: queueAgeAlarmThresholdS(defaultDelays),
      TreatMissingData: 'notBreaching',
    });
    // The schedule (755 s) plus one visibility timeout (90 s) and one function timeout per attempt (6 x 15 s).
    expect(scheduleS).toBe(755);
    expect(queueAgeAlarmThresholdS(defaultDelays)).toBe(755 + 90 + 6 * 15);
  });

  test('ARCH-ALARM-1: the MCP function`s DependencyUnavailable, summed over every Dependency value it writes, >= 1 in 5 minutes', () => {
    const alarm = mathAlarm(MetricName.dependencyUnavailable, METRICS_NAMESPACE);
    const { metrics, returned } = queries(alarm);
    expect(Object.values(metrics).sort()).toEqual(
      DEPENDENCIES.map((d) => `${METRICS_NAMESPACE} ${MetricName.dependencyUnavailable} ${DimensionName.dependency}="${d}" Sum 300`).sort(),
    );
    for (const id of Object.keys(metrics)) expect(returned).toContain(`FILL(${id}, 0)`);
    expect(returned.split('+')).toHaveLength(DEPENDENCIES.length);
    expect(alarm).toMatchObject({ ComparisonOperator: 'GreaterThanOrEqualToThreshold', Threshold: 1, EvaluationPeriods: 1, TreatMissingData: 'notBreaching' });
  });

  test('ARCH-ALARM-5: the reconciler`s RecordsRepaired, both actions summed, >= 1 in 5 minutes', () => {
    const alarm = mathAlarm(MetricName.recordsRepaired, METRICS_NAMESPACE);
    const { metrics, returned } = queries(alarm);
    expect(Object.values(metrics).sort()).toEqual(
      ['requeued', 'failed'].map((a) => `${METRICS_NAMESPACE} ${MetricName.recordsRepaired} Action="${a}" Sum 300`).sort(),
    );
    for (const id of Object.keys(metrics)) expect(returned).toContain(`FILL(${id}, 0)`);
    expect(alarm).toMatchObject({ ComparisonOperator: 'GreaterThanOrEqualToThreshold', Threshold: 1, TreatMissingData: 'notBreaching' });
  });

  test('delivery function: Errors >= 1', () => {
    expect(alarms()).toContainEqual(
      expect.objectContaining({
        Namespace: 'AWS/Lambda',
        MetricName: 'Errors',
        Dimensions: [{ Name: 'FunctionName', Value: ref(ids.deliveryFn) }],
        Statistic: 'Sum',
        Period: 300,
        ComparisonOperator: 'GreaterThanOrEqualToThreshold',
        Threshold: 1,
      }),
    );
  });

  test('HTTP API: 5xx >= 5 in 5 minutes', () => {
    expect(alarms()).toContainEqual(
      expect.objectContaining({
        Namespace: 'AWS/ApiGateway',
        MetricName: '5xx',
        Dimensions: [{ Name: 'ApiId', Value: ref(ids.api) }],
        Statistic: 'Sum',
        Period: 300,
        ComparisonOperator: 'GreaterThanOrEqualToThreshold',
        Threshold: 5,
        EvaluationPeriods: 1,
      }),
    );
  });

  test('ARCH-ALARM-6: without alarmEmail a topic still exists, named by the output AlarmTopicArn, and every alarm notifies it when it fires and when it clears', () => {
    const topics = logicalIds(template, 'AWS::SNS::Topic');
    expect(topics).toHaveLength(1);
    expect(template.Outputs.AlarmTopicArn.Value).toEqual(ref(topics[0]!));
    for (const alarm of alarms()) {
      expect(alarm.AlarmActions).toEqual([ref(topics[0]!)]);
      expect(alarm.OKActions).toEqual([ref(topics[0]!)]);
    }
    expect(logicalIds(template, 'AWS::SNS::Subscription')).toEqual([]);
  });

  test('ARCH-ALARM-6: every alarm has its runbook paragraph in docs/deploying-aws.md "Alarms and what to do"', () => {
    const doc = fs.readFileSync(path.join(__dirname, '../../docs/deploying-aws.md'), 'utf8');
    const section = /\n## Alarms and what to do\n([\s\S]*?)\n## /.exec(doc)?.[1] ?? '';
    const names = synth.stack.observability.alarms.map((a) => a.node.id);
    expect(names).toHaveLength(9);
    for (const name of names) expect(section).toMatch(new RegExp(`\\*\\*${name}\\*\\*`));
  });
});

describe('dashboard', () => {
  /** The dashboard body with each CloudFormation reference replaced by a readable placeholder. */
  function body(): Json {
    const join = props(ids.dashboard).DashboardBody['Fn::Join'] as [string, Json[]];
    const text = join[1]
      .map((part: Json) => {
        if (typeof part === 'string') return part;
        if (part.Ref) return `REF(${part.Ref})`;
        if (part['Fn::GetAtt']) return `GETATT(${part['Fn::GetAtt'].join('.')})`;
        throw new Error(`unexpected part ${JSON.stringify(part)}`);
      })
      .join(join[0]);
    return JSON.parse(text);
  }
  const graphs = (): Json[] => body().widgets.filter((w: Json) => w.type === 'metric');
  const graph = (title: RegExp): Json => {
    const found = graphs().filter((w: Json) => title.test(w.properties.title));
    expect(found).toHaveLength(1);
    return found[0].properties;
  };
  /** A widget's metrics as `namespace name dim=value...` lines (math expressions as `expr`). */
  const lines = (widget: Json): string[] =>
    widget.metrics.map((m: Json[]) => {
      const options = typeof m[m.length - 1] === 'object' ? (m[m.length - 1] as Json) : {};
      if (options.expression) return `expr ${options.expression}`;
      const parts = m.filter((x) => typeof x === 'string') as string[];
      const [namespace, name, ...dims] = parts;
      const pairs: string[] = [];
      for (let i = 0; i + 1 < dims.length; i += 2) pairs.push(`${dims[i]}=${dims[i + 1]}`);
      return [namespace, name, ...pairs].join(' ');
    });

  test('one dashboard, named after the stack and region (dashboards are per account)', () => {
    expect(logicalIds(template, 'AWS::CloudWatch::Dashboard')).toHaveLength(1);
    expect(props(ids.dashboard).DashboardName).toEqual({ 'Fn::Join': ['-', [ref('AWS::StackName'), ref('AWS::Region')]] });
  });

  test('deliveries by outcome: one line per outcome the worker can decide, from the EMF metrics', () => {
    const w = graph(/^Deliveries by outcome/);
    expect(lines(w)).toEqual(DELIVERY_OUTCOMES.map((o) => `${METRICS_NAMESPACE} ${MetricName.deliveries} Outcome=${o}`));
    expect(w.metrics.every((m: Json[]) => (m[m.length - 1] as Json).stat === 'Sum')).toBe(true);
  });

  test('delivery latency (percentiles) and attempts', () => {
    expect(lines(graph(/^Delivery latency/))).toEqual([
      `${METRICS_NAMESPACE} ${MetricName.deliveryLatency}`,
      `${METRICS_NAMESPACE} ${MetricName.deliveryLatency}`,
      `${METRICS_NAMESPACE} ${MetricName.deliveryDuration}`,
    ]);
    expect(graph(/^Delivery latency/).metrics.map((m: Json[]) => (m[m.length - 1] as Json).stat)).toEqual(['p50', 'p99', 'p99']);
    expect(lines(graph(/^Attempts/))).toContain(`${METRICS_NAMESPACE} ${MetricName.deliveryAttempt}`);
  });

  test('DEL-RUN-6: who delivered, inline or worker: one line per Via, from the EMF metrics; the totals by outcome stay on Outcome alone', () => {
    expect(lines(graph(/^Attempts/))).toEqual(
      expect.arrayContaining(DELIVERY_VIAS.map((via) => `${METRICS_NAMESPACE} ${MetricName.deliveries} Outcome=delivered Via=${via}`)),
    );
  });

  test('dead-letter queue depth (as the reconciler counts it, what DeadLetterAlarm reads) next to the delivery queue', () => {
    const l = lines(graph(/^Dead-letter queue/));
    expect(l).toContain(`${METRICS_NAMESPACE} ${MetricName.deadLetters}`);
    expect(l).toContain(`AWS/SQS ApproximateAgeOfOldestMessage QueueName=GETATT(${ids.queue}.QueueName)`);
  });

  test('ARCH-ALARM-7: the reconciler`s failed runs beside the other functions` errors; the dashboard stays within the free tier`s 50 metrics', () => {
    const fn = resource(template, 'AWS::Lambda::Function', 'ReconcilerFunction').id;
    expect(lines(graph(/^Function errors/))).toContain(`AWS/Lambda Errors FunctionName=REF(${fn})`);
    expect(graphs().flatMap((w: Json) => w.properties.metrics)).toHaveLength(50);
  });

  test('MCP requests by status class and the function`s errors; request latency', () => {
    const l = lines(graph(/^MCP function: requests/));
    for (const cls of STATUS_CLASSES) expect(l).toContain(`${METRICS_NAMESPACE} ${MetricName.requests} StatusClass=${cls}`);
    expect(l).toContain(`AWS/Lambda Errors FunctionName=REF(${ids.mcpFn})`);
    expect(lines(graph(/^Request latency/))).toContain(`${METRICS_NAMESPACE} ${MetricName.requestLatency}`);
  });

  test('throttles: both functions, API Gateway`s own 4xx (429s) and DynamoDB', () => {
    const l = lines(graph(/^Throttles/));
    expect(l).toContain(`AWS/Lambda Throttles FunctionName=REF(${ids.mcpFn})`);
    expect(l).toContain(`AWS/Lambda Throttles FunctionName=REF(${ids.deliveryFn})`);
    expect(l.some((x) => x.startsWith('expr ') && x.includes('api4xx'))).toBe(true);
    expect(JSON.stringify(graph(/^Throttles/))).toContain('ThrottledRequests');
  });

  test('every dm-dot metric on the dashboard is one the functions emit (namespace DmDot, known names)', () => {
    const known = new Set<string>(Object.values(MetricName));
    const ours = graphs()
      .flatMap((w: Json) => lines(w.properties))
      .filter((l) => l.startsWith(`${METRICS_NAMESPACE} `))
      .map((l) => l.split(' ')[1]);
    expect(ours.length).toBeGreaterThan(10);
    for (const name of ours) expect(known.has(name as string)).toBe(true);
  });
});

describe('outputs', () => {
  test('McpEndpoint is the https URL of /mcp, with no key', () => {
    const endpoint = template.Outputs.McpEndpoint.Value;
    expect(endpoint).toEqual({ 'Fn::Join': ['', [getAtt(ids.api, 'ApiEndpoint'), '/mcp']] });
    expect(JSON.stringify(template.Outputs)).not.toContain('key=');
  });

  test('McpFunctionName and AlarmNames, for the operator CLI: the MCP function, and every alarm of the stack comma-separated', () => {
    const o = template.Outputs;
    // dm-dot key rotate --aws recycles this function's execution environments.
    expect(o.McpFunctionName.Value).toEqual(ref(ids.mcpFn));
    // dm-dot status --aws reads these alarms' state.
    const alarmIds = logicalIds(template, 'AWS::CloudWatch::Alarm');
    expect(alarmIds).toHaveLength(9);
    expect(o.AlarmNames.Value).toEqual({ 'Fn::Join': [',', alarmIds.map(ref)] });
  });

  test('ApiKeySecretArn, GetApiKeyCommand, PupSecretArn, DashboardUrl, TableName, DeliveryQueueUrl, DeadLetterQueueUrl and RedriveCommand are there', () => {
    const o = template.Outputs;
    expect(Object.keys(o).sort()).toEqual(
      [
        'AlarmNames',
        'AlarmTopicArn',
        'ApiKeySecretArn',
        'DashboardUrl',
        'DeadLetterQueueUrl',
        'DeliveryQueueUrl',
        'GetApiKeyCommand',
        'McpEndpoint',
        'McpFunctionName',
        'PupSecretArn',
        'RedriveCommand',
        'TableName',
      ].sort(),
    );
    // What `dm-dot <command> --aws --stack NAME` reads.
    expect(o.TableName.Value).toEqual(ref(ids.table));
    expect(o.DeliveryQueueUrl.Value).toEqual(ref(ids.queue));
    expect(o.ApiKeySecretArn.Value).toEqual(ref(ids.secret));
    expect(o.PupSecretArn.Value).toEqual(ref(ids.pupSecret));
    expect(o.DashboardUrl.Value).toEqual({
      'Fn::Join': [
        '',
        ['https://', ref('AWS::Region'), '.console.aws.amazon.com/cloudwatch/home?region=', ref('AWS::Region'), '#dashboards:name=', ref(ids.dashboard)],
      ],
    });
    expect(o.DeadLetterQueueUrl.Value).toEqual(ref(ids.dlq));
    expect(o.GetApiKeyCommand.Value).toEqual({
      'Fn::Join': [
        '',
        ['aws secretsmanager get-secret-value --secret-id ', ref(ids.secret), ' --query SecretString --output text --region ', ref('AWS::Region')],
      ],
    });
    expect(o.RedriveCommand.Value).toEqual({
      'Fn::Join': [
        '',
        [
          'aws sqs start-message-move-task --source-arn ',
          getAtt(ids.dlq, 'Arn'),
          ' --destination-arn ',
          getAtt(ids.queue, 'Arn'),
          ' --region ',
          ref('AWS::Region'),
        ],
      ],
    });
  });
});

describe('cdk-nag (AWS Solutions)', () => {
  test('the synthesized validation report has no unacknowledged error or warning', () => {
    expect(unacknowledgedViolations(synth.validationReport)).toEqual([]);
  });

  test('a fresh AwsSolutionsChecks run over the app finds nothing unacknowledged', () => {
    const report = new AwsSolutionsChecks().validateScope(synth.app);
    expect(report.violations.map((v) => `${v.ruleName} ${v.violatingResources.map((r) => r.constructPath).join(' ')}`)).toEqual([]);
  });

  test('every acknowledgement is one of the reviewed few, each with a specific reason', () => {
    const found = acknowledgements(synth.app);
    for (const { reason } of found) expect(reason.length).toBeGreaterThan(60);
    const acknowledged = found.map(({ path, rule }) => `${path} ${rule}`);
    expect(acknowledged.sort()).toEqual(
      [
        'DmDot/Secrets/ApiKey AwsSolutions-SMG4',
        'DmDot/Delivery/Function/Function AwsSolutions-L1',
        'DmDot/Delivery/Function/Role AwsSolutions-IAM5[Action::kms:GenerateDataKey*]',
        'DmDot/Delivery/Function/Role AwsSolutions-IAM5[Action::kms:ReEncrypt*]',
        'DmDot/Http/Api AwsSolutions-APIG4',
        'DmDot/Mcp/Function AwsSolutions-L1',
        'DmDot/Mcp/Role AwsSolutions-IAM5[Action::kms:GenerateDataKey*]',
        'DmDot/Mcp/Role AwsSolutions-IAM5[Action::kms:ReEncrypt*]',
        'DmDot/Reconciler/Function/Function AwsSolutions-L1',
        'DmDot/Reconciler/Function/Role AwsSolutions-IAM5[Action::kms:GenerateDataKey*]',
        'DmDot/Reconciler/Function/Role AwsSolutions-IAM5[Action::kms:ReEncrypt*]',
        'DmDot/Secrets/PupSigningSecrets AwsSolutions-SMG4',
      ].sort(),
    );
  });
});

describe('bundles (read from the synthesized cloud assembly)', () => {
  const files = (fnId: string) => {
    const dir = synth.assetDir(fnId);
    return {
      dir,
      code: fs.readFileSync(path.join(dir, 'index.js'), 'utf8'),
      sources: (JSON.parse(fs.readFileSync(path.join(dir, 'index.js.map'), 'utf8')) as { sources: string[] }).sources,
    };
  };

  test('each asset is a minified CommonJS index.js with its source map and a package.json naming the format', () => {
    for (const [id, chunks] of [
      [ids.mcpFn, ['mcp-storage.js', 'mcp-storage.js.map', 'after-response.mjs', 'after-response.mjs.map']],
      [ids.deliveryFn, []],
    ] as const) {
      const { dir, code } = files(id);
      expect(fs.readdirSync(dir).sort()).toEqual(['index.js', 'index.js.map', ...chunks, 'package.json'].sort());
      expect(JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8'))).toEqual({ type: 'commonjs' });
      expect(code).toMatch(/\/\/# sourceMappingURL=index\.js\.map\s*$/);
      // esbuild marks each input file with a `// path` comment unless it minifies.
      expect(code).not.toMatch(/^\s*\/\/ (lambda|node_modules)\//m);
    }
  });

  test("the MCP asset's storage chunk (built by the afterBundling hook) is minified, tree-shaken and loaded by index.js", () => {
    const { dir, code } = files(ids.mcpFn);
    const chunk = fs.readFileSync(path.join(dir, 'mcp-storage.js'), 'utf8');
    const chunkSources = (JSON.parse(fs.readFileSync(path.join(dir, 'mcp-storage.js.map'), 'utf8')) as { sources: string[] }).sources;
    expect(code).toContain('require("./mcp-storage")');
    expect(chunk).toMatch(/\/\/# sourceMappingURL=mcp-storage\.js\.map\s*$/);
    expect(chunk).not.toMatch(/^\s*\/\/ (lambda|node_modules)\//m);
    expect(chunkSources.some((s) => s.includes('@aws-sdk/client-dynamodb/dist-es/'))).toBe(true);
    // Tree-shaken: a DynamoDB command dm-dot never sends is not in it.
    expect(chunk).not.toContain('CreateBackup');
    expect(files(ids.mcpFn).sources.filter((s) => /@aws-sdk\/client-(dynamodb|sqs)\//.test(s))).toEqual([]);
  });

  test('the MCP bundle contains the MCP SDK (so the check below can see it)', () => {
    const { sources } = files(ids.mcpFn);
    expect(sources.some((s) => s.includes('node_modules/@modelcontextprotocol/'))).toBe(true);
  });

  test('the delivery bundle contains neither @modelcontextprotocol nor McpServer', () => {
    const { code, sources } = files(ids.deliveryFn);
    expect(code).not.toContain('@modelcontextprotocol');
    expect(code).not.toContain('McpServer');
    expect(sources.filter((s) => s.includes('@modelcontextprotocol'))).toEqual([]);
  });

  test('the delivery bundle carries no classic zod (about 425 KiB of a bundle that uses it)', () => {
    const { sources } = files(ids.deliveryFn);
    expect(sources.filter((s) => /node_modules\/zod\/(v4\/classic|v3)\//.test(s))).toEqual([]);
  });
});

describe('ARCH-2: the bundles start with the environment the stack gives them', () => {
  /** Plausible values for the references in the functions' environment. */
  const resolveEnvironment = (variables: Record<string, Json>): Record<string, string> => {
    const values: Record<string, string> = {
      [ids.table]: 'DmDot-TableCD117FA1-EXAMPLE',
      [ids.queue]: 'https://sqs.us-east-1.amazonaws.com/123456789012/DmDot-DeliveryQueue-EXAMPLE',
      [ids.dlq]: 'https://sqs.us-east-1.amazonaws.com/123456789012/DmDot-DeadLetterQueue-EXAMPLE',
      [ids.secret]: 'arn:aws:secretsmanager:us-east-1:123456789012:secret:ApiKey-EXAMPLE-AbCdEf',
      [ids.pupSecret]: 'arn:aws:secretsmanager:us-east-1:123456789012:secret:PupSigningSecrets-EXAMPLE-AbCdEf',
    };
    return Object.fromEntries(
      Object.entries(variables).map(([name, value]) => {
        if (typeof value === 'string') return [name, value];
        const resolved = values[value.Ref as string];
        if (resolved === undefined) throw new Error(`no example value for ${name} = ${JSON.stringify(value)}`);
        return [name, resolved];
      }),
    );
  };

  test.each([
    ['MCP', 'mcpFn'],
    ['delivery', 'deliveryFn'],
  ] as const)('%s: index.js loads (module scope reads its settings) and exports handler', (_name, key) => {
    const home = fs.mkdtempSync(path.join(os.tmpdir(), 'dm-dot-bundle-start-'));
    try {
      const index = path.join(synth.assetDir(ids[key]), 'index.js');
      const probe = `const m = require(${JSON.stringify(index)}); process.exit(typeof m.handler === 'function' ? 0 : 3);`;
      const result = spawnSync(process.execPath, ['-e', probe], {
        env: {
          ...inTaskRoot(resolveEnvironment(props(ids[key]).Environment.Variables), synth.assetDir(ids[key])),
          PATH: process.env.PATH,
          HOME: home,
          AWS_REGION: 'us-east-1',
          AWS_EC2_METADATA_DISABLED: 'true',
          AWS_CONFIG_FILE: path.join(home, 'none'),
          AWS_SHARED_CREDENTIALS_FILE: path.join(home, 'none'),
        },
        encoding: 'utf8',
        timeout: 20_000,
      });
      const detail = result.stderr
        .split('\n')
        .filter((l) => /^\w*Error\b/.test(l))
        .slice(0, 3)
        .join('\n');
      expect({ status: result.status, detail }).toEqual({ status: 0, detail });
    } finally {
      fs.rmSync(home, { recursive: true, force: true });
    }
  });
});
