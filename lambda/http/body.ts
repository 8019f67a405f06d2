/**
 * Reading a request body the way every POST route does (docs/contract/http.md): the raw bytes, read
 * once, at most 1 MiB, after a JSON Content-Type check; the pup door verifies its signature over
 * exactly these bytes.
 *
 * Deliberately not here: parsing (each route decides how, and when: pup verifies before parsing)
 * and any answer (the callers shape their own refusals).
 */
import { readCapped } from '../core/capped-body';

/** True when the request declares a body longer than `max` (answered 413 before reading anything). */
export function declaredTooLarge(request: Request, max: number): boolean {
  const declared = Number(request.headers.get('content-length'));
  return Number.isFinite(declared) && declared > max;
}

/** Reads at most `max` bytes of the body, handing each chunk to `onChunk` as it arrives; undefined when it is larger. */
export async function readStream(request: Request, max: number, onChunk?: (chunk: Uint8Array) => void): Promise<Uint8Array | undefined> {
  if (declaredTooLarge(request, max)) return undefined;
  return request.body ? readCapped(request.body, max, onChunk) : new Uint8Array();
}

export function isJsonContentType(value: string | null): boolean {
  return (value ?? '').split(';')[0]!.trim().toLowerCase() === 'application/json';
}
