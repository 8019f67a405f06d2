/**
 * The per-client limit in front of the API (`-c protection=waf`): an AWS WAF web ACL of scope
 * CLOUDFRONT, which AWS accepts in us-east-1 only, so it lives in a companion stack of its own
 * (`<stack>-Edge`) and the main stack's CloudFront distribution names it by ARN.
 *
 * One rate-based rule on the client IP (CloudFront's viewer address, no forwarded header). A blocked
 * request ends at the edge: it never reaches API Gateway, so it spends nothing of the stage throttle
 * ChatGPT's calls draw from. The WAF log redacts the query string and `Authorization`, and sampled
 * requests are off (docs/decisions.md, "No log holds the query string", says why). Metrics stay on:
 * they count, they quote nothing.
 *
 * Deliberately not here: managed rule groups (priced per rule group and per request, and none is
 * aimed at a JSON-RPC API), any rule that reads the key (WAF would need the key in its rule text,
 * which is in the template), and the distribution itself (edge-distribution.ts).
 */
import { RemovalPolicy, Stack, type StackProps } from 'aws-cdk-lib';
import * as logs from 'aws-cdk-lib/aws-logs';
import * as wafv2 from 'aws-cdk-lib/aws-wafv2';
import { Construct } from 'constructs';
import type { DmDotSettings } from '../settings';

/** The body of a `429` from the edge, in the shape of dm-dot's REST errors. */
export const EDGE_RATE_LIMITED_BODY = JSON.stringify({
  error: { code: 'rate_limited', message: 'Too many requests from this address; wait and try again (see Retry-After).' },
});

export interface EdgeStackProps extends StackProps {
  readonly protection: NonNullable<DmDotSettings['protection']>;
  readonly logRetention: logs.RetentionDays;
  /** The main stack's name: names the log group (`aws-waf-logs-<name>`, the prefix WAF requires) and the metrics. */
  readonly name: string;
}

export class EdgeStack extends Stack {
  readonly webAcl: wafv2.CfnWebACL;

  constructor(scope: Construct, id: string, props: EdgeStackProps) {
    super(scope, id, { description: 'dm-dot: the AWS WAF web ACL in front of the MCP API (CloudFront scope, us-east-1)', ...props });
    const { name } = props;
    const { requestsPerClient, windowS } = props.protection;
    // The construct `Acl` keeps the resources' logical IDs.
    const acl = new Construct(this, 'Acl');

    this.webAcl = new wafv2.CfnWebACL(acl, 'WebAcl', {
      scope: 'CLOUDFRONT',
      description: 'dm-dot: per-client request limit in front of the MCP API',
      defaultAction: { allow: {} },
      customResponseBodies: {
        RateLimited: { contentType: 'APPLICATION_JSON', content: EDGE_RATE_LIMITED_BODY },
      },
      visibilityConfig: { cloudWatchMetricsEnabled: true, metricName: `${name}-edge`, sampledRequestsEnabled: false },
      rules: [
        {
          name: 'PerClientRate',
          priority: 0,
          statement: {
            rateBasedStatement: { aggregateKeyType: 'IP', limit: requestsPerClient, evaluationWindowSec: windowS },
          },
          action: {
            block: {
              customResponse: {
                responseCode: 429,
                customResponseBodyKey: 'RateLimited',
                responseHeaders: [{ name: 'retry-after', value: String(windowS) }],
              },
            },
          },
          visibilityConfig: { cloudWatchMetricsEnabled: true, metricName: `${name}-per-client-rate`, sampledRequestsEnabled: false },
        },
      ],
    });

    const logGroupName = `aws-waf-logs-${name}`;
    const logGroup = new logs.LogGroup(acl, 'Logs', {
      logGroupName,
      retention: props.logRetention,
      removalPolicy: RemovalPolicy.DESTROY,
    });
    // WAF takes the log group's ARN without the `:*` CloudWatch adds to a log group's Arn attribute.
    const logGroupArn = `arn:${this.partition}:logs:${this.region}:${this.account}:log-group:${logGroupName}`;
    const logging = new wafv2.CfnLoggingConfiguration(acl, 'Logging', {
      resourceArn: this.webAcl.attrArn,
      logDestinationConfigs: [logGroupArn],
      // Where a key can travel (docs/contract/http.md).
      redactedFields: [{ queryString: {} }, { singleHeader: { Name: 'authorization' } }],
    });
    logging.node.addDependency(logGroup);
  }
}
