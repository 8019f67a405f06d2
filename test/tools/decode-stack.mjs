#!/usr/bin/env node
/**
 * Decodes a stack trace of a dm-dot Lambda offline: every `index.js:LINE:COLUMN` in the text
 * (as CloudWatch Logs shows it) becomes the original `source:LINE:COLUMN` from the bundle's
 * source map, with the original name when the map has one. The functions run without
 * `--enable-source-maps` (docs/performance.md: loading the map cost about 40% of a cold start),
 * so their traces point into the minified bundle.
 *
 *   node test/tools/decode-stack.mjs <index.js.map> [more.js.map ...] [file with the stack trace]   (stdin without it)
 *
 * The maps are the deployed asset's: `cdk.out/asset.<hash>/index.js.map` from the synth that
 * deployed it, or from the function's code package (`aws lambda get-function --query
 * Code.Location` is a download URL of the zip). The MCP function has a second file, mcp-storage.js
 * (its storage code): give `mcp-storage.js.map` too and frames in either file are decoded. Each map
 * decodes the positions in the file it belongs to (its `file` field, else its own name less `.map`). Lines no map covers stay as they are.
 *
 * Deliberately not here: fetching logs or code from AWS, and any dependency: `node:module`'s
 * SourceMap reads the map.
 */
import { readFileSync } from 'node:fs';
import { SourceMap } from 'node:module';
import { basename } from 'node:path';

function usage(message) {
  process.stderr.write(`${message}\nusage: node test/tools/decode-stack.mjs <index.js.map> [more.js.map ...] [stack.txt]\n`);
  process.exit(2);
}

/** `../../lambda/core/x.ts` -> `lambda/core/x.ts`: sources are relative to where the asset was built. */
function tidy(source) {
  return source.replace(/^(?:\.\.?\/)+/, '');
}

/** Rewrites every position in `text` that points into `bundleName`. */
export function decodeStack(text, map, bundleName = 'index.js') {
  const escaped = bundleName.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  const position = new RegExp(`(?:[^\\s()]*[/\\\\])?${escaped}:(\\d+):(\\d+)`, 'g');
  return text.replace(position, (whole, line, column) => {
    // Stack traces count lines and columns from 1; SourceMap#findEntry takes 0-based offsets.
    const entry = map.findEntry(Number(line) - 1, Number(column) - 1);
    if (!entry || entry.originalSource === undefined) return whole;
    const name = entry.name ? ` [${entry.name}]` : '';
    return `${tidy(entry.originalSource)}:${entry.originalLine + 1}:${entry.originalColumn + 1}${name}`;
  });
}

function readMap(mapFile) {
  let payload;
  try {
    payload = JSON.parse(readFileSync(mapFile, 'utf8'));
  } catch (error) {
    usage(`cannot read the source map ${mapFile}: ${error instanceof Error ? error.message : String(error)}`);
  }
  if (payload?.version !== 3 || typeof payload.mappings !== 'string') usage(`${mapFile} is not a version 3 source map`);
  return payload;
}

function main() {
  const args = process.argv.slice(2);
  if (args.length === 0) usage('missing the source map');
  // The first argument is always a map; later ones are maps when they end in .map, the trace otherwise.
  const [first, ...rest] = args;
  const mapFiles = [first, ...rest.filter((arg) => arg.endsWith('.map'))];
  const others = rest.filter((arg) => !arg.endsWith('.map'));
  if (others.length > 1) usage(`one stack trace file at most, got ${others.length}`);
  // The file a map decodes: its `file` field, or else the map's own name less `.map` (esbuild writes no `file`).
  const maps = mapFiles.map((mapFile) => {
    const payload = readMap(mapFile);
    return { payload, bundleName: payload.file ? basename(payload.file) : basename(mapFile).replace(/\.map$/, '') };
  });
  let text;
  try {
    text = readFileSync(others[0] ?? 0, 'utf8');
  } catch (error) {
    usage(`cannot read ${others[0] ?? 'stdin'}: ${error instanceof Error ? error.message : String(error)}`);
  }
  for (const { payload, bundleName } of maps) text = decodeStack(text, new SourceMap(payload), bundleName);
  process.stdout.write(text);
}

if (import.meta.url === `file://${process.argv[1]}`) main();
