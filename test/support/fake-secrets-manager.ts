/**
 * A stand-in for AWS Secrets Manager's `GetSecretValue` (JSON 1.1 protocol) on 127.0.0.1, so the
 * MCP Lambda's reader (lambda/adapters/secrets-manager.ts) is exercised end to end: the secret can
 * be set, removed (ResourceNotFoundException) or made to fail (500), and every call is counted. It
 * holds any number of secrets by ARN (the API key and the pup signing secrets).
 *
 * Signatures: every request's Signature Version 4 is recomputed with the AWS SDK's own signer
 * (`@smithy/signature-v4`, an implementation independent of the `aws4` the reader signs with)
 * for the credentials it is given (TEST_CREDENTIALS by default; any one of a list), over the headers the request says it signed and its exact body; a request
 * that does not verify is answered 403 `InvalidSignatureException`, as AWS answers it. A fake
 * behind the fault proxy is started with `verifySignatures: false`: the proxy rewrites `Host`.
 *
 * Deliberately not here: any other Secrets Manager action, versions, and the signing time window.
 */
import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { SignatureV4 } from '@smithy/signature-v4';
import { createSecretsManagerReader, type SecretsReader } from '../../lambda/adapters/secrets-manager';

/** The credentials tests sign with; the fake verifies against them. */
export const TEST_CREDENTIALS = { accessKeyId: 'AKIDTESTEXAMPLE', secretAccessKey: 'test-secret-access-key', sessionToken: 'test-session-token' } as const;

/** The reader the MCP Lambda uses, pointed at a fake (or a proxy in front of one). */
export function testSecretsReader(endpoint: string, options: { maxAttempts?: number } = {}): SecretsReader {
  return createSecretsManagerReader({ region: 'us-east-1', endpoint, credentials: () => TEST_CREDENTIALS, ...options });
}

/** What the SDK's signer hands a hash: text, bytes or a buffer. */
type SourceData = string | ArrayBuffer | ArrayBufferView;
const bytesOf = (data: SourceData): string | Buffer =>
  typeof data === 'string' ? data : ArrayBuffer.isView(data) ? Buffer.from(data.buffer, data.byteOffset, data.byteLength) : Buffer.from(data);

/** SHA-256 and HMAC-SHA-256 for the SDK's signer, from node:crypto. */
class NodeSha256 {
  private hash: ReturnType<typeof createHash> | ReturnType<typeof createHmac>;
  constructor(private readonly secret?: SourceData) {
    this.hash = this.fresh();
  }
  private fresh() {
    return this.secret === undefined ? createHash('sha256') : createHmac('sha256', bytesOf(this.secret));
  }
  update(data: SourceData): void {
    this.hash.update(bytesOf(data));
  }
  async digest(): Promise<Uint8Array> {
    return new Uint8Array(this.hash.digest());
  }
  reset(): void {
    this.hash = this.fresh();
  }
}

export interface SigningCredentials {
  accessKeyId: string;
  secretAccessKey: string;
  sessionToken?: string;
}

/** True when the request's Authorization is what the SDK's signer computes for it with `credentials`. */
async function signatureVerifies(signer: SignatureV4, req: http.IncomingMessage, body: Buffer): Promise<boolean> {
  const authorization = String(req.headers.authorization ?? '');
  const signed = /SignedHeaders=([^,]+)/.exec(authorization)?.[1]?.split(';') ?? [];
  const amzDate = String(req.headers['x-amz-date'] ?? '');
  const when = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/.exec(amzDate);
  if (signed.length === 0 || !when) return false;
  const headers: Record<string, string> = {};
  for (const name of signed) {
    const value = req.headers[name];
    if (value === undefined) return false;
    headers[name] = Array.isArray(value) ? value.join(',') : value;
  }
  const [host, port] = String(req.headers.host ?? '').split(':');
  const expected = await signer.sign(
    {
      method: req.method ?? 'POST',
      protocol: 'http:',
      hostname: host ?? '',
      ...(port ? { port: Number(port) } : {}),
      path: req.url ?? '/',
      query: {},
      headers,
      body: body.toString('utf8'),
    },
    { signingDate: new Date(Date.UTC(+when[1]!, +when[2]! - 1, +when[3]!, +when[4]!, +when[5]!, +when[6]!)) },
  );
  const want = Buffer.from(String(expected.headers.authorization ?? expected.headers.Authorization ?? ''));
  const got = Buffer.from(authorization);
  return want.length === got.length && timingSafeEqual(want, got);
}

export interface FakeSecretsManager {
  endpoint: string;
  arn: string;
  /** Number of GetSecretValue calls received (with a valid signature). */
  calls(): number;
  /** Requests refused for their signature. */
  badSignatures(): number;
  /** Sets (or with undefined removes) the secret at `forArn`, by default the one `arn`. */
  setSecret(value: string | undefined, forArn?: string): void;
  /** When true every call answers 500 InternalServiceError. */
  setFailing(failing: boolean): void;
  stop(): Promise<void>;
}

export async function startFakeSecretsManager(
  arn = 'arn:aws:secretsmanager:us-east-1:000000000000:secret:dm-dot-api-key-TeSt01',
  options: { verifySignatures?: boolean; credentials?: SigningCredentials | SigningCredentials[] } = {},
): Promise<FakeSecretsManager> {
  const verify = options.verifySignatures ?? true;
  // applyChecksum off: only S3 signs an x-amz-content-sha256 header; a JSON service's request carries none.
  const signers = [options.credentials ?? TEST_CREDENTIALS]
    .flat()
    .map((credentials) => new SignatureV4({ service: 'secretsmanager', region: 'us-east-1', credentials, sha256: NodeSha256, applyChecksum: false }));
  const secrets = new Map<string, string>();
  let failing = false;
  let calls = 0;
  let badSignatures = 0;
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => void answer(req, res, Buffer.concat(chunks)));
  });
  async function answer(req: http.IncomingMessage, res: http.ServerResponse, raw: Buffer): Promise<void> {
    if (verify && !(await Promise.all(signers.map((signer) => signatureVerifies(signer, req, raw)))).some(Boolean)) {
      badSignatures++;
      res.writeHead(403, { 'content-type': 'application/x-amz-json-1.1' });
      res.end(
        JSON.stringify({ __type: 'InvalidSignatureException', message: 'The request signature we calculated does not match the signature you provided.' }),
      );
      return;
    }
    const target = String(req.headers['x-amz-target'] ?? '');
    const reply = (status: number, body: unknown) => {
      res.writeHead(status, { 'content-type': 'application/x-amz-json-1.1' });
      res.end(JSON.stringify(body));
    };
    if (target !== 'secretsmanager.GetSecretValue') return reply(400, { __type: 'InvalidAction', message: 'unsupported' });
    calls++;
    const input = JSON.parse(raw.toString('utf8') || '{}') as { SecretId?: string };
    if (failing) return reply(500, { __type: 'InternalServiceError', message: 'injected failure' });
    const secret = input.SecretId === undefined ? undefined : secrets.get(input.SecretId);
    if (secret === undefined) {
      return reply(400, { __type: 'ResourceNotFoundException', message: "Secrets Manager can't find the specified secret." });
    }
    return reply(200, { ARN: input.SecretId, Name: 'dm-dot-secret', SecretString: secret, VersionId: 'v1', VersionStages: ['AWSCURRENT'], CreatedDate: 0 });
  }
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    endpoint: `http://127.0.0.1:${port}`,
    arn,
    calls: () => calls,
    badSignatures: () => badSignatures,
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
