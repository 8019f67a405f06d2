/**
 * End to end through the MCP Lambda in this process (`mcpLambdaFromEnvironment`, behind the local
 * API Gateway of test/support/apigw.ts) and the Delivery Lambda (fed by a local SQS event source
 * that long-polls fauxqs), with the stack's wait window, against DynamoDB Local and fauxqs, and
 * the loopback receiver: the same send_to_dot figures as the loopback section.
 *
 * As deployed, the MCP function runs with its after-response extension (the stack loads it through
 * NODE_OPTIONS): it answers "delivered" when the dot answers 2xx and records that after the answer,
 * and its environment takes the next invocation only once that write has settled. Here the
 * extension's part is played in-process (test/support/kept-work.ts), and the next send waits for the write
 * outside its timing, as the next invocation would.
 *
 * Deliberately not here: the SQS hop and the delivery function's cold start on AWS, and the built
 * bundle (the awscalls section runs that one).
 */
import { startFakeSecretsManager } from '../../support/fake-secrets-manager';
import { keptWork } from '../../support/kept-work';
import { measureSends, startReceiver } from '../sends';
import { errorText, newApiKey, progress, rpcBody, rpcHeaders, silentLog, type Section } from '../support';

export const lambdaE2eSection: Section = {
  key: 'lambda',
  title: 'end to end through the MCP Lambda (DynamoDB Local, fauxqs)',
  budgetMs: 60_000,
  async run(bench) {
    const { startDynamoDbLocal } = await import('../../support/dynamodb-local');
    const { startFauxqs } = await import('../../support/fauxqs');
    const { pollOnce } = await import('../../support/event-source');
    const { localApiGateway } = await import('../../support/apigw');
    const { deliveryLambdaFromEnvironment, mcpLambdaFromEnvironment } = await import('../../support/lambda-environment');
    const { testSecretsReader } = await import('../../support/fake-secrets-manager');

    // This process runs the Lambdas' code: keep the AWS SDK's Node 20 notice and the MCP SDK's
    // once-per-handler note on JSON response mode (dm-dot sends no mid-call notifications) off the output.
    process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
    const key = newApiKey();
    const [ddb, fauxqs, secrets, receiver] = await Promise.all([startDynamoDbLocal(), startFauxqs(), startFakeSecretsManager(), startReceiver()]);
    bench.cleanup(
      () => ddb.stop(),
      () => fauxqs.stop(),
      () => secrets.stop(),
      () => receiver.close(),
    );
    const table = 'dm-dot-bench';
    await ddb.createTable(table);
    secrets.setSecret(key);
    const stackEnv = await bench.stackEnvironments().catch(() => undefined);
    const env: NodeJS.ProcessEnv = {
      TABLE_NAME: table,
      QUEUE_URL: fauxqs.queueUrl,
      DEAD_LETTER_QUEUE_URL: fauxqs.deadLetterQueueUrl,
      API_KEY_SECRET_ARN: secrets.arn,
      // The stack's wait window and retry schedule, when the synth ran; the documented defaults otherwise.
      ...(stackEnv ? { DMDOT_DELIVERY_WAIT_MS: stackEnv.mcp.DMDOT_DELIVERY_WAIT_MS, DMDOT_RETRY_DELAYS: stackEnv.delivery.DMDOT_RETRY_DELAYS } : {}),
      DMDOT_ALLOW_LOOPBACK_CALLBACKS: '1',
    };
    const secretsClient = testSecretsReader(secrets.endpoint, { maxAttempts: 1 });
    const kept = keptWork();
    const gateway = localApiGateway(
      mcpLambdaFromEnvironment(env, { dynamodb: ddb.client, sqs: fauxqs.client, secrets: secretsClient }, { log: silentLog, afterResponse: kept }),
    );
    const worker = deliveryLambdaFromEnvironment(env, { dynamodb: ddb.client, sqs: fauxqs.client }, { log: silentLog });

    // The event source mapping: one long poll after another until the section ends.
    let polling = true;
    const loop = (async () => {
      while (polling) {
        try {
          await pollOnce(fauxqs, worker, { timeoutMs: 1_000 });
        } catch (error) {
          if (polling) progress(`lambda e2e: poll failed: ${errorText(error)}`);
        }
      }
    })();
    bench.cleanup(async () => {
      polling = false;
      await loop;
    });

    const call = async (method: string, params: Record<string, unknown>, name?: string) => {
      const response = await gateway.fetch('https://api.example/mcp', {
        method: 'POST',
        headers: rpcHeaders(method, key, name),
        body: rpcBody(method, params),
      });
      return { status: response.status, body: (await response.json()) as any };
    };
    await measureSends(bench, 'lambda', call, receiver, kept.settled);
    bench.note(
      'lambda e2e: MCP and Delivery Lambdas in this process against DynamoDB Local and fauxqs (long-polled by a local event source); no SQS network hop or delivery cold start as on AWS.',
    );
    bench.note(
      "lambda e2e: the after-response extension's part played in-process, as deployed: the answer comes at the dot's 2xx, and each next send waits, untimed, for the last one's write.",
    );
  },
};
