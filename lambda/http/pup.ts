/**
 * The pup door (docs/contract/pup.md): `GET /pup/manifest.json`, `POST /pup/mcp`, `POST /pup/challenge`,
 * `POST /pup/events`, reached from the one route table of app.ts after its Host and Origin checks.
 *
 * Order on the POST routes: secrets configured (`503` otherwise; the manifest is served either
 * way), method (`405`), Content-Type (`415`), declared body size at most 1 MiB (`413`), then the
 * signature headers and their timestamp window (`401`), all before a byte of the body is read, so
 * a request that can never verify costs nothing but its headers. Then the body is read once, at
 * most 1 MiB, with the HMAC computed as it streams in, and only a verified body is parsed (after
 * the nesting check of core/json-text.ts). A refusal is
 * `401 {"error":{"code":"invalid_signature"|"stale_timestamp"|"replayed","message"}}` and nothing
 * else: no hint of which secret, no echo of the body.
 *
 * At most `maxBodiesInFlight` bodies are read at once (the local runtime sets it; a Lambda serves
 * one request at a time): past it, a signed-looking request is answered `503` at once with
 * `Retry-After`, so a flood of slow bodies with forged signatures cannot hold the memory of
 * hundreds of megabytes while it waits to be refused.
 *
 * - `/pup/mcp` and `/pup/challenge`: the `webhook-id` is claimed in the store's replay namespace
 *   (one conditional write with a token of the request's own, shared by both routes) before the
 *   work, and settled after it: after a success the id is `replayed` for 10 minutes (its answer
 *   is never given again, nor stored); a failure releases the id, so a retry is processed like
 *   the first try. The id used for another request (the other route, other bytes) is `replayed`.
 * - `/pup/mcp`: `params._meta["io.puphq/context"]` is validated (core/pup.ts), logged as ids only,
 *   and then the request goes to the same MCP server factory as `/mcp`, 2026-07-28 only, as the
 *   principal PUP_PRINCIPAL. The context grants nothing: it is not passed on.
 * - `/pup/events`: pup retries a delivery with the same id, so the id is not refused: the answer
 *   is stored under it with one conditional write, and only the request that stored it commits the
 *   delivery's effect (today: the member event's log line). A retry gets the stored answer, byte
 *   for byte. Only `200` answers are stored: a `400` depends on the body alone, so a retry of the
 *   same body gets the same `400` anyway, and nothing was committed for it.
 *
 * Deliberately not here: the API key (pup never needs it and may not use it instead of a
 * signature; a `key` parameter or `Authorization` header is ignored and stripped), CORS (pup calls
 * server to server), and where the secrets come from (the local settings or the Lambda's Secrets
 * Manager loader hand them in through `PupConfig.secrets`).
 */
import { createHash, randomBytes } from 'node:crypto';
import { answerUnavailable, DEPENDENCY_UNAVAILABLE_EVENT, describeCause } from '../core/answers';
import { DependencyUnavailable } from '../core/errors';
import { checkInboundHeaders, createInboundVerifier, type InboundSecrets } from '../core/inbound';
import { scanJsonText } from '../core/json-text';
import { challengeAnswer, defaultPupManifest, parsePupEvent, pupContextOf, PUP_PRINCIPAL } from '../core/pup';
import { ErrorCodes, Limits, PUP_SENDER, PupRefusals, PupRoutes, WebhookHeaders, type PupRefusal } from '../core/protocol';
import { createMcpEndpoint, type McpDeps } from '../mcp/server';
import { timeOfDay, type InboundAnswer, type Logger } from '../ports';
import { declaredTooLarge, isJsonContentType, readStream } from './body';
import { json, jsonText, restError, rpcError } from './json';

export interface PupConfig {
  /**
   * The signing secrets in force now (called per request: the Lambda's loader caches and refreshes
   * them, so a rotation needs no deploy). Undefined or an empty list: the POST routes answer 503.
   */
  secrets?: () => Promise<InboundSecrets | undefined>;
  /** The manifest's exact text (already validated as a JSON object); undefined: the default one. */
  manifest?: string;
  /** Bodies read at once; past it a POST is answered 503 before its body is read. Default: no cap. */
  maxBodiesInFlight?: number;
}

export interface PupDoor {
  handle(request: Request, url: URL, requestId: string): Promise<Response>;
  close(): Promise<void>;
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

export function createPupDoor(deps: McpDeps, config: PupConfig): PupDoor {
  // Requests whose MCP answer hid a failed dependency (an HTTP 200 tool error or -32603 from
  // core/answers.ts `answerUnavailable`, which logs each with its request id): not kept for replays.
  const dependencyFailed = new Set<string>();
  const log: Logger = {
    info: (event, fields) => deps.log.info(event, fields),
    warn: (event, fields) => deps.log.warn(event, fields),
    error: (event, fields) => {
      deps.log.error(event, fields);
      if (event === DEPENDENCY_UNAVAILABLE_EVENT && typeof fields?.requestId === 'string') dependencyFailed.add(fields.requestId);
    },
  };
  const mcp = createMcpEndpoint({ ...deps, log }, { legacy: 'reject' });
  const manifest = config.manifest ?? JSON.stringify(defaultPupManifest(deps.version));
  const storageUnavailable = (requestId: string, route: string, error: unknown) => {
    const unavailable = error instanceof DependencyUnavailable ? error : new DependencyUnavailable('storage', { cause: error });
    const answer = answerUnavailable(deps.log, 'rest', unavailable, { requestId, where: `POST ${route}` });
    return json(answer.status, answer.body);
  };
  const maxBodies = config.maxBodiesInFlight ?? Number.POSITIVE_INFINITY;
  let bodiesInFlight = 0;

  async function handle(request: Request, url: URL, requestId: string): Promise<Response> {
    if (url.pathname === PupRoutes.manifest) {
      if (request.method !== 'GET' && request.method !== 'HEAD') return restError(405, 'method_not_allowed', 'Use GET.', { allow: 'GET' });
      return jsonText(200, manifest);
    }
    const secrets = config.secrets ? await config.secrets() : undefined;
    if (!secrets || secrets.secrets.length === 0) {
      return restError(503, 'not_configured', 'pup signing secrets are not configured; the pup door cannot accept requests.');
    }
    if (request.method !== 'POST') return restError(405, 'method_not_allowed', 'Method not allowed: use POST.', { allow: 'POST' });
    if (!isJsonContentType(request.headers.get('content-type'))) return restError(415, 'unsupported_media_type', 'Content-Type must be application/json.');
    if (declaredTooLarge(request, Limits.requestBodyMaxBytes))
      return restError(413, 'payload_too_large', `Request body is over ${Limits.requestBodyMaxBytes} bytes.`);

    // pup's timestamp is compared with the time of day, and the replay memory that must agree with
    // its window (LIM-9) is kept in the same time.
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
    const webhookId = verdict.webhookId;
    if (scanJsonText(body).tooDeep) {
      const why = `The body nests objects or arrays deeper than ${Limits.jsonMaxDepth} levels.`;
      if (url.pathname === PupRoutes.mcp) return rpcError(400, ErrorCodes.invalidParams, why);
      return restError(400, url.pathname === PupRoutes.events ? 'invalid_envelope' : 'invalid_challenge', why);
    }
    // Signed by pup, but logged: keep a line bounded whatever length pup chose.
    const loggedId = webhookId.slice(0, 128);
    // The verifier has checked that the body is UTF-8; this decoding cannot fail.
    const bodyText = new TextDecoder('utf-8', { ignoreBOM: true }).decode(body);

    if (url.pathname === PupRoutes.events) return events(bodyText, webhookId, loggedId, now, requestId);

    return once(url, webhookId, loggedId, now, requestId, body, () =>
      url.pathname === PupRoutes.challenge ? Promise.resolve(challenge(bodyText)) : mcpCall(request, url, body, bodyText, requestId),
    );
  }

  function challenge(bodyText: string): Response {
    const answer = challengeAnswer(bodyText);
    return answer.ok ? jsonText(200, answer.body) : restError(400, 'invalid_challenge', answer.message);
  }

  /**
   * `/pup/mcp` and `/pup/challenge`: the request's work runs at most once per webhook-id, and an id
   * that was processed is `401 replayed` from then on, whatever comes with it (pup's documentation:
   * replayed MCP and challenge ids are rejected; a captured request must not fetch its answer
   * twice). The id is claimed with a token of this request's own (a claim whose write applied but
   * whose answer was lost is recognised as ours, not as a replay); a success (an answer below 400
   * with no failed dependency) settles the claim as processed; a failure (400, 5xx, a dependency
   * that failed inside an HTTP 200 tool result) releases it, so a retry of a request that had no
   * effect is processed like its first try. While the first request is still being answered, the
   * same request sent again is told to come back (`503 in_progress`, `Retry-After: 1`): it may
   * yet fail and be released.
   */
  async function once(
    url: URL,
    webhookId: string,
    loggedId: string,
    now: number,
    requestId: string,
    body: Uint8Array,
    work: () => Promise<Response>,
  ): Promise<Response> {
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
      // Processed already (settled), or the id was used for another request (the other route, or
      // other bytes): a replay, refused. A captured request never fetches its answer a second time.
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
      await settle(webhookId, token, undefined, requestId, loggedId);
      throw error;
    }
    const failed = dependencyFailed.delete(requestId) || response.status >= 400;
    // A processed request's claim is settled with the refusal its replays get, never with its
    // answer: nothing of the answer is stored, so nothing of it can be handed out again.
    await settle(webhookId, token, failed ? undefined : REPLAYED_ANSWER, requestId, loggedId);
    return new Response(bodyText, { status: response.status, headers: response.headers });
  }

  async function settle(webhookId: string, token: string, kept: InboundAnswer | undefined, requestId: string, loggedId: string): Promise<void> {
    try {
      await deps.store.settleReplayId(webhookId, token, kept);
    } catch (error) {
      // The answer stands. Unsettled, the claim lapses with its lease: a retry after it is processed
      // again (after a success, a second time: the one case the store cannot prevent).
      deps.log.warn('pup_claim_not_settled', { requestId, webhookId: loggedId, kept: kept !== undefined, cause: describeCause(error) });
    }
  }

  async function mcpCall(request: Request, url: URL, body: Uint8Array, bodyText: string, requestId: string): Promise<Response> {
    let message: unknown;
    try {
      message = JSON.parse(bodyText);
    } catch {
      message = undefined; // the SDK answers malformed JSON (-32700) exactly as on /mcp
    }
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

    url.searchParams.delete('key');
    const headers = new Headers(request.headers);
    headers.delete('authorization');
    const forwarded = new Request(url, { method: 'POST', headers, body: body as BodyInit });
    // pup's callId is the idempotency key of its send_to_dot (scoped to the sender `pup`): a call
    // pup makes again makes no second event.
    const callId = context.kind === 'ok' ? context.ids.callId : undefined;
    const extra = { principal: PUP_PRINCIPAL, requestId, sender: PUP_SENDER, ...(callId !== undefined ? { idempotencyKey: callId } : {}) };
    return mcp.fetch(forwarded, { authInfo: { token: 'pup-signature', clientId: 'pup', scopes: [], extra } });
  }

  async function events(bodyText: string, webhookId: string, loggedId: string, now: number, requestId: string): Promise<Response> {
    let value: unknown;
    try {
      value = JSON.parse(bodyText);
    } catch {
      return restError(400, 'invalid_json', 'The body is not valid JSON.');
    }
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
