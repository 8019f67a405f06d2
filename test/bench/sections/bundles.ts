/**
 * Bundles and cold start: both Lambda entries built with the stack's own options
 * (lib/bundling.ts) as they were before the bundle tuning and after each of its changes, their
 * sizes against the budgets, and the cold start (a fresh process on the Lambda runtime's Node major: load + first request,
 * the synthesized environment, a fake AWS endpoint) against a bare MCP SDK server bundled the
 * usual way. The headline ratio is the median of back-to-back pairs (baseline and as deployed,
 * their order alternating), so a shared machine's noise hits both sides of a pair alike.
 *
 * Deliberately not here: the Lambda runtime's own bootstrap and code download, network to AWS,
 * and size assertions (test/build/bundles.test.ts holds the budgets).
 */
import { statSync } from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { AWS_CREDENTIAL_CHAIN, lambdaBundle, MCP_SDK_SHIMS, AFTER_RESPONSE_CHUNK, MCP_STORAGE_CHUNK, type LambdaBundle } from '../../../lib/bundling';
import { TOOL_NAME } from '../../../lambda/core/protocol';
import { startFakeSecretsManager } from '../../support/fake-secrets-manager';
import {
  BUNDLE_BUDGET_BYTES,
  buildBaselineBundle,
  buildLambdaBundle,
  coldStart,
  inputsMatching,
  lambdaRuntimeEnvironment,
  LAMBDA_RUNTIME_MAJOR,
  lambdaNodeBinary,
  seedDeployedSecrets,
  toolNames,
  toolsListEvent,
  toolsListRequest,
  type ColdStart,
} from '../lambda-bundles';
import { kib, ms, newApiKey, ratio, stats, versionOf, type Section } from '../support';

/**
 * The MCP and delivery bundles before the bundle tuning and after each of its changes,
 * cumulatively, in one run: every variant is the shared description of lib/bundling.ts with the
 * later changes taken back out. The last one is exactly what the stack deploys (its environment
 * comes from the synthesized template, so a NODE_OPTIONS put back there shows up here).
 */
function bundleVariants(): Array<{ key: string; label: string; spec: LambdaBundle; nodeOptions?: string }> {
  const deployed = lambdaBundle(undefined, [MCP_STORAGE_CHUNK, AFTER_RESPONSE_CHUNK]);
  const oneFile = { ...deployed, chunks: [] };
  const { [MCP_SDK_SHIMS]: shims, [AWS_CREDENTIAL_CHAIN]: _chain, ...otherAliases } = deployed.alias;
  // esbuild's own default for platform node (what the stack used before).
  const cjsFirst = ['main', 'module'];
  return [
    {
      key: 'before',
      label: 'before the bundle tuning (source maps loaded at run time)',
      spec: { ...oneFile, mainFields: cjsFirst, alias: otherAliases },
      nodeOptions: '--enable-source-maps',
    },
    { key: 'offlineMaps', label: '+ source maps decoded offline (no NODE_OPTIONS)', spec: { ...oneFile, mainFields: cjsFirst, alias: otherAliases } },
    { key: 'esBuilds', label: '+ ES builds of the AWS SDK (mainFields)', spec: { ...oneFile, alias: otherAliases } },
    { key: 'noAjv', label: '+ no ajv (_shims alias)', spec: { ...oneFile, alias: { ...otherAliases, [MCP_SDK_SHIMS]: shims! } } },
    { key: 'envCredentials', label: '+ environment-only credentials', spec: oneFile },
    { key: 'deployed', label: '+ storage code in its own file (mcp-storage.js, loaded on first use) = as deployed', spec: deployed },
  ];
}

interface VariantResult {
  key: string;
  label: string;
  mcpBundleBytes: number;
  deliveryBundleBytes: number;
  coldStartMs: number;
  coldStartP90Ms: number;
  coldStartRatio: number;
  loadMs: number;
  firstRequestMs: number;
  deliveryColdStartMs: number;
}

export const bundlesSection: Section = {
  key: 'bundles',
  title: 'bundles and cold start',
  budgetMs: 150_000,
  async run(bench) {
    const root = bench.tempDir('bundles');
    const variants = bundleVariants();
    const environments = await bench.stackEnvironments();
    const built = await Promise.all(
      variants.map(async (v) => ({
        ...v,
        mcp: await buildLambdaBundle(join(root, v.key, 'mcp'), { file: 'lambda/handlers/mcp.ts' }, v.spec),
        // The Delivery function has no chunk.
        delivery: await buildLambdaBundle(join(root, v.key, 'delivery'), { file: 'lambda/handlers/delivery.ts' }, { ...v.spec, chunks: [] }),
      })),
    );
    const baseline = await buildBaselineBundle(join(root, 'baseline'));
    const deployed = built.at(-1)!;
    if (Object.keys(environments.mcp).includes('NODE_OPTIONS'))
      bench.note(`bundles: the stack sets NODE_OPTIONS=${environments.mcp.NODE_OPTIONS} on the MCP function; the "as deployed" rows include it.`);

    // A fake AWS endpoint: Secrets Manager answers the API key; nothing else is called before the first answer.
    const apiKey = newApiKey();
    // Signatures are checked by the tests (test/build/bundles.test.ts); here the fake answers at once.
    const secrets = await startFakeSecretsManager(environments.mcp.API_KEY_SECRET_ARN, { verifySignatures: false });
    bench.cleanup(() => secrets.stop());
    seedDeployedSecrets(secrets, environments.mcp, apiKey);
    const mcpEnv = { ...lambdaRuntimeEnvironment('dm-dot-mcp', secrets.endpoint), ...environments.mcp };
    const deliveryEnv = { ...lambdaRuntimeEnvironment('dm-dot-delivery', secrets.endpoint), ...environments.delivery };
    const event = await toolsListEvent(apiKey);
    const bareRequest = JSON.stringify(toolsListRequest('http://localhost/mcp'));
    const emptyBatch = JSON.stringify({ Records: [] });
    const node = lambdaNodeBinary();
    const nodeVersion = await versionOf(node.path);
    bench.recordMachine({ coldStartNode: nodeVersion, coldStartNodeIsLambdaMajor: node.isLambdaMajor });

    // The stack's NODE_OPTIONS imports the after-response extension: only the as-deployed build carries
    // that file, so the baseline and the earlier variants run without it.
    const { NODE_OPTIONS: deployedNodeOptions, ...mcpEnvBare } = mcpEnv;
    const envOf = (base: Record<string, string>, nodeOptions?: string) => (nodeOptions ? { ...base, NODE_OPTIONS: nodeOptions } : base);
    const checkMcp = (label: string, answer: { status: number; body: string }, expected: string) => {
      const tools = toolNames(answer.body);
      if (answer.status !== 200 || tools.join() !== expected) throw new Error(`${label}: first answer ${answer.status} ${answer.body.slice(0, 160)}`);
    };
    const jobs: Array<{ key: string; run: () => Promise<ColdStart> }> = [
      {
        key: 'baseline',
        run: async () => {
          const started = await coldStart(node.path, baseline.file, 'fetch', bareRequest, mcpEnvBare);
          checkMcp('baseline', started.answer, 'echo');
          return started;
        },
      },
    ];
    for (const v of built) {
      jobs.push({
        key: `mcp:${v.key}`,
        run: async () => {
          // With a chunk: after the answer, what the first request that needs storage adds (timed apart).
          const then = v.mcp.chunkFiles[0]
            ? { require: v.mcp.chunkFiles[0], call: 'createMcpStorage', args: [mcpEnv.TABLE_NAME, mcpEnv.QUEUE_URL] }
            : undefined;
          const started = await coldStart(
            node.path,
            v.mcp.file,
            'apigw',
            event,
            envOf(mcpEnvBare, v.key === 'deployed' ? deployedNodeOptions : v.nodeOptions),
            undefined,
            then,
          );
          checkMcp(v.key, started.answer, TOOL_NAME);
          return started;
        },
      });
      jobs.push({
        key: `delivery:${v.key}`,
        run: async () => {
          const started = await coldStart(node.path, v.delivery.file, 'sqs', emptyBatch, envOf(deliveryEnv, v.nodeOptions));
          if (started.answer.body !== '{"batchItemFailures":[]}') throw new Error(`delivery ${v.key}: ${started.answer.body.slice(0, 160)}`);
          return started;
        },
      });
    }
    // One unrecorded pass warms the page cache. Then each round runs the headline pair back to back
    // (baseline and as-deployed, their order alternating), so both see the same moment of a shared
    // machine, and then every other job in a rotating order. At least 5 rounds; more while time allows.
    for (const job of jobs) await job.run();
    const samples = new Map<string, ColdStart[]>(jobs.map((j) => [j.key, []]));
    const pairRatios: number[] = [];
    const pair = [jobs.find((j) => j.key === 'baseline')!, jobs.find((j) => j.key === 'mcp:deployed')!];
    const others = jobs.filter((j) => !pair.includes(j));
    const deadline = performance.now() + 90_000;
    for (let round = 0; round < 25 && (round < 5 || performance.now() < deadline); round++) {
      const [first, second] = round % 2 === 0 ? pair : [pair[1]!, pair[0]!];
      const a = await first!.run();
      const b = await second!.run();
      samples.get(first!.key)!.push(a);
      samples.get(second!.key)!.push(b);
      pairRatios.push(first!.key === 'baseline' ? b.totalMs / a.totalMs : a.totalMs / b.totalMs);
      for (let i = 0; i < others.length; i++) {
        const job = others[(i + round) % others.length]!;
        samples.get(job.key)!.push(await job.run());
      }
    }
    const total = (key: string) => stats(samples.get(key)!.map((x) => x.totalMs));
    const part = (key: string, field: 'loadMs' | 'firstRequestMs') => stats(samples.get(key)!.map((x) => x[field])).median;
    const base = total('baseline');

    const variantResults: VariantResult[] = built.map((v) => {
      const cold = total(`mcp:${v.key}`);
      return {
        key: v.key,
        label: v.label,
        mcpBundleBytes: v.mcp.bytes,
        deliveryBundleBytes: v.delivery.bytes,
        coldStartMs: cold.median,
        coldStartP90Ms: cold.p90,
        coldStartRatio: cold.median / base.median,
        loadMs: part(`mcp:${v.key}`, 'loadMs'),
        firstRequestMs: part(`mcp:${v.key}`, 'firstRequestMs'),
        deliveryColdStartMs: total(`delivery:${v.key}`).median,
      };
    });

    for (const v of variantResults) {
      bench.timeRow(`MCP cold start (load + first tools/list), ${v.label}`, total(`mcp:${v.key}`), 'bare MCP SDK server, classic zod, esbuild defaults', base);
    }
    const sizeRow = (name: string, subject: number, baselineName: string, baselineBytes: number) =>
      bench.row({ name, median: kib(subject), p90: '-', baseline: baselineName, baselineMedian: kib(baselineBytes), ratio: ratio(subject, baselineBytes) });
    for (const v of variantResults) sizeRow(`MCP bundle, ${v.label}`, v.mcpBundleBytes, `budget ${kib(BUNDLE_BUDGET_BYTES.mcp)}`, BUNDLE_BUDGET_BYTES.mcp);
    for (const v of variantResults)
      sizeRow(`delivery bundle, ${v.label}`, v.deliveryBundleBytes, `budget ${kib(BUNDLE_BUDGET_BYTES.delivery)}`, BUNDLE_BUDGET_BYTES.delivery);
    sizeRow('bare MCP SDK server bundle (the cold start baseline)', baseline.bytes, 'MCP bundle as deployed', deployed.mcp.bytes);
    sizeRow(
      'MCP index.js alone, as deployed (what a cold start parses; mcp-storage.js waits for storage)',
      deployed.mcp.indexBytes,
      'MCP bundle as deployed',
      deployed.mcp.bytes,
    );
    const last = variantResults.at(-1)!;
    const paired = stats(pairRatios);
    bench.row({
      name: `MCP cold start as deployed / baseline, back-to-back pairs (n=${paired.n}; target ≤ 1.25×)`,
      median: `${paired.median.toFixed(2)}×`,
      p90: `${paired.p90.toFixed(2)}×`,
      baseline: 'ratio of the medians above',
      baselineMedian: `${last.coldStartRatio.toFixed(2)}×`,
      ratio: `${paired.median.toFixed(2)}×`,
    });
    const chunkLoad = stats(samples.get('mcp:deployed')!.flatMap((x) => (x.thenMs === undefined ? [] : [x.thenMs])));
    bench.row({
      name: `first request that needs storage, once per cold start: loading mcp-storage.js and its clients (n=${chunkLoad.n})`,
      median: ms(chunkLoad.median),
      p90: ms(chunkLoad.p90),
      baseline: 'MCP cold start as deployed',
      baselineMedian: ms(last.coldStartMs),
      ratio: ratio(chunkLoad.median, last.coldStartMs),
    });
    bench.timeRow(
      'delivery cold start (load + empty batch), as deployed',
      total('delivery:deployed'),
      'the same, before the bundle tuning',
      total('delivery:before'),
    );

    const SDK = /node_modules\/@modelcontextprotocol\//;
    const sdkInDelivery = inputsMatching(deployed.delivery, SDK).length > 0 || deployed.delivery.text.includes('@modelcontextprotocol');
    bench.row({
      name: "delivery bundle contains '@modelcontextprotocol' (must be no)",
      median: sdkInDelivery ? 'yes' : 'no',
      p90: '-',
      baseline: '-',
      baselineMedian: '-',
      ratio: '-',
    });

    bench.record({
      mcpBundleBytes: deployed.mcp.bytes,
      deliveryBundleBytes: deployed.delivery.bytes,
      baselineBundleBytes: baseline.bytes,
      coldStartMs: last.coldStartMs,
      baselineColdStartMs: base.median,
      // The headline: the median of the per-round ratios of the back-to-back pair (noise of a shared
      // machine hits both sides of a pair alike); the ratio of the two medians is kept next to it.
      coldStartRatio: paired.median,
      coldStartRatioOfMedians: last.coldStartRatio,
      coldStartSamples: base.n,
      deliveryColdStartMs: last.deliveryColdStartMs,
      mcpIndexBytes: deployed.mcp.indexBytes,
      storageChunkLoadMs: chunkLoad.median,
      budgets: { mcpBundleBytes: BUNDLE_BUDGET_BYTES.mcp, deliveryBundleBytes: BUNDLE_BUDGET_BYTES.delivery, coldStartRatio: 1.25 },
      coldStartVariants: variantResults,
    });
    bench.note(
      `bundles: built with lib/bundling.ts's options (the stack's) into the asset layout; cold start = require(index.js) + first invocation, timed in a fresh ${nodeVersion} process (${node.isLambdaMajor ? 'the Lambda runtime major' : `not the Lambda runtime's major, Node ${LAMBDA_RUNTIME_MAJOR}: test/tools has none for this machine`}) with the synthesized environment, Lambda's own variables and a fake Secrets Manager on 127.0.0.1; the baseline gets the same tools/list as a web Request.`,
    );
    bench.note(
      `bundles: as deployed, MCP load ${ms(last.loadMs)} + first request ${ms(last.firstRequestMs)}; before the bundle tuning ${ms(variantResults[0]!.loadMs)} + ${ms(variantResults[0]!.firstRequestMs)}; baseline ${ms(part('baseline', 'loadMs'))} + ${ms(part('baseline', 'firstRequestMs'))}. Source maps (written, not loaded): ${kib(statSync(`${deployed.mcp.file}.map`).size)} (mcp), ${kib(statSync(`${deployed.delivery.file}.map`).size)} (delivery).`,
    );
  },
};
