/**
 * The MCP function (docs/contract: http, mcp, events, pup): every HTTP route of the API reaches it. It authenticates,
 * speaks MCP, manages the subscription, builds and records each event, enqueues it and makes the
 * first attempt inline; it serves pup's routes and the manifest.
 *
 * Its environment is the contract of lambda/config/settings.ts `mcpLambdaSettings`, checked against
 * Lambda's 4 KB limit (lib/lambda-environment.ts). The pup manifest travels in the code asset
 * (handler-function.ts) and the environment only names it; with none configured, neither exists and
 * the function serves its default manifest.
 *
 * Grants: every item action on the table but Scan and Query, on any item. It touches every kind of
 * item the table holds (lambda/core/store/items.ts), so a `dynamodb:LeadingKeys` list would name the
 * whole key space: it would deny nothing today and would turn the next kind of item into a failure
 * that shows only on AWS. Nothing on the dead-letter queue.
 *
 * It extends HandlerFunction rather than wrapping one, so that its resources keep the paths, and
 * the logical IDs, the first deployments gave them (`Mcp/Function`, `Mcp/Role`, `Mcp/Logs`).
 *
 * Deliberately not here: `DMDOT_ALLOW_LOOPBACK_CALLBACKS` (docs/contract/outbound-guard.md: local runtime only), any secret
 * value (only the secrets' ARNs are in the environment), and the routes (http-api.ts).
 */
import { Duration } from 'aws-cdk-lib';
import { PendingIndex } from '../../lambda/core/store/items';
import type { Construct } from 'constructs';
import { AFTER_RESPONSE_CHUNK, AFTER_RESPONSE_NODE_OPTIONS, MCP_STORAGE_CHUNK } from '../bundling';
import { assertEnvironmentFits } from '../lambda-environment';
import type { DmDotSettings } from '../settings';
import type { DeliveryPipeline } from './delivery-pipeline';
import { HandlerFunction } from './handler-function';
import type { Secrets } from './secrets';
import type { Storage } from './storage';

/** The manifest's name inside the asset, and the value of PUP_MANIFEST_FILE. */
export const PUP_MANIFEST_ASSET_FILE = 'pup-manifest.json';

export class McpFunction extends HandlerFunction {
  /** The environment's size as Lambda measures it (each reference at 256 bytes), in bytes. */
  readonly environmentBytes: number;

  constructor(scope: Construct, id: string, props: { storage: Storage; delivery: DeliveryPipeline; secrets: Secrets; settings: DmDotSettings }) {
    const { settings } = props;
    const environment: Record<string, string> = {
      TABLE_NAME: props.storage.table.tableName,
      QUEUE_URL: props.delivery.queue.queueUrl,
      API_KEY_SECRET_ARN: props.secrets.apiKey.secretArn,
      PUP_SECRET_ARN: props.secrets.pupSigningSecrets.secretArn,
      DMDOT_DELIVERY_WAIT_MS: String(settings.deliveryWaitMs),
      // The inline first attempt times attempt 2 from the schedule (docs/contract/delivery.md).
      DMDOT_RETRY_DELAYS: settings.retryDelaysS.join(','),
      DMDOT_TTL_DEFAULT_MS: String(settings.ttlDefaultMs),
      DMDOT_TTL_MAX_MS: String(settings.ttlMaxMs),
      DMDOT_ALLOWED_ORIGINS: settings.allowedOrigins.join(','),
      ...(settings.pupManifest ? { PUP_MANIFEST_FILE: PUP_MANIFEST_ASSET_FILE } : {}),
      // The after-response extension (lib/bundling.ts, AFTER_RESPONSE_CHUNK).
      NODE_OPTIONS: AFTER_RESPONSE_NODE_OPTIONS,
      // Only when it differs from the functions' default, so a default stack's template is unchanged.
      ...(settings.eventsProfile !== 'chatgpt' ? { DMDOT_EVENTS_PROFILE: settings.eventsProfile } : {}),
      ...(settings.inbox ? { DMDOT_INBOX: '1' } : {}),
    };
    // HandlerFunction adds nothing to it (source maps are not loaded at run time). Only allowedOrigins can make it too big.
    const environmentBytes = assertEnvironmentFits('MCP', environment, { DMDOT_ALLOWED_ORIGINS: 'allowedOrigins' });
    super(scope, id, {
      entry: 'lambda/handlers/mcp.ts',
      description: 'dm-dot: MCP endpoint, send_to_dot and MCP Events subscriptions',
      memorySize: 512,
      // The request's 5 s, plus what runs after its answer: an inline attempt the caller stopped waiting
      // for has its POST's 5 s and the writes after it (lambda/handlers/after-response.ts).
      timeout: Duration.seconds(15),
      logRetention: settings.logRetention,
      environment,
      chunks: [MCP_STORAGE_CHUNK, AFTER_RESPONSE_CHUNK],
      ...(settings.pupManifest ? { assetFiles: { [PUP_MANIFEST_ASSET_FILE]: settings.pupManifest.file } } : {}),
    });
    this.environmentBytes = environmentBytes;

    props.storage.grantItems(this.role, ['dynamodb:GetItem', 'dynamodb:PutItem', 'dynamodb:UpdateItem', 'dynamodb:DeleteItem']);
    // get_pending_messages reads the inbox's index; without the inbox nothing reads it.
    if (settings.inbox) props.storage.grantIndexQuery(this.role, PendingIndex.name);
    props.delivery.queue.grantSendMessages(this.role);
    props.secrets.apiKey.grantRead(this.role);
    props.secrets.pupSigningSecrets.grantRead(this.role);
  }
}
