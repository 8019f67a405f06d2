/**
 * The connector's stable address without CloudFront (`-c domainName=… -c certificateArn=…`): an
 * API Gateway regional custom domain with the operator's ACM certificate and an API mapping of the
 * `$default` stage, so the connector URL outlives the API (a replaced API is mapped again, the URL
 * stays). The operator points the name at `RegionalDomainName` (the `CustomDomainTarget` output)
 * with a CNAME or an alias record; the stack manages no DNS zone.
 *
 * API Gateway takes a regional certificate from the API's own region only; the template carries a
 * rule that refuses a deploy in any other region before anything is created, and synth refuses it
 * already when the stack's region is known.
 *
 * The same construct is the locked origin of `protection=waf` (the four `origin…` settings): then the
 * domain requires mutual TLS against the operator's trust store and the execute-api address is off
 * (http-api.ts); docs/decisions.md, "Locking the origin, so nothing goes around the rule".
 *
 * Deliberately not here: DNS records (the zone may live anywhere) and certificate requests (ACM
 * validation waits on DNS the operator controls).
 */
import { CfnRule, Fn, Stack, Token } from 'aws-cdk-lib';
import * as s3 from 'aws-cdk-lib/aws-s3';
import * as acm from 'aws-cdk-lib/aws-certificatemanager';
import { ApiMapping, DomainName, EndpointType, SecurityPolicy } from 'aws-cdk-lib/aws-apigatewayv2';
import { Construct } from 'constructs';
import { certificateRegionError, type CustomDomain, type LockedOrigin } from '../settings';
import type { McpHttpApi } from './http-api';

export class ApiCustomDomain extends Construct {
  readonly domainName: DomainName;

  constructor(scope: Construct, id: string, props: { http: McpHttpApi; domain: CustomDomain | LockedOrigin; certificateSetting?: string }) {
    super(scope, id);
    const { domain } = props;
    const setting = props.certificateSetting ?? 'certificateArn';
    const stack = Stack.of(this);
    if (!Token.isUnresolved(stack.region) && stack.region !== domain.certificateRegion) {
      throw certificateRegionError(setting, domain.certificateRegion, stack.region);
    }
    const truststore = 'truststore' in domain ? domain.truststore : undefined;
    this.domainName = new DomainName(this, 'DomainName', {
      domainName: domain.domainName,
      certificate: acm.Certificate.fromCertificateArn(this, 'Certificate', domain.certificateArn),
      endpointType: EndpointType.REGIONAL,
      securityPolicy: SecurityPolicy.TLS_1_2,
      mtls: truststore && { bucket: s3.Bucket.fromBucketName(this, 'Truststore', truststore.bucket), key: truststore.key, version: truststore.version },
    });
    // The mapping names the stage by its name (`$default`), so CloudFormation must create the stage first.
    const { api, stage } = props.http;
    new ApiMapping(this, 'Mapping', { api, domainName: this.domainName, stage }).node.addDependency(stage);
    new CfnRule(this, 'CertificateInStackRegion', {
      assertions: [
        {
          assert: Fn.conditionEquals(Fn.ref('AWS::Region'), domain.certificateRegion),
          assertDescription:
            `${setting} is in ${domain.certificateRegion}: deploy this stack there, or use a certificate of the stack's region (API Gateway takes ` +
            'none from another region)',
        },
      ],
    });
  }
}
