/**
 * The settings that let a personal deployment idle for under $1 a month (docs/deploying-aws.md,
 * "Costs"): `-c dashboard=false` leaves the CloudWatch dashboard (and its DashboardUrl output) out
 * and keeps every alarm; `-c tableKey=aws-managed` encrypts the table with DynamoDB's AWS managed
 * key, so the stack has no KMS key of its own and no role is granted one. The defaults keep both.
 * Templates only (no bundling), cdk-nag still clean.
 */
import { unacknowledgedViolations, synthesize, type Json, type Synthesized } from './synth';

const count = (template: Json, type: string) => Object.values(template.Resources as Record<string, { Type: string }>).filter((r) => r.Type === type).length;

describe('a personal deployment that idles cheaply', () => {
  let defaults: Synthesized;
  let lean: Synthesized;
  beforeAll(() => {
    defaults = synthesize({ bundle: false });
    lean = synthesize({ bundle: false, context: { dashboard: 'false', tableKey: 'aws-managed' } });
  }, 120_000);
  afterAll(() => {
    defaults?.cleanup();
    lean?.cleanup();
  });

  test('by default the stack has its dashboard and a customer managed key for the table', () => {
    expect(count(defaults.template, 'AWS::CloudWatch::Dashboard')).toBe(1);
    expect(defaults.template.Outputs.DashboardUrl).toBeDefined();
    expect(count(defaults.template, 'AWS::KMS::Key')).toBe(1);
  });

  test('dashboard=false: no dashboard and no DashboardUrl output; the alarms are the same', () => {
    expect(count(lean.template, 'AWS::CloudWatch::Dashboard')).toBe(0);
    expect(lean.template.Outputs.DashboardUrl).toBeUndefined();
    expect(count(lean.template, 'AWS::CloudWatch::Alarm')).toBe(count(defaults.template, 'AWS::CloudWatch::Alarm'));
  });

  test('tableKey=aws-managed: the table uses the AWS managed key; no KMS key, and no role is granted one', () => {
    expect(count(lean.template, 'AWS::KMS::Key')).toBe(0);
    const table = Object.values(lean.template.Resources as Record<string, { Type: string; Properties: Json }>).find((r) => r.Type === 'AWS::DynamoDB::Table')!;
    // SSEEnabled without a key id: KMS with DynamoDB's AWS managed key (aws/dynamodb).
    expect(table.Properties.SSESpecification).toEqual({ SSEEnabled: true });
    expect(JSON.stringify(lean.template)).not.toMatch(/kms:Decrypt/);
  });

  test('cdk-nag finds nothing new in the lean stack', () => {
    expect(unacknowledgedViolations(lean.validationReport)).toEqual([]);
  });

  test('a bad value is one sentence naming the setting', () => {
    expect(() => synthesize({ bundle: false, context: { tableKey: 'mine' } })).toThrow('context tableKey must be one of customer, aws-managed, got "mine"');
    expect(() => synthesize({ bundle: false, context: { dashboard: 'no' } })).toThrow(
      /^context dashboard must be 1 or true \(on\), or 0, false or empty \(off\), got "no"$/,
    );
  });
});
