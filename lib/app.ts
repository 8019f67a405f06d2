/**
 * The dm-dot app's stacks, built the same way by `cdk` (bin/dm-dot.ts) and by the template tests:
 * read the settings once, name the stack after the stage (`DmDot`, or `DmDot-<stage>` with
 * `-c stage=NAME`, so a dev and a prod stack live side by side and an existing `DmDot` is never
 * replaced), and with `-c protection=waf` add the companion stack `<stack>-Edge` (edge-acl.ts), whose
 * web ACL's ARN the main stack reads across regions: so protection needs the region at synth
 * (docs/decisions.md, "Per-client protection is CloudFront with an AWS WAF rate-based rule").
 *
 * Deliberately not here: cdk-nag (the caller registers it), and any resource.
 */
import type { App, Environment } from 'aws-cdk-lib';
import { stackNameOf } from '../lambda/config/fields';
import { DmDotStack } from './dm-dot-stack';
import { EdgeStack } from './constructs/edge-acl';
import { CLOUDFRONT_REGION, SettingsError, certificateRegionError, readSettings } from './settings';

/**
 * `account`/`region` as the CDK CLI found them (CDK_DEFAULT_ACCOUNT / CDK_DEFAULT_REGION): the
 * stacks' environment with protection on; without it the stack stays environment-agnostic, and a
 * known region only serves to refuse a custom domain's certificate from another region at synth
 * (`regionKnown: false`: the region was filled in for an offline synth, not given).
 */
export function addDmDot(app: App, found: Environment = {}, options: { regionKnown?: boolean } = {}) {
  const settings = readSettings(app.node);
  const name = stackNameOf(settings.stage);
  if (!settings.protection) {
    const domain = settings.customDomain;
    const region = (options.regionKnown ?? true) ? found.region : undefined;
    if (domain && region && domain.certificateRegion !== region) throw certificateRegionError('certificateArn', domain.certificateRegion, region);
    return { stack: new DmDotStack(app, name, { settings }), edge: undefined };
  }

  if (!found.region) {
    throw new SettingsError(
      "context protection=waf needs the stack's region at synth (set AWS_REGION): its web ACL lives in us-east-1 and the stack reads it across regions",
    );
  }
  const account = found.account ? { account: found.account } : {};
  const edge = new EdgeStack(app, `${name}-Edge`, {
    env: { ...account, region: CLOUDFRONT_REGION },
    protection: settings.protection,
    logRetention: settings.logRetention,
    name,
  });
  // The reference to the ARN makes the main stack depend on the edge stack: `cdk deploy --all` creates the web ACL first.
  const stack = new DmDotStack(app, name, {
    settings,
    env: { ...account, region: found.region },
    webAclArn: edge.webAcl.attrArn,
  });
  return { stack, edge };
}
