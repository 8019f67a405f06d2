/**
 * What the Lambda bundles use in place of `@modelcontextprotocol/server/_shims` (an esbuild alias,
 * lib/bundling.ts): the same two exports as the SDK's Node shim, with the SDK's own lighter JSON
 * Schema validator (`validators/cf-worker`, the one the SDK picks on edge runtimes) in place of
 * ajv, which is about 150 KiB of every MCP bundle and a share of every cold start.
 *
 * dm-dot never validates JSON Schema at run time: its tool publishes a fixed schema and the core
 * validates (lambda/mcp/server.ts), and it uses neither elicitation nor `fromJsonSchema`. Should a
 * future SDK path need a validator, this one still validates (draft 2020-12), so the alias changes
 * bundle size, not behaviour.
 *
 * Deliberately not here: anything else of the SDK. Only the bundles see this module (tests under
 * tsx and Jest load the SDK's real shim); test/build/bundles.test.ts checks that its exports match
 * the SDK's shim at the pinned version and that ajv stays out of the built bundle.
 */
export { CfWorkerJsonSchemaValidator as DefaultJsonSchemaValidator } from '@modelcontextprotocol/server/validators/cf-worker';
export { default as process } from 'node:process';
