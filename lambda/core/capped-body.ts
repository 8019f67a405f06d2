/**
 * The one capped reader of an HTTP body, inbound (the routes' request bodies) and outbound (the
 * webhook guard, the Secrets Manager read, the CLI's client, the stand-in dot): it stops at the
 * first chunk past `maxBytes`, so a huge body costs at most the cap in memory; leaving the loop
 * early destroys a node stream or cancels a web stream, which closes its connection.
 *
 * Deliberately not here: what an over-long body means (each caller's own), timeouts, decoding,
 * and any import beyond the language: the CLI loads it on every command.
 */
/** The body, or undefined when it went past `maxBytes` (what was read is dropped); `onChunk` sees each chunk kept. */
export async function readCapped(body: AsyncIterable<Uint8Array>, maxBytes: number, onChunk?: (chunk: Uint8Array) => void): Promise<Buffer | undefined> {
  const chunks: Uint8Array[] = [];
  let length = 0;
  for await (const chunk of body) {
    length += chunk.byteLength;
    if (length > maxBytes) return undefined;
    onChunk?.(chunk);
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
}
