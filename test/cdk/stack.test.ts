/**
 * The dm-dot stack with cdk.json's defaults, synthesized once (esbuild bundles included) and checked
 * rule by rule against SPEC 1, 2, 5, 6, 7 and 10 and the stack's own contract with the handlers.
 */
import { Validations } from 'aws-cdk-lib';
import { AwsSolutionsChecks } from 'cdk-nag';
import type { IConstruct } from 'constructs';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { ACCESS_LOG_FIELDS, ROUTES } from '../../lib/http-api';
import { DEFAULTS } from '../../lib/settings';
import {
  type Json,
  type Synthesized,
  logicalIds,
  resource,
  stableTemplate,
  synthesize,
  unacknowledgedViolations,
} from './synth';

let synth: Synthesized;
let template: Json;
const ids = {} as Record<
  'table' | 'key' | 'queue' | 'dlq' | 'secret' | 'mcpFn' | 'deliveryFn' | 'mcpRole' | 'deliveryRole' | 'api' | 'accessLogs',
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
  ids.mcpFn = resource(template, 'AWS::Lambda::Function', 'McpFunction').id;
  ids.deliveryFn = resource(template, 'AWS::Lambda::Function', 'DeliveryFunction').id;
  ids.mcpRole = resource(template, 'AWS::IAM::Role', 'McpRole').id;
  ids.deliveryRole = resource(template, 'AWS::IAM::Role', 'DeliveryRole').id;
  ids.api = resource(template, 'AWS::ApiGatewayV2::Api', 'HttpApi').id;
  ids.accessLogs = resource(template, 'AWS::Logs::LogGroup', 'HttpAccessLogs').id;
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

/** `action -> resources` for a role, so a test can state exactly what a function may do. */
function permissions(roleId: string): Record<string, string[]> {
  const out: Record<string, string[]> = {};
  for (const s of statementsOf(roleId)) {
    expect(s.Effect).toBe('Allow');
    expect(s.Condition).toBeUndefined();
    const actions: string[] = [s.Action].flat();
    const resources: string[] = [s.Resource].flat().map((r: Json) => JSON.stringify(r));
    for (const a of actions) out[a] = [...(out[a] ?? []), ...resources].sort();
  }
  return out;
}

describe('template', () => {
  test('matches the snapshot (asset hashes normalised, so Lambda code changes do not touch it)', () => {
    expect(stableTemplate(template)).toMatchSnapshot();
  });
});

describe('storage (SPEC 5)', () => {
  test('table: pk string partition key only, on demand, TTL on `ttl`', () => {
    const table = props(ids.table);
    expect(table.KeySchema).toEqual([{ AttributeName: 'pk', KeyType: 'HASH' }]);
    expect(table.AttributeDefinitions).toEqual([{ AttributeName: 'pk', AttributeType: 'S' }]);
    expect(table.BillingMode).toBe('PAY_PER_REQUEST');
    expect(table.TimeToLiveSpecification).toEqual({ AttributeName: 'ttl', Enabled: true });
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

  test('table is encrypted with the stack`s customer-managed key, which rotates', () => {
    expect(props(ids.table).SSESpecification).toEqual({
      SSEEnabled: true,
      SSEType: 'KMS',
      KMSMasterKeyId: getAtt(ids.key, 'Arn'),
    });
    expect(props(ids.key).EnableKeyRotation).toBe(true);
  });
});

describe('queues (SPEC 6)', () => {
  test('dead-letter queue keeps messages 14 days (1,209,600 s)', () => {
    expect(props(ids.dlq).MessageRetentionPeriod).toBe(1_209_600);
  });

  test('redrive maxReceiveCount = attempts + 2 = 8 with the default schedule', () => {
    const attempts = DEFAULTS.retryDelays.split(',').length + 1;
    expect(attempts).toBe(6);
    expect(props(ids.queue).RedrivePolicy).toEqual({ deadLetterTargetArn: getAtt(ids.dlq, 'Arn'), maxReceiveCount: 8 });
  });

  test('visibility timeout is at least 6x the delivery function timeout', () => {
    expect(props(ids.queue).VisibilityTimeout).toBeGreaterThanOrEqual(6 * props(ids.deliveryFn).Timeout);
  });

  test('main queue keeps a message longer than its whole retry schedule', () => {
    const scheduleS = DEFAULTS.retryDelays.split(',').map(Number).reduce((a, b) => a + b, 0);
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

  test('event source: the delivery queue, batches of 10, partial batch failures reported', () => {
    const mappings = logicalIds(template, 'AWS::Lambda::EventSourceMapping').map(props);
    expect(mappings).toEqual([
      {
        EventSourceArn: getAtt(ids.queue, 'Arn'),
        FunctionName: ref(ids.deliveryFn),
        BatchSize: 10,
        FunctionResponseTypes: ['ReportBatchItemFailures'],
      },
    ]);
  });
});

describe('API key (SPEC 1, 2)', () => {
  test('the secret is generated by Secrets Manager: 43+ letters and digits, no value in the template', () => {
    const secret = props(ids.secret);
    expect(secret.SecretString).toBeUndefined();
    expect(secret.GenerateSecretString).toEqual(
      expect.objectContaining({ ExcludePunctuation: true, IncludeSpace: false }),
    );
    expect(secret.GenerateSecretString.PasswordLength).toBeGreaterThanOrEqual(43);
    expect(secret.GenerateSecretString.SecretStringTemplate).toBeUndefined();
    expect(JSON.stringify(template)).not.toMatch(/"SecretString"/);
  });

  test('no API key material anywhere: no key parameter, no key= in any string', () => {
    expect(Object.keys(template.Parameters ?? {})).toEqual(['BootstrapVersion']);
    expect(JSON.stringify(template)).not.toMatch(/[?&]key=/);
    expect(JSON.stringify(template)).not.toMatch(/MCP_API_KEY/);
  });
});

describe('functions', () => {
  test('both run nodejs22.x on arm64 and never load source maps at run time (issue 10: decoded offline)', () => {
    for (const id of [ids.mcpFn, ids.deliveryFn]) {
      expect(props(id)).toEqual(
        expect.objectContaining({ Runtime: 'nodejs22.x', Architectures: ['arm64'], Handler: 'index.handler' }),
      );
      expect(props(id).Environment.Variables.NODE_OPTIONS).toBeUndefined();
    }
  });

  test('timeouts and memory: MCP 10 s (the wait never passes 5 s), delivery 15 s (5 s deadline per request)', () => {
    expect(props(ids.mcpFn)).toEqual(expect.objectContaining({ Timeout: 10, MemorySize: 512 }));
    expect(props(ids.deliveryFn)).toEqual(expect.objectContaining({ Timeout: 15, MemorySize: 256 }));
  });

  test('environment is exactly the handlers` contract', () => {
    expect(props(ids.mcpFn).Environment.Variables).toEqual({
      TABLE_NAME: ref(ids.table),
      QUEUE_URL: ref(ids.queue),
      API_KEY_SECRET_ARN: ref(ids.secret),
      DMDOT_DELIVERY_WAIT_MS: String(DEFAULTS.deliveryWaitMs),
      DMDOT_TTL_DEFAULT_MS: String(DEFAULTS.ttlDefaultMs),
      DMDOT_TTL_MAX_MS: String(DEFAULTS.ttlMaxMs),
      DMDOT_ALLOWED_ORIGINS: '',
    });
    expect(props(ids.deliveryFn).Environment.Variables).toEqual({
      TABLE_NAME: ref(ids.table),
      QUEUE_URL: ref(ids.queue),
      DEAD_LETTER_QUEUE_URL: ref(ids.dlq),
      DMDOT_RETRY_DELAYS: DEFAULTS.retryDelays,
    });
  });

  test('DMDOT_ALLOW_LOOPBACK_CALLBACKS is never set (SPEC 7)', () => {
    for (const id of logicalIds(template, 'AWS::Lambda::Function')) {
      expect(Object.keys(props(id).Environment?.Variables ?? {})).not.toContain('DMDOT_ALLOW_LOOPBACK_CALLBACKS');
    }
    expect(JSON.stringify(template)).not.toContain('ALLOW_LOOPBACK');
  });

  test('each function logs to its own log group, kept for logRetentionDays (default 30)', () => {
    for (const [fn, prefix] of [
      [ids.mcpFn, 'McpLogs'],
      [ids.deliveryFn, 'DeliveryLogs'],
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

  test('MCP role: its logs, table item CRUD, the table key, send to the delivery queue, read the key secret', () => {
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
      'secretsmanager:GetSecretValue': [JSON.stringify(ref(ids.secret))],
      'secretsmanager:DescribeSecret': [JSON.stringify(ref(ids.secret))],
    });
  });

  test('MCP role: nothing on the dead-letter queue, no ChangeMessageVisibility', () => {
    const statements = JSON.stringify(statementsOf(ids.mcpRole));
    expect(statements).not.toContain(ids.dlq);
    expect(statements).not.toContain('ChangeMessageVisibility');
    expect(statements).not.toContain('ReceiveMessage');
  });

  test('delivery role: its logs, table Get/Put/Update, the key, consume the queue, send to the DLQ', () => {
    const p = permissions(ids.deliveryRole);
    const key = at(ids.key);
    expect(p).toEqual({
      'logs:CreateLogStream': [at(resource(template, 'AWS::Logs::LogGroup', 'DeliveryLogs').id)],
      'logs:PutLogEvents': [at(resource(template, 'AWS::Logs::LogGroup', 'DeliveryLogs').id)],
      'dynamodb:GetItem': [at(ids.table)],
      'dynamodb:PutItem': [at(ids.table)],
      'dynamodb:UpdateItem': [at(ids.table)],
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

  test('delivery role: no Secrets Manager access', () => {
    expect(JSON.stringify(statementsOf(ids.deliveryRole))).not.toContain('secretsmanager');
  });

  test('only API Gateway may invoke the MCP function, only for this API', () => {
    const permissionsOfMcp = logicalIds(template, 'AWS::Lambda::Permission').map(props);
    expect(permissionsOfMcp.length).toBeGreaterThan(0);
    for (const p of permissionsOfMcp) {
      expect(p.FunctionName).toEqual(getAtt(ids.mcpFn, 'Arn'));
      expect(p.Principal).toBe('apigateway.amazonaws.com');
      expect(JSON.stringify(p.SourceArn)).toContain(JSON.stringify(ref(ids.api)));
    }
  });
});

describe('HTTP API (SPEC 2)', () => {
  test('exactly the five routes, each to the MCP function with payload format 2.0', () => {
    const routes = logicalIds(template, 'AWS::ApiGatewayV2::Route').map(props);
    expect(routes.map((r) => r.RouteKey).sort()).toEqual(Object.keys(ROUTES).sort());
    expect(Object.keys(ROUTES).sort()).toEqual(['DELETE /mcp', 'GET /healthz', 'GET /mcp', 'POST /mcp', 'POST /v1/messages']);
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

  test('default stage is throttled with the context defaults', () => {
    const stage = props(resource(template, 'AWS::ApiGatewayV2::Stage', 'HttpDefaultStage').id);
    expect(stage.StageName).toBe('$default');
    expect(stage.AutoDeploy).toBe(true);
    expect(stage.DefaultRouteSettings).toEqual({
      ThrottlingRateLimit: DEFAULTS.throttleRateLimit,
      ThrottlingBurstLimit: DEFAULTS.throttleBurstLimit,
    });
  });

  test('access logs: JSON to the stack`s log group, never the path as sent or the query string', () => {
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

  test('no CORS configuration while no browser origin is allowed', () => {
    expect(props(ids.api).CorsConfiguration).toBeUndefined();
  });
});

describe('alarms', () => {
  const alarms = () => logicalIds(template, 'AWS::CloudWatch::Alarm').map(props);

  test('dead-letter queue: ApproximateNumberOfMessagesVisible >= 1', () => {
    expect(alarms()).toContainEqual(
      expect.objectContaining({
        Namespace: 'AWS/SQS',
        MetricName: 'ApproximateNumberOfMessagesVisible',
        Dimensions: [{ Name: 'QueueName', Value: getAtt(ids.dlq, 'QueueName') }],
        ComparisonOperator: 'GreaterThanOrEqualToThreshold',
        Threshold: 1,
        EvaluationPeriods: 1,
      }),
    );
  });

  test('delivery function: Errors >= 1', () => {
    expect(alarms()).toContainEqual(
      expect.objectContaining({
        Namespace: 'AWS/Lambda',
        MetricName: 'Errors',
        Dimensions: [{ Name: 'FunctionName', Value: ref(ids.deliveryFn) }],
        Statistic: 'Sum',
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

  test('no e-mail topic and no alarm actions without alarmEmail', () => {
    expect(alarms()).toHaveLength(3);
    for (const alarm of alarms()) expect(alarm.AlarmActions).toBeUndefined();
    expect(logicalIds(template, 'AWS::SNS::Topic')).toEqual([]);
  });
});

describe('outputs', () => {
  test('McpEndpoint is the https URL of /mcp, with no key', () => {
    const endpoint = template.Outputs.McpEndpoint.Value;
    expect(endpoint).toEqual({ 'Fn::Join': ['', [getAtt(ids.api, 'ApiEndpoint'), '/mcp']] });
    expect(JSON.stringify(template.Outputs)).not.toContain('key=');
  });

  test('ApiKeySecretArn, GetApiKeyCommand, DeadLetterQueueUrl and RedriveCommand are there', () => {
    const o = template.Outputs;
    expect(Object.keys(o).sort()).toEqual(
      ['ApiKeySecretArn', 'DeadLetterQueueUrl', 'GetApiKeyCommand', 'McpEndpoint', 'RedriveCommand'].sort(),
    );
    expect(o.ApiKeySecretArn.Value).toEqual(ref(ids.secret));
    expect(o.DeadLetterQueueUrl.Value).toEqual(ref(ids.dlq));
    expect(o.GetApiKeyCommand.Value).toEqual({
      'Fn::Join': [
        '',
        [
          'aws secretsmanager get-secret-value --secret-id ',
          ref(ids.secret),
          ' --query SecretString --output text --region ',
          ref('AWS::Region'),
        ],
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
    const acknowledged: string[] = [];
    const walk = (c: IConstruct) => {
      for (const entry of c.node.metadata) {
        if (entry.type !== Validations.ACKNOWLEDGED_RULES_METADATA_KEY) continue;
        for (const [id, reason] of Object.entries(entry.data as Record<string, string>)) {
          expect(String(reason).length).toBeGreaterThan(60);
          acknowledged.push(`${c.node.path} ${id.replace(/^annotation::/i, '')}`);
        }
      }
      c.node.children.forEach(walk);
    };
    walk(synth.app);
    expect(acknowledged.sort()).toEqual(
      [
        'DmDot/ApiKey AwsSolutions-SMG4',
        'DmDot/Delivery/Function AwsSolutions-L1',
        'DmDot/Delivery/Role AwsSolutions-IAM5[Action::kms:GenerateDataKey*]',
        'DmDot/Delivery/Role AwsSolutions-IAM5[Action::kms:ReEncrypt*]',
        'DmDot/Http/Api AwsSolutions-APIG4',
        'DmDot/Mcp/Function AwsSolutions-L1',
        'DmDot/Mcp/Role AwsSolutions-IAM5[Action::kms:GenerateDataKey*]',
        'DmDot/Mcp/Role AwsSolutions-IAM5[Action::kms:ReEncrypt*]',
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
    for (const id of [ids.mcpFn, ids.deliveryFn]) {
      const { dir, code } = files(id);
      expect(fs.readdirSync(dir).sort()).toEqual(['index.js', 'index.js.map', 'package.json']);
      expect(JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8'))).toEqual({ type: 'commonjs' });
      expect(code).toMatch(/\/\/# sourceMappingURL=index\.js\.map\s*$/);
      // esbuild marks each input file with a `// path` comment unless it minifies.
      expect(code).not.toMatch(/^\s*\/\/ (lambda|node_modules)\//m);
    }
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

  test('the delivery bundle carries no classic zod (TOOLCHAIN: about 425 KiB of bundle)', () => {
    const { sources } = files(ids.deliveryFn);
    expect(sources.filter((s) => /node_modules\/zod\/(v4\/classic|v3)\//.test(s))).toEqual([]);
  });
});

describe('the bundles start with the environment the stack gives them', () => {
  /** Plausible values for the references in the functions' environment. */
  const resolveEnvironment = (variables: Record<string, Json>): Record<string, string> => {
    const values: Record<string, string> = {
      [ids.table]: 'DmDot-TableCD117FA1-EXAMPLE',
      [ids.queue]: 'https://sqs.us-east-1.amazonaws.com/123456789012/DmDot-DeliveryQueue-EXAMPLE',
      [ids.dlq]: 'https://sqs.us-east-1.amazonaws.com/123456789012/DmDot-DeadLetterQueue-EXAMPLE',
      [ids.secret]: 'arn:aws:secretsmanager:us-east-1:123456789012:secret:ApiKey-EXAMPLE-AbCdEf',
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
          ...resolveEnvironment(props(ids[key]).Environment.Variables),
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
      const detail = result.stderr.split('\n').filter((l) => /^\w*Error\b/.test(l)).slice(0, 3).join('\n');
      expect({ status: result.status, detail }).toEqual({ status: 0, detail });
    } finally {
      fs.rmSync(home, { recursive: true, force: true });
    }
  });
});
