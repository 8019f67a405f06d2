/**
 * The HTTP surface of docs/contract/http.md as one `handle(request) -> Response` on web-standard
 * types (a Request, or the local server's lighter view of one: json.ts `HttpRequest`), shared by
 * the local runtime and the MCP Lambda, its checks in the order of docs/decisions.md, "The order
 * of the checks" (a batch on a revision without batches last): nothing reads the body before the
 * key has been checked. Every answer is JSON; nothing a client sends yields a 5xx or internal text,
 * and the API key is never logged.
 *
 * Deliberately not here: MCP semantics (the SDK and mcp/server.ts), event shapes of a particular
 * runtime, and TLS (API Gateway or a tunnel terminates it).
 */
import { randomUUID } from 'node:crypto';
import { answerUnavailable, describeCause, restAnswerOf, rateLimitedText } from '../core/answers';
import { DependencyUnavailable, isClientAbort } from '../core/errors';
import { admitSend, createAuthenticator, type Identity } from '../core/access';
import { scanJsonText } from '../core/json-text';
import { sendOnce } from '../core/idempotency';
import {
  BATCH_PROTOCOL_VERSION,
  CorsPolicy,
  ErrorCodes,
  IDEMPOTENCY_KEY_HEADER,
  LEGACY_PROTOCOL_VERSIONS,
  Limits,
  MCP_PROTOCOL_VERSION,
  McpHeaders,
  OAUTH_DISCOVERY_PATHS,
  Routes,
} from '../core/protocol';
import { readReceipt } from '../core/receipts';
import { createMcpEndpoint, type McpDeps } from '../mcp/server';
import { forwarded, getOnly, type HttpRequest, isJsonContentType, json, parseJson, readStream, restError, restUnavailable, rpcError } from './json';
import { createPupDoor, isPupPath, type PupConfig } from './pup';

export interface HttpConfig {
  /** The API key, or undefined when it is not configured or could not be loaded (503). */
  apiKey: string | undefined;
  /** Exact origins (scheme://host[:port]) allowed to call with an Origin header. */
  allowedOrigins: readonly string[];
  /** Host header values accepted (host[:port] or bare host name); undefined disables the check (behind API Gateway). */
  allowedHosts?: readonly string[];
  /** The pup door (docs/contract/pup.md): its signing secrets and manifest. Absent: its POST routes answer 503. */
  pup?: PupConfig;
}

export type App = ReturnType<typeof createApp>;

const API_KEY_HEADER = 'x-api-key';
const API_KEY_HINT = 'Missing or wrong API key: this server takes an API key, not OAuth. Pass it as ?key=… in the URL or as Authorization: Bearer ….';
const OAUTH_HINT = 'This server does not use OAuth: it takes an API key, as ?key=… in the URL (what ChatGPT connectors use) or as Authorization: Bearer ….';
const TOO_DEEP = `The request nests objects or arrays deeper than ${Limits.jsonMaxDepth} levels; nothing dm-dot accepts is that deep.`;

/** A JSON-RPC batch on a revision that has none is refused before anything in it runs (the SDK would serve it). */
const SERVED_REVISIONS: ReadonlySet<string> = new Set([MCP_PROTOCOL_VERSION, ...LEGACY_PROTOCOL_VERSIONS]);

function batchRefusal(body: Uint8Array, version: string | null): Response | undefined {
  // A revision dm-dot does not serve is the SDK's to refuse, as an unsupported version.
  if (version === null || version === BATCH_PROTOCOL_VERSION || !SERVED_REVISIONS.has(version)) return undefined;
  // The first byte that is not JSON whitespace says whether the body is an array.
  const first = body.find((byte) => byte !== 0x20 && byte !== 0x09 && byte !== 0x0a && byte !== 0x0d);
  if (first !== 0x5b) return undefined;
  return rpcError(
    400,
    ErrorCodes.invalidRequest,
    `JSON-RPC batches are not part of MCP ${version}: send one request per POST (only ${BATCH_PROTOCOL_VERSION} takes batches).`,
  );
}

/** `response` with `added` headers, set in place (a copy per request is a measurable share of a send) unless they are immutable. */
function withHeaders(response: Response, added: readonly [string, string][]): Response {
  try {
    for (const [name, value] of added) response.headers.set(name, value);
    return response;
  } catch {
    const headers = new Headers(response.headers);
    for (const [name, value] of added) headers.set(name, value);
    return new Response(response.body, { status: response.status, statusText: response.statusText, headers });
  }
}

export function createApp(deps: McpDeps, config: HttpConfig) {
  const mcp = createMcpEndpoint(deps);
  const pup = createPupDoor(deps, config.pup ?? {});
  const authenticator = config.apiKey
    ? createAuthenticator({ apiKey: config.apiKey, clock: deps.clock, ...(deps.access ? { access: deps.access } : {}) })
    : undefined;
  const allowedOrigins = new Set(config.allowedOrigins.map((o) => o.toLowerCase()));
  const allowedHosts = config.allowedHosts ? new Set(config.allowedHosts.map((h) => h.toLowerCase())) : undefined;

  function hostRefused(request: HttpRequest, received: string | undefined): boolean {
    if (!allowedHosts) return false;
    const host = (received ?? request.headers.get('host') ?? '').toLowerCase();
    if (allowedHosts.has(host)) return false;
    const bare = host.startsWith('[') ? host.slice(0, host.indexOf(']') + 1) : host.split(':')[0]!;
    return !allowedHosts.has(bare);
  }

  /** A configured origin, or the server's own (`http://` plus an allowed Host value, as localhost tools send). */
  function originAllowed(origin: string): boolean {
    const lower = origin.toLowerCase();
    if (allowedOrigins.has(lower)) return true;
    if (!allowedHosts || !lower.startsWith('http://')) return false;
    const host = lower.slice('http://'.length);
    // An origin is scheme://host[:port] and nothing more: a path, user info or query is not one.
    return host !== '' && !/[/?#@\s]/.test(host) && allowedHosts.has(host);
  }

  function corsHeaders(request: HttpRequest): Record<string, string> {
    const origin = request.headers.get('origin');
    return origin && originAllowed(origin)
      ? { 'access-control-allow-origin': origin, vary: 'Origin', 'access-control-expose-headers': CorsPolicy.exposeHeaders.join(', ') }
      : {};
  }

  /** The caller's identity when authenticated; otherwise the refusal. */
  async function authenticate(request: HttpRequest, url: URL, isMcp: boolean, requestId: string): Promise<Identity | Response> {
    if (!authenticator) {
      return isMcp
        ? rpcError(503, ErrorCodes.internalError, 'The API key is not configured; the server cannot accept requests.')
        : restError(503, 'not_configured', 'The API key is not configured; the server cannot accept requests.');
    }
    // Any of the three that matches authenticates (docs/decisions.md, "Either credential authenticates").
    const bearer = /^Bearer\s+(.+)$/i.exec(request.headers.get('authorization') ?? '')?.[1]?.trim();
    const headerKey = request.headers.get(API_KEY_HEADER)?.trim();
    let identity: Identity | undefined;
    const offered = [url.searchParams.get('key') ?? '', bearer ?? '', headerKey ?? ''];
    try {
      identity = await authenticator.identify(offered);
    } catch (error) {
      if (!(error instanceof DependencyUnavailable)) throw error;
      if (!isMcp) return restUnavailable(deps.log, error, requestId, 'authentication');
      const answer = answerUnavailable(deps.log, 'rpc', error, { requestId, where: 'authentication' });
      return rpcError(503, answer.code, answer.message);
    }
    if (identity) return identity;
    const headers = { 'www-authenticate': 'Bearer' };
    // Who holds a revoked sender key learns that, not the generic hint; a storage failure here keeps the hint.
    const revoked = await authenticator.revokedSender(offered).catch(() => undefined);
    const hint = revoked === undefined ? API_KEY_HINT : `This sender key (${revoked}) was revoked: ask the operator for a new one (dm-dot senders add).`;
    return isMcp ? rpcError(401, ErrorCodes.invalidRequest, hint, headers) : restError(401, 'unauthorized', hint, headers);
  }

  async function route(request: HttpRequest, requestId: string, host: string | undefined): Promise<Response> {
    const url = new URL(request.url);
    const isMcp = url.pathname === Routes.mcp;
    const isRest = url.pathname === Routes.messages;
    const isReceipt = url.pathname.startsWith(`${Routes.messages}/`);

    if (url.pathname === Routes.health) return getOnly(request) ?? json(200, { ok: true });
    if (OAUTH_DISCOVERY_PATHS.has(url.pathname)) return restError(404, 'no_oauth', OAUTH_HINT);
    const isPup = isPupPath(url.pathname);
    if (!isMcp && !isRest && !isPup && !isReceipt) return restError(404, 'not_found', 'No such route. The MCP endpoint is /mcp.');

    const refuse = (status: number, code: string, message: string, headers: Record<string, string> = {}) =>
      isMcp ? rpcError(status, ErrorCodes.invalidRequest, message, headers) : restError(status, code, message, headers);

    if (hostRefused(request, host)) return refuse(403, 'forbidden_host', 'Host header not allowed (DNS rebinding protection); add it to DMDOT_ALLOWED_HOSTS.');
    const origin = request.headers.get('origin');
    if (origin !== null && !originAllowed(origin)) {
      return refuse(403, 'forbidden_origin', 'Origin not allowed; add it to DMDOT_ALLOWED_ORIGINS.');
    }
    // pup authenticates by signature, not by the API key (which it neither needs nor may use instead).
    if (isPup) return pup.handle(request, url, requestId);
    if (request.method === 'OPTIONS' && origin !== null) {
      return new Response(null, {
        status: 204,
        headers: {
          ...corsHeaders(request),
          'access-control-allow-methods': CorsPolicy.allowMethods.join(', '),
          'access-control-allow-headers': CorsPolicy.allowHeaders.join(', '),
          'access-control-max-age': String(CorsPolicy.maxAgeS),
        },
      });
    }
    const identity = await authenticate(request, url, isMcp, requestId);
    if (identity instanceof Response) return identity;
    if (isReceipt) return receipt(request, url, requestId, identity);
    if (request.method !== 'POST') return refuse(405, 'method_not_allowed', 'Method not allowed: use POST (no SSE stream, no sessions).', { allow: 'POST' });
    if (!isJsonContentType(request.headers.get('content-type'))) return refuse(415, 'unsupported_media_type', 'Content-Type must be application/json.');
    const raw = await readStream(request, Limits.requestBodyMaxBytes);
    if (!raw) return refuse(413, 'payload_too_large', `Request body is over ${Limits.requestBodyMaxBytes} bytes.`);
    const scanned = scanJsonText(raw);
    if (scanned.tooDeep) {
      return isMcp ? rpcError(400, ErrorCodes.invalidParams, TOO_DEEP) : restError(400, 'invalid_input', TOO_DEEP);
    }
    const body = scanned.bytes;

    if (isRest) return rest(request, body, requestId, identity);
    const batchRefused = batchRefusal(body, request.headers.get(McpHeaders.protocolVersion));
    if (batchRefused) return batchRefused;

    const authInfo = { token: 'api-key', clientId: 'api-key', scopes: [], extra: { identity, requestId } };
    return mcp.fetch(forwarded(request, url, body, ['authorization', API_KEY_HEADER, 'content-length']), { authInfo });
  }

  /** `GET /v1/messages/{eventId}`: one 404 for a malformed, unknown or another key's id, so no one learns which ids exist. */
  async function receipt(request: HttpRequest, url: URL, requestId: string, identity: Identity): Promise<Response> {
    const refused = getOnly(request);
    if (refused) return refused;
    try {
      const found = await readReceipt(deps.store, identity, url.pathname.slice(Routes.messages.length + 1), deps.clock.now());
      return found ? json(200, found) : restError(404, 'not_found', 'No event with this id was sent with this key.');
    } catch (error) {
      if (!(error instanceof DependencyUnavailable)) throw error;
      return restUnavailable(deps.log, error, requestId, 'GET /v1/messages/{eventId}');
    }
  }

  async function rest(request: HttpRequest, body: Uint8Array, requestId: string, identity: Identity): Promise<Response> {
    // Bytes that were not UTF-8 are lone surrogates by now: the message check refuses them as send_to_dot does.
    const parsed = parseJson(new TextDecoder('utf-8').decode(body));
    if (parsed === undefined) return restError(400, 'invalid_json', 'The body is not valid JSON.');
    try {
      const admission = await admitSend(deps.access, identity, deps.clock.now());
      if (!admission.ok) {
        return restError(429, 'rate_limited', rateLimitedText(identity.rate!, admission.retryAfterSeconds), {
          'retry-after': String(admission.retryAfterSeconds),
        });
      }
      const key = request.headers.get(IDEMPOTENCY_KEY_HEADER) ?? undefined;
      const answer = restAnswerOf(await sendOnce(deps, parsed, { sender: identity.sender }, key));
      return json(answer.status, answer.body, answer.retryAfterSeconds === undefined ? {} : { 'retry-after': String(answer.retryAfterSeconds) });
    } catch (error) {
      if (!(error instanceof DependencyUnavailable)) throw error;
      return restUnavailable(deps.log, error, requestId, 'POST /v1/messages');
    }
  }

  /** `host` is the Host header as received (web Request objects may not carry it). */
  async function handle(request: HttpRequest, options: { requestId?: string; host?: string } = {}): Promise<Response> {
    const requestId = options.requestId ?? randomUUID();
    const started = Date.now();
    let response: Response;
    try {
      response = await route(request, requestId, options.host);
    } catch (error) {
      // A client that left mid-body is not a fault of ours (and cannot read an answer).
      if (isClientAbort(error)) deps.log.info('client_aborted', { requestId, path: new URL(request.url).pathname });
      else deps.log.error('internal_error', { requestId, cause: describeCause(error) });
      response = rpcError(500, ErrorCodes.internalError, `Internal error (request ${requestId}).`);
    }
    const added: [string, string][] = [['x-request-id', requestId], ...Object.entries(corsHeaders(request))];
    // The query string may hold the API key: only the path is ever logged.
    deps.log.info('request', { requestId, method: request.method, path: new URL(request.url).pathname, status: response.status, ms: Date.now() - started });
    return withHeaders(response, added);
  }

  return { handle, close: async (): Promise<void> => void (await Promise.all([mcp.close(), pup.close()])) };
}
