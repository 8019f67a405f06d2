/**
 * The one capped body reader (lambda/core/capped-body.ts) shared by the outbound guard, the
 * Secrets Manager read, the CLI's client and the request routes: what each caller answers for an over-long body is
 * pinned in that caller's own tests.
 */
import { Readable } from 'node:stream';
import { readCapped } from '../../../lambda/core/capped-body';

function chunks(...sizes: number[]): Uint8Array[] {
  return sizes.map((size, i) => new Uint8Array(size).fill(97 + i));
}

test('a body of exactly the cap is read whole, its chunks in order', async () => {
  const body = await readCapped(Readable.from(chunks(3, 2)), 5);
  expect(body?.toString('latin1')).toBe('aaabb');
});

test('one byte over the cap is undefined', async () => {
  expect(await readCapped(Readable.from(chunks(3, 3)), 5)).toBeUndefined();
});

test('an empty body is an empty buffer', async () => {
  expect(await readCapped(Readable.from([]), 5)).toEqual(Buffer.alloc(0));
});

test('reading stops at the chunk that passes the cap: an endless body ends, and its stream is destroyed', async () => {
  let produced = 0;
  const endless = new Readable({
    read() {
      produced++;
      this.push(new Uint8Array(1024));
    },
  });
  expect(await readCapped(endless, 4096)).toBeUndefined();
  expect(endless.destroyed).toBe(true);
  expect(produced).toBeLessThan(64);
});

test("a stream's error rejects", async () => {
  const failing = new Readable({
    read() {
      this.destroy(Object.assign(new Error('cut'), { code: 'ECONNRESET' }));
    },
  });
  await expect(readCapped(failing, 10)).rejects.toMatchObject({ code: 'ECONNRESET' });
});
