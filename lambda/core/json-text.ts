/**
 * A look at a JSON request body before any parser or schema walks it, in one pass without
 * recursion: nesting deeper than `Limits.jsonMaxDepth` (recursive code further on would run out of
 * stack on a few kilobytes of `[[[[…`), and bytes that are not UTF-8, which a lenient decoder would
 * turn into U+FFFD the sender never wrote. Inside a string each ill-formed sequence (Unicode's
 * "maximal subpart") becomes the escape `\udfff`, a lone surrogate the message validation refuses;
 * outside a string the JSON is malformed anyway and the parser says so.
 *
 * Deliberately not here: parsing (JSON.parse and the SDK do that, on the bytes this returns), and
 * any answer: the HTTP layer chooses each route's refusal.
 */
import { Limits } from './protocol';

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN = new Set([0x5b, 0x7b]);
const CLOSE = new Set([0x5d, 0x7d]);
/** `\udfff` and, after a backslash that already opened an escape, `udfff`. */
const ESCAPE = new TextEncoder().encode('\\udfff');

/**
 * The length of the well-formed UTF-8 sequence starting at `i`, or the negative length of its
 * maximal ill-formed subpart (at least 1), following the table of well-formed byte sequences in
 * the Unicode Standard (3.9, table 3-7).
 */
function sequenceAt(b: Uint8Array, i: number): number {
  const lead = b[i]!;
  if (lead < 0x80) return 1;
  let need: number;
  let lo = 0x80;
  let hi = 0xbf;
  if (lead >= 0xc2 && lead <= 0xdf) need = 1;
  else if (lead >= 0xe0 && lead <= 0xef) {
    need = 2;
    if (lead === 0xe0) lo = 0xa0;
    if (lead === 0xed) hi = 0x9f;
  } else if (lead >= 0xf0 && lead <= 0xf4) {
    need = 3;
    if (lead === 0xf0) lo = 0x90;
    if (lead === 0xf4) hi = 0x8f;
  } else return -1;
  for (let k = 1; k <= need; k++) {
    const next = b[i + k];
    const min = k === 1 ? lo : 0x80;
    const max = k === 1 ? hi : 0xbf;
    if (next === undefined || next < min || next > max) return -k;
  }
  return need + 1;
}

/** `tooDeep`: nested past the limit; `repaired`: some bytes were not UTF-8; `bytes`: what to parse (`bytes` itself when not repaired). */
export function scanJsonText(bytes: Uint8Array) {
  let depth = 0;
  let tooDeep = false;
  let inString = false;
  let escaped = false;
  let out: number[] | undefined;
  for (let i = 0; i < bytes.length; ) {
    const byte = bytes[i]!;
    if (byte >= 0x80) {
      const length = sequenceAt(bytes, i);
      if (length > 0) {
        if (out) for (let k = 0; k < length; k++) out.push(bytes[i + k]!);
        escaped = false;
        i += length;
        continue;
      }
      // Bytes before the first repair are copied in one go, only if a repair is needed at all.
      out ??= Array.from(bytes.subarray(0, i));
      const bad = -length;
      if (inString) {
        // After an opening backslash, `udfff` completes the escape that backslash began.
        for (const c of escaped ? ESCAPE.subarray(1) : ESCAPE) out.push(c);
      } else {
        for (let k = 0; k < bad; k++) out.push(bytes[i + k]!);
      }
      escaped = false;
      i += bad;
      continue;
    }
    out?.push(byte);
    i++;
    if (inString) {
      if (escaped) escaped = false;
      else if (byte === BACKSLASH) escaped = true;
      else if (byte === QUOTE) inString = false;
      continue;
    }
    if (byte === QUOTE) inString = true;
    else if (OPEN.has(byte)) {
      depth++;
      if (depth > Limits.jsonMaxDepth) tooDeep = true;
    } else if (CLOSE.has(byte)) depth = Math.max(0, depth - 1);
  }
  return { tooDeep, repaired: out !== undefined, bytes: out ? Uint8Array.from(out) : bytes };
}
