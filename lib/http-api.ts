/**
 * The public HTTP surface (SPEC 2): an API Gateway HTTP API whose five routes all go to the MCP
 * function with payload format 2.0, one throttled `$default` stage, and JSON access logs.
 *
 * Access logs record the route key (method and route template), never the path as sent nor the
 * query string: the API key travels as `?key=` (ChatGPT connectors) and must not reach a log.
 *
 * Authentication is the handler's job (API key in the query or a Bearer header, compared in
 * constant time, SPEC 2), so the routes carry no API Gateway authorizer. CORS is configured only
 * when browser origins are allowed; the handler refuses other origins itself.
 *
 * Deliberately not here: custom domains, WAF (not available for HTTP APIs), the pup routes
 * (SPEC 8).
 */
import { Duration, RemovalPolicy, Validations } from 'aws-cdk-lib';
import { AccessLogFormat } from 'aws-cdk-lib/aws-apigateway';
import {
  CorsHttpMethod,
  HttpApi,
  HttpMethod,
  HttpStage,
  LogGroupLogDestination,
  PayloadFormatVersion,
} from 'aws-cdk-lib/aws-apigatewayv2';
import { HttpLambdaIntegration } from 'aws-cdk-lib/aws-apigatewayv2-integrations';
import type { IFunction } from 'aws-cdk-lib/aws-lambda';
import * as logs from 'aws-cdk-lib/aws-logs';
import { Construct } from 'constructs';

/** Route key (`METHOD /path`) -> what it serves. The keys are the only routes the API has. */
export const ROUTES = {
  'POST /mcp': 'MCP Streamable HTTP endpoint',
  'GET /mcp': '405 Allow: POST',
  'DELETE /mcp': '405 Allow: POST',
  'POST /v1/messages': 'REST twin of send_to_dot',
  'GET /healthz': 'health check, no auth',
} as const;

/**
 * One JSON object per request. Only `$context` variables that cannot carry the query string or
 * request content: no `$context.path`, no request parameters, no overrides.
 */
export const ACCESS_LOG_FIELDS: Readonly<Record<string, string>> = {
  requestId: '$context.requestId',
  requestTimeEpoch: '$context.requestTimeEpoch',
  ip: '$context.identity.sourceIp',
  userAgent: '$context.identity.userAgent',
  routeKey: '$context.routeKey',
  protocol: '$context.protocol',
  status: '$context.status',
  responseLength: '$context.responseLength',
  responseLatency: '$context.responseLatency',
  integrationStatus: '$context.integrationStatus',
  integrationLatency: '$context.integrationLatency',
  integrationErrorMessage: '$context.integrationErrorMessage',
  errorMessage: '$context.error.message',
};

export interface McpHttpApiProps {
  readonly handler: IFunction;
  readonly allowedOrigins: readonly string[];
  readonly throttleRateLimit: number;
  readonly throttleBurstLimit: number;
  readonly logRetention: logs.RetentionDays;
}

export class McpHttpApi extends Construct {
  readonly api: HttpApi;
  readonly stage: HttpStage;
  readonly accessLogs: logs.LogGroup;

  constructor(scope: Construct, id: string, props: McpHttpApiProps) {
    super(scope, id);

    this.api = new HttpApi(this, 'Api', {
      description: 'dm-dot: MCP endpoint and message API',
      createDefaultStage: false,
      corsPreflight:
        props.allowedOrigins.length === 0
          ? undefined
          : {
              allowOrigins: [...props.allowedOrigins],
              allowMethods: [CorsHttpMethod.GET, CorsHttpMethod.POST, CorsHttpMethod.DELETE],
              allowHeaders: [
                'authorization',
                'content-type',
                'accept',
                'mcp-protocol-version',
                'mcp-method',
                'mcp-name',
                'mcp-session-id',
                'last-event-id',
              ],
              exposeHeaders: ['mcp-session-id', 'mcp-protocol-version', 'www-authenticate'],
              maxAge: Duration.hours(1),
            },
    });

    this.accessLogs = new logs.LogGroup(this, 'AccessLogs', {
      retention: props.logRetention,
      removalPolicy: RemovalPolicy.DESTROY,
    });

    this.stage = new HttpStage(this, 'DefaultStage', {
      httpApi: this.api,
      stageName: '$default',
      autoDeploy: true,
      throttle: { rateLimit: props.throttleRateLimit, burstLimit: props.throttleBurstLimit },
      accessLogSettings: {
        destination: new LogGroupLogDestination(this.accessLogs),
        format: AccessLogFormat.custom(JSON.stringify(ACCESS_LOG_FIELDS)),
      },
    });

    const integration = new HttpLambdaIntegration('Mcp', props.handler, {
      payloadFormatVersion: PayloadFormatVersion.VERSION_2_0,
    });
    for (const routeKey of Object.keys(ROUTES)) {
      const [method, routePath] = routeKey.split(' ') as [keyof typeof HttpMethod, string];
      this.api.addRoutes({ path: routePath, methods: [HttpMethod[method]], integration });
    }

    Validations.of(this.api).acknowledge({
      id: 'AwsSolutions-APIG4',
      reason:
        'Authorization is done in the MCP function: the API key (query parameter `key` or Bearer header) ' +
        'is checked before the body is parsed and compared in constant time, with the 401/503 answers SPEC 2 ' +
        'defines. An API Gateway Lambda authorizer would repeat that check in a second invocation per request. ' +
        'GET /healthz is public by design and reveals nothing.',
    });
  }

  /** The MCP endpoint, without any key. */
  get mcpUrl(): string {
    return `${this.api.apiEndpoint}/mcp`;
  }
}
