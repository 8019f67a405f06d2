/**
 * The one capped reader of an HTTP answer's body (the outbound guard, the Secrets Manager read, the
 * CLI's client): it stops at the first chunk past `maxBytes`, so a huge answer costs at most the
 * cap in memory; leaving the loop early destroys a node stream, which closes its connection.
 *
 * Deliberately not here: what an over-long answer means (each caller's own), timeouts, decoding,
 * and any import beyond the language: the CLI loads it on every command.
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
