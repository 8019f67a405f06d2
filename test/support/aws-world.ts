/**
 * The AWS world of the integration tests that run dm-dot's Lambdas in-process: DynamoDB Local,
 * fauxqs, the fake Secrets Manager and (unless left out) the loopback receiver, started together;
 * a fault proxy (test/support/aws-fault-proxy.ts) in front of the services a file chooses; the
 * table created and the API key stored. On top of it, what every such file otherwise wrote again:
 * the environment the stack gives the Lambdas (`env`, with the file's own extras), SDK clients with
 * dm-dot's own options (handlers/aws-clients.ts) pointed at the proxies, tracked and destroyed by
 * `stop`, the MCP and Delivery Lambdas wired from that environment (the MCP one behind the local
 * API Gateway, test/support/apigw.ts), their log lines collected, and the requests the tests send
 * (a REST send, a 2026-07-28 JSON-RPC call, `send_to_dot`, `events/subscribe`), with `timed`.
 *
 * Deliberately not here: what a file pins. The faults (each test sets its proxies' rules; `resetProxies`
 * only puts them back to `pass`), the reconciler's clock and metrics, senders and pollers, child
 * processes and built bundles, and every assertion (including "the key never reaches a log line",
 * which each file states over `logLines`). The request shapes themselves live in test/support/app.ts
 * (`modernInit`, `messageInit`), shared with the unit tests.
 */
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { SQSClient } from '@aws-sdk/client-sqs';
import { DynamoDbStore } from '../../lambda/adapters/dynamodb-store';
import type { SecretsReader } from '../../lambda/adapters/secrets-manager';
import { clientOptions, type AwsClients } from '../../lambda/handlers/aws-clients';
import type { DeliveryLambda, DeliveryLambdaOverrides } from '../../lambda/handlers/delivery-lambda';
import type { McpAwsClients, McpLambdaOverrides } from '../../lambda/handlers/mcp-lambda';
import { deliveryLambdaFromEnvironment, mcpLambdaFromEnvironment } from './lambda-environment';
import { EventStatus } from '../../lambda/core/protocol';
import { createLogger } from '../../lambda/log';
import { localApiGateway } from './apigw';
import { messageInit, modernInit } from './app';
import { startFaultProxy, type FaultProxy, type FaultProxyOptions, type Service } from './aws-fault-proxy';
import { startDynamoDbLocal, type DynamoDbLocal } from './dynamodb-local';
import { startFakeSecretsManager, testSecretsReader, type FakeSecretsManager, type SigningCredentials } from './fake-secrets-manager';
import { startFauxqs, type Fauxqs, type FauxqsOptions } from './fauxqs';
import { startReceiver, type Receiver } from './receiver';
import { newSecret } from './webhook-secret';
import { measureCpuWait, pollUntil } from './cpu-wait';

export { newSecret };

const REGION = 'us-east-1';
/** DynamoDB Local keeps one database per access key id: the same as its helper's client. */
const DYNAMODB_CREDENTIALS = { accessKeyId: 'local', secretAccessKey: 'local' };
const SQS_CREDENTIALS = { accessKeyId: 'test', secretAccessKey: 'test' };

export interface AwsWorldOptions<P extends Service> {
  table: string;
  /** Stored as the secret at the fake's ARN. */
  apiKey: string;
  /** The file's own variables over the base environment (DMDOT_RETRY_DELAYS, DMDOT_DELIVERY_WAIT_MS, ...). */
  env?: NodeJS.ProcessEnv;
  fauxqs?: FauxqsOptions;
  /** The fake's ARN (or a promise of it, awaited while the rest starts) and its signature check. */
  secrets?: { arn?: string | PromiseLike<string | undefined>; verifySignatures?: boolean; credentials?: SigningCredentials | SigningCredentials[] };
  /** The loopback dot (test/support/receiver.ts); default true. */
  receiver?: boolean;
  /** The services behind a fault proxy of their own; the clients and the secrets reader go through them. */
  proxies?: readonly P[];
  proxyOptions?: Partial<Record<P, FaultProxyOptions>>;
}

/** The MCP Lambda behind the local API Gateway, with the requests the tests send, signed with the world's key. */
export interface McpGateway {
  fetch(input: string | URL | Request, init?: RequestInit): Promise<Response>;
  /** POST /v1/messages with the key as a Bearer token. */
  postMessage(message: string): Promise<{ status: number; body: RestAnswer }>;
  /** A JSON-RPC call on /mcp?key=..., the Response as it came. */
  call(method: string, params?: Record<string, unknown>, options?: RpcOptions): Promise<Response>;
  /** The same, its body read as JSON. */
  rpc<R = Record<string, unknown>>(method: string, params?: Record<string, unknown>, options?: RpcOptions): Promise<RpcAnswer<R>>;
  sendToDot(message: string, options?: RpcOptions): Promise<RpcAnswer<ToolResult>>;
  /** events/subscribe to message.created by webhook at `url`, with a fresh secret unless given. */
  subscribe(url: string, options?: RpcOptions & { secret?: string }): Promise<RpcAnswer<{ id?: string } & Record<string, unknown>>>;
}

export interface RpcOptions {
  id?: number | string;
  /** `_meta` entries after the protocol version and client capabilities. */
  meta?: Record<string, unknown>;
}

export interface RestAnswer {
  eventId?: string;
  status?: string;
  error?: { code: string; eventId?: string; status?: string; message?: string };
}

export interface RpcAnswer<R> {
  status: number;
  body: { result?: R; error?: { code: number; message: string } };
}

export interface ToolResult {
  isError?: boolean;
  content?: { text: string }[];
  structuredContent?: { eventId?: string; status?: string };
}

export interface AwsWorld<P extends Service = never> {
  readonly ddb: DynamoDbLocal;
  readonly fauxqs: Fauxqs;
  readonly secrets: FakeSecretsManager;
  /** Throws when the world was started with `receiver: false`. */
  readonly receiver: Receiver;
  readonly proxies: Readonly<Record<P, FaultProxy>>;
  /** The table on DynamoDB Local's own client: past the proxies, for arranging and reading records. */
  readonly store: DynamoDbStore;
  /** What the Lambdas built here logged (a test may add lines, a child's stderr say). */
  readonly logLines: string[];
  /** A fresh logger into `logLines` (each Lambda gets its own, as each has its own redactions). */
  logger(): ReturnType<typeof createLogger>;
  /** The environment the stack gives the Lambdas, on these emulators, with the file's extras and then `extra`. */
  env(extra?: NodeJS.ProcessEnv): NodeJS.ProcessEnv;
  /** New DynamoDB and SQS clients (a cold start) with dm-dot's options, through the proxies where there are. */
  sdkClients(): AwsClients;
  /** The Secrets Manager reader of the MCP Lambda, through the proxy if there is one. */
  secretsReader(): SecretsReader;
  /** The MCP Lambda from `env()` on new `sdkClients()` and `secretsReader()` unless given, logging into `logLines`. */
  mcpGateway(options?: { env?: NodeJS.ProcessEnv; clients?: Partial<McpAwsClients>; overrides?: McpLambdaOverrides }): McpGateway;
  /** The Delivery Lambda, likewise. */
  deliveryLambda(options?: { env?: NodeJS.ProcessEnv; clients?: AwsClients; overrides?: DeliveryLambdaOverrides }): DeliveryLambda;
  /** Every proxy back to `pass`, what it holds answered. */
  resetProxies(): void;
  /** Destroys the clients, then stops the proxies, then everything else. */
  stop(): Promise<void>;
}

/**
 * A file's set-up subscription: `events/subscribe` of `url` through a fresh MCP Lambda, made again
 * (at most 3 times) until the table holds it, with every proxy passing. An answer of 200 may carry
 * an error: on a loaded machine a subscribe can outrun its 5 s budget, and the set-up is not what
 * the file tests. Returns the subscription id.
 */
export async function subscribeForSetUp(world: Pick<AwsWorld<Service>, 'mcpGateway' | 'store'>, url: string): Promise<string> {
  for (let attempt = 1; ; attempt++) {
    const subscribed = await world.mcpGateway().subscribe(url);
    const stored = await world.store.getStoredSubscription();
    if (subscribed.body.result?.id !== undefined && stored?.url === url) return subscribed.body.result.id;
    if (attempt === 3) throw new Error(`set-up: ${url} could not be subscribed: ${JSON.stringify(subscribed)}`);
  }
}

/** UpdateItems the DynamoDB proxy saw abandoned by their caller so far (the count runs over the whole file). */
export function abandonedUpdates(world: Pick<AwsWorld<'dynamodb'>, 'proxies'>): number {
  return world.proxies.dynamodb.abandoned().UpdateItem ?? 0;
}

/**
 * DEL-OUT-2's end state for a send whose job SendMessage never took, as the answer claimed it:
 * undefined when the record is `failed`, otherwise what fell short. "Was not sent" (`weaker`
 * false) needs the mark to have landed before the answer. "May still be delivered" is the honest
 * answer only when the mark's UpdateItem was still unanswered when the request's deadline abandoned
 * it (a starved DynamoDB Local on a loaded machine): the proxy saw that since `abandonedBefore`,
 * and the mark, which it forwarded all the same, lands afterwards.
 */
export async function unsentMarkShortfall(
  world: Pick<AwsWorld<'dynamodb'>, 'proxies' | 'store'>,
  eventId: string,
  weaker: boolean,
  abandonedBefore: number,
): Promise<string | undefined> {
  const failed = async () => (await world.store.getEvent(eventId, Date.now()))?.status === EventStatus.failed;
  if (!weaker) return (await failed()) ? undefined : `"was not sent", but ${eventId} is not failed`;
  if (!(await pollUntil(() => abandonedUpdates(world) > abandonedBefore, { limitMs: 5_000 }))) {
    return '"may still be delivered", but no UpdateItem was abandoned at the deadline';
  }
  return (await pollUntil(failed, { limitMs: 10_000 })) ? undefined : `"may still be delivered", and the mark of ${eventId} never landed`;
}

/** `fn`'s value, how long it took, and how long this process waited for a CPU meanwhile (test/support/cpu-wait.ts). */
export async function timed<T>(fn: () => Promise<T>): Promise<{ value: T; ms: number; cpuWaitMs: number }> {
  const cpuWait = measureCpuWait();
  const started = Date.now();
  try {
    const value = await fn();
    return { value, ms: Date.now() - started, cpuWaitMs: cpuWait.stop() };
  } finally {
    cpuWait.stop();
  }
}

/** The requests of McpGateway on a fetch-like client of the MCP Lambda. */
function mcpGatewayOf(gateway: { fetch: McpGateway['fetch'] }, apiKey: string): McpGateway {
  const call: McpGateway['call'] = (method, params = {}, options = {}) =>
    gateway.fetch(`https://api.example/mcp?key=${encodeURIComponent(apiKey)}`, modernInit(method, params, options));
  const rpc = async <R>(method: string, params: Record<string, unknown> = {}, options: RpcOptions = {}): Promise<RpcAnswer<R>> => {
    const response = await call(method, params, options);
    return { status: response.status, body: (await response.json()) as RpcAnswer<R>['body'] };
  };
  return {
    fetch: (input, init) => gateway.fetch(input, init),
    async postMessage(message) {
      const response = await gateway.fetch('https://api.example/v1/messages', messageInit(message, apiKey));
      return { status: response.status, body: (await response.json()) as RestAnswer };
    },
    call,
    rpc,
    sendToDot: (message, options) => rpc<ToolResult>('tools/call', { name: 'send_to_dot', arguments: { message } }, options),
    subscribe: (url, { secret = newSecret(), ...options } = {}) =>
      rpc('events/subscribe', { name: 'message.created', arguments: {}, delivery: { mode: 'webhook', url, secret } }, options),
  };
}

export async function startAwsWorld<P extends Service = never>(options: AwsWorldOptions<P>): Promise<AwsWorld<P>> {
  const running: { stop(): Promise<void> }[] = [];
  const started = async <T extends { stop(): Promise<void> }>(starting: Promise<T>): Promise<T> => {
    const service = await starting;
    running.push(service);
    return service;
  };
  const { arn, ...secretsOptions } = options.secrets ?? {};
  try {
    const [ddb, fauxqs, secrets, receiver] = await Promise.all([
      started(startDynamoDbLocal()),
      started(startFauxqs(options.fauxqs)),
      started((async () => startFakeSecretsManager(await arn, secretsOptions))()),
      options.receiver === false ? undefined : started(startReceiver()),
    ]);
    const upstream: Record<Service, string> = { dynamodb: ddb.endpoint, sqs: fauxqs.endpoint, secretsmanager: secrets.endpoint };
    const proxied = options.proxies ?? [];
    const list = await Promise.all(proxied.map((service) => started(startFaultProxy(service, upstream[service], options.proxyOptions?.[service]))));
    const proxies = Object.fromEntries(proxied.map((service, i) => [service, list[i]!])) as Record<P, FaultProxy>;
    await ddb.createTable(options.table);
    secrets.setSecret(options.apiKey);
    const through = (service: Service) => (proxies as Partial<Record<Service, FaultProxy>>)[service]?.endpoint ?? upstream[service];
    return buildWorld(options, { ddb, fauxqs, secrets, receiver, proxies, through });
  } catch (error) {
    await Promise.allSettled(running.map((service) => service.stop()));
    throw error;
  }
}

function buildWorld<P extends Service>(
  options: AwsWorldOptions<P>,
  {
    ddb,
    fauxqs,
    secrets,
    receiver,
    proxies,
    through,
  }: {
    ddb: DynamoDbLocal;
    fauxqs: Fauxqs;
    secrets: FakeSecretsManager;
    receiver: Receiver | undefined;
    proxies: Record<P, FaultProxy>;
    /** The endpoint a client of `service` is given: its proxy's, or the emulator's. */
    through: (service: Service) => string;
  },
): AwsWorld<P> {
  const clients: { destroy(): void }[] = [];
  const logLines: string[] = [];
  const world: AwsWorld<P> = {
    ddb,
    fauxqs,
    secrets,
    get receiver(): Receiver {
      if (!receiver) throw new Error('this AWS world was started without a receiver');
      return receiver;
    },
    proxies,
    store: new DynamoDbStore({ client: ddb.client, tableName: options.table }),
    logLines,
    logger: () => createLogger((line) => logLines.push(line)),
    env: (extra = {}) => ({
      TABLE_NAME: options.table,
      QUEUE_URL: fauxqs.queueUrl,
      DEAD_LETTER_QUEUE_URL: fauxqs.deadLetterQueueUrl,
      API_KEY_SECRET_ARN: secrets.arn,
      DMDOT_ALLOW_LOOPBACK_CALLBACKS: '1',
      ...options.env,
      ...extra,
    }),
    sdkClients() {
      const dynamodb = new DynamoDBClient({ ...clientOptions(), endpoint: through('dynamodb'), region: REGION, credentials: DYNAMODB_CREDENTIALS });
      const sqs = new SQSClient({ ...clientOptions(), endpoint: through('sqs'), region: REGION, credentials: SQS_CREDENTIALS });
      clients.push(dynamodb, sqs);
      return { dynamodb, sqs };
    },
    secretsReader: () => testSecretsReader(through('secretsmanager')),
    mcpGateway: ({ env = world.env(), clients: given, overrides = {} } = {}) => {
      const lambda = mcpLambdaFromEnvironment(env, given ?? { ...world.sdkClients(), secrets: world.secretsReader() }, { log: world.logger(), ...overrides });
      return mcpGatewayOf(localApiGateway(lambda), options.apiKey);
    },
    deliveryLambda: ({ env = world.env(), clients: given, overrides = {} } = {}) =>
      deliveryLambdaFromEnvironment(env, given ?? world.sdkClients(), { log: world.logger(), ...overrides }),
    resetProxies() {
      for (const proxy of Object.values<FaultProxy>(proxies)) {
        proxy.setRule(() => 'pass');
        proxy.releaseHeld();
      }
    },
    async stop() {
      for (const client of clients) client.destroy();
      await Promise.all(Object.values<FaultProxy>(proxies).map((proxy) => proxy.stop()));
      await Promise.all([ddb.stop(), fauxqs.stop(), secrets.stop(), receiver?.stop()]);
    },
  };
  return world;
}
