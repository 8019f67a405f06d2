/**
 * Lambda refuses a function whose environment variables take more than 4 KB ("Function environment
 * variables: 4 KB, for all environment variables associated with the function, in aggregate",
 * https://docs.aws.amazon.com/lambda/latest/dg/gettingstarted-limits.html). What it measures is the
 * variables serialized as one compact JSON object, names, quotes, escapes and commas included: its
 * refusal quotes that very string ("Lambda was unable to configure your environment variables
 * because the environment variables you have provided exceeded the 4KB limit. String measured:
 * {"POWERTOOLS_LOGGER_LOG_EVENT":"true",...}", as reported in
 * https://github.com/github-aws-runners/terraform-aws-github-runner/issues/3594). A deploy would
 * fail half-way with that error; this check fails `cdk synth` instead, naming the context key that
 * made the environment too big, and measures the same string: `JSON.stringify` of the variables,
 * in UTF-8 bytes, so a value full of quotes or backslashes counts with its escapes.
 *
 * References (a table name, a queue URL, a secret ARN) are unknown at synth. Each is counted at the
 * longest text CloudFormation can give it, worked out from what it refers to (REFERENCE_BOUNDS):
 * names CloudFormation generates are `<stack name>-<logical ID>-<up to 13 random characters>`, cut
 * to the resource type's limit, and the region, partition and URL suffix are taken at their
 * longest. A reference of a kind without a bound fails the check: a guess would make it meaningless.
 *
 * Deliberately not here: trimming or compressing a value to make it fit (the operator decides what
 * the settings say), and any other Lambda limit.
 */
import { CfnResource, Reference, Stack, Token, Tokenization, type IResolvable } from 'aws-cdk-lib';
import { SettingsError } from './settings';

export const LAMBDA_ENVIRONMENT_MAX_BYTES = 4096;

/** `us-isof-south-1`: the longest region name of any partition. */
const REGION_MAX = 15;
/** `aws-us-gov`. */
const PARTITION_MAX = 10;
/** `amazonaws.com.cn`. */
const URL_SUFFIX_MAX = 16;
const ACCOUNT_ID = 12;
/** Random characters CloudFormation appends to a name it generates. */
const GENERATED_SUFFIX_MAX = 13;
/** CloudFormation's longest stack name, for a stack whose name is not known at synth. */
const STACK_NAME_MAX = 128;

interface Referenced {
  /** The stack's name as CloudFormation knows it. */
  readonly stackName: string;
  /** The referenced resource's logical ID. */
  readonly logicalId: string;
}

/** `<stack>-<logical ID>-<random>`, at most `limit` characters (the resource type's name limit). */
const generatedName = (r: Referenced, limit: number) => Math.min(limit, r.stackName.length + 1 + r.logicalId.length + 1 + GENERATED_SUFFIX_MAX);

/**
 * The longest value of a reference, by `<resource type> <attribute>` (`Ref` for Ref). Each follows
 * the format the service documents for that value.
 */
export const REFERENCE_BOUNDS: Readonly<Record<string, (r: Referenced) => number>> = {
  // A generated table name; table names are at most 255 characters.
  'AWS::DynamoDB::Table Ref': (r) => generatedName(r, 255),
  // https://sqs.<region>.<url suffix>/<account>/<queue name>; a generated queue name, at most 80.
  'AWS::SQS::Queue Ref': (r) => 'https://sqs.'.length + REGION_MAX + 1 + URL_SUFFIX_MAX + 1 + ACCOUNT_ID + 1 + generatedName(r, 80),
  // arn:<partition>:secretsmanager:<region>:<account>:secret:<name>-<6 random>, where the name
  // CloudFormation generates is <logical ID>-<12 random> (the "CloudFormationCreatedSecret-a1b2c3d4e5f6"
  // of https://docs.aws.amazon.com/secretsmanager/latest/userguide/cfn-example_secret.html).
  'AWS::SecretsManager::Secret Ref': (r) =>
    'arn:'.length + PARTITION_MAX + ':secretsmanager:'.length + REGION_MAX + 1 + ACCOUNT_ID + ':secret:'.length + r.logicalId.length + 1 + 12 + 1 + 6,
};

/** The longest text this reference can resolve to; throws for a kind REFERENCE_BOUNDS does not know. */
export function referenceMaxLength(token: IResolvable): number {
  const target = Reference.isReference(token) ? token.target : undefined;
  const kind = target instanceof CfnResource ? `${target.cfnResourceType} ${(token as Reference).displayName}` : undefined;
  const bound = kind === undefined ? undefined : REFERENCE_BOUNDS[kind];
  if (!bound || !(target instanceof CfnResource)) {
    throw new Error(`no longest length is known for ${kind ?? 'a value that is not a reference'}: add one to REFERENCE_BOUNDS in lib/lambda-environment.ts`);
  }
  const stack = Stack.of(target);
  const stackName = Token.isUnresolved(stack.stackName) ? 'x'.repeat(STACK_NAME_MAX) : stack.stackName;
  return bound({ stackName, logicalId: String(stack.resolve(target.logicalId)) });
}

/** A value with each reference replaced by as many `x` as it can resolve to at most. */
export function worstCaseValue(value: string): string {
  if (!Token.isUnresolved(value)) return value;
  return String(
    Tokenization.reverseString(value)
      .mapTokens({ mapToken: (token) => 'x'.repeat(referenceMaxLength(token)) })
      .join({ join: (left: unknown, right: unknown) => `${String(left)}${String(right)}` }),
  );
}

/** What Lambda measures: the variables as compact JSON in UTF-8 bytes, each reference at its longest. */
export function environmentBytes(environment: Readonly<Record<string, string>>): number {
  const worst = Object.fromEntries(Object.entries(environment).map(([name, value]) => [name, worstCaseValue(value)]));
  return Buffer.byteLength(JSON.stringify(worst), 'utf8');
}

/**
 * Throws SettingsError when the environment cannot fit; returns the bytes measured otherwise.
 * `sources` maps a variable to the context key it comes from, so the message names what the
 * operator can change (the largest first).
 */
export function assertEnvironmentFits(functionName: string, environment: Readonly<Record<string, string>>, sources: Readonly<Record<string, string>>): number {
  const total = environmentBytes(environment);
  if (total <= LAMBDA_ENVIRONMENT_MAX_BYTES) return total;
  const culprits = Object.entries(sources)
    .filter(([name]) => environment[name] !== undefined)
    .map(([name, key]) => ({ name, key, bytes: environmentBytes({ [name]: environment[name] as string }) - 2 }))
    .sort((a, b) => b.bytes - a.bytes);
  const largest = culprits[0];
  const hint = largest ? `context ${largest.key} (${largest.name}) takes ${largest.bytes} bytes of it; make it shorter` : 'no single setting is to blame';
  throw new SettingsError(
    `${functionName} function: its environment variables measure ${total} bytes as Lambda counts them (compact JSON, ` +
      `references at their longest), and Lambda allows ${LAMBDA_ENVIRONMENT_MAX_BYTES}; ${hint}`,
  );
}
