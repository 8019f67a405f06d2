/**
 * The pup door (docs/contract/pup.md): `GET /pup/manifest.json` and `POST /pup/mcp|challenge|events`,
 * reached from app.ts after its Host and Origin checks. A POST's headers are all checked before a
 * byte of its body is read, the body is read once with the HMAC computed as it streams in, and only
 * a verified body is parsed (docs/decisions.md, "Refusals" and "pup's signature is checked as the
 * body streams"). Past `maxBodiesInFlight` a request is answered 503 at once, so a flood of slow
 * forged bodies cannot hold the memory while it waits to be refused.
 *
 * `/pup/mcp` and `/pup/challenge` run at most once per webhook-id (`once` below); `/pup/mcp` goes to
 * the `/mcp` server factory, 2026-07-28 only, as PUP_PRINCIPAL (its context is logged as ids and
 * grants nothing). A repeated `/pup/events` id gets the answer stored for it (PUP-11).
 *
 * Deliberately not here: the API key (pup may not use it instead of a signature; it is stripped),
 * CORS (pup calls server to server), and where the secrets come from (`PupConfig.secrets`).
 */
import { createHash, randomBytes } from 'node:crypto';
import type { Identity } from '../core/access';
import { describeCause, watchingUnavailable } from '../core/answers';
import { DependencyUnavailable } from '../core/errors';
import { checkInboundHeaders, createInboundVerifier, type InboundSecrets } from '../core/inbound';
import { scanJsonText } from '../core/json-text';
import { challengeAnswer, defaultPupManifest, parsePupEvent, pupContextOf, PUP_PRINCIPAL } from '../core/pup';
import { ErrorCodes, Limits, PUP_SENDER, PupRefusals, PupRoutes, WebhookHeaders, type PupRefusal } from '../core/protocol';
import { createMcpEndpoint, type Caller, type McpDeps } from '../mcp/server';
import { timeOfDay, type InboundAnswer } from '../ports';
import {
  declaredTooLarge,
  forwarded,
  getOnly,
  type HttpRequest,
  isJsonContentType,
  json,
  jsonText,
  parseJson,
  readStream,
  restError,
  restUnavailable,
  rpcError,
} from './json';

export interface PupConfig {
  /** The signing secrets in force now, asked per request (a rotation needs no deploy). None: the POST routes answer 503. */
  secrets?: () => Promise<InboundSecrets | undefined>;
  /** The manifest's exact text (already validated as a JSON object); undefined: the default one. */
  manifest?: string;
  /** Bodies read at once; past it a POST is answered 503 before its body is read. Default: no cap. */
  maxBodiesInFlight?: number;
}

const PATHS: ReadonlySet<string> = new Set(Object.values(PupRoutes));

export function isPupPath(pathname: string): boolean {
  return PATHS.has(pathname);
}

const REFUSAL_MESSAGES: Record<PupRefusal, string> = {
  invalid_signature: 'The request does not carry a valid pup signature.',
  stale_timestamp: 'The webhook-timestamp is more than 5 minutes away from the server time.',
  replayed: 'This webhook-id was already used.',
};

/** What a processed request's claim keeps (Store.settleReplayId): the refusal, as a marker that it was processed. */
const REPLAYED_ANSWER: InboundAnswer = { status: 401, body: JSON.stringify({ error: { code: PupRefusals.replayed, message: REFUSAL_MESSAGES.replayed } }) };

/** A POST whose signature checked out: its webhook-id (`loggedId` is the bounded form logged), when it was checked, its request id. */
type Signed = { webhookId: string; loggedId: string; now: number; requestId: string };

export function createPupDoor(deps: McpDeps, config: PupConfig) {
  // Requests whose MCP answer hid a failed dependency (seen by its log line): not settled as processed.
  const dependencyFailed = new Set<string>();
  const log = watchingUnavailable(deps.log, (fields) => {
    if (typeof fields?.requestId === 'string') dependencyFailed.add(fields.requestId);
  });
  const mcp = createMcpEndpoint({ ...deps, log }, { legacy: 'reject' });
  const manifest = config.manifest ?? JSON.stringify(defaultPupManifest(deps.version));
  const storageUnavailable = (requestId: string, route: string, error: unknown) =>
    restUnavailable(
      deps.log,
      error instanceof DependencyUnavailable ? error : new DependencyUnavailable('storage', { cause: error }),
      requestId,
      `POST ${route}`,
    );
  const maxBodies = config.maxBodiesInFlight ?? Number.POSITIVE_INFINITY;
  let bodiesInFlight = 0;

  async function handle(request: HttpRequest, url: URL, requestId: string): Promise<Response> {
    if (url.pathname === PupRoutes.manifest) return getOnly(request) ?? jsonText(200, manifest);
    const secrets = config.secrets ? await config.secrets() : undefined;
    if (!secrets || secrets.secrets.length === 0) {
      return restError(503, 'not_configured', 'pup signing secrets are not configured; the pup door cannot accept requests.');
    }
    if (request.method !== 'POST') return restError(405, 'method_not_allowed', 'Method not allowed: use POST.', { allow: 'POST' });
    if (!isJsonContentType(request.headers.get('content-type'))) return restError(415, 'unsupported_media_type', 'Content-Type must be application/json.');
    if (declaredTooLarge(request, Limits.requestBodyMaxBytes))
      return restError(413, 'payload_too_large', `Request body is over ${Limits.requestBodyMaxBytes} bytes.`);

    // The time of day, as pup's timestamp window and the replay memory that must agree with it (LIM-9).
    const now = timeOfDay(deps.clock);
    const checked = checkInboundHeaders(
      secrets,
      {
        id: request.headers.get(WebhookHeaders.id),
        timestamp: request.headers.get(WebhookHeaders.timestamp),
        signature: request.headers.get(WebhookHeaders.signature),
      },
      now,
    );
    if (!checked.ok) return restError(401, checked.refusal, REFUSAL_MESSAGES[checked.refusal]);
    if (bodiesInFlight >= maxBodies) {
      return restError(503, 'busy', 'Too many pup requests are being read at once; try again in a second.', { 'retry-after': '1' });
    }
    bodiesInFlight++;
    let body: Uint8Array | undefined;
    const verifier = createInboundVerifier(checked);
    try {
      body = await readStream(request, Limits.requestBodyMaxBytes, (chunk) => verifier.update(chunk));
    } finally {
      bodiesInFlight--;
    }
    if (!body) return restError(413, 'payload_too_large', `Request body is over ${Limits.requestBodyMaxBytes} bytes.`);
    const verdict = verifier.verdict();
    if (!verdict.ok) return restError(401, verdict.refusal, REFUSAL_MESSAGES[verdict.refusal]);
    if (scanJsonText(body).tooDeep) {
      const why = `The body nests objects or arrays deeper than ${Limits.jsonMaxDepth} levels.`;
      if (url.pathname === PupRoutes.mcp) return rpcError(400, ErrorCodes.invalidParams, why);
      return restError(400, url.pathname === PupRoutes.events ? 'invalid_envelope' : 'invalid_challenge', why);
    }
    // Signed by pup, but logged: keep a line bounded whatever length pup chose.
    const signed: Signed = { webhookId: verdict.webhookId, loggedId: verdict.webhookId.slice(0, 128), now, requestId };
    // The verifier has checked that the body is UTF-8; this decoding cannot fail.
    const bodyText = new TextDecoder('utf-8', { ignoreBOM: true }).decode(body);

    if (url.pathname === PupRoutes.events) return events(bodyText, signed);

    return once(url, signed, body, () =>
      url.pathname === PupRoutes.challenge ? Promise.resolve(challenge(bodyText)) : mcpCall(request, url, body, bodyText, requestId),
    );
  }

  function challenge(bodyText: string): Response {
    const answer = challengeAnswer(bodyText);
    return answer.ok ? jsonText(200, answer.body) : restError(400, 'invalid_challenge', answer.message);
  }

  /** `/pup/mcp` and `/pup/challenge`: the work runs at most once per webhook-id, as PUP-10, PUP-21 and PUP-22 say. */
  async function once(url: URL, signed: Signed, body: Uint8Array, work: () => Promise<Response>): Promise<Response> {
    const { webhookId, loggedId, now, requestId } = signed;
    const token = randomBytes(16).toString('hex');
    // What makes a retry the same request: its route and its exact bytes (the signature's headers differ).
    const fingerprint = `POST ${url.pathname} ${createHash('sha256').update(body).digest('base64url')}`;
    let claim;
    try {
      claim = await deps.store.claimReplayId(webhookId, now, token, fingerprint);
    } catch (error) {
      // Nothing was processed; a claim this write may still have made lapses with its lease.
      return storageUnavailable(requestId, url.pathname, error);
    }
    if (!claim.claimed) {
      // Processed already, or the id was used for another request: a replay, refused.
      if (!claim.sameRequest || claim.answer) {
        deps.log.info('pup_request_replayed', { requestId, webhookId: loggedId, route: url.pathname, processed: claim.answer !== undefined });
        return restError(401, PupRefusals.replayed, REFUSAL_MESSAGES.replayed);
      }
      return restError(503, 'in_progress', 'A request with this webhook-id is still being answered; try again in a second.', { 'retry-after': '1' });
    }
    let response: Response;
    let bodyText: string;
    try {
      response = await work();
      bodyText = await response.text();
    } catch (error) {
      dependencyFailed.delete(requestId);
      await settle(signed, token, undefined);
      throw error;
    }
    const failed = dependencyFailed.delete(requestId) || response.status >= 400;
    // Settled with the refusal its replays get, never its answer: nothing of it can be handed out again.
    await settle(signed, token, failed ? undefined : REPLAYED_ANSWER);
    return new Response(bodyText, { status: response.status, headers: response.headers });
  }

  async function settle({ webhookId, loggedId, requestId }: Signed, token: string, kept: InboundAnswer | undefined): Promise<void> {
    try {
      await deps.store.settleReplayId(webhookId, token, kept);
    } catch (error) {
      // The answer stands; the claim lapses with its lease, and a retry after it is processed again.
      deps.log.warn('pup_claim_not_settled', { requestId, webhookId: loggedId, kept: kept !== undefined, cause: describeCause(error) });
    }
  }

  async function mcpCall(request: HttpRequest, url: URL, body: Uint8Array, bodyText: string, requestId: string): Promise<Response> {
    // Undefined when malformed: the SDK answers it (-32700) exactly as on /mcp.
    const message = parseJson(bodyText);
    const context = pupContextOf(message);
    const rpc = message as { id?: unknown; method?: unknown } | undefined;
    const method = typeof rpc?.method === 'string' ? rpc.method.slice(0, 64) : undefined;
    if (context.kind === 'invalid') {
      deps.log.warn('pup_context_invalid', { requestId, method });
      const id = typeof rpc?.id === 'string' || typeof rpc?.id === 'number' ? rpc.id : null;
      // HTTP 200, as the SDK answers every other -32602 on 2026-07-28: an in-band JSON-RPC error.
      return json(200, { jsonrpc: '2.0', id, error: { code: ErrorCodes.invalidParams, message: context.message } });
    }
    deps.log.info('pup_request', { requestId, method, context: context.kind === 'ok' ? context.ids : 'absent' });

    // pup's callId is the idempotency key of its send_to_dot: a call pup makes again makes no second event.
    const callId = context.kind === 'ok' ? context.ids.callId : undefined;
    // A door with a fixed principal and sender name of its own: it may do what the connector does.
    const identity: Identity = { role: 'connector', sender: PUP_SENDER, principal: async () => PUP_PRINCIPAL };
    const extra = { identity, requestId, door: 'pup' as const, ...(callId !== undefined ? { idempotencyKey: callId } : {}) } satisfies Caller;
    return mcp.fetch(forwarded(request, url, body, ['authorization']), { authInfo: { token: 'pup-signature', clientId: 'pup', scopes: [], extra } });
  }

  async function events(bodyText: string, { webhookId, loggedId, now, requestId }: Signed): Promise<Response> {
    const value = parseJson(bodyText);
    if (value === undefined) return restError(400, 'invalid_json', 'The body is not valid JSON.');
    const parsed = parsePupEvent(value, webhookId);
    if (!parsed.ok) return restError(400, parsed.code, parsed.message);

    const answer = { status: 200, body: '{}' };
    let result;
    try {
      result = await deps.store.putInboundAnswer(webhookId, answer, now);
    } catch (error) {
      return storageUnavailable(requestId, PupRoutes.events, error);
    }
    if (!result.stored) {
      deps.log.info('pup_event_repeated', { requestId, webhookId: loggedId });
      return jsonText(result.answer.status, result.answer.body);
    }
    // The effect, committed once per delivery id: ids and the type only.
    const { event } = parsed;
    const fields = {
      requestId,
      webhookId: loggedId,
      type: event.type.slice(0, 64),
      eventId: event.eventId,
      memberId: event.memberId,
      installationId: event.installationId,
    };
    if (event.known) deps.log.info('pup_member_event', fields);
    else deps.log.warn('pup_event_ignored', fields);
    return jsonText(answer.status, answer.body);
  }

  return { handle, close: () => mcp.close() };
}
