/**
 * Exposure settings (docs/deploying-aws.md, "Exposure and protection"): stage-named stacks, the
 * per-client limit in front of the API (`protection=waf`: CloudFront with a WAF web ACL from a
 * us-east-1 companion stack), custom domains, the default endpoint switch, and the rule that no log
 * the stack configures records the query string (where ChatGPT's connector carries the key). Each
 * template is synthesized once without bundling: these tests read resources, not code.
 */
import { App } from 'aws-cdk-lib';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { BUNDLE_ROOT as PROJECT_ROOT } from '../../lib/bundling';
import { stackNameOf } from '../../lambda/config/fields';
import { addDmDot } from '../../lib/app';
import { EDGE_RATE_LIMITED_BODY } from '../../lib/constructs/edge-acl';
import { ACCESS_LOG_FIELDS } from '../../lib/constructs/http-api';
import { DmDotStack } from '../../lib/dm-dot-stack';
import { DEFAULTS, SettingsError, readSettings } from '../../lib/settings';
import { type Json, type Synthesized, acknowledgements, cdkJsonContext, logicalIds, resource, synthesize, unacknowledgedViolations } from './synth';

const CERT_US_EAST_1 = 'arn:aws:acm:us-east-1:123456789012:certificate/12345678-1234-1234-1234-123456789012';
const CERT_EU_WEST_1 = 'arn:aws:acm:eu-west-1:123456789012:certificate/87654321-4321-4321-4321-210987654321';
const settingsWith = (context: Record<string, unknown>) => readSettings(new App({ context }).node);
const synths: Synthesized[] = [];
function synth(context: Record<string, unknown>, env?: { region?: string; account?: string }): Synthesized {
  const s = synthesize({ bundle: false, context, ...(env ? { env } : {}) });
  synths.push(s);
  return s;
}
afterAll(() => synths.forEach((s) => s.cleanup()));

const typesOf = (template: Json): string[] => Object.values(template.Resources as Record<string, { Type: string }>).map((r) => r.Type);

/** Every log the template configures, as text: stage access logs, CloudFront logging, WAF logging, vended log deliveries. */
function logConfigs(template: Json): Json[] {
  const found: Json[] = [];
  for (const r of Object.values(template.Resources as Record<string, { Type: string; Properties: Json }>)) {
    if (r.Type === 'AWS::ApiGatewayV2::Stage') found.push(r.Properties.AccessLogSettings);
    if (r.Type === 'AWS::CloudFront::Distribution') found.push(r.Properties.DistributionConfig.Logging ?? null);
    if (r.Type === 'AWS::WAFv2::LoggingConfiguration' || r.Type.startsWith('AWS::Logs::Delivery') || r.Type === 'AWS::CloudFront::RealtimeLogConfig')
      found.push(r);
  }
  return found;
}

describe('stages: -c stage=NAME deploys DmDot-NAME beside the others', () => {
  test('EXPO-3: no stage keeps the stack named DmDot (existing deployments are not replaced); a stage names it DmDot-<stage>', () => {
    expect(stackNameOf(undefined)).toBe('DmDot');
    const nameWith = (context: Record<string, unknown>) => addDmDot(new App({ context: { ...context, 'aws:cdk:bundling-stacks': [] } })).stack.stackName;
    expect(nameWith({})).toBe('DmDot');
    expect(nameWith({ stage: 'dev' })).toBe('DmDot-dev');
    expect(nameWith({ stage: '' })).toBe('DmDot');
  });

  test.each(['-dev', 'dev_1', 'dev.1', '1dev', 'a--b', 'dev-', 'x'.repeat(25), 'dév'])(
    'EXPO-3: stage %p is refused with a sentence naming the key',
    (stage) => {
      expect(() => settingsWith({ stage })).toThrow(SettingsError);
      expect(() => settingsWith({ stage })).toThrow(/context stage must be 1 to 24 letters/);
    },
  );

  test('EXPO-3: a stage is carried in the settings, and nothing else changes', () => {
    const { stage, ...rest } = settingsWith({ stage: 'prod-eu' });
    expect(stage).toBe('prod-eu');
    expect(rest).toEqual(settingsWith({}));
  });
});

describe('the app entry (bin/dm-dot.ts) builds what the CLI deploys', () => {
  /** Runs the app as the CDK CLI does (context and region through the environment), without bundling; the stacks of its cloud assembly. */
  function appStacks(context: Record<string, unknown>, region?: string): Record<string, string> {
    const outdir = fs.mkdtempSync(path.join(os.tmpdir(), 'dm-dot-app-'));
    try {
      const result = spawnSync(path.join(PROJECT_ROOT, 'node_modules/.bin/tsx'), [path.join(PROJECT_ROOT, 'bin/dm-dot.ts')], {
        cwd: PROJECT_ROOT,
        env: {
          PATH: process.env.PATH,
          HOME: process.env.HOME,
          CDK_OUTDIR: outdir,
          CDK_CONTEXT_JSON: JSON.stringify({ ...cdkJsonContext(), 'aws:cdk:bundling-stacks': [], ...context }),
          CDK_VALIDATION: 'false',
          ...(region ? { CDK_DEFAULT_REGION: region } : {}),
        },
        encoding: 'utf8',
        timeout: 90_000,
      });
      expect({ status: result.status, stderr: result.stderr.split('\n').filter((l) => /Error/.test(l)) }).toEqual({ status: 0, stderr: [] });
      const manifest = JSON.parse(fs.readFileSync(path.join(outdir, 'manifest.json'), 'utf8')) as {
        artifacts: Record<string, { type: string; environment?: string }>;
      };
      return Object.fromEntries(
        Object.entries(manifest.artifacts)
          .filter(([, a]) => a.type === 'aws:cloudformation:stack')
          .map(([id, a]) => [id, a.environment ?? '']),
      );
    } finally {
      fs.rmSync(outdir, { recursive: true, force: true });
    }
  }

  test('EXPO-3: -c stage=dev is the stack DmDot-dev, environment-agnostic like DmDot', () => {
    expect(appStacks({ stage: 'dev' })).toEqual({ 'DmDot-dev': 'aws://unknown-account/unknown-region' });
  }, 120_000);

  test('EXPO-1: -c protection=waf adds <stack>-Edge in us-east-1, and the main stack takes the region the CLI found', () => {
    expect(appStacks({ stage: 'dev', protection: 'waf' }, 'eu-west-1')).toEqual({
      'DmDot-dev-Edge': 'aws://unknown-account/us-east-1',
      'DmDot-dev': 'aws://unknown-account/eu-west-1',
    });
  }, 120_000);
});

describe('protection=waf: a per-client limit before the shared throttle', () => {
  let s: Synthesized;
  let main: Json;
  let edge: Json;
  beforeAll(() => {
    s = synth({ protection: 'waf', stage: 'dev' }, { region: 'eu-west-1' });
    main = s.template;
    edge = s.edgeTemplate;
  }, 120_000);

  test('the web ACL lives in a companion stack <stack>-Edge in us-east-1, with CLOUDFRONT scope', () => {
    expect(s.edge?.stackName).toBe('DmDot-dev-Edge');
    expect(s.edge?.region).toBe('us-east-1');
    const acl = resource(edge, 'AWS::WAFv2::WebACL', 'AclWebAcl').Properties;
    expect(acl.Scope).toBe('CLOUDFRONT');
    expect(acl.DefaultAction).toEqual({ Allow: {} });
  });

  test('EXPO-1: one rate-based rule per client IP (the connection`s address, no forwarded header), 429 with Retry-After past the limit', () => {
    const acl = resource(edge, 'AWS::WAFv2::WebACL', 'AclWebAcl').Properties;
    expect(acl.Rules).toHaveLength(1);
    const [rule] = acl.Rules;
    expect(rule.Statement).toEqual({
      RateBasedStatement: { AggregateKeyType: 'IP', Limit: DEFAULTS.wafRateLimit, EvaluationWindowSec: DEFAULTS.wafRateWindowSeconds },
    });
    expect(rule.Action.Block.CustomResponse).toEqual({
      ResponseCode: 429,
      CustomResponseBodyKey: 'RateLimited',
      ResponseHeaders: [{ Name: 'retry-after', Value: String(DEFAULTS.wafRateWindowSeconds) }],
    });
    expect(acl.CustomResponseBodies.RateLimited).toEqual({ ContentType: 'APPLICATION_JSON', Content: EDGE_RATE_LIMITED_BODY });
  });

  test('the limit and window are settings, checked against WAF`s bounds', () => {
    expect(settingsWith({ protection: 'waf', wafRateLimit: '500', wafRateWindowSeconds: '300' }).protection).toEqual({
      kind: 'waf',
      requestsPerClient: 500,
      windowS: 300,
    });
    expect(() => settingsWith({ protection: 'waf', wafRateLimit: '9' })).toThrow(/context wafRateLimit must be an integer from 10/);
    expect(() => settingsWith({ protection: 'waf', wafRateWindowSeconds: '90' })).toThrow(
      /context wafRateWindowSeconds must be one of AWS WAF's evaluation windows \(60, 120, 300, 600\)/,
    );
    expect(() => settingsWith({ protection: 'cloudflare' })).toThrow(/context protection must be one of none, waf/);
    expect(settingsWith({ protection: 'none' }).protection).toBeUndefined();
  });

  test('EXPO-1: the distribution carries the web ACL, read across regions from the edge stack`s output', () => {
    const dist = resource(main, 'AWS::CloudFront::Distribution', 'EdgeDistribution').Properties.DistributionConfig;
    const acl = resource(edge, 'AWS::WAFv2::WebACL', 'AclWebAcl');
    const getStackOutput = dist.WebACLId['Fn::GetStackOutput'];
    expect(getStackOutput).toEqual(expect.objectContaining({ StackName: 'DmDot-dev-Edge', Region: 'us-east-1' }));
    expect(edge.Outputs[getStackOutput.OutputName].Value).toEqual({ 'Fn::GetAtt': [acl.id, 'Arn'] });
  });

  test('EXPO-1: its one origin is the HTTP API, over TLS 1.2: the WAF rule meets every request before API Gateway`s stage throttle does', () => {
    const dist = resource(main, 'AWS::CloudFront::Distribution', 'EdgeDistribution').Properties.DistributionConfig;
    const api = resource(main, 'AWS::ApiGatewayV2::Api', 'HttpApi').id;
    expect(dist.Origins).toHaveLength(1);
    expect(dist.Origins[0].DomainName).toEqual({ 'Fn::Select': [2, { 'Fn::Split': ['/', { 'Fn::GetAtt': [api, 'ApiEndpoint'] }] }] });
    expect(dist.Origins[0].CustomOriginConfig).toEqual({ OriginProtocolPolicy: 'https-only', OriginSSLProtocols: ['TLSv1.2'] });
    expect(dist.CacheBehaviors).toBeUndefined();
    expect(dist.DefaultCacheBehavior.ViewerProtocolPolicy).toBe('https-only');
    expect(dist.DefaultCacheBehavior.AllowedMethods).toEqual(expect.arrayContaining(['GET', 'POST', 'DELETE', 'OPTIONS']));
    // The stage throttle stays as it was: it is the backstop behind the per-client rule.
    const stage = resource(main, 'AWS::ApiGatewayV2::Stage', 'HttpDefaultStage').Properties;
    expect(stage.DefaultRouteSettings).toEqual({ ThrottlingRateLimit: DEFAULTS.throttleRateLimit, ThrottlingBurstLimit: DEFAULTS.throttleBurstLimit });
  });

  test('the key still reaches the function: all query strings and viewer headers but Host forwarded, Authorization through the cache policy, nothing cached', () => {
    const behavior = resource(main, 'AWS::CloudFront::Distribution', 'EdgeDistribution').Properties.DistributionConfig.DefaultCacheBehavior;
    // The managed AllViewerExceptHostHeader policy: every query string, header and cookie but Host.
    expect(behavior.OriginRequestPolicyId).toBe('b689b0a8-53d0-40ab-baf2-68738e2966ac');
    const cache = resource(main, 'AWS::CloudFront::CachePolicy', 'EdgeNoCache');
    expect(behavior.CachePolicyId).toEqual({ Ref: cache.id });
    const config = cache.Properties.CachePolicyConfig;
    expect([config.MinTTL, config.DefaultTTL, config.MaxTTL]).toEqual([0, 0, 1]);
    expect(config.ParametersInCacheKeyAndForwardedToOrigin.HeadersConfig).toEqual({ HeaderBehavior: 'whitelist', Headers: ['Authorization'] });
    expect(config.ParametersInCacheKeyAndForwardedToOrigin.QueryStringsConfig).toEqual({ QueryStringBehavior: 'all' });
  });

  test('EXPO-2, HTTP-10: no log records the query string: WAF redacts it and Authorization, samples are off, CloudFront logs nothing, the access log has no path or query', () => {
    const logging = resource(edge, 'AWS::WAFv2::LoggingConfiguration', 'AclLogging').Properties;
    expect(logging.RedactedFields).toEqual([{ QueryString: {} }, { SingleHeader: { Name: 'authorization' } }]);
    expect(logging.ResourceArn).toEqual({ 'Fn::GetAtt': [resource(edge, 'AWS::WAFv2::WebACL', 'AclWebAcl').id, 'Arn'] });
    const logGroup = resource(edge, 'AWS::Logs::LogGroup', 'AclLogs').Properties;
    expect(logGroup.LogGroupName).toBe('aws-waf-logs-DmDot-dev');
    expect(logGroup.RetentionInDays).toBe(DEFAULTS.logRetentionDays);
    // A sampled request shows the query string as sent; log redaction does not apply to samples.
    const acl = resource(edge, 'AWS::WAFv2::WebACL', 'AclWebAcl').Properties;
    expect(acl.VisibilityConfig.SampledRequestsEnabled).toBe(false);
    for (const rule of acl.Rules) expect(rule.VisibilityConfig.SampledRequestsEnabled).toBe(false);
    // CloudFront: no standard (legacy) logging, no v2 delivery, no real-time log (each would carry cs-uri-query).
    const dist = resource(main, 'AWS::CloudFront::Distribution', 'EdgeDistribution').Properties.DistributionConfig;
    expect(dist.Logging).toBeUndefined();
    expect(dist.DefaultCacheBehavior.RealtimeLogConfigArn).toBeUndefined();
    for (const template of [main, edge]) {
      expect(typesOf(template).filter((t) => t.startsWith('AWS::Logs::Delivery') || t === 'AWS::CloudFront::RealtimeLogConfig')).toEqual([]);
    }
    // Every log configured, across both stacks: the access log (no path, no query) and the redacted WAF log.
    const configs = [...logConfigs(main), ...logConfigs(edge)];
    expect(configs).toHaveLength(3);
    const access = configs[0];
    expect(JSON.parse(access.Format)).toEqual(ACCESS_LOG_FIELDS);
    expect(access.Format).not.toMatch(/querystring|rawQueryString|\$context\.path|\$request/i);
    expect(configs[1]).toBeNull();
  });

  test('EXPO-1: the connector URL is CloudFront`s, and no output names the execute-api address that bypasses the rule', () => {
    const dist = resource(main, 'AWS::CloudFront::Distribution', 'EdgeDistribution').id;
    expect(main.Outputs.McpEndpoint.Value).toEqual({ 'Fn::Join': ['', ['https://', { 'Fn::GetAtt': [dist, 'DomainName'] }, '/mcp']] });
    expect(JSON.stringify(main.Outputs)).not.toMatch(/ApiEndpoint|execute-api/);
    expect(JSON.stringify(main.Outputs)).not.toContain('key=');
  });

  test('cdk-nag: nothing unacknowledged in either stack', () => {
    expect(unacknowledgedViolations(s.validationReport)).toEqual([]);
    // What this design acknowledges, beyond the default stack's reviewed few (stack.test.ts): the distribution's three.
    const found = acknowledgements(s.app);
    for (const { reason } of found) expect(reason.length).toBeGreaterThan(60);
    const acknowledged = found.filter(({ path }) => /Edge/.test(path)).map(({ path, rule }) => `${path} ${rule}`);
    expect(acknowledged.sort()).toEqual(
      [
        'DmDot-dev/Edge/Distribution AwsSolutions-CFR1',
        'DmDot-dev/Edge/Distribution AwsSolutions-CFR3',
        'DmDot-dev/Edge/Distribution AwsSolutions-CFR4',
      ].sort(),
    );
  });

  test('without a region CDK cannot read the web ACL across regions: synth says to set one', () => {
    expect(() => addDmDot(new App({ context: { protection: 'waf' } }))).toThrow(/protection=waf needs the stack's region at synth \(set AWS_REGION\)/);
  });

  test('EXPO-4: with the region known at synth, a custom domain whose certificate is from another region is refused in one sentence', () => {
    const context = { domainName: 'mcp.example.com', certificateArn: CERT_EU_WEST_1, 'aws:cdk:bundling-stacks': [] };
    expect(() => addDmDot(new App({ context }), { region: 'us-west-2' })).toThrow(
      "context certificateArn is in eu-west-1, but API Gateway takes a certificate from the API's own region (us-west-2): use a certificate from us-west-2, or deploy to eu-west-1",
    );
    // A region filled in for an offline synth (no one gave it) is not checked against.
    expect(() => addDmDot(new App({ context }), { region: 'us-east-1' }, { regionKnown: false })).not.toThrow();
    expect(() => addDmDot(new App({ context }), { region: 'eu-west-1' })).not.toThrow();
  });

  test('EXPO-1: the default stack has no CloudFront, no WAF and no second stack', () => {
    const app = new App({ context: { 'aws:cdk:bundling-stacks': [] } });
    const built = addDmDot(app, { region: 'eu-west-1' });
    expect(built.edge).toBeUndefined();
    expect(built.stack.edge).toBeUndefined();
    expect(app.node.children.filter((c) => c.node.id.startsWith('DmDot'))).toHaveLength(1);
  });
});

describe('protection=waf with the locked origin: nothing reaches API Gateway around the web ACL', () => {
  const ORIGIN = {
    protection: 'waf',
    originDomainName: 'origin.mcp.example.com',
    originCertificateArn: CERT_EU_WEST_1,
    originTruststoreUri: 's3://dm-dot-truststore/cloudfront-ca.pem',
    originClientCertificateArn: CERT_US_EAST_1,
  };
  let s: Synthesized;
  beforeAll(() => {
    s = synth(ORIGIN, { region: 'eu-west-1' });
  }, 120_000);

  test('EXPO-5: the execute-api address is off, and the API`s only way in is a custom domain that requires mutual TLS against the operator`s trust store', () => {
    const api = resource(s.template, 'AWS::ApiGatewayV2::Api', 'HttpApi');
    expect(api.Properties.DisableExecuteApiEndpoint).toBe(true);
    const domain = resource(s.template, 'AWS::ApiGatewayV2::DomainName', 'OriginDomainName');
    expect(domain.Properties).toEqual({
      DomainName: 'origin.mcp.example.com',
      DomainNameConfigurations: [{ CertificateArn: CERT_EU_WEST_1, EndpointType: 'REGIONAL', SecurityPolicy: 'TLS_1_2' }],
      MutualTlsAuthentication: { TruststoreUri: 's3://dm-dot-truststore/cloudfront-ca.pem' },
    });
    expect(logicalIds(s.template, 'AWS::ApiGatewayV2::DomainName')).toHaveLength(1);
    expect(resource(s.template, 'AWS::ApiGatewayV2::ApiMapping', 'OriginMapping').Properties.ApiId).toEqual({ Ref: api.id });
  });

  test('EXPO-5: CloudFront connects to that domain and presents the us-east-1 client certificate (origin mTLS); the connector URL is CloudFront`s', () => {
    const dist = resource(s.template, 'AWS::CloudFront::Distribution', 'EdgeDistribution');
    const [origin] = dist.Properties.DistributionConfig.Origins;
    expect(origin.DomainName).toBe('origin.mcp.example.com');
    expect(origin.CustomOriginConfig).toEqual({
      OriginProtocolPolicy: 'https-only',
      OriginSSLProtocols: ['TLSv1.2'],
      OriginMtlsConfig: { ClientCertificateArn: CERT_US_EAST_1 },
    });
    expect(s.template.Resources[dist.id].DependsOn).toEqual(
      expect.arrayContaining([resource(s.template, 'AWS::ApiGatewayV2::DomainName', 'OriginDomainName').id]),
    );
    expect(s.template.Outputs.McpEndpoint.Value).toEqual({ 'Fn::Join': ['', ['https://', { 'Fn::GetAtt': [dist.id, 'DomainName'] }, '/mcp']] });
    // CloudFormation takes only literal text as an output's description.
    for (const output of Object.values(s.template.Outputs as Record<string, Json>)) expect(typeof output.Description).toBe('string');
    expect(s.template.Outputs.OriginDomainTarget.Description).toMatch(/^Point origin\.mcp\.example\.com here/);
    expect(s.template.Outputs.OriginDomainTarget.Value).toEqual({
      'Fn::GetAtt': [resource(s.template, 'AWS::ApiGatewayV2::DomainName', 'OriginDomainName').id, 'RegionalDomainName'],
    });
    expect(unacknowledgedViolations(s.validationReport)).toEqual([]);
  });

  test.each([
    [{ ...ORIGIN, originTruststoreUri: '' }, /the locked origin needs all four origin settings; missing context originTruststoreUri$/],
    [
      { ...ORIGIN, originClientCertificateArn: CERT_EU_WEST_1 },
      /originClientCertificateArn is in eu-west-1, but CloudFront presents client certificates from ACM in us-east-1 only/,
    ],
    [{ ...ORIGIN, protection: 'none' }, /only apply with protection=waf/],
    [
      { ...ORIGIN, originTruststoreUri: 'https://bucket.s3.amazonaws.com/ca.pem' },
      /context originTruststoreUri must be an S3 object like s3:\/\/my-bucket\/truststore.pem/,
    ],
  ])('EXPO-4: an incomplete or inconsistent locked origin fails synth with one sentence: %p', (context, message) => {
    expect(() => settingsWith(context)).toThrow(SettingsError);
    expect(() => settingsWith(context)).toThrow(message);
  });

  test('EXPO-4: an origin certificate from another region than the stack`s fails synth', () => {
    expect(() => synth({ ...ORIGIN, originCertificateArn: CERT_US_EAST_1 }, { region: 'eu-west-1' })).toThrow(
      /context originCertificateArn is in us-east-1, but API Gateway takes a certificate from the API's own region \(eu-west-1\)/,
    );
  });
});

describe('custom domain: a stable connector URL', () => {
  test('EXPO-4: without protection: an API Gateway regional domain (TLS 1.2) mapped to the $default stage; McpEndpoint on the domain', () => {
    const { template } = synth({ domainName: 'MCP.Example.com', certificateArn: CERT_EU_WEST_1 });
    const domain = resource(template, 'AWS::ApiGatewayV2::DomainName', 'DomainDomainName');
    expect(domain.Properties).toEqual({
      DomainName: 'mcp.example.com',
      DomainNameConfigurations: [{ CertificateArn: CERT_EU_WEST_1, EndpointType: 'REGIONAL', SecurityPolicy: 'TLS_1_2' }],
    });
    const mapping = resource(template, 'AWS::ApiGatewayV2::ApiMapping', 'DomainMapping').Properties;
    expect(mapping.ApiId).toEqual({ Ref: resource(template, 'AWS::ApiGatewayV2::Api', 'HttpApi').id });
    expect(mapping.Stage).toBe('$default');
    expect(template.Resources[resource(template, 'AWS::ApiGatewayV2::ApiMapping', 'DomainMapping').id].DependsOn).toContain(
      resource(template, 'AWS::ApiGatewayV2::Stage', 'HttpDefaultStage').id,
    );
    expect(template.Outputs.McpEndpoint.Value).toBe('https://mcp.example.com/mcp');
    expect(template.Outputs.CustomDomainTarget.Value).toEqual({ 'Fn::GetAtt': [domain.id, 'RegionalDomainName'] });
    // The execute-api address stays on until disableDefaultEndpoint.
    expect(resource(template, 'AWS::ApiGatewayV2::Api', 'HttpApi').Properties.DisableExecuteApiEndpoint).toBeUndefined();
  });

  test('EXPO-4: the environment-agnostic stack carries a rule that refuses a deploy outside the certificate`s region', () => {
    // Without protection the stack names no region at synth, so the template checks it at deploy.
    const { template } = synth({ domainName: 'mcp.example.com', certificateArn: CERT_EU_WEST_1 });
    // CDK's own CheckBootstrapVersion rule sits beside it.
    const rules = Object.entries(template.Rules as Record<string, Json>).filter(([id]) => id.startsWith('DomainCertificateInStackRegion'));
    expect(rules).toHaveLength(1);
    expect(rules[0]?.[1].Assertions).toEqual([
      {
        Assert: { 'Fn::Equals': [{ Ref: 'AWS::Region' }, 'eu-west-1'] },
        AssertDescription: expect.stringMatching(/^certificateArn is in eu-west-1: deploy this stack there/),
      },
    ]);
  });

  test('EXPO-4: disableDefaultEndpoint=true turns the execute-api address off; the domain is then the only way in', () => {
    const { template } = synth({ domainName: 'mcp.example.com', certificateArn: CERT_EU_WEST_1, disableDefaultEndpoint: 'true' });
    expect(resource(template, 'AWS::ApiGatewayV2::Api', 'HttpApi').Properties.DisableExecuteApiEndpoint).toBe(true);
    expect(template.Outputs.McpEndpoint.Value).toBe('https://mcp.example.com/mcp');
  });

  test('EXPO-4: with protection: the domain is an alias of the distribution with a us-east-1 certificate and TLS 1.2; no API Gateway domain', () => {
    const s = synth({ protection: 'waf', domainName: 'mcp.example.com', certificateArn: CERT_US_EAST_1 }, { region: 'eu-west-1' });
    const dist = resource(s.template, 'AWS::CloudFront::Distribution', 'EdgeDistribution');
    expect(dist.Properties.DistributionConfig.Aliases).toEqual(['mcp.example.com']);
    expect(dist.Properties.DistributionConfig.ViewerCertificate).toEqual({
      AcmCertificateArn: CERT_US_EAST_1,
      MinimumProtocolVersion: 'TLSv1.2_2021',
      SslSupportMethod: 'sni-only',
    });
    expect(logicalIds(s.template, 'AWS::ApiGatewayV2::DomainName')).toEqual([]);
    expect(s.template.Outputs.McpEndpoint.Value).toBe('https://mcp.example.com/mcp');
    expect(s.template.Outputs.CustomDomainTarget.Value).toEqual({ 'Fn::GetAtt': [dist.id, 'DomainName'] });
    expect(unacknowledgedViolations(s.validationReport)).toEqual([]);
  });

  test.each([
    [{ domainName: 'mcp.example.com' }, /context domainName needs context certificateArn/],
    [{ certificateArn: CERT_EU_WEST_1 }, /context certificateArn needs context domainName/],
    [
      { protection: 'waf', domainName: 'mcp.example.com', certificateArn: CERT_EU_WEST_1 },
      /certificateArn is in eu-west-1, but with protection=waf .* us-east-1 only/,
    ],
    [{ disableDefaultEndpoint: 'true' }, /context disableDefaultEndpoint needs context domainName/],
    [
      { disableDefaultEndpoint: true, protection: 'waf', domainName: 'mcp.example.com', certificateArn: CERT_US_EAST_1 },
      /disableDefaultEndpoint with protection=waf needs the locked origin/,
    ],
    [{ domainName: 'https://mcp.example.com', certificateArn: CERT_EU_WEST_1 }, /context domainName must be a DNS name/],
    [{ domainName: '*.example.com', certificateArn: CERT_EU_WEST_1 }, /context domainName must be a DNS name/],
    [{ domainName: 'mcp.example.com', certificateArn: 'arn:aws:iam::123456789012:role/x' }, /context certificateArn must be an ACM certificate ARN/],
    [
      { disableDefaultEndpoint: 'yes', domainName: 'mcp.example.com', certificateArn: CERT_EU_WEST_1 },
      /context disableDefaultEndpoint must be 1 or true \(on\), or 0, false or empty \(off\)/,
    ],
  ])('EXPO-4: a bad or incomplete combination fails synth with one sentence: %p', (context, message) => {
    expect(() => settingsWith(context)).toThrow(SettingsError);
    expect(() => settingsWith(context)).toThrow(message);
  });

  test('EXPO-4: an API Gateway certificate from another region fails synth when the stack`s region is known', () => {
    const app = new App({ context: { domainName: 'mcp.example.com', certificateArn: CERT_US_EAST_1, 'aws:cdk:bundling-stacks': [] } });
    const settings = readSettings(app.node);
    // The stack is environment-agnostic without protection; with a region given it is checked at once.
    expect(() => new DmDotStack(app, 'DmDot', { settings, env: { region: 'eu-west-1' } })).toThrow(
      /certificateArn is in us-east-1, but API Gateway takes a certificate from the API's own region \(eu-west-1\)/,
    );
  });
});
