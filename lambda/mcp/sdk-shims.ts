/**
 * What the Lambda bundles use in place of `@modelcontextprotocol/server/_shims` (an esbuild alias,
 * lib/bundling.ts): the SDK's Node shim's two exports, with the SDK's lighter edge JSON Schema
 * validator in place of ajv (about 150 KiB of every MCP bundle). dm-dot never validates JSON Schema
 * at run time, and this one still validates, so the alias changes bundle size, not behaviour.
 *
 * Deliberately not here: anything else of the SDK (test/build/bundles.test.ts checks the exports).
 */
export { CfWorkerJsonSchemaValidator as DefaultJsonSchemaValidator } from '@modelcontextprotocol/server/validators/cf-worker';
export { default as process } from 'node:process';
