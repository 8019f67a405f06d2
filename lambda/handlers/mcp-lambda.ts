/**
 * The MCP Lambda without its entry file: API Gateway v2 event -> web Request -> the HTTP app ->
 * Response -> payload 2.0 result. `createMcpLambda` takes the adapters, `mcpLambdaFromSettings`
 * builds them from the settings and the AWS clients it is given. Each invocation runs under
 * `mcpDeadline` (adapters/deadline.ts), so a stalled dependency becomes an error answer within the
 * contract's 5 s, not a gateway timeout; `/healthz` never waits for the API key.
 *
 * Deliberately not here: middy and the process environment (handlers/mcp.ts reads it once, through
 * lambda/config/settings.ts), event translation details (handlers/apigw.ts), and any route, auth
 * or MCP logic (the app).
 */
import type { APIGatewayProxyEventV2, APIGatewayProxyStructuredResultV2 } from 'aws-lambda';
import { createGuardedWebhookClient } from '../adapters/guarded-https';
import { outsideDeadline, runWithDeadline, webhookWithinDeadline } from '../adapters/deadline';
import { deferredAccessStore, deferredIdempotencyStore, deferredInboxStore, deferredOutbox, deferredStore, once } from '../adapters/deferred';
import { createApiKeyLoader, createPupSecretsLoader, type ApiKeyLoader } from '../adapters/secret-loader';
import { secretsManagerFromRuntime, type SecretsReader } from '../adapters/secrets-manager';
import type { McpLambdaSettings } from '../config/settings';
import { watchingUnavailable } from '../core/answers';
import { Budgets, mcpDeadline } from '../core/budgets';
import type { Dependency } from '../core/errors';
import { DEFAULT_RETRY_DELAYS_S, EventsProfiles, Routes, type EventsProfileName } from '../core/protocol';
import { createApp, type App, type HttpConfig } from '../http/app';
import { restError } from '../http/json';
import type { McpDeps } from '../mcp/server';
import { createLogger } from '../log';
import { createMetrics, DEPENDENCIES, type MetricDependency, type Metrics } from '../metrics';
import { systemClock, type Logger } from '../ports';
import { version as packageVersion } from '../version';
import { afterResponse, type AfterResponse } from './after-response';
import { requestFromEvent, resultFromResponse } from './apigw';
import type { AwsClients } from './aws-clients';
import type { DeliveryLambdaOverrides } from './delivery-lambda';

/** The app's ports as McpDeps has them, with defaults for the clock, version and retry schedule; the rest is this handler's. */
export interface McpLambdaDeps
  extends Pick<McpDeps, 'store' | 'access' | 'outbox' | 'idempotency' | 'inbox' | 'webhook' | 'deliveryWaitMs' | 'ttlPolicy' | 'log'>,
    Partial<Pick<McpDeps, 'clock' | 'version' | 'retryDelaysS'>>,
    Pick<HttpConfig, 'allowedOrigins' | 'pup'> {
  /** DMDOT_EVENTS_PROFILE; chatgpt when absent. */
  eventsProfile?: EventsProfileName;
  apiKey: ApiKeyLoader;
  /** Subscribe-time URL policy; must match the webhook client's allowLoopback. */
  allowLoopbackCallbacks: boolean;
  /** EMF lines per request, per inline delivery decision and per failed-dependency answer; none when absent. */
  metrics?: Metrics;
  /** Tests only (McpLambdaOverrides.requestMs): the request budget `mcpDeadline` counts from. Default: Limits.requestMs. */
  requestMs?: number;
  /** The after-response extension: with it an inline attempt runs on after the answer; without it the answer waits. */
  afterResponse?: AfterResponse;
}

export type McpLambda = (event: APIGatewayProxyEventV2) => Promise<APIGatewayProxyStructuredResultV2>;

// Every dependency the core can report unavailable has a value of the metric's Dependency dimension
// (the alarm sums exactly those): a new one fails the type check here until lambda/metrics.ts lists it.
const everyDependencyCounted: Exclude<Dependency, MetricDependency> extends never ? true : never = true;
void everyDependencyCounted;

function metricDependency(value: unknown): MetricDependency {
  return (DEPENDENCIES as readonly unknown[]).includes(value) ? (value as MetricDependency) : 'storage';
}

export function createMcpLambda(deps: McpLambdaDeps): McpLambda {
  const { metrics, eventsProfile, afterResponse, apiKey, allowedOrigins, allowLoopbackCallbacks, pup, requestMs, ...shared } = deps;
  const appDeps = {
    ...shared,
    clock: deps.clock ?? systemClock,
    retryDelaysS: deps.retryDelaysS ?? DEFAULT_RETRY_DELAYS_S,
    urlPolicy: { allowLoopbackCallbacks },
    version: deps.version ?? packageVersion,
    // Every answer a failed dependency forced counts as DependencyUnavailable, which an alarm watches.
    log: metrics ? watchingUnavailable(deps.log, (fields) => metrics.dependencyUnavailable(metricDependency(fields?.dependency))) : deps.log,
    ...(metrics ? { metrics } : {}),
    ...(eventsProfile ? { eventsProfile: EventsProfiles[eventsProfile] } : {}),
    // Outside the request's deadline: the work's own timeouts bound it (the POST its 5 s).
    ...(afterResponse ? { background: <T>(work: () => Promise<T>) => afterResponse.run(() => outsideDeadline(work)) } : {}),
  };
  let built: { key: string | undefined; app: App } | undefined;

  // At most two apps per cold start: the keyless one (503) until the key loads, then the real one.
  function appFor(key: string | undefined): App {
    if (built && built.key === key) return built.app;
    const previous = built?.app;
    built = { key, app: createApp(appDeps, { apiKey: key, allowedOrigins, ...(pup ? { pup } : {}) }) };
    void previous?.close().catch(() => undefined);
    return built.app;
  }

  const handle: McpLambda = async (event) => {
    let translated;
    try {
      translated = requestFromEvent(event);
    } catch (error) {
      // Only a malformed event gets here (e.g. a method no web Request accepts); never its content.
      deps.log.warn('bad_event', { requestId: event.requestContext?.requestId, cause: error instanceof Error ? error.name : 'unknown' });
      return resultFromResponse(restError(400, 'bad_request', 'The request could not be read.'));
    }
    const { request, requestId } = translated;
    return runWithDeadline(mcpDeadline(Date.now(), deps.requestMs), async () => {
      const health = new URL(request.url).pathname === Routes.health;
      const key = health ? deps.apiKey.peek() : await deps.apiKey.get();
      // No key for a request that needs one: Secrets Manager could not be read.
      if (!health && key === undefined) deps.metrics?.dependencyUnavailable('secrets');
      return resultFromResponse(await appFor(key).handle(request, requestId ? { requestId } : {}));
    });
  };

  return async (event) => {
    const started = performance.now();
    // The route template API Gateway matched (`POST /mcp`), never the raw path: it could carry the key.
    const route = typeof event.routeKey === 'string' ? event.routeKey : 'unknown';
    let status = 500;
    try {
      const result = await handle(event);
      status = result.statusCode ?? 200;
      return result;
    } finally {
      deps.metrics?.request({ route, status, durationMs: performance.now() - started });
      deps.afterResponse?.invocationEnded();
    }
  };
}

/** What the MCP Lambda talks to AWS with: production passes nothing (clients made on first use), tests local endpoints. */
export interface McpAwsClients extends AwsClients {
  secrets: SecretsReader;
}

export interface McpLambdaOverrides extends DeliveryLambdaOverrides {
  log?: Logger & { redact?(value: string): void };
  /**
   * Tests only: each request's whole budget instead of the contract's 5 s. Only the deadline moves:
   * the reserves inside it stay absolute (scaling them would test other numbers than production's),
   * so a budget below their sum leaves the guarded step no time.
   */
  requestMs?: number;
  /** Tests only: a stand-in of the after-response extension (default: the one this process registered, if any). */
  afterResponse?: AfterResponse;
}

/** The MCP Lambda from its settings (lambda/config/settings.ts `mcpLambdaSettings`). */
export function mcpLambdaFromSettings(settings: McpLambdaSettings, clients: Partial<McpAwsClients> = {}, overrides: McpLambdaOverrides = {}): McpLambda {
  const given = clients.dynamodb && clients.sqs ? { dynamodb: clients.dynamodb, sqs: clients.sqs } : undefined;
  // A require, not import(): the bundle keeps it and finds mcp-storage.js beside index.js.
  const storage = once(async () => (require('./mcp-storage') as typeof import('./mcp-storage')).createMcpStorage(settings.tableName, settings.queueUrl, given));
  const secrets = clients.secrets ?? secretsManagerFromRuntime(settings.aws);
  const log = overrides.log ?? createLogger();
  const apiKey = createApiKeyLoader({ client: secrets, secretArn: settings.apiKeySecretArn, log, onLoaded: (key) => log.redact?.(key) });
  const pupSecrets = createPupSecretsLoader({
    client: secrets,
    secretArn: settings.pupSecretArn,
    log,
    onLoaded: (secret) => log.redact?.(secret),
    ...(overrides.clock ? { now: () => overrides.clock!.now() } : {}),
  });
  // Read during the init phase, so the first request rarely waits (a read frozen at init is simply read again).
  void apiKey.get();
  void pupSecrets.get();
  return createMcpLambda({
    store: deferredStore(async () => (await storage()).store),
    outbox: deferredOutbox(async () => (await storage()).outbox),
    access: deferredAccessStore(async () => (await storage()).access),
    // The one Store holds the idempotency keys and the pending index too.
    idempotency: deferredIdempotencyStore(async () => (await storage()).store),
    ...(settings.inbox ? { inbox: deferredInboxStore(async () => (await storage()).store) } : {}),
    eventsProfile: settings.eventsProfile,
    webhook: webhookWithinDeadline(
      overrides.webhook ?? createGuardedWebhookClient({ allowLoopback: settings.allowLoopbackCallbacks }),
      Budgets.mcpRecordReserveMs,
    ),
    apiKey,
    deliveryWaitMs: settings.deliveryWaitMs,
    retryDelaysS: settings.retryDelaysS,
    ttlPolicy: settings.ttlPolicy,
    allowedOrigins: settings.allowedOrigins,
    allowLoopbackCallbacks: settings.allowLoopbackCallbacks,
    log,
    metrics: overrides.metrics ?? createMetrics({ enabled: settings.aws.functionName !== undefined }),
    ...(overrides.clock ? { clock: overrides.clock } : {}),
    ...(overrides.requestMs !== undefined ? { requestMs: overrides.requestMs } : {}),
    ...((overrides.afterResponse ?? afterResponse()) ? { afterResponse: (overrides.afterResponse ?? afterResponse())! } : {}),
    pup: { secrets: () => pupSecrets.get(), ...(settings.pupManifest !== undefined ? { manifest: settings.pupManifest } : {}) },
  });
}
