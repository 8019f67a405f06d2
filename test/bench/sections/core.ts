/**
 * Core: canonical JSON + subscription id, Standard Webhooks signing of a 16 KiB event with one and
 * two keys, and checkMessage on a 16 KiB message, each vs the bare node:crypto / Buffer work it
 * wraps (what the core adds on top of the unavoidable).
 *
 * Deliberately not here: I/O of any kind, and the send path as a whole (the app section).
 */
import { createHash, createHmac, randomBytes } from 'node:crypto';
import { canonicalJson, newEventId, sha256Hex, subscriptionIdOf } from '../../../lambda/core/identity';
import { buildEvent } from '../../../lambda/core/messages';
import { EVENT_NAME, Limits } from '../../../lambda/core/protocol';
import { decodeSecret, signatureHeader } from '../../../lambda/core/signing';
import { checkMessage } from '../../../lambda/core/validation';
import { kib, messageOfBytes, newSecret, pairedSync, type Section } from '../support';

export const coreSection: Section = {
  key: 'core',
  title: 'core',
  budgetMs: 30_000,
  async run(bench) {
    const principal = sha256Hex(randomBytes(24).toString('base64url'));
    const url = 'https://chatgpt.example.com/backend-api/dots/webhooks/abc123?token=xyz';
    const micro = { samples: 300, batch: 200, warmup: 2000, rounds: 5, maxMs: 4_000 };

    const id = pairedSync(
      () => subscriptionIdOf(principal, url, EVENT_NAME, {}),
      () =>
        createHash('sha256')
          .update(JSON.stringify([principal, url, EVENT_NAME, {}]))
          .digest('hex'),
      micro,
    );
    if (canonicalJson([principal, url, EVENT_NAME, {}]) !== JSON.stringify([principal, url, EVENT_NAME, {}])) {
      bench.note('canonicalJson and JSON.stringify differ on the id input (the baseline is not the same bytes).');
    }
    bench.timeRow('core canonicalJson + subscriptionIdOf', id.subject, 'JSON.stringify + sha256 hex', id.baseline);

    const eventId = newEventId();
    const body = new TextEncoder().encode(buildEvent(eventId, messageOfBytes(Limits.messageMaxBytes), Date.now()));
    const key1 = decodeSecret(newSecret())!;
    const key2 = decodeSecret(newSecret())!;
    const ts = Math.floor(Date.now() / 1000);
    const bareHmac = () => createHmac('sha256', key1).update(`${eventId}.${ts}.`).update(body).digest('base64');
    const signOptions = { samples: 300, batch: 20, warmup: 200, rounds: 5, maxMs: 4_000 };

    const one = pairedSync(() => signatureHeader([key1], eventId, ts, body), bareHmac, signOptions);
    bench.timeRow(`core sign ${kib(body.byteLength)} event, 1 key`, one.subject, 'bare node:crypto HMAC-SHA256', one.baseline);
    const two = pairedSync(() => signatureHeader([key1, key2], eventId, ts, body), bareHmac, signOptions);
    bench.timeRow(`core sign ${kib(body.byteLength)} event, 2 keys`, two.subject, 'bare node:crypto HMAC-SHA256', two.baseline);

    const message = `  ${messageOfBytes(Limits.messageMaxBytes)}  `;
    const args = { message };
    if (!checkMessage(args).ok) throw new Error('checkMessage refused the 16 KiB fixture');
    const check = pairedSync(
      () => checkMessage(args),
      () => Buffer.byteLength(message.trim(), 'utf8'),
      { samples: 300, batch: 50, warmup: 500, rounds: 5, maxMs: 4_000 },
    );
    bench.timeRow(`core checkMessage ${kib(Buffer.byteLength(message.trim()))} message`, check.subject, 'Buffer.byteLength(trim())', check.baseline);
  },
};
