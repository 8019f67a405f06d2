/**
 * Lambda refuses a function whose environment variables take more than 4 KB in total (keys and
 * values; "Function environment variables: 4 KB, for all environment variables associated with
 * the function, in aggregate", https://docs.aws.amazon.com/lambda/latest/dg/gettingstarted-limits.html).
 * The deploy would fail half-way with a CloudFormation error; this check fails `cdk synth` instead,
 * naming the setting that made the environment too big.
 *
 * Values that are CloudFormation references (a table name, a queue URL, a secret ARN) are unknown at
 * synth; each is counted as TOKEN_ESTIMATE_BYTES, more than any of them resolves to, so the check
 * errs on the safe side.
 *
 * Deliberately not here: trimming or compressing a value to make it fit (the operator decides what
 * the manifest says), and any other Lambda limit.
 */
import { Token } from 'aws-cdk-lib';
import { SettingsError } from './settings';

export const LAMBDA_ENVIRONMENT_MAX_BYTES = 4096;
/** Upper bound for a reference: a queue URL or secret ARN is ~100-150 bytes, a table name at most 255. */
export const TOKEN_ESTIMATE_BYTES = 256;

/** Bytes the environment takes as Lambda counts it (UTF-8 keys plus values), references estimated. */
export function environmentBytes(environment: Readonly<Record<string, string>>): number {
  let total = 0;
  for (const [name, value] of Object.entries(environment)) {
    total += Buffer.byteLength(name, 'utf8');
    total += Token.isUnresolved(value) ? TOKEN_ESTIMATE_BYTES : Buffer.byteLength(value, 'utf8');
  }
  return total;
}

/**
 * Throws SettingsError when the environment cannot fit. `sources` maps a variable to the context
 * key it comes from, so the message names what the operator can change (the largest first).
 */
export function assertEnvironmentFits(
  functionName: string,
  environment: Readonly<Record<string, string>>,
  sources: Readonly<Record<string, string>>,
): void {
  const total = environmentBytes(environment);
  if (total <= LAMBDA_ENVIRONMENT_MAX_BYTES) return;
  const culprits = Object.entries(sources)
    .filter(([name]) => environment[name] !== undefined && !Token.isUnresolved(environment[name] as string))
    .map(([name, key]) => ({ name, key, bytes: Buffer.byteLength(environment[name] as string, 'utf8') }))
    .sort((a, b) => b.bytes - a.bytes);
  const largest = culprits[0];
  const hint = largest
    ? `context ${largest.key} (${largest.name}) takes ${largest.bytes} bytes of it; make it smaller (for a JSON file: minify it)`
    : 'no single setting is to blame';
  throw new SettingsError(
    `${functionName} function: its environment variables take about ${total} bytes, Lambda allows ${LAMBDA_ENVIRONMENT_MAX_BYTES} in total; ${hint}`,
  );
}
