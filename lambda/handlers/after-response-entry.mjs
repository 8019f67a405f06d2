/**
 * The MCP function's `--import` entry (NODE_OPTIONS), built as an ES module so that its top-level
 * await registers the after-response extension during Init, before the runtime asks for its first
 * event (docs/decisions.md, "On Lambda, work after the answer needs an extension"). Nothing else.
 */
import { install } from './after-response.ts';

await install();
