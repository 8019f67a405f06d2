/**
 * A stand-in for AWS Secrets Manager's `GetSecretValue` (JSON 1.1 protocol) on 127.0.0.1, so the
 * real SecretsManagerClient of the MCP Lambda is exercised end to end: the secret can be set,
 * removed (ResourceNotFoundException) or made to fail (500), and every call is counted. It holds
 * any number of secrets by ARN (the API key and the pup signing secrets).
 *
 * Deliberately not here: any other Secrets Manager action, signature checks, versions.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface FakeSecretsManager {
  endpoint: string;
  arn: string;
  /** Number of GetSecretValue calls received. */
  calls(): number;
  /** Sets (or with undefined removes) the secret at `forArn`, by default the one `arn`. */
  setSecret(value: string | undefined, forArn?: string): void;
  /** When true every call answers 500 InternalServiceError. */
  setFailing(failing: boolean): void;
  stop(): Promise<void>;
}

export async function startFakeSecretsManager(arn = 'arn:aws:secretsmanager:us-east-1:000000000000:secret:dm-dot-api-key-TeSt01'): Promise<FakeSecretsManager> {
  const secrets = new Map<string, string>();
  let failing = false;
  let calls = 0;
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const target = String(req.headers['x-amz-target'] ?? '');
      const reply = (status: number, body: unknown) => {
        res.writeHead(status, { 'content-type': 'application/x-amz-json-1.1' });
        res.end(JSON.stringify(body));
      };
      if (target !== 'secretsmanager.GetSecretValue') return reply(400, { __type: 'InvalidAction', message: 'unsupported' });
      calls++;
      const input = JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}') as { SecretId?: string };
      if (failing) return reply(500, { __type: 'InternalServiceError', message: 'injected failure' });
      const secret = input.SecretId === undefined ? undefined : secrets.get(input.SecretId);
      if (secret === undefined) {
        return reply(400, { __type: 'ResourceNotFoundException', message: "Secrets Manager can't find the specified secret." });
      }
      return reply(200, { ARN: input.SecretId, Name: 'dm-dot-secret', SecretString: secret, VersionId: 'v1', VersionStages: ['AWSCURRENT'], CreatedDate: 0 });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    endpoint: `http://127.0.0.1:${port}`,
    arn,
    calls: () => calls,
    setSecret: (value, forArn = arn) => {
      if (value === undefined) secrets.delete(forArn);
      else secrets.set(forArn, value);
    },
    setFailing: (value) => {
      failing = value;
    },
    stop: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
