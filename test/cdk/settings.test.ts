/**
 * CDK context settings: documented defaults (cdk.json repeats lib/settings.ts), validation with one
 * clear message per bad value, and what the non-default values change in the template. The
 * template checks synthesize once without bundling: they read resources, not code.
 */
import { App, Token } from 'aws-cdk-lib';
import { AwsSolutionsChecks } from 'cdk-nag';
import { RetentionDays } from 'aws-cdk-lib/aws-logs';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { RECEIVE_LIMIT_AWS_MARGIN, receiveLimit } from '../../lambda/core/delivery';
import { LAMBDA_ENVIRONMENT_MAX_BYTES, TOKEN_ESTIMATE_BYTES, assertEnvironmentFits, environmentBytes } from '../../lib/lambda-environment';
import { DEFAULTS, MAX_RETRY_DELAY_S, type ContextKey, SettingsError, readSettings } from '../../lib/settings';
import { type Json, type Synthesized, cdkJson, cdkJsonContext, logicalIds, resource, synthesize, unacknowledgedViolations } from './synth';

const settingsWith = (context: Record<string, unknown>) => readSettings(new App({ context }).node);

const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'dm-dot-settings-'));
afterAll(() => fs.rmSync(scratch, { recursive: true, force: true }));
/** A file in the scratch directory with this content; returns its path. */
function file(name: string, content: string): string {
  const p = path.join(scratch, name);
  fs.writeFileSync(p, content);
  return p;
}
const MANIFEST = '{\n  "name": "dm-dot",\n  "tools": ["send_to_dot"]\n}\n';

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
      deliveryMaxConcurrency: 2,
      pupManifestJson: undefined,
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
        deliveryMaxConcurrency: '5',
        pupManifestFile: file('manifest.json', MANIFEST),
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
      deliveryMaxConcurrency: 5,
      // Byte for byte, whitespace included: SPEC 8 serves the operator's manifest as is.
      pupManifestJson: MANIFEST,
    });
  });

  test('deliveryMaxConcurrency accepts what SQS event sources accept, 2 and 1000 included', () => {
    expect(settingsWith({ deliveryMaxConcurrency: '2' }).deliveryMaxConcurrency).toBe(2);
    expect(settingsWith({ deliveryMaxConcurrency: 1000 }).deliveryMaxConcurrency).toBe(1000);
  });

  test('pupManifestFile: a relative path is read from the directory cdk runs in', () => {
    const cwd = process.cwd();
    file('relative.json', '{"name":"x"}');
    process.chdir(scratch);
    try {
      expect(settingsWith({ pupManifestFile: 'relative.json' }).pupManifestJson).toBe('{"name":"x"}');
    } finally {
      process.chdir(cwd);
    }
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
    // SQS event sources refuse a MaximumConcurrency outside 2..1000 (Lambda ScalingConfig).
    ['deliveryMaxConcurrency', '1', /deliveryMaxConcurrency must be an integer from 2 to 1000/],
    ['deliveryMaxConcurrency', '1001', /deliveryMaxConcurrency must be an integer from 2 to 1000/],
    ['deliveryMaxConcurrency', 'many', /deliveryMaxConcurrency/],
  ])('%s = %j', (key, value, message) => {
    expect(() => settingsWith({ [key]: value })).toThrow(message);
  });

  test.each([
    ['a file that does not exist', () => path.join(scratch, 'missing.json'), /pupManifestFile: cannot read .*missing\.json.*ENOENT/],
    ['a file that is not JSON', () => file('broken.json', '{"name": '), /pupManifestFile: .*broken\.json" is not JSON/],
    ['JSON that is not an object', () => file('list.json', '["a"]'), /pupManifestFile: .*list\.json" must hold one JSON object/],
    ['a directory', () => scratch, /pupManifestFile: cannot read/],
  ])('pupManifestFile: %s fails synth naming the setting', (_name, make, message) => {
    const run = () => settingsWith({ pupManifestFile: make() });
    expect(run).toThrow(SettingsError);
    expect(run).toThrow(message);
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
        deliveryMaxConcurrency: '7',
        pupManifestFile: file('synth-manifest.json', MANIFEST),
      },
    });
    template = synth.template;
  }, 120_000);

  afterAll(() => synth?.cleanup());

  const props = (id: string): Json => template.Resources[id].Properties;

  test('alarmEmail: CloudWatch may publish to the topic, for this account`s alarms of this stack only', () => {
    // The topic policy replaces SNS's default policy; without an Allow for cloudwatch.amazonaws.com the
    // alarms fail with "not authorized to perform: SNS:Publish" and no mail is ever sent
    // (https://repost.aws/knowledge-center/cloudwatch-receive-sns-for-alarm-trigger). The conditions
    // keep another account's alarms out (https://docs.aws.amazon.com/sns/latest/dg/sns-access-policy-use-cases.html).
    const topic = logicalIds(template, 'AWS::SNS::Topic')[0] as string;
    const policies = logicalIds(template, 'AWS::SNS::TopicPolicy').map((id) => props(id));
    expect(policies).toHaveLength(1);
    expect(policies[0].Topics).toEqual([{ Ref: topic }]);
    const allows = policies[0].PolicyDocument.Statement.filter((s: Json) => s.Effect === 'Allow');
    const alarmArns = logicalIds(template, 'AWS::CloudWatch::Alarm').map((id) => ({ 'Fn::GetAtt': [id, 'Arn'] }));
    expect(alarmArns).toHaveLength(3);
    expect(allows).toEqual([
      {
        Sid: 'AllowThisStacksAlarmsToPublish',
        Effect: 'Allow',
        Principal: { Service: 'cloudwatch.amazonaws.com' },
        Action: 'sns:Publish',
        Resource: { Ref: topic },
        Condition: {
          StringEquals: { 'aws:SourceAccount': { Ref: 'AWS::AccountId' } },
          ArnEquals: { 'aws:SourceArn': alarmArns },
        },
      },
    ]);
    // Each alarm the policy names notifies the topic, and every alarm that notifies it is named.
    for (const id of logicalIds(template, 'AWS::CloudWatch::Alarm')) {
      expect(props(id).AlarmActions).toEqual([{ Ref: topic }]);
    }
  });

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

  test('allowedOrigins: API Gateway`s CORS exposes x-request-id and mcp-protocol-version, as the app does', () => {
    // With CORS configured, API Gateway ignores the CORS headers the integration returns
    // (https://docs.aws.amazon.com/apigateway/latest/developerguide/http-api-cors.html): every header
    // the app exposes (lambda/http/app.ts) has to be in the API's own list or browser scripts lose it.
    const cors = props(resource(template, 'AWS::ApiGatewayV2::Api', 'HttpApi').id).CorsConfiguration;
    expect(cors.ExposeHeaders).toEqual(expect.arrayContaining(['x-request-id', 'mcp-protocol-version']));
    const appSource = fs.readFileSync(path.join(__dirname, '../../lambda/http/app.ts'), 'utf8');
    const appExposed = [...appSource.matchAll(/'access-control-expose-headers': '([^']+)'/g)].flatMap((m) =>
      (m[1] as string).split(',').map((h) => h.trim().toLowerCase()),
    );
    expect(appExposed.length).toBeGreaterThan(0);
    expect(cors.ExposeHeaders).toEqual(expect.arrayContaining(appExposed));
  });

  test('retryDelays: passed to the delivery function; maxReceiveCount follows the receive limit (4 attempts + 4, + 5)', () => {
    const fn = resource(template, 'AWS::Lambda::Function', 'DeliveryFunction');
    expect(fn.Properties.Environment.Variables.DMDOT_RETRY_DELAYS).toBe('1,2,3');
    expect(receiveLimit([1, 2, 3]) + RECEIVE_LIMIT_AWS_MARGIN).toBe(13);
    expect(props(resource(template, 'AWS::SQS::Queue', 'DeliveryQueue').id).RedrivePolicy.maxReceiveCount).toBe(13);
  });

  test('deliveryMaxConcurrency reaches the event source`s ScalingConfig', () => {
    const [mapping] = logicalIds(template, 'AWS::Lambda::EventSourceMapping').map((id) => props(id));
    expect(mapping.ScalingConfig).toEqual({ MaximumConcurrency: 7 });
  });

  test('pupManifestFile: its text reaches the MCP function as PUP_MANIFEST_JSON, unchanged; the delivery function never sees it', () => {
    const mcp = resource(template, 'AWS::Lambda::Function', 'McpFunction');
    expect(mcp.Properties.Environment.Variables.PUP_MANIFEST_JSON).toBe(MANIFEST);
    const delivery = resource(template, 'AWS::Lambda::Function', 'DeliveryFunction');
    expect(delivery.Properties.Environment.Variables.PUP_MANIFEST_JSON).toBeUndefined();
  });

  test('/healthz route throttle never exceeds the stage`s own limits', () => {
    const low = synthesize({ bundle: false, context: { throttleRateLimit: '1', throttleBurstLimit: '1' } });
    try {
      const stage = resource(low.template, 'AWS::ApiGatewayV2::Stage', 'HttpDefaultStage').Properties;
      expect(stage.RouteSettings['GET /healthz']).toEqual({ ThrottlingRateLimit: 1, ThrottlingBurstLimit: 1 });
    } finally {
      low.cleanup();
    }
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
      expect(queue.RedrivePolicy.maxReceiveCount).toBe(20 + 1 + 4 + 5);
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

describe('Lambda`s 4 KB environment limit (https://docs.aws.amazon.com/lambda/latest/dg/gettingstarted-limits.html)', () => {
  /** A JSON object of about `bytes` bytes. */
  const manifestOf = (bytes: number) => JSON.stringify({ name: 'dm-dot', description: 'x'.repeat(bytes - 30) });

  test('a manifest too big for the MCP function`s environment fails synth naming pupManifestFile', () => {
    const big = file('big.json', manifestOf(LAMBDA_ENVIRONMENT_MAX_BYTES));
    expect(() => synthesize({ bundle: false, context: { pupManifestFile: big } })).toThrow(
      /MCP function: its environment variables take about \d+ bytes, Lambda allows 4096 in total; context pupManifestFile \(PUP_MANIFEST_JSON\) takes \d+ bytes/,
    );
  });

  test('the count: UTF-8 bytes of names and values, each CloudFormation reference counted as 256 bytes', () => {
    expect(environmentBytes({ A: 'bc', É: 'é' })).toBe(1 + 2 + 2 + 2);
    expect(environmentBytes({ TABLE: Token.asString({ Ref: 'Table' }) })).toBe(5 + TOKEN_ESTIMATE_BYTES);
    expect(() => assertEnvironmentFits('X', { A: 'a'.repeat(LAMBDA_ENVIRONMENT_MAX_BYTES - 1) }, {})).not.toThrow();
    expect(() => assertEnvironmentFits('X', { AB: 'a'.repeat(LAMBDA_ENVIRONMENT_MAX_BYTES - 1) }, { AB: 'someKey' })).toThrow(
      /X function: .*4097 bytes.*context someKey \(AB\)/,
    );
  });

  test('too many allowed origins fail synth naming allowedOrigins', () => {
    const origins = Array.from({ length: 200 }, (_, i) => `https://app${i}.example.com`).join(',');
    expect(() => synthesize({ bundle: false, context: { allowedOrigins: origins } })).toThrow(/context allowedOrigins \(DMDOT_ALLOWED_ORIGINS\)/);
  });

  test('a manifest that fits with room for the references synthesizes', () => {
    const fits = file('fits.json', manifestOf(2000));
    const ok = synthesize({ bundle: false, context: { pupManifestFile: fits } });
    try {
      const fn = resource(ok.template, 'AWS::Lambda::Function', 'McpFunction');
      expect(fn.Properties.Environment.Variables.PUP_MANIFEST_JSON).toBe(fs.readFileSync(fits, 'utf8'));
    } finally {
      ok.cleanup();
    }
  });
});

test('a TTL default above the TTL cap fails synth naming ttlDefaultMs', () => {
  expect(() => settingsWith({ ttlMaxMs: '3600000', ttlDefaultMs: '7200000' })).toThrow(/ttlDefaultMs .*60000 to 3600000/);
});
