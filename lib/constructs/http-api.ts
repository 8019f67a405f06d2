/**
 * The public HTTP surface (docs/contract/http.md, docs/contract/pup.md): an API Gateway HTTP API whose routes all go to the MCP
 * function with payload format 2.0, one throttled `$default` stage, and JSON access logs.
 *
 * Authentication is the handler's job, so the routes carry no API Gateway authorizer (the APIG4
 * acknowledgement below says why). CORS is configured only when browser origins are allowed; the
 * handler refuses other origins itself.
 *
 * The OAuth discovery paths an MCP client probes after a 401 (RFC 9728, RFC 8414) are routes too, so
 * that the function answers them (a 404 saying this server takes an API key), not API Gateway with a
 * bare `{"message":"Not Found"}`. `GET /healthz`, public, gets its own lower route throttle
 * (docs/deploying-aws.md, "Public routes").
 *
 * Deliberately not here: custom domains (custom-domain.ts) and AWS WAF. WAF cannot be attached to
 * an HTTP API (it protects REST APIs, CloudFront, ALB and others); `-c protection=waf` puts CloudFront
 * with a web ACL in front (edge-distribution.ts, edge-acl.ts).
 */
import { Duration, RemovalPolicy, Validations } from 'aws-cdk-lib';
import { AccessLogFormat } from 'aws-cdk-lib/aws-apigateway';
import { CorsHttpMethod, type CfnStage, HttpApi, HttpMethod, HttpStage, LogGroupLogDestination, PayloadFormatVersion } from 'aws-cdk-lib/aws-apigatewayv2';
import { HttpLambdaIntegration } from 'aws-cdk-lib/aws-apigatewayv2-integrations';
import type { IFunction } from 'aws-cdk-lib/aws-lambda';
import * as logs from 'aws-cdk-lib/aws-logs';
import { Construct } from 'constructs';
import { CorsPolicy } from '../../lambda/core/protocol';
import type { DmDotSettings } from '../settings';

/**
 * Route key (`METHOD /path`) -> what it serves. The keys are the only routes the API has. The one
 * integration is created with the first route and takes its logical ID from it, so new routes go at
 * the end.
 */
export const ROUTES = {
  'POST /mcp': 'MCP Streamable HTTP endpoint',
  'GET /mcp': '405 Allow: POST',
  'DELETE /mcp': '405 Allow: POST',
  'POST /v1/messages': 'REST twin of send_to_dot',
  'GET /healthz': 'health check, no auth',
  'GET /pup/manifest.json': 'pup extension manifest, no auth',
  'POST /pup/mcp': 'MCP for pup, Standard Webhooks signature',
  'POST /pup/challenge': 'pup challenge echo, Standard Webhooks signature',
  'POST /pup/events': 'pup member events, Standard Webhooks signature',
  'GET /.well-known/oauth-protected-resource': 'OAuth discovery after a 401: 404, this server takes an API key',
  'GET /.well-known/oauth-protected-resource/mcp': 'OAuth discovery after a 401: 404, this server takes an API key',
  'GET /.well-known/oauth-authorization-server': 'OAuth discovery after a 401: 404, this server takes an API key',
  'GET /.well-known/oauth-authorization-server/mcp': 'OAuth discovery after a 401: 404, this server takes an API key',
  'GET /v1/messages/{eventId}': 'read receipt of one event, for the key that sent it or the connector key',
} as const;

export type RouteKey = keyof typeof ROUTES;

/** The public route that gets its own, lower throttle. */
export const HEALTHZ_ROUTE: RouteKey = 'GET /healthz';
/** Requests per second and burst for `GET /healthz`: a monitor polls it, nothing needs more. */
export const HEALTHZ_THROTTLE = { rateLimit: 1, burstLimit: 2 } as const;

/**
 * One JSON object per request: field name -> the `$context` variable API Gateway writes there,
 * unescaped, so each is text API Gateway produces itself (the IP is the TCP connection's, not
 * X-Forwarded-For). What is left out and why (client text, the path and query string, the
 * integration's error texts): docs/deploying-aws.md, "Access logs".
 */
export const ACCESS_LOG_FIELDS: Readonly<Record<string, string>> = {
  requestId: '$context.requestId',
  requestTimeEpoch: '$context.requestTimeEpoch',
  ip: '$context.identity.sourceIp',
  routeKey: '$context.routeKey',
  protocol: '$context.protocol',
  status: '$context.status',
  responseLength: '$context.responseLength',
  responseLatency: '$context.responseLatency',
  integrationStatus: '$context.integrationStatus',
  integrationLatency: '$context.integrationLatency',
  errorMessage: '$context.error.message',
};

export class McpHttpApi extends Construct {
  readonly api: HttpApi;
  readonly stage: HttpStage;

  constructor(scope: Construct, id: string, props: { handler: IFunction; settings: DmDotSettings }) {
    super(scope, id);
    const { allowedOrigins, throttleRateLimit, throttleBurstLimit } = props.settings;

    this.api = new HttpApi(this, 'Api', {
      description: 'dm-dot: MCP endpoint and message API',
      createDefaultStage: false,
      // Only a custom domain reaches the API; the locked origin leaves CloudFront the only way in (custom-domain.ts).
      ...(props.settings.disableDefaultEndpoint || props.settings.protection?.lockedOrigin ? { disableExecuteApiEndpoint: true } : {}),
      corsPreflight:
        allowedOrigins.length === 0
          ? undefined
          : {
              allowOrigins: [...allowedOrigins],
              allowMethods: CorsPolicy.allowMethods.map((method) => CorsHttpMethod[method]),
              allowHeaders: [...CorsPolicy.allowHeaders],
              // API Gateway's headers replace the app's own Access-Control-Expose-Headers
              // (https://docs.aws.amazon.com/apigateway/latest/developerguide/http-api-cors.html).
              exposeHeaders: [...CorsPolicy.exposeHeaders],
              maxAge: Duration.seconds(CorsPolicy.maxAgeS),
            },
    });

    const accessLogs = new logs.LogGroup(this, 'AccessLogs', {
      retention: props.settings.logRetention,
      removalPolicy: RemovalPolicy.DESTROY,
    });

    this.stage = new HttpStage(this, 'DefaultStage', {
      httpApi: this.api,
      stageName: '$default',
      autoDeploy: true,
      throttle: { rateLimit: throttleRateLimit, burstLimit: throttleBurstLimit },
      accessLogSettings: {
        destination: new LogGroupLogDestination(accessLogs),
        format: AccessLogFormat.custom(JSON.stringify(ACCESS_LOG_FIELDS)),
      },
    });

    const integration = new HttpLambdaIntegration('Mcp', props.handler, {
      payloadFormatVersion: PayloadFormatVersion.VERSION_2_0,
    });
    for (const routeKey of Object.keys(ROUTES) as RouteKey[]) {
      const [method, routePath] = routeKey.split(' ') as [keyof typeof HttpMethod, string];
      const [route] = this.api.addRoutes({ path: routePath, methods: [HttpMethod[method]], integration });
      // API Gateway refuses route settings for a route key that does not exist yet ("Unable to find Route by key ...").
      if (routeKey === HEALTHZ_ROUTE && route) this.stage.node.addDependency(route);
    }
    // HttpStage has no route settings of its own: the L1 property, in CloudFormation's spelling. A route's
    // settings replace the stage defaults for that route, so both limits are given; never above the
    // stage's own, a route throttle here is meant to be the lower one.
    (this.stage.node.defaultChild as CfnStage).routeSettings = {
      [HEALTHZ_ROUTE]: {
        ThrottlingRateLimit: Math.min(HEALTHZ_THROTTLE.rateLimit, throttleRateLimit),
        ThrottlingBurstLimit: Math.min(HEALTHZ_THROTTLE.burstLimit, throttleBurstLimit),
      },
    };

    Validations.of(this.api).acknowledge({
      id: 'AwsSolutions-APIG4',
      reason:
        'Authorization is done in the MCP function: the API key (query parameter `key` or Bearer header) ' +
        'is checked before the body is parsed and compared in constant time, with the 401/503 answers docs/contract/http.md ' +
        'defines. An API Gateway Lambda authorizer would repeat that check in a second invocation per request. ' +
        'GET /healthz, GET /pup/manifest.json and the OAuth discovery paths are public by design and reveal nothing ' +
        'beyond health, the manifest and the fact that this server takes an API key.',
    });
  }
}
