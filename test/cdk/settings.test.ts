/**
 * CDK context settings: documented defaults (cdk.json repeats lib/settings.ts), validation with one
 * clear message per bad value, and what the non-default values change in the template. The
 * template checks synthesize once without bundling: they read resources, not code.
 */
import { App } from 'aws-cdk-lib';
import { AwsSolutionsChecks } from 'cdk-nag';
import { RetentionDays } from 'aws-cdk-lib/aws-logs';
import { DEFAULTS, MAX_RETRY_DELAY_S, type ContextKey, readSettings } from '../../lib/settings';
import { type Json, type Synthesized, cdkJson, cdkJsonContext, logicalIds, resource, synthesize, unacknowledgedViolations } from './synth';

const settingsWith = (context: Record<string, unknown>) => readSettings(new App({ context }).node);

describe('defaults', () => {
  test('cdk.json carries exactly the documented defaults', () => {
    const context = cdkJsonContext();
    for (const key of Object.keys(DEFAULTS) as ContextKey[]) expect(context[key]).toEqual(DEFAULTS[key]);
  });

  test('cdk.json keeps the CLI offline: no notices, no telemetry', () => {
    const context = cdkJsonContext();
    expect(context['cli-telemetry']).toBe(false);
    const config = cdkJson();
    expect(config.notices).toBe(false);
    expect(config.app).toBe('node_modules/.bin/tsx bin/dm-dot.ts');
  });

  test('no context at all gives the defaults', () => {
    expect(settingsWith({})).toEqual({
      retryDelaysS: [1, 4, 30, 120, 600],
      deliveryWaitMs: 3000,
      allowedOrigins: [],
      alarmEmail: undefined,
      logRetention: RetentionDays.ONE_MONTH,
      throttleRateLimit: 10,
      throttleBurstLimit: 20,
      ttlDefaultMs: 604_800_000,
      ttlMaxMs: 604_800_000,
    });
  });
});

describe('values from -c arrive as strings and are parsed', () => {
  test('every key', () => {
    expect(
      settingsWith({
        retryDelays: '2, 10,60',
        deliveryWaitMs: '1500',
        allowedOrigins: 'https://inspector.example.com/, http://localhost:6274',
        alarmEmail: 'ops@example.com',
        logRetentionDays: '90',
        throttleRateLimit: '50',
        throttleBurstLimit: '100',
        ttlDefaultMs: '3600000',
        ttlMaxMs: '86400000',
      }),
    ).toEqual({
      retryDelaysS: [2, 10, 60],
      deliveryWaitMs: 1500,
      allowedOrigins: ['https://inspector.example.com', 'http://localhost:6274'],
      alarmEmail: 'ops@example.com',
      logRetention: RetentionDays.THREE_MONTHS,
      throttleRateLimit: 50,
      throttleBurstLimit: 100,
      ttlDefaultMs: 3_600_000,
      ttlMaxMs: 86_400_000,
    });
  });
});

describe('bad values fail synth with a message naming the key', () => {
  test.each([
    ['retryDelays', '', /retryDelays/],
    ['retryDelays', '1,x', /retryDelays/],
    ['retryDelays', '1,50000', /retryDelays/],
    ['retryDelays', Array.from({ length: 21 }, () => '1').join(','), /retryDelays/],
    ['deliveryWaitMs', '5000', /deliveryWaitMs .*0 to 4000/],
    ['deliveryWaitMs', '1.5', /deliveryWaitMs/],
    ['ttlMaxMs', '604800001', /ttlMaxMs .*60000 to 604800000/],
    ['ttlMaxMs', '59999', /ttlMaxMs/],
    ['ttlDefaultMs', '59999', /ttlDefaultMs/],
    ['allowedOrigins', 'https://example.com/path', /allowedOrigins/],
    ['allowedOrigins', '*', /allowedOrigins/],
    ['alarmEmail', 'not-an-address', /alarmEmail/],
    ['alarmEmail', 'a@example.com,b@example.com', /alarmEmail/],
    ['logRetentionDays', '31', /logRetentionDays must be one of/],
    ['throttleRateLimit', '0', /throttleRateLimit/],
    ['throttleBurstLimit', 'lots', /throttleBurstLimit/],
  ])('%s = %j', (key, value, message) => {
    expect(() => settingsWith({ [key]: value })).toThrow(message);
  });
});

describe('non-default settings in the template', () => {
  let synth: Synthesized;
  let template: Json;
  const email = 'ops@example.com';

  beforeAll(() => {
    synth = synthesize({
      bundle: false,
      context: {
        alarmEmail: email,
        allowedOrigins: 'https://inspector.example.com',
        retryDelays: '1,2,3',
        deliveryWaitMs: '2000',
        logRetentionDays: '7',
        throttleRateLimit: '5',
        throttleBurstLimit: '8',
      },
    });
    template = synth.template;
  }, 120_000);

  afterAll(() => synth?.cleanup());

  const props = (id: string): Json => template.Resources[id].Properties;

  test('alarmEmail: one topic that refuses plain HTTP, an e-mail subscription, every alarm notifies it', () => {
    const topics = logicalIds(template, 'AWS::SNS::Topic');
    expect(topics).toHaveLength(1);
    const topic = topics[0] as string;
    expect(logicalIds(template, 'AWS::SNS::Subscription').map((id) => props(id))).toEqual([
      { Protocol: 'email', Endpoint: email, TopicArn: { Ref: topic } },
    ]);
    const alarms = logicalIds(template, 'AWS::CloudWatch::Alarm').map((id) => props(id));
    expect(alarms).toHaveLength(3);
    for (const alarm of alarms) expect(alarm.AlarmActions).toEqual([{ Ref: topic }]);
    const policy = logicalIds(template, 'AWS::SNS::TopicPolicy').map((id) => props(id))[0];
    expect(policy.PolicyDocument.Statement).toContainEqual(
      expect.objectContaining({ Effect: 'Deny', Condition: { Bool: { 'aws:SecureTransport': 'false' } } }),
    );
  });

  test('allowedOrigins: passed to the MCP function and answered by API Gateway CORS for that origin only', () => {
    const fn = resource(template, 'AWS::Lambda::Function', 'McpFunction');
    expect(fn.Properties.Environment.Variables.DMDOT_ALLOWED_ORIGINS).toBe('https://inspector.example.com');
    const cors = props(resource(template, 'AWS::ApiGatewayV2::Api', 'HttpApi').id).CorsConfiguration;
    expect(cors.AllowOrigins).toEqual(['https://inspector.example.com']);
    expect(cors.AllowCredentials).toBeUndefined();
    expect(cors.AllowHeaders).toEqual(expect.arrayContaining(['authorization', 'content-type', 'mcp-protocol-version']));
  });

  test('retryDelays: passed to the delivery function; maxReceiveCount follows the attempt count (4 + 2)', () => {
    const fn = resource(template, 'AWS::Lambda::Function', 'DeliveryFunction');
    expect(fn.Properties.Environment.Variables.DMDOT_RETRY_DELAYS).toBe('1,2,3');
    expect(props(resource(template, 'AWS::SQS::Queue', 'DeliveryQueue').id).RedrivePolicy.maxReceiveCount).toBe(6);
  });

  test('deliveryWaitMs, logRetentionDays and throttling reach their resources', () => {
    const fn = resource(template, 'AWS::Lambda::Function', 'McpFunction');
    expect(fn.Properties.Environment.Variables.DMDOT_DELIVERY_WAIT_MS).toBe('2000');
    for (const id of logicalIds(template, 'AWS::Logs::LogGroup')) expect(props(id).RetentionInDays).toBe(7);
    expect(props(resource(template, 'AWS::ApiGatewayV2::Stage', 'HttpDefaultStage').id).DefaultRouteSettings).toEqual({
      ThrottlingRateLimit: 5,
      ThrottlingBurstLimit: 8,
    });
  });

  test('long retry schedules get a main queue retention that outlasts them', () => {
    const long = synthesize({ bundle: false, context: { retryDelays: Array.from({ length: 20 }, () => String(MAX_RETRY_DELAY_S)).join(',') } });
    try {
      const queue = resource(long.template, 'AWS::SQS::Queue', 'DeliveryQueue').Properties;
      expect(queue.MessageRetentionPeriod).toBeGreaterThan(20 * MAX_RETRY_DELAY_S);
      expect(queue.MessageRetentionPeriod).toBeLessThanOrEqual(14 * 86_400);
      expect(queue.RedrivePolicy.maxReceiveCount).toBe(23);
    } finally {
      long.cleanup();
    }
  });

  test('cdk-nag finds nothing unacknowledged in this variant either (SNS topic, CORS)', () => {
    expect(unacknowledgedViolations(synth.validationReport)).toEqual([]);
    const report = new AwsSolutionsChecks().validateScope(synth.app);
    expect(report.violations.map((v) => v.ruleName)).toEqual([]);
  });
});

test('a TTL default above the TTL cap fails synth naming ttlDefaultMs', () => {
  expect(() => settingsWith({ ttlMaxMs: '3600000', ttlDefaultMs: '7200000' })).toThrow(/ttlDefaultMs .*60000 to 3600000/);
});
