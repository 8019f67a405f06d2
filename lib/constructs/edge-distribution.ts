/**
 * CloudFront in front of the HTTP API (`-c protection=waf`): the connector's address when the
 * per-client limit is on. The web ACL (edge-acl.ts) is attached here, so every request meets the
 * rate-based rule at the edge before API Gateway, its stage throttle and the MCP function see it.
 *
 * What reaches the origin: every method, the query string (the connector's `?key=`) and every viewer
 * header but `Host` (API Gateway routes by its own host name). CloudFront refuses `Authorization` in
 * an origin request policy, so the cache policy carries it, and caches nothing.
 *
 * The origin is the API's execute-api address, which stays reachable around the web ACL, unless the
 * locked origin is configured (custom-domain.ts): then CloudFront presents its client certificate.
 *
 * Deliberately not here: a custom origin header as an "only from CloudFront" check (an HTTP API
 * cannot refuse a request on a header before its throttle), compression (the API's answers are
 * small JSON) and CloudFront Functions.
 */
import { Duration, Fn, Stack, Validations } from 'aws-cdk-lib';
import type { HttpApi } from 'aws-cdk-lib/aws-apigatewayv2';
import * as acm from 'aws-cdk-lib/aws-certificatemanager';
import * as cloudfront from 'aws-cdk-lib/aws-cloudfront';
import * as origins from 'aws-cdk-lib/aws-cloudfront-origins';
import { Construct } from 'constructs';
import type { CustomDomain, LockedOrigin } from '../settings';

export class EdgeDistribution extends Construct {
  readonly distribution: cloudfront.Distribution;

  constructor(scope: Construct, id: string, props: { api: HttpApi; webAclArn: string; customDomain?: CustomDomain; lockedOrigin?: LockedOrigin }) {
    super(scope, id);
    // The locked origin's name, else `https://<id>.execute-api.<region>.amazonaws.com` -> its host name.
    const apiHost = props.lockedOrigin?.domainName ?? Fn.select(2, Fn.split('/', props.api.apiEndpoint));

    const cachePolicy = new cloudfront.CachePolicy(this, 'NoCache', {
      comment: 'dm-dot: nothing cached; Authorization and the query string in the key so they reach the API',
      minTtl: Duration.seconds(0),
      defaultTtl: Duration.seconds(0),
      maxTtl: Duration.seconds(1),
      headerBehavior: cloudfront.CacheHeaderBehavior.allowList('Authorization'),
      queryStringBehavior: cloudfront.CacheQueryStringBehavior.all(),
      cookieBehavior: cloudfront.CacheCookieBehavior.none(),
      enableAcceptEncodingGzip: false,
      enableAcceptEncodingBrotli: false,
    });

    const domain = props.customDomain;
    this.distribution = new cloudfront.Distribution(this, 'Distribution', {
      comment: `dm-dot ${Stack.of(this).stackName}: per-client limit in front of the MCP API`,
      webAclId: props.webAclArn,
      httpVersion: cloudfront.HttpVersion.HTTP2_AND_3,
      priceClass: cloudfront.PriceClass.PRICE_CLASS_100,
      enableLogging: false,
      ...(domain
        ? {
            domainNames: [domain.domainName],
            certificate: acm.Certificate.fromCertificateArn(this, 'Certificate', domain.certificateArn),
            minimumProtocolVersion: cloudfront.SecurityPolicyProtocol.TLS_V1_2_2021,
          }
        : {}),
      defaultBehavior: {
        origin: new origins.HttpOrigin(apiHost, {
          protocolPolicy: cloudfront.OriginProtocolPolicy.HTTPS_ONLY,
          originSslProtocols: [cloudfront.OriginSslPolicy.TLS_V1_2],
        }),
        allowedMethods: cloudfront.AllowedMethods.ALLOW_ALL,
        viewerProtocolPolicy: cloudfront.ViewerProtocolPolicy.HTTPS_ONLY,
        cachePolicy,
        originRequestPolicy: cloudfront.OriginRequestPolicy.ALL_VIEWER_EXCEPT_HOST_HEADER,
        compress: false,
      },
    });

    if (props.lockedOrigin) {
      // The HttpOrigin L2 has no origin mTLS property yet: CloudFormation's CustomOriginConfig.OriginMtlsConfig.
      (this.distribution.node.defaultChild as cloudfront.CfnDistribution).addPropertyOverride(
        'DistributionConfig.Origins.0.CustomOriginConfig.OriginMtlsConfig',
        { ClientCertificateArn: props.lockedOrigin.clientCertificateArn },
      );
    }

    Validations.of(this.distribution).acknowledge(
      {
        id: 'AwsSolutions-CFR3',
        reason:
          "CloudFront's standard logs always hold the query string (cs-uri-query), where ChatGPT's connector carries the API key; " +
          'the WAF log (query string and Authorization redacted) and the API access log (no path, no query) record every request instead.',
      },
      {
        id: 'AwsSolutions-CFR1',
        reason:
          'No geo restriction: ChatGPT calls from wherever OpenAI runs it and senders from anywhere; the per-client rate rule of the web ACL ' +
          'is what keeps one address from spending the shared throttle.',
      },
    );
    if (!domain) {
      Validations.of(this.distribution).acknowledge({
        id: 'AwsSolutions-CFR4',
        reason:
          "Without a custom domain the distribution serves CloudFront's default certificate, whose minimum protocol CloudFront fixes; " +
          'with domainName and certificateArn the stack sets TLSv1.2_2021. The origin connection is TLS 1.2 only either way.',
      });
    }
  }
}
