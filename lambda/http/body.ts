/**
 * Reading a request body the way every POST route does (docs/contract/http.md): the raw bytes, read
 * once, at most 1 MiB, after a JSON Content-Type check; the pup door verifies its signature over
 * exactly these bytes.
 *
 * Deliberately not here: parsing (each route decides how, and when: pup verifies before parsing)
 * and any answer (the callers shape their own refusals).
 */

/** True when the request declares a body longer than `max` (answered 413 before reading anything). */
export function declaredTooLarge(request: Request, max: number): boolean {
  const declared = Number(request.headers.get('content-length'));
  return Number.isFinite(declared) && declared > max;
}

/** Reads at most `max` bytes of the body, handing each chunk to `onChunk` as it arrives; undefined when it is larger. */
export async function readStream(request: Request, max: number, onChunk?: (chunk: Uint8Array) => void): Promise<Uint8Array | undefined> {
  if (declaredTooLarge(request, max)) return undefined;
  if (!request.body) return new Uint8Array();
  const reader = request.body.getReader();
  const chunks: Uint8Array[] = [];
  let length = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    length += value.byteLength;
    if (length > max) {
      await reader.cancel().catch(() => undefined);
      return undefined;
    }
    onChunk?.(value);
    chunks.push(value);
  }
  return Buffer.concat(chunks);
}

export function isJsonContentType(value: string | null): boolean {
  return (value ?? '').split(';')[0]!.trim().toLowerCase() === 'application/json';
}
