/**
 * Deployment settings of the dm-dot stack, read from CDK context (`cdk.json` or `-c key=value`)
 * and validated once, so a typo fails `cdk synth` with one clear line instead of a broken deploy.
 *
 * Every value goes through the parsers of lambda/config/fields.ts, named `context <key>` in their
 * messages; this module adds what exists for CDK alone: the context, its documented defaults, the
 * ranges AWS gives the stack's resources, and how the exposure settings combine. Values from `-c`
 * arrive as strings, values from `cdk.json` may be numbers: both are accepted. An empty value means
 * the default.
 *
 * Deliberately not here: anything that must never be configurable on AWS, such as
 * `DMDOT_ALLOW_LOOPBACK_CALLBACKS` (docs/contract/outbound-guard.md: the stack never sets it), and the API key (generated
 * by Secrets Manager, never a context value).
 */
import { RetentionDays } from 'aws-cdk-lib/aws-logs';
import type { Node } from 'constructs';
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as field from '../lambda/config/fields';
import { SettingsError, type Raw } from '../lambda/config/fields';
import { DEFAULT_EVENTS_PROFILE, EVENTS_PROFILES, Limits } from '../lambda/core/protocol';

export { MAX_RETRY_DELAY_S, SettingsError } from '../lambda/config/fields';

/** The refusal of a certificate from another region than the API's: API Gateway takes none from elsewhere. */
export function certificateRegionError(setting: string, certificateRegion: string, region: string): SettingsError {
  return new SettingsError(
    `context ${setting} is in ${certificateRegion}, but API Gateway takes a certificate from the API's own region (${region}): use ` +
      `a certificate from ${region}, or deploy to ${certificateRegion}`,
  );
}

/** What readSettings makes of the context: each key parsed (docs/deploying-aws.md says what each does). */
export type DmDotSettings = ReturnType<typeof readSettings>;

/** The connector's domain: a lower-cased DNS name, and its certificate's ARN and region (us-east-1 for CloudFront, the stack's own for API Gateway). */
export type CustomDomain = NonNullable<DmDotSettings['customDomain']>;
/** The locked origin of `protection=waf` (custom-domain.ts): the four origin settings. */
export type LockedOrigin = NonNullable<NonNullable<DmDotSettings['protection']>['lockedOrigin']>;

/** CloudFront reads certificates and CLOUDFRONT-scope web ACLs from this region only. */
export const CLOUDFRONT_REGION = 'us-east-1';
/** The evaluation windows AWS WAF's rate-based rules accept. */
const WAF_RATE_WINDOWS_S = [60, 120, 300, 600];

/** Context keys and their defaults, exactly as they appear in `cdk.json` (a test keeps the two in step, and these in step with the functions' own). */
export const DEFAULTS = {
  retryDelays: '1,4,30,120,600',
  deliveryWaitMs: 3000,
  ttlDefaultMs: 604_800_000,
  ttlMaxMs: 604_800_000,
  allowedOrigins: '',
  alarmEmail: '',
  logRetentionDays: 30,
  throttleRateLimit: 10,
  throttleBurstLimit: 20,
  deliveryMaxConcurrency: 2,
  pupManifestFile: '',
  stage: '',
  protection: 'none',
  wafRateLimit: 100,
  wafRateWindowSeconds: 60,
  domainName: '',
  certificateArn: '',
  disableDefaultEndpoint: 'false',
  originDomainName: '',
  originCertificateArn: '',
  originTruststoreUri: '',
  originClientCertificateArn: '',
  eventsProfile: 'chatgpt',
  inbox: 'false',
  dashboard: 'true',
  tableKey: 'customer',
} as const;

export type ContextKey = keyof typeof DEFAULTS;

/** CloudWatch's retention values, without "never expire". */
const VALID_RETENTION_DAYS: readonly number[] = Object.values(RetentionDays).filter((v): v is number => typeof v === 'number' && v !== RetentionDays.INFINITE);

const named = (key: ContextKey) => `context ${key}`;

/** A context value as the parsers take it; a key that is not set, or set to nothing, gets its documented default. */
function raw(node: Node, key: ContextKey): Raw {
  const value: unknown = node.tryGetContext(key);
  if (value === undefined || value === null) return DEFAULTS[key];
  // A switch may be a JSON boolean in cdk.json; any other key takes text or a number only.
  if (typeof value === 'boolean' && key === 'disableDefaultEndpoint') return String(value);
  if (typeof value !== 'string' && typeof value !== 'number') throw new SettingsError(`${named(key)} must be a string or a number`);
  return field.isUnset(value) ? DEFAULTS[key] : value;
}

const integer = (node: Node, key: ContextKey, min: number, max: number) => field.integer(raw(node, key), named(key), min, max);

/**
 * Reads the pup manifest at synth and checks it with the functions' own rule (one JSON object of at
 * most 1 MiB, served as is: docs/contract/pup.md). A relative path is taken from the directory `cdk` runs in.
 */
function readManifest(value: Raw): { file: string; text: string } | undefined {
  const file = field.optional(value);
  if (file === undefined) return undefined;
  const resolved = path.resolve(file);
  const name = `${named('pupManifestFile')} (${resolved})`;
  let content: string;
  try {
    content = fs.readFileSync(resolved, 'utf8');
  } catch (error) {
    throw new SettingsError(`${name} cannot be read (${(error as NodeJS.ErrnoException).code ?? 'error'})`);
  }
  return { file: resolved, text: field.manifestText(content, name) };
}

/**
 * The exposure settings, each through its parser, then their combinations. What needs the stack's
 * region (an API Gateway certificate in that region) is checked where the region is known (app.ts, custom-domain.ts).
 */
function readExposure(node: Node) {
  const stage = field.stageName(raw(node, 'stage'), named('stage'));
  const kind = field.choice(raw(node, 'protection'), named('protection'), ['none', 'waf']);
  // AWS WAF's bounds of a rate-based rule's limit.
  const requestsPerClient = integer(node, 'wafRateLimit', 10, 2_000_000_000);
  const windowS = integer(node, 'wafRateWindowSeconds', 60, 600);
  if (!WAF_RATE_WINDOWS_S.includes(windowS)) {
    throw new SettingsError(`${named('wafRateWindowSeconds')} must be one of AWS WAF's evaluation windows (${WAF_RATE_WINDOWS_S.join(', ')}), got ${windowS}`);
  }
  const domainName = field.dnsName(raw(node, 'domainName'), named('domainName'));
  const certificate = field.certificateArn(raw(node, 'certificateArn'), named('certificateArn'));
  const disableDefaultEndpoint = field.flag(raw(node, 'disableDefaultEndpoint'), named('disableDefaultEndpoint'));

  if (domainName !== undefined && certificate === undefined) {
    throw new SettingsError(
      `${named('domainName')} needs ${named('certificateArn')}: an ACM certificate for ${domainName} (in us-east-1 with protection=waf, else in ` +
        "the stack's region)",
    );
  }
  if (certificate !== undefined && domainName === undefined) {
    throw new SettingsError(`${named('certificateArn')} needs ${named('domainName')}: the name the certificate is for`);
  }
  if (kind === 'waf' && certificate !== undefined && certificate.region !== CLOUDFRONT_REGION) {
    throw new SettingsError(
      `${named('certificateArn')} is in ${certificate.region}, but with protection=waf the domain is CloudFront's, which takes certificates from ` +
        `${CLOUDFRONT_REGION} only`,
    );
  }
  if (disableDefaultEndpoint && domainName === undefined) {
    throw new SettingsError(
      `${named('disableDefaultEndpoint')} needs ${named('domainName')} and ${named('certificateArn')}: without them the API would have no address at all`,
    );
  }
  const lockedOrigin = readLockedOrigin(node);
  if (lockedOrigin !== undefined && kind !== 'waf') {
    throw new SettingsError(`${named('originDomainName')} and the other origin settings only apply with protection=waf: they lock the API to CloudFront`);
  }
  if (disableDefaultEndpoint && kind === 'waf' && lockedOrigin === undefined) {
    throw new SettingsError(
      `${named('disableDefaultEndpoint')} with protection=waf needs the locked origin (originDomainName, originCertificateArn, ` +
        'originTruststoreUri, originClientCertificateArn): otherwise CloudFront reaches the API through the execute-api address',
    );
  }
  return {
    ...(stage === undefined ? {} : { stage }),
    ...(kind === 'waf' ? { protection: { kind, requestsPerClient, windowS, ...(lockedOrigin ? { lockedOrigin } : {}) } } : {}),
    ...(domainName !== undefined && certificate !== undefined
      ? { customDomain: { domainName, certificateArn: certificate.arn, certificateRegion: certificate.region } }
      : {}),
    ...(disableDefaultEndpoint ? { disableDefaultEndpoint: true as const } : {}),
  };
}

/** The locked origin (custom-domain.ts): the four origin settings, all or none. */
function readLockedOrigin(node: Node) {
  const domainName = field.dnsName(raw(node, 'originDomainName'), named('originDomainName'));
  const certificate = field.certificateArn(raw(node, 'originCertificateArn'), named('originCertificateArn'));
  const truststore = field.s3Uri(raw(node, 'originTruststoreUri'), named('originTruststoreUri'));
  const client = field.certificateArn(raw(node, 'originClientCertificateArn'), named('originClientCertificateArn'));
  if (domainName === undefined || certificate === undefined || truststore === undefined || client === undefined) {
    const given = { originDomainName: domainName, originCertificateArn: certificate, originTruststoreUri: truststore, originClientCertificateArn: client };
    const missing = Object.entries(given).flatMap(([key, value]) => (value === undefined ? [`context ${key}`] : []));
    if (missing.length === 4) return undefined;
    throw new SettingsError(`the locked origin needs all four origin settings; missing ${missing.join(', ')}`);
  }
  if (client.region !== CLOUDFRONT_REGION) {
    throw new SettingsError(
      `${named('originClientCertificateArn')} is in ${client.region}, but CloudFront presents client certificates from ACM in ${CLOUDFRONT_REGION} only`,
    );
  }
  return { domainName, certificateArn: certificate.arn, certificateRegion: certificate.region, truststore, clientCertificateArn: client.arn };
}

/** Reads and validates every setting; throws SettingsError naming the bad key. */
export function readSettings(node: Node) {
  const logRetentionDays = integer(node, 'logRetentionDays', 1, 3653);
  if (!VALID_RETENTION_DAYS.includes(logRetentionDays)) {
    throw new SettingsError(`${named('logRetentionDays')} must be one of CloudWatch's values (${VALID_RETENTION_DAYS.join(', ')}), got ${logRetentionDays}`);
  }
  // Each bound on its own first, so the message names the key that is off; then the shared rule
  // that ties the two together (the default never above the cap).
  const ttlMaxMs = integer(node, 'ttlMaxMs', Limits.ttlMinMs, Limits.ttlMaxMs);
  const ttlDefaultMs = integer(node, 'ttlDefaultMs', Limits.ttlMinMs, ttlMaxMs);
  const ttl = field.ttlPolicy(ttlDefaultMs, ttlMaxMs, `${named('ttlDefaultMs')} / ${named('ttlMaxMs')}`);
  const pupManifest = readManifest(raw(node, 'pupManifestFile'));
  const alarmEmail = field.email(raw(node, 'alarmEmail'), named('alarmEmail'));
  return {
    retryDelaysS: field.retryDelays(raw(node, 'retryDelays'), named('retryDelays')),
    deliveryWaitMs: field.deliveryWaitMs(raw(node, 'deliveryWaitMs'), named('deliveryWaitMs')),
    ttlDefaultMs: ttl.defaultMs,
    ttlMaxMs: ttl.maxMs,
    allowedOrigins: field.origins(raw(node, 'allowedOrigins'), named('allowedOrigins')),
    ...(alarmEmail === undefined ? {} : { alarmEmail }),
    logRetention: logRetentionDays as RetentionDays,
    throttleRateLimit: integer(node, 'throttleRateLimit', 1, 10_000),
    throttleBurstLimit: integer(node, 'throttleBurstLimit', 1, 5_000),
    // The range of an SQS event source's `MaximumConcurrency` (Lambda's ScalingConfig).
    deliveryMaxConcurrency: integer(node, 'deliveryMaxConcurrency', 2, 1000),
    ...(pupManifest === undefined ? {} : { pupManifest }),
    ...readExposure(node),
    eventsProfile: field.oneOf(raw(node, 'eventsProfile'), named('eventsProfile'), EVENTS_PROFILES, DEFAULT_EVENTS_PROFILE),
    inbox: field.flag(raw(node, 'inbox'), named('inbox')),
    dashboard: field.flag(raw(node, 'dashboard'), named('dashboard')),
    tableKey: field.oneOf(raw(node, 'tableKey'), named('tableKey'), ['customer', 'aws-managed'], 'customer'),
  };
}
