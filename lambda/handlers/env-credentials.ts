/**
 * What the Lambda bundles use in place of `@aws-sdk/credential-provider-node` (an esbuild alias,
 * lib/bundling.ts): the SDK's default credential chain reduced to its first link, the environment.
 *
 * Lambda puts the execution role's credentials in the environment of every function
 * (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN:
 * https://docs.aws.amazon.com/lambda/latest/dg/configuration-envvars.html#configuration-envvars-runtime),
 * and the default chain reads the environment first, so on Lambda both resolve the same
 * credentials. The rest of the chain (SSO, INI profiles, web identity, process, container and
 * instance metadata, with their STS and SSO clients) is about 100 KiB of every bundle that a
 * Lambda never runs. dm-dot's clients get `credentials: fromEnv()` explicitly anyway
 * (handlers/aws-clients.ts `clientOptions`); this module only stands in for the clients' static import of
 * the chain.
 *
 * Deliberately not here: SnapStart, whose functions get container credentials instead of these
 * variables (https://docs.aws.amazon.com/lambda/latest/dg/snapstart-activate.html#snapstart-credentials);
 * the stack does not turn it on. Enabling it means dropping this alias and the `credentials` field.
 * Tests under tsx and Jest load the real chain; test/build/bundles.test.ts checks the bundles.
 */
import { fromEnv } from '@aws-sdk/credential-provider-env';

type FromEnvInit = Parameters<typeof fromEnv>[0];

/** Same name and call shape as the chain's `defaultProvider`, environment only. */
export const defaultProvider = (init?: FromEnvInit) => fromEnv(init);
