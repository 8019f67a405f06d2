/**
 * The stack's environment as a function unpacked into `dir` sees it: Lambda unpacks an asset into
 * /var/task, and the MCP function's NODE_OPTIONS preloads a file there (lib/bundling.ts
 * AFTER_RESPONSE_NODE_OPTIONS). Tests that start a built asset from a temporary folder point that
 * path at the folder instead.
 */
export const LAMBDA_TASK_ROOT = '/var/task/';

export function inTaskRoot<E extends Record<string, string | undefined>>(env: E, dir: string): E {
  if (env.NODE_OPTIONS === undefined) return env;
  return { ...env, NODE_OPTIONS: env.NODE_OPTIONS.split(LAMBDA_TASK_ROOT).join(`${dir.replace(/\/$/, '')}/`) };
}
