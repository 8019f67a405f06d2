/**
 * The one way dm-dot's tools publish their schemas to the SDK.
 *
 * Deliberately not here: validation. The core validates every tool's arguments itself, so that bad
 * input becomes a tool result with `isError: true` and a sentence, as docs/contract/mcp.md requires.
 */
import type { StandardSchemaWithJSON } from '@modelcontextprotocol/server';

/** A schema that publishes fixed JSON Schema and accepts any value. */
export function publishedSchema(jsonSchema: Record<string, unknown>): StandardSchemaWithJSON {
  return {
    '~standard': {
      version: 1,
      vendor: 'dm-dot',
      validate: (value: unknown) => ({ value }),
      jsonSchema: { input: () => jsonSchema, output: () => jsonSchema },
    },
  };
}
