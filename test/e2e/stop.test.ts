/**
 * A clean stop drains, end to end on the local runtime as `npm start` runs it: SIGTERM while 20
 * sends wait on a slow dot, every caller gets its answer, and the process exits 0.
 */
import { it } from 'node:test';
import assert from 'node:assert/strict';
import { newSecret, rpc, startReceiver, startServer, waitFor } from '../support/e2e';

it('LOCAL-18, LOCAL-FAULT-5: SIGTERM during 20 in-flight sends to a slow dot: every caller gets its answer, then exit 0', { timeout: 60_000 }, async () => {
  const receiver = await startReceiver((r) =>
    r.json?.type === 'verification' ? { status: 200, body: JSON.stringify({ challenge: r.json.challenge }) } : { status: 200, delayMs: 1_500 },
  );
  const server = await startServer({ DMDOT_DELIVERY_WAIT_MS: '3000' });
  try {
    await rpc(server, 'events/subscribe', { name: 'message.created', arguments: {}, delivery: { mode: 'webhook', url: receiver.url(), secret: newSecret() } });
    const calls = Array.from({ length: 20 }, (_, i) =>
      fetch(`${server.url}/v1/messages`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${server.key}` },
        body: JSON.stringify({ message: `in flight ${i}` }),
      }).then(
        async (response) => ({ status: response.status, body: (await response.json()) as any }),
        (error: Error) => ({ status: 0, body: String(error.cause ?? error) }),
      ),
    );
    await waitFor('all 20 sends reaching the slow dot', () => receiver.events().length === 20, 20_000);
    const code = server.stop('SIGTERM');
    const answers = await Promise.all(calls);
    const lost = answers.filter((a) => a.status === 0);
    assert.equal(lost.length, 0, `callers that lost their connection: ${lost.length} (${lost[0]?.body})`);
    for (const answer of answers) assert.ok(answer.status >= 200 && answer.status < 300, `answered ${answer.status} ${JSON.stringify(answer.body)}`);
    assert.equal(await code, 0);
  } finally {
    await receiver.close();
    await server.stop();
  }
});
