/**
 * The look at a JSON body before it is parsed (lambda/core/json-text.ts): nesting deeper than the
 * limit is flagged without recursion, and bytes that are not UTF-8 inside a string become the lone
 * surrogate `\udfff` (which the message check refuses), never a silent U+FFFD.
 */
import { scanJsonText } from '../../../lambda/core/json-text';
import { checkMessage, NOT_UTF8_MESSAGE } from '../../../lambda/core/validation';

const bytes = (...parts: (string | number[])[]) => Uint8Array.from(parts.flatMap((part) => (typeof part === 'string' ? [...Buffer.from(part, 'utf8')] : part)));
const text = (b: Uint8Array) => Buffer.from(b).toString('utf8');

describe('depth', () => {
  test('at the limit is fine; one deeper is too deep', () => {
    expect(scanJsonText(bytes('['.repeat(64), ']'.repeat(64))).tooDeep).toBe(false);
    expect(scanJsonText(bytes('['.repeat(65), ']'.repeat(65))).tooDeep).toBe(true);
  });

  test('2,000 levels of objects (a 12 KB body) are flagged, and the scan itself does not recurse', () => {
    const deep = `${'{"a":'.repeat(2000)}1${'}'.repeat(2000)}`;
    expect(scanJsonText(bytes(deep)).tooDeep).toBe(true);
    expect(scanJsonText(bytes('['.repeat(1_000_000))).tooDeep).toBe(true);
  });

  test('brackets inside strings, escaped quotes included, do not count', () => {
    const body = JSON.stringify({ message: `${'['.repeat(500)} \\" ${'{'.repeat(500)}` });
    expect(scanJsonText(bytes(body)).tooDeep).toBe(false);
  });

  test('siblings do not add up: depth is nesting, not count', () => {
    expect(scanJsonText(bytes(JSON.stringify(Array.from({ length: 500 }, () => [[1]])))).tooDeep).toBe(false);
  });
});

describe('UTF-8', () => {
  test('well-formed bodies come back as the very same bytes', () => {
    const body = bytes(JSON.stringify({ message: 'héllo 😀 \u0000 "quoted"' }));
    const scan = scanJsonText(body);
    expect(scan.repaired).toBe(false);
    expect(scan.bytes).toBe(body);
  });

  test('an invalid byte inside a string becomes the escape \\udfff, and the message check refuses it', () => {
    const scan = scanJsonText(bytes('{"message":"ab', [0xff], 'cd"}'));
    expect(scan.repaired).toBe(true);
    expect(text(scan.bytes)).toBe('{"message":"ab\\udfffcd"}');
    const parsed = JSON.parse(text(scan.bytes)) as { message: string };
    expect(checkMessage(parsed)).toEqual({ ok: false, error: NOT_UTF8_MESSAGE });
  });

  test('each maximal ill-formed subpart is one escape, as a decoder counts replacements', () => {
    // E0 80: E0 needs A0..BF next, so E0 alone is one subpart and 80 another; F0 9F 98 cut short is one.
    const scan = scanJsonText(bytes('"', [0xe0, 0x80], 'x', [0xf0, 0x9f, 0x98], '"'));
    expect(text(scan.bytes)).toBe('"\\udfff\\udfffx\\udfff"');
  });

  test('surrogates encoded in UTF-8 (ED A0 80) and overlong forms (C0 AF) are ill-formed', () => {
    expect(text(scanJsonText(bytes('"', [0xed, 0xa0, 0x80], '"')).bytes)).toBe('"\\udfff\\udfff\\udfff"');
    expect(text(scanJsonText(bytes('"', [0xc0, 0xaf], '"')).bytes)).toBe('"\\udfff\\udfff"');
  });

  test('after a backslash the repair completes the escape instead of breaking it', () => {
    const scan = scanJsonText(bytes('{"message":"a\\', [0xff], 'b"}'));
    const parsed = JSON.parse(text(scan.bytes)) as { message: string };
    expect(parsed.message).toBe('a\udfffb');
    expect(checkMessage(parsed).ok).toBe(false);
  });

  test('outside a string the bytes are left alone: the JSON stays malformed and the parser says so', () => {
    const scan = scanJsonText(bytes('{"a":1', [0xff], '}'));
    expect(() => JSON.parse(text(scan.bytes))).toThrow();
  });

  test('a multibyte character split nowhere is kept as is; a truncated one at the end is repaired', () => {
    expect(scanJsonText(bytes('"😀"')).repaired).toBe(false);
    expect(text(scanJsonText(bytes('"', [0xf0, 0x9f])).bytes)).toBe('"\\udfff');
  });
});
