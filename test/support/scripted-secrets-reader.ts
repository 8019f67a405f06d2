/**
 * A scripted Secrets Manager reader (adapters/secrets-manager.ts's port) for the secret loaders'
 * unit tests (API key and pup secrets): each `getSecretValue` takes the next answer (the last one
 * repeats), records the input, and throws an answer that is an Error. `awsError` builds an SDK-like error whose message names the ARN, so a
 * test can check that loaders log error names only.
 */
export type SecretAnswer = { SecretString?: string; SecretBinary?: Uint8Array } | Error;

export function fakeSecretsClient(answers: SecretAnswer[]) {
  const calls: Array<{ SecretId: string }> = [];
  return {
    calls,
    getSecretValue: jest.fn(async (input: { SecretId: string }, _options?: { abortSignal?: AbortSignal }) => {
      calls.push(input);
      const answer = answers.length > 1 ? answers.shift()! : answers[0]!;
      if (answer instanceof Error) throw answer;
      return answer;
    }),
  };
}

export function awsErrorNaming(arn: string, name: string): Error {
  const error = new Error(`${name}: something about ${arn}`);
  error.name = name;
  return error;
}
