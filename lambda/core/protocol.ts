/**
 * Every protocol constant dm-dot uses: names, methods, error codes, failure reasons, header names
 * and limits. One module so that the wire contract (docs/contract) can be read in one place and no
 * literal is spelled twice.
 *
 * Deliberately not here: behaviour. Nothing in this module computes anything.
 */

export const SERVER_NAME = 'dm-dot';
export const TOOL_NAME = 'send_to_dot';
export const EVENT_NAME = 'message.created';

/** The routes of the HTTP surface (docs/contract/http.md); the pup door's are PupRoutes below. */
export const Routes = {
  mcp: '/mcp',
  messages: '/v1/messages',
  health: '/healthz',
  /** Local runtime only, loopback only, with the admin token (docs/contract/local-runtime.md). */
  admin: '/admin',
} as const;

/** The local runtime's admin routes, shared by the server and the operator CLI. */
export const AdminRoutes = {
  events: '/admin/events',
  subscription: '/admin/subscription',
  redrive: '/admin/redrive',
  status: '/admin/status',
  key: '/admin/key',
  senders: '/admin/senders',
} as const;

/** The stateless MCP revision; the legacy era is whatever the SDK negotiates on `initialize`. */
export const MCP_PROTOCOL_VERSION = '2026-07-28';
/**
 * The legacy (`initialize`) revisions dm-dot serves, newest first: a client that asks for another
 * (the SDK also knows 2024-11-05 and 2024-10-07) is offered the first of these instead.
 */
export const LEGACY_PROTOCOL_VERSIONS: readonly string[] = ['2025-11-25', '2025-06-18', '2025-03-26'];
/** The one revision whose transport takes JSON-RPC batches, also that of a POST without `MCP-Protocol-Version` (MCP-15). */
export const BATCH_PROTOCOL_VERSION = '2025-03-26';
/** Per-request `_meta` keys of MCP 2026-07-28 that every stateless request carries. */
export const PROTOCOL_VERSION_META_KEY = 'io.modelcontextprotocol/protocolVersion';
export const CLIENT_INFO_META_KEY = 'io.modelcontextprotocol/clientInfo';
/** Request headers of the 2026-07-28 era (lower case, as node and API Gateway present them). */
export const McpHeaders = { protocolVersion: 'mcp-protocol-version', method: 'mcp-method', name: 'mcp-name', sessionId: 'mcp-session-id' } as const;

/**
 * The one CORS policy of the MCP and message endpoints, for the origins the operator allows: the
 * local app answers it (lambda/http/app.ts) and API Gateway answers it on AWS
 * (lib/constructs/http-api.ts, whose headers replace the app's there). GET and DELETE pass the
 * preflight so that a browser client reads the 405 that says "no stream, no session" instead of
 * failing on CORS.
 */
export const CorsPolicy = {
  allowMethods: ['GET', 'POST', 'DELETE'],
  allowHeaders: [
    'authorization',
    'content-type',
    'accept',
    McpHeaders.protocolVersion,
    McpHeaders.method,
    McpHeaders.name,
    McpHeaders.sessionId,
    'last-event-id',
    'idempotency-key',
  ],
  /** Response headers a browser script may read. */
  exposeHeaders: [McpHeaders.sessionId, McpHeaders.protocolVersion, 'www-authenticate', 'x-request-id'],
  maxAgeS: 3600,
} as const;

export const Methods = {
  eventsList: 'events/list',
  eventsSubscribe: 'events/subscribe',
  eventsUnsubscribe: 'events/unsubscribe',
  /** The three methods of the MCP Tasks extension (see TASKS_EXTENSION). */
  tasksGet: 'tasks/get',
  tasksUpdate: 'tasks/update',
  tasksCancel: 'tasks/cancel',
} as const;

/**
 * The MCP Tasks extension of MCP 2026-07-28 (SEP-2663), as published in
 * https://github.com/modelcontextprotocol/experimental-ext-tasks (specification/draft/tasks.md):
 * a client declares it in its per-request client capabilities, a server advertises it in its
 * capabilities' `extensions`; both as an empty object.
 */
export const TASKS_EXTENSION = 'io.modelcontextprotocol/tasks';
/** The per-request `_meta` key (MCP 2026-07-28) that carries the client's capabilities. */
export const CLIENT_CAPABILITIES_META_KEY = 'io.modelcontextprotocol/clientCapabilities';
/** `resultType` of a tools/call answered with a task instead of a tool result (the extension's CreateTaskResult). */
export const TASK_RESULT_TYPE = 'task';
export const TASK_ID_PREFIX = 'task_';

/** JSON-RPC error codes dm-dot answers with. */
export const ErrorCodes = {
  parseError: -32700,
  invalidRequest: -32600,
  methodNotFound: -32601,
  invalidParams: -32602,
  internalError: -32603,
  /** Another callback holds the single live subscription. */
  subscriptionConflict: -32000,
  /** The callback challenge failed; data.reason says how. */
  callbackEndpointError: -32015,
  headerMismatch: -32020,
  /** MCP 2026-07-28 Missing Required Client Capability; the Tasks extension uses it for tasks/* from a client that did not declare it. */
  missingRequiredClientCapability: -32021,
  unsupportedProtocolVersion: -32022,
} as const;

/** The events profiles (docs/contract/events.md, EV-PROF-1..5), chosen with DMDOT_EVENTS_PROFILE (CDK context `eventsProfile`). */
export const EVENTS_PROFILES = ['chatgpt', 'sep-3415'] as const;
export type EventsProfileName = (typeof EVENTS_PROFILES)[number];
export const DEFAULT_EVENTS_PROFILE: EventsProfileName = 'chatgpt';

export interface EventsProfile {
  codes: { notFound: number; forbidden: number; resourceExhausted: number; unsupported: number; callbackEndpointError: number };
  /** `events/unsubscribe` of a subscription that does not exist answers NotFound (else `complete`). */
  unsubscribeNotFound: boolean;
  /** An unknown event name answers NotFound with `data.kind: "event"` (else -32602). */
  unknownEventNotFound: boolean;
  /** A `ttlMs` below Limits.ttlMinMs is raised to it (else refused with -32602). */
  clampShortTtl: boolean;
}

export const EventsProfiles: Readonly<Record<EventsProfileName, EventsProfile>> = {
  chatgpt: {
    codes: { notFound: -32011, forbidden: -32012, resourceExhausted: -32013, unsupported: -32014, callbackEndpointError: -32015 },
    unsubscribeNotFound: false,
    unknownEventNotFound: false,
    clampShortTtl: false,
  },
  'sep-3415': {
    codes: { notFound: -32023, forbidden: -32024, resourceExhausted: -32025, unsupported: -32026, callbackEndpointError: -32027 },
    unsubscribeNotFound: true,
    unknownEventNotFound: true,
    clampShortTtl: true,
  },
};

/**
 * Sender keys and the connector key's rotation (docs/contract/http.md): a sender key is
 * `dmsk_<name>_<43 base64url characters: 32 random bytes>`; the name routes the lookup to its
 * SENDER# item without a scan, the random part is what authenticates (compared by hash).
 */
export const SENDER_KEY_PREFIX = 'dmsk_';
/** The name a sender carries in its key and its item: lower-case letters, digits and dashes. */
export const SENDER_NAME_PATTERN = /^[a-z0-9][a-z0-9-]{0,31}$/;
/** The `sender` an event records when the connector key sent it. */
export const CONNECTOR_SENDER = 'connector';
/** The `sender` an event records when it came through the pup door, and the scope of pup's idempotency keys (callId). */
export const PUP_SENDER = 'pup';
/** The sender of dm-dot's own events (the announcement of waiting messages). */
export const DMDOT_SENDER = 'dm-dot';
/** Names no sender key may take: the log gives them to the connector key, pup and dm-dot itself. */
export const RESERVED_SENDER_NAMES = [CONNECTOR_SENDER, PUP_SENDER, DMDOT_SENDER] as const;

export const AccessLimits = {
  /** A sender's lastUsedAt is rewritten at most this often: a send is not a write. */
  senderLastUsedRefreshMs: 60 * 1000,
  /** The rate window: fixed, one counter item per sender per minute. */
  rateWindowMs: 60 * 1000,
  /** A counter item outlives its window by this much, then TTL removes it. */
  rateCounterGraceMs: 60 * 1000,
  /** How long a served app trusts the DEPLOYMENT item it read (the connector keys in force and the overlap's end). */
  deploymentCacheMs: 10 * 1000,
  /** A key the cached item refuses reads it again, at most this often: a key rotated in moments ago works at once. */
  deploymentRecheckMs: 1000,
  /** The longest overlap a rotation may keep the previous connector key for. */
  maxOverlapMs: 7 * 24 * 60 * 60 * 1000,
  maxSenderRate: 100_000,
} as const;

/** The message of a -32015 error; the reason travels in data. */
export const CALLBACK_ENDPOINT_ERROR_MESSAGE = 'CallbackEndpointError';

// FailureReasons, EventStatus and DeadLetterReason are defined in ports.ts, beside the records that
// store them, so that the ports import nothing of ours; as part of the wire contract they are here too.
import { EventStatus, FailureReasons, type DeadLetterReason, type FailureReason } from '../ports';
export { EventStatus, FailureReasons, type DeadLetterReason, type FailureReason };

/** Standard Webhooks and MCP Events header names (lower case: HTTP header names are case-insensitive). */
export const WebhookHeaders = {
  id: 'webhook-id',
  timestamp: 'webhook-timestamp',
  signature: 'webhook-signature',
  subscriptionId: 'x-mcp-subscription-id',
} as const;

export const SECRET_PREFIX = 'whsec_';
export const SIGNATURE_VERSION = 'v1';
export const SUBSCRIPTION_ID_PREFIX = 'sub_';
export const EVENT_ID_PREFIX = 'evt_';
export const VERIFICATION_ID_PREFIX = 'msg_verification_';

export const SECOND = 1000;
export const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;

export const Limits = {
  messageMaxBytes: 16_384,
  requestBodyMaxBytes: 1024 * 1024,
  outboundBodyMaxBytes: 256 * 1024,
  outboundDeadlineMs: 5 * SECOND,
  outboundResponseMaxBytes: 1024 * 1024,
  callbackUrlMaxChars: 2048,
  /** Shorter than this, an API key is refused: it could be guessed. */
  apiKeyMinChars: 16,
  /** Shorter than this, an API key is accepted with a warning (the generated ones have 43). */
  apiKeyRecommendedChars: 32,
  secretMinBytes: 24,
  secretMaxBytes: 64,
  ttlMinMs: 60 * SECOND,
  ttlDefaultMs: 7 * DAY,
  ttlMaxMs: 7 * DAY,
  rotationOverlapMs: 10 * MINUTE,
  verificationCacheMs: 24 * HOUR,
  inboundSignatureToleranceS: 5 * 60,
  /** Inclusive: a claim made at t holds through t + 10 min, the last instant the 5-minute timestamp window (either way) can accept the same request. */
  replayMemoryMs: 10 * MINUTE,
  /** How long an idempotency key remembers the event it made (docs/contract: idempotency keys). */
  idempotencyMemoryMs: 24 * HOUR,
  /** An idempotency key: 1..255 printable ASCII characters. */
  idempotencyKeyMaxChars: 255,
  /** get_pending_messages: page size 1..50, 10 when not given; acknowledge_messages: 1..50 ids. */
  inboxPageMax: 50,
  inboxPageDefault: 10,
  acknowledgeMax: 50,
  /** How long a claim of an inbound webhook-id holds while its request is answered, before a retry may take it over (docs/pup.md). */
  replayLeaseMs: 10 * SECOND,
  /** How long the answer to a pup event delivery is kept for its retries (docs/pup.md). */
  pupEventAnswerMs: 3 * DAY,
  /** Event records outlive every copy of their job (docs/decisions.md, "Event records live 15 days, not 7"). */
  eventRecordMs: 15 * DAY,
  /** While deliveries keep succeeding, the subscription's `lastDeliveryAt` is rewritten at most this often (DEL-PIPE-20). */
  deliveryStatusRefreshMs: MINUTE,
  /** DynamoDB may delete a subscription item this long after it expired (reads check expiry first). */
  subscriptionItemGraceMs: DAY,
  deliveryWaitDefaultMs: 3 * SECOND,
  /** The wait for an outcome never holds a request longer than this. */
  deliveryWaitMaxMs: 4 * SECOND,
  /** No MCP or REST request takes longer than this, on AWS or locally (docs/contract/delivery.md and pup.md). */
  requestMs: 5 * SECOND,
  /** JSON nested deeper than this is refused before any parser or schema walks it. */
  jsonMaxDepth: 64,
  deadLetterRetentionDays: 14,
} as const;

/** Seconds after the first attempt: 6 attempts in about 13 minutes. */
export const DEFAULT_RETRY_DELAYS_S: readonly number[] = [1, 4, 30, 120, 600];

/**
 * Suggested `pollIntervalMs` of a task, by the age of its event. The first retries come after
 * 1 s and 4 s, later ones after 30 s, 2 min and 10 min (DEFAULT_RETRY_DELAYS_S), so polling
 * faster than the schedule can change the answer would only cost reads.
 */
export const TASK_POLL_INTERVALS: readonly { untilAgeMs: number; pollMs: number }[] = [
  { untilAgeMs: 10 * SECOND, pollMs: SECOND },
  { untilAgeMs: 2 * MINUTE, pollMs: 5 * SECOND },
  { untilAgeMs: Number.POSITIVE_INFINITY, pollMs: 30 * SECOND },
];

/** The one event dm-dot publishes, as `events/list` returns it. */
export const MESSAGE_CREATED_DEFINITION = {
  name: EVENT_NAME,
  description: 'A new message addressed to the single configured dot.',
  delivery: ['webhook'],
  inputSchema: { type: 'object', properties: {}, additionalProperties: false },
  payloadSchema: {
    type: 'object',
    properties: { message: { type: 'string' } },
    required: ['message'],
    additionalProperties: false,
  },
} as const;

/** Capabilities for legacy `initialize` (docs/contract/mcp.md); the 2026-07-28 era adds the Tasks extension. */
export const SERVER_CAPABILITIES = {
  tools: { listChanged: false },
  events: {},
  extensions: { 'io.modelcontextprotocol/events': {} },
} as const;

/** Capabilities for `server/discover` (2026-07-28): also the Tasks extension (docs/decisions.md, "Tasks on 2026-07-28 only"). */
export const MODERN_SERVER_CAPABILITIES = {
  ...SERVER_CAPABILITIES,
  extensions: { ...SERVER_CAPABILITIES.extensions, [TASKS_EXTENSION]: {} },
} as const;

/**
 * The pup door (docs/contract/pup.md): routes, the codes of its refusals, the context key of `_meta`, the
 * member events it knows. pup signs every request with Standard Webhooks (same header names and
 * `v1,` scheme as WebhookHeaders / SIGNATURE_VERSION above).
 */
export const PupRoutes = {
  manifest: '/pup/manifest.json',
  mcp: '/pup/mcp',
  challenge: '/pup/challenge',
  events: '/pup/events',
} as const;

/** The only codes a refused (401) pup request ever gets; nothing else is said about why. */
export const PupRefusals = {
  invalidSignature: 'invalid_signature',
  staleTimestamp: 'stale_timestamp',
  replayed: 'replayed',
} as const;
export type PupRefusal = (typeof PupRefusals)[keyof typeof PupRefusals];

/** The `_meta` key under which pup sends its invocation context (installation, asker, channel). */
export const PUP_CONTEXT_META_KEY = 'io.puphq/context';

/**
 * Where OAuth clients look for metadata after a 401 (RFC 9728 protected resource metadata, RFC 8414
 * authorization server metadata, each with and without the MCP endpoint's path): dm-dot answers
 * them with a 404 that says it takes an API key.
 */
export const OAUTH_DISCOVERY_PATHS: ReadonlySet<string> = new Set([
  '/.well-known/oauth-protected-resource',
  '/.well-known/oauth-protected-resource/mcp',
  '/.well-known/oauth-authorization-server',
  '/.well-known/oauth-authorization-server/mcp',
]);

/** Member events dm-dot understands on `/pup/events`; any other type is answered `{}` and logged. */
export const PupMemberEvents = ['member.joined', 'member.left'] as const;

/** At most this many pup signing secrets are configured: the current one and the previous one. */
export const PUP_MAX_SECRETS = 2;

// ---- Idempotency keys, read receipts and the inbox (docs/contract/http.md, mcp.md) -------------

/** The request header of an idempotency key on `POST /v1/messages` (lower case, as received). */
export const IDEMPOTENCY_KEY_HEADER = 'idempotency-key';
/** How long a first request holds its key `in_progress` before a retry may look at what it did (docs/decisions.md). */
export const IDEMPOTENCY_LEASE_MS = 2 * Limits.requestMs;
/** The inbox's tools (docs/contract/mcp.md): the connector key sees them, with the inbox on. */
export const INBOX_TOOLS = { pending: 'get_pending_messages', acknowledge: 'acknowledge_messages' } as const;
/** How many pending messages the announcement counts before it says "more than". */
export const ANNOUNCE_COUNT_MAX = 100;
