/**
 * The one capped reader of an HTTP answer's body, for the outbound guard (guarded-https.ts), the
 * Secrets Manager read (secrets-manager.ts) and the CLI's client (cli/http.ts): it reads the chunks
 * of a body (a node:http `IncomingMessage` or any async iterable of bytes) and stops at the first
 * chunk that takes it past `maxBytes`, so an endless or huge answer costs at most the cap in
 * memory. Leaving the loop early destroys a node stream, which closes its connection.
 *
 * Deliberately not here: what an over-long answer means (each caller gives its own error or
 * result), timeouts, decoding, and any import beyond the language: the CLI loads it on every command.
 */

/** The body, or undefined when it went past `maxBytes` (what was read is dropped). */
export async function readCapped(body: AsyncIterable<Uint8Array>, maxBytes: number): Promise<Buffer | undefined> {
  const chunks: Uint8Array[] = [];
  let length = 0;
  for await (const chunk of body) {
    length += chunk.byteLength;
    if (length > maxBytes) return undefined;
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
}
