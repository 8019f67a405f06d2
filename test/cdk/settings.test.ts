/**
 * CDK context settings: documented defaults (cdk.json repeats lib/settings.ts, and both agree with
 * the functions' own defaults), validation through the functions' own parsers with one clear
 * message per bad value naming the context key, and what the non-default values change in the
 * template. The template checks synthesize once without bundling: they read resources, not code.
 */
import { App, Stack } from 'aws-cdk-lib';
import { AwsSolutionsChecks } from 'cdk-nag';
import { RetentionDays } from 'aws-cdk-lib/aws-logs';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as secretsmanager from 'aws-cdk-lib/aws-secretsmanager';
import * as sqs from 'aws-cdk-lib/aws-sqs';
import * as fields from '../../lambda/config/fields';
import { RECEIVE_LIMIT_AWS_MARGIN, receiveLimit } from '../../lambda/core/delivery';
import { CorsPolicy, DEFAULT_RETRY_DELAYS_S, Limits } from '../../lambda/core/protocol';
import { PUP_MANIFEST_ASSET_FILE } from '../../lib/constructs/mcp-function';
import { queueAgeAlarmThresholdS } from '../../lib/constructs/observability';
import { LAMBDA_ENVIRONMENT_MAX_BYTES, REFERENCE_BYTES, assertEnvironmentFits, environmentBytes } from '../../lib/lambda-environment';
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
    const settings = settingsWith({});
    expect(settings).toEqual({
      retryDelaysS: [1, 4, 30, 120, 600],
      deliveryWaitMs: 3000,
      allowedOrigins: [],
      logRetention: RetentionDays.ONE_MONTH,
      throttleRateLimit: 10,
      throttleBurstLimit: 20,
      ttlDefaultMs: 604_800_000,
      ttlMaxMs: 604_800_000,
      deliveryMaxConcurrency: 2,
      eventsProfile: 'chatgpt',
      inbox: false,
      dashboard: true,
      tableKey: 'customer',
    });
    expect(settings.alarmEmail).toBeUndefined();
    expect(settings.pupManifest).toBeUndefined();
  });

  test('LOCAL-15: the stack`s defaults are the functions` own defaults (lambda/core/protocol.ts, lambda/config/fields.ts)', () => {
    // A stack left at its defaults configures the functions exactly as an empty environment would.
    expect(DEFAULTS.retryDelays).toBe(DEFAULT_RETRY_DELAYS_S.join(','));
    expect(fields.retryDelays(undefined, 'X')).toEqual(settingsWith({}).retryDelaysS);
    expect(DEFAULTS.deliveryWaitMs).toBe(Limits.deliveryWaitDefaultMs);
    expect(DEFAULTS.ttlDefaultMs).toBe(Limits.ttlDefaultMs);
    expect(DEFAULTS.ttlMaxMs).toBe(Limits.ttlMaxMs);
    expect(MAX_RETRY_DELAY_S).toBe(fields.MAX_RETRY_DELAY_S);
  });

  test('an empty value means the default, as for the functions` environment variables', () => {
    const empty = Object.fromEntries((Object.keys(DEFAULTS) as ContextKey[]).map((key) => [key, ' ']));
    expect(settingsWith(empty)).toEqual(settingsWith({}));
  });
});

describe('LOCAL-15: values from -c arrive as strings and are parsed', () => {
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
        eventsProfile: 'sep-3415',
        inbox: 'true',
        dashboard: 'false',
        tableKey: 'aws-managed',
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
      eventsProfile: 'sep-3415',
      inbox: true,
      dashboard: false,
      tableKey: 'aws-managed',
      // Byte for byte, whitespace included: docs/contract/pup.md serves the operator's manifest as is.
      pupManifest: { file: path.join(scratch, 'manifest.json'), text: MANIFEST },
    });
  });

  test('retryDelays: fractions of a second are accepted, as the functions accept them (SQS rounds a delay up)', () => {
    expect(settingsWith({ retryDelays: '0.5,1.5,30' }).retryDelaysS).toEqual([0.5, 1.5, 30]);
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
      expect(settingsWith({ pupManifestFile: 'relative.json' }).pupManifest).toEqual({ file: path.join(scratch, 'relative.json'), text: '{"name":"x"}' });
    } finally {
      process.chdir(cwd);
    }
  });
});

describe('bad values fail synth with a message naming the key', () => {
  test.each([
    ['retryDelays', ',', /^context retryDelays must be 1 to 20 comma-separated numbers of seconds/],
    ['retryDelays', '1,x', /retryDelays/],
    ['retryDelays', '1,-1', /retryDelays/],
    ['retryDelays', '1,50000', /retryDelays/],
    ['retryDelays', Array.from({ length: 21 }, () => '1').join(','), /retryDelays/],
    ['deliveryWaitMs', '5000', /deliveryWaitMs .*0 to 4000/],
    ['deliveryWaitMs', '1.5', /deliveryWaitMs/],
    ['ttlMaxMs', '604800001', /^context ttlMaxMs .*60000 to 604800000/],
    ['ttlMaxMs', '59999', /^context ttlMaxMs/],
    ['ttlDefaultMs', '59999', /^context ttlDefaultMs/],
    ['ttlDefaultMs', '1.5e6', /^context ttlDefaultMs/],
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
    ['alarmEmail', true, /^context alarmEmail must be a string or a number/],
  ])('%s = %j', (key, value, message) => {
    const run = () => settingsWith({ [key]: value });
    // The functions' own error type: one parser for both (lambda/config/fields.ts).
    expect(run).toThrow(fields.SettingsError);
    expect(run).toThrow(message);
  });

  test.each([
    ['a file that does not exist', () => path.join(scratch, 'missing.json'), /^context pupManifestFile \(.*missing\.json\) cannot be read \(ENOENT\)/],
    ['a file that is not JSON', () => file('broken.json', '{"name": '), /^context pupManifestFile \(.*broken\.json\) is not valid JSON/],
    ['JSON that is not an object', () => file('list.json', '["a"]'), /^context pupManifestFile \(.*list\.json\) must hold a JSON object/],
    ['a directory', () => scratch, /^context pupManifestFile \(.*\) cannot be read/],
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
        eventsProfile: 'sep-3415',
        inbox: 'true',
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
    expect(alarmArns).toHaveLength(synth.stack.observability.alarms.length);
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
    expect(logicalIds(template, 'AWS::SNS::Subscription').map((id) => props(id))).toEqual([{ Protocol: 'email', Endpoint: email, TopicArn: { Ref: topic } }]);
    const alarms = logicalIds(template, 'AWS::CloudWatch::Alarm').map((id) => props(id));
    expect(alarms).toHaveLength(9);
    for (const alarm of alarms) expect(alarm.AlarmActions).toEqual([{ Ref: topic }]);
  });

  test('ARCH-ALARM-6: alarmEmail: every alarm also mails when it returns to OK (an OK action on the same topic)', () => {
    const topic = logicalIds(template, 'AWS::SNS::Topic')[0] as string;
    const alarms = logicalIds(template, 'AWS::CloudWatch::Alarm').map((id) => props(id));
    expect(alarms).toHaveLength(9);
    for (const alarm of alarms) expect(alarm.OKActions).toEqual([{ Ref: topic }]);
  });

  test('ARCH-ALARM-2: retryDelays: the delivery queue`s age alarm follows the schedule (1+2+3 s, plus 90 s and 4 x 15 s)', () => {
    const queue = resource(template, 'AWS::SQS::Queue', 'DeliveryQueue').id;
    const alarm = logicalIds(template, 'AWS::CloudWatch::Alarm')
      .map((id) => props(id))
      .find((a: Json) => a.MetricName === 'ApproximateAgeOfOldestMessage' && JSON.stringify(a.Dimensions).includes(queue));
    expect(alarm.Threshold).toBe(queueAgeAlarmThresholdS([1, 2, 3]));
    expect(alarm.Threshold).toBe(6 + 90 + 4 * 15);
    const policy = logicalIds(template, 'AWS::SNS::TopicPolicy').map((id) => props(id))[0];
    expect(policy.PolicyDocument.Statement).toContainEqual(
      expect.objectContaining({ Effect: 'Deny', Condition: { Bool: { 'aws:SecureTransport': 'false' } } }),
    );
  });

  test('HTTP-12: allowedOrigins: passed to the MCP function and answered by API Gateway CORS for that origin only', () => {
    const fn = resource(template, 'AWS::Lambda::Function', 'McpFunction');
    expect(fn.Properties.Environment.Variables.DMDOT_ALLOWED_ORIGINS).toBe('https://inspector.example.com');
    const cors = props(resource(template, 'AWS::ApiGatewayV2::Api', 'HttpApi').id).CorsConfiguration;
    expect(cors.AllowOrigins).toEqual(['https://inspector.example.com']);
    expect(cors.AllowCredentials).toBeUndefined();
    expect(cors.AllowHeaders).toEqual(expect.arrayContaining(['authorization', 'content-type', 'mcp-protocol-version']));
  });

  test('allowedOrigins: API Gateway answers the one CORS policy (core/protocol CorsPolicy), the one the local app answers', () => {
    // With CORS configured, API Gateway ignores the CORS headers the integration returns
    // (https://docs.aws.amazon.com/apigateway/latest/developerguide/http-api-cors.html), so its own
    // configuration has to be the whole policy; test/unit/http/auth-origin.test.ts checks the app's.
    const cors = props(resource(template, 'AWS::ApiGatewayV2::Api', 'HttpApi').id).CorsConfiguration;
    expect(cors.AllowMethods).toEqual([...CorsPolicy.allowMethods]);
    expect(cors.AllowHeaders).toEqual([...CorsPolicy.allowHeaders]);
    expect(cors.ExposeHeaders).toEqual([...CorsPolicy.exposeHeaders]);
    expect(cors.MaxAge).toBe(CorsPolicy.maxAgeS);
  });

  test('DEL-PIPE-19: retryDelays: passed to the delivery function; maxReceiveCount follows the receive limit (4 attempts + 4, + 5)', () => {
    const fn = resource(template, 'AWS::Lambda::Function', 'DeliveryFunction');
    expect(fn.Properties.Environment.Variables.DMDOT_RETRY_DELAYS).toBe('1,2,3');
    expect(receiveLimit([1, 2, 3]) + RECEIVE_LIMIT_AWS_MARGIN).toBe(13);
    expect(props(resource(template, 'AWS::SQS::Queue', 'DeliveryQueue').id).RedrivePolicy.maxReceiveCount).toBe(13);
  });

  test('deliveryMaxConcurrency reaches the event source`s ScalingConfig', () => {
    const [mapping] = logicalIds(template, 'AWS::Lambda::EventSourceMapping').map((id) => props(id));
    expect(mapping.ScalingConfig).toEqual({ MaximumConcurrency: 7 });
  });

  test('pupManifestFile: the MCP function is told the file`s name in its asset (PUP_MANIFEST_FILE), never its text', () => {
    const mcp = resource(template, 'AWS::Lambda::Function', 'McpFunction');
    expect(mcp.Properties.Environment.Variables.PUP_MANIFEST_FILE).toBe(PUP_MANIFEST_ASSET_FILE);
    expect(PUP_MANIFEST_ASSET_FILE).toBe('pup-manifest.json');
    expect(JSON.stringify(template)).not.toContain('PUP_MANIFEST_JSON');
    expect(JSON.stringify(template)).not.toContain('"tools"');
    const delivery = resource(template, 'AWS::Lambda::Function', 'DeliveryFunction');
    expect(Object.keys(delivery.Properties.Environment.Variables)).not.toContain('PUP_MANIFEST_FILE');
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

  test('EV-PROF-7: eventsProfile reaches the MCP function as DMDOT_EVENTS_PROFILE (and only when it is not the default)', () => {
    const fn = resource(template, 'AWS::Lambda::Function', 'McpFunction');
    expect(fn.Properties.Environment.Variables.DMDOT_EVENTS_PROFILE).toBe('sep-3415');
    expect(() => settingsWith({ eventsProfile: 'openai' })).toThrow(/context eventsProfile must be one of chatgpt, sep-3415/);
  });

  test('INBOX-1: inbox=true reaches the MCP function as DMDOT_INBOX=1 (a default stack sets nothing); another value is refused', () => {
    const fn = resource(template, 'AWS::Lambda::Function', 'McpFunction');
    expect(fn.Properties.Environment.Variables.DMDOT_INBOX).toBe('1');
    expect(() => settingsWith({ inbox: 'yes' })).toThrow(/context inbox must be 1 or true/);
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

describe('Lambda`s 4 KB environment limit, measured as Lambda measures it (https://docs.aws.amazon.com/lambda/latest/dg/gettingstarted-limits.html)', () => {
  test('the count: the variables as compact JSON in UTF-8 bytes, names, quotes, commas and braces included', () => {
    // {"A":"bc","É":"é"}: 14 ASCII characters and two of two bytes each.
    expect(environmentBytes({ A: 'bc', É: 'é' })).toBe(20);
    expect(environmentBytes({})).toBe(2);
  });

  test('a quote-heavy value counts with its escapes, as in the string Lambda measures', () => {
    // {"Q":"\"\"\\"}: each quote and the backslash take two bytes once escaped.
    expect(environmentBytes({ Q: '""\\' })).toBe(8 + 2 * 3);
    expect(environmentBytes({ Q: '"'.repeat(100) })).toBe(8 + 200);
    // Control characters take six (\u0001) or two (\n).
    expect(environmentBytes({ C: '\u0001\n' })).toBe(8 + 6 + 2);
    const quoted = 'x'.repeat(2000) + '"'.repeat(1100);
    expect(Buffer.byteLength(quoted)).toBeLessThan(LAMBDA_ENVIRONMENT_MAX_BYTES);
    expect(() => assertEnvironmentFits('X', { DMDOT_ALLOWED_ORIGINS: quoted }, { DMDOT_ALLOWED_ORIGINS: 'allowedOrigins' })).toThrow(
      /X function: .* measure 4228 bytes .*context allowedOrigins \(DMDOT_ALLOWED_ORIGINS\)/,
    );
  });

  test('the limit itself: 4096 bytes fit, 4097 do not', () => {
    const of = (bytes: number) => ({ A: 'a'.repeat(bytes - '{"A":""}'.length) });
    expect(assertEnvironmentFits('X', of(4096), {})).toBe(4096);
    expect(() => assertEnvironmentFits('X', of(4097), { A: 'someKey' })).toThrow(/X function: .*4097 bytes.*Lambda allows 4096.*context someKey \(A\)/);
  });

  test('a reference counts as 256 bytes, more than a table name (255 at most under the longest stack name) or a queue URL can take', () => {
    const stack = new Stack(new App(), 'S'.repeat(128));
    const table = new dynamodb.Table(stack, 'Table', { partitionKey: { name: 'pk', type: dynamodb.AttributeType.STRING } });
    const queue = new sqs.Queue(stack, 'DeliveryQueue');
    const secret = new secretsmanager.Secret(stack, 'PupSigningSecrets');
    expect(environmentBytes({ T: table.tableName })).toBe('{"T":""}'.length + REFERENCE_BYTES);
    // Text around a reference counts as it is.
    expect(environmentBytes({ Q: `${queue.queueUrl}?x` })).toBe('{"Q":""}'.length + REFERENCE_BYTES + 2);
    expect(environmentBytes({ S: secret.secretArn, T: table.tableName })).toBe('{"S":"","T":""}'.length + 2 * REFERENCE_BYTES);
  });

  test('the Delivery and Reconciler functions need no check: 20 retry delays of the longest text leave their environment far under 4 KB', () => {
    const longest = Array.from({ length: 20 }, () => '0.00000012345678901234567').join(',');
    const long = synthesize({ bundle: false, context: { retryDelays: longest } });
    try {
      const environment = long.stack.delivery.settingsEnvironment;
      expect(environment.DMDOT_RETRY_DELAYS).toHaveLength(20 * 22 - 1);
      expect(environmentBytes(environment)).toBeLessThan(LAMBDA_ENVIRONMENT_MAX_BYTES / 2);
    } finally {
      long.cleanup();
    }
  });

  test('too many allowed origins fail synth naming allowedOrigins, the one sizable setting left in the environment', () => {
    const origins = Array.from({ length: 200 }, (_, i) => `https://app${i}.example.com`).join(',');
    expect(() => synthesize({ bundle: false, context: { allowedOrigins: origins } })).toThrow(
      /^MCP function: its environment variables measure \d+ bytes .*Lambda allows 4096; context allowedOrigins \(DMDOT_ALLOWED_ORIGINS\) takes \d+ bytes/,
    );
  });

  test('a pup manifest far larger than the environment could hold synthesizes: it travels in the asset, not the environment', () => {
    const big = file('big.json', JSON.stringify({ name: 'dm-dot', description: 'x'.repeat(64 * 1024) }));
    const ok = synthesize({ bundle: false, context: { pupManifestFile: big } });
    try {
      const fn = resource(ok.template, 'AWS::Lambda::Function', 'McpFunction');
      expect(fn.Properties.Environment.Variables.PUP_MANIFEST_FILE).toBe('pup-manifest.json');
      expect(JSON.stringify(ok.template).length).toBeLessThan(64 * 1024);
    } finally {
      ok.cleanup();
    }
  });
});

test('a TTL default above the TTL cap fails synth naming ttlDefaultMs', () => {
  expect(() => settingsWith({ ttlMaxMs: '3600000', ttlDefaultMs: '7200000' })).toThrow(/ttlDefaultMs .*60000 to 3600000/);
});
