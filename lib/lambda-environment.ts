/**
 * Lambda's 4 KB limit on a function's environment variables, measured as Lambda does (its refusal
 * quotes the compact JSON it measured) and checked at synth, so that a deploy does not fail
 * half-way: docs/deploying-aws.md, "Lambda's 4 KB environment limit", says how, and why only the
 * MCP function is measured.
 *
 * Deliberately not here: trimming or compressing a value to make it fit (the operator decides what
 * the settings say), an exact length for each kind of reference, and any other Lambda limit.
 */
import { Token, Tokenization } from 'aws-cdk-lib';
import { SettingsError } from './settings';

export const LAMBDA_ENVIRONMENT_MAX_BYTES = 4096;

/**
 * What a reference (a table name, a queue URL, a secret ARN) counts for: unknown at synth, and no
 * longer than this (a table name is at most 255 characters; the stack's queue URLs and generated
 * secret ARNs are shorter).
 */
export const REFERENCE_BYTES = 256;

function withReferencesAtMost(value: string): string {
  if (!Token.isUnresolved(value)) return value;
  return String(
    Tokenization.reverseString(value)
      .mapTokens({ mapToken: () => 'x'.repeat(REFERENCE_BYTES) })
      .join({ join: (left: unknown, right: unknown) => `${String(left)}${String(right)}` }),
  );
}

/** What Lambda measures: the variables as compact JSON in UTF-8 bytes, each reference at REFERENCE_BYTES. */
export function environmentBytes(environment: Readonly<Record<string, string>>): number {
  const longest = Object.fromEntries(Object.entries(environment).map(([name, value]) => [name, withReferencesAtMost(value)]));
  return Buffer.byteLength(JSON.stringify(longest), 'utf8');
}

/**
 * Throws SettingsError when the environment cannot fit; returns the bytes measured otherwise.
 * `sources` maps a variable to the context key it comes from, so the message names what the
 * operator can change (the largest first).
 */
export function assertEnvironmentFits(functionName: string, environment: Readonly<Record<string, string>>, sources: Readonly<Record<string, string>>): number {
  const total = environmentBytes(environment);
  if (total <= LAMBDA_ENVIRONMENT_MAX_BYTES) return total;
  const [largest] = Object.entries(sources)
    .filter(([name]) => environment[name] !== undefined)
    .map(([name, key]) => ({ name, key, bytes: environmentBytes({ [name]: environment[name] as string }) - 2 }))
    .sort((a, b) => b.bytes - a.bytes);
  const hint = largest ? `context ${largest.key} (${largest.name}) takes ${largest.bytes} bytes of it; make it shorter` : 'no single setting is to blame';
  throw new SettingsError(
    `${functionName} function: its environment variables measure ${total} bytes as Lambda counts them (compact JSON, ` +
      `references at ${REFERENCE_BYTES} bytes), and Lambda allows ${LAMBDA_ENVIRONMENT_MAX_BYTES}; ${hint}`,
  );
}
