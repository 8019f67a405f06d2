/**
 * End to end on loopback: `startLocal` in this process (a temp state directory, loopback callbacks
 * on, settings through the real parser) and a node:http receiver on 127.0.0.1; the send_to_dot
 * round trip to the "delivered" answer and to the event's arrival, vs a plain POST to the receiver.
 *
 * Deliberately not here: a state directory with history (the scale section), TLS, and the
 * guarded client's DNS and address checks beyond loopback.
 */
import { localSettings } from '../../../lambda/config/settings';
import { startLocal } from '../../../lambda/local/runtime';
import { measureSends, startReceiver, type RpcCall } from '../sends';
import { newApiKey, ROOT, rpcBody, rpcHeaders, silentLog, type Section } from '../support';

export const localE2eSection: Section = {
  key: 'e2e',
  title: 'end to end on loopback',
  budgetMs: 40_000,
  async run(bench) {
    const stateDir = bench.tempDir('state');
    const key = newApiKey();
    const receiver = await startReceiver();
    bench.cleanup(() => receiver.close());
    const runtime = await startLocal({
      // Through the real settings parser, so every other setting keeps its documented default.
      settings: localSettings(
        { HOST: '127.0.0.1', PORT: '0', DMDOT_STATE_DIR: stateDir, DMDOT_ALLOW_LOOPBACK_CALLBACKS: '1', MCP_API_KEY: key },
        { projectRoot: ROOT },
      ),
      log: silentLog,
      announce: () => undefined,
    });
    bench.cleanup(() => runtime.stop());

    const call: RpcCall = async (method, params, name) => {
      const response = await fetch(runtime.url, {
        method: 'POST',
        headers: rpcHeaders(method, key, name),
        body: rpcBody(method, params),
        signal: AbortSignal.timeout(10_000),
      });
      return { status: response.status, body: (await response.json()) as any };
    };
    await measureSends(bench, 'local', call, receiver);
    bench.note(
      'e2e: the first attempt is made inline (DEL-PIPE-5): the "delivered" answer comes when the receiver answers; the "event at receiver" row shows the pipeline itself.',
    );
  },
};
