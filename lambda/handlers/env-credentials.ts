/**
 * What the Lambda bundles use in place of `@aws-sdk/credential-provider-node` (an esbuild alias,
 * lib/bundling.ts): the default credential chain reduced to its first link, the environment, where
 * Lambda puts the execution role's credentials
 * (https://docs.aws.amazon.com/lambda/latest/dg/configuration-envvars.html#configuration-envvars-runtime).
 * The rest of the chain is about 100 KiB of every bundle that a Lambda never runs.
 *
 * Deliberately not here: SnapStart, whose functions get container credentials instead; enabling it
 * means dropping this alias and the clients' `credentials` field.
 */
import { fromEnv } from '@aws-sdk/credential-provider-env';

/** Same name and call shape as the chain's `defaultProvider`, environment only. */
export const defaultProvider = fromEnv;
