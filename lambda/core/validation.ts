/**
 * Validation of everything a caller sends: the `send_to_dot` message, `events/subscribe` and
 * `events/unsubscribe` params (checked in the order of docs/contract/events.md, each failure naming its field),
 * callback URLs and TTL grants. Pure functions; messages never echo a secret.
 *
 * Deliberately not here: address checks of the callback host (the outbound guard does those at
 * connect time, where DNS answers are known) and any I/O.
 */
import { decodeSecret } from './signing';
import { LOOPBACK_LITERAL_HOSTNAMES } from './loopback';
import { DEFAULT_EVENTS_PROFILE, EVENT_NAME, EventsProfiles, Limits, type EventsProfile } from './protocol';
import { invalidParams, ProtocolFault } from './errors';

const utf8 = new TextEncoder();

/** A UTF-16 surrogate without its partner: text no UTF-8 encoding can carry. */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** What both send surfaces say for bytes that are not UTF-8, or a lone surrogate written as a JSON escape. */
export const NOT_UTF8_MESSAGE = 'Invalid input: the message must be valid UTF-8 text (it holds bytes that are not UTF-8, or a lone surrogate).';

/** The keys of `args` beyond `allowed`, the first three quoted (each cut to 40 characters); undefined when there are none. */
export function unexpectedKeys(args: object, allowed: readonly string[]): string | undefined {
  const extra = Object.keys(args).filter((key) => !allowed.includes(key));
  if (extra.length === 0) return undefined;
  return extra
    .slice(0, 3)
    .map((k) => JSON.stringify(k.slice(0, 40)))
    .join(', ');
}

/** `message` trimmed of surrounding whitespace, then valid Unicode text of 1..16,384 UTF-8 bytes. */
export function checkMessage(args: unknown): { ok: true; message: string } | { ok: false; error: string } {
  if (!isObject(args)) return { ok: false, error: 'Invalid input: send an object with a "message" string.' };
  const unexpected = unexpectedKeys(args, ['message']);
  if (unexpected) return { ok: false, error: `Invalid input: "message" is the only argument (unexpected: ${unexpected}).` };
  const raw = args.message;
  if (typeof raw !== 'string') return { ok: false, error: 'Invalid input: "message" is required and must be a string.' };
  if (LONE_SURROGATE.test(raw)) return { ok: false, error: NOT_UTF8_MESSAGE };
  const message = raw.trim();
  const bytes = utf8.encode(message).byteLength;
  if (bytes === 0) return { ok: false, error: 'Invalid input: "message" is empty after trimming whitespace.' };
  if (bytes > Limits.messageMaxBytes) {
    return { ok: false, error: `Invalid input: "message" is ${bytes} UTF-8 bytes after trimming; the limit is ${Limits.messageMaxBytes}.` };
  }
  return { ok: true, message };
}

export interface UrlPolicy {
  /** DMDOT_ALLOW_LOOPBACK_CALLBACKS: also allow http: and https: to the literal 127.0.0.1 or [::1]. */
  allowLoopbackCallbacks: boolean;
}

const HAS_USERINFO = /^[a-z][a-z0-9+.-]*:\/\/[^/?#]*@/i;
// C0 controls, space, DEL: the URL parser would strip or re-encode them, changing the bytes.
const UNSAFE_URL_CHARS = /[\u0000-\u0020\u007f]/;

export function isLoopbackLiteralHost(hostname: string): boolean {
  return LOOPBACK_LITERAL_HOSTNAMES.has(hostname);
}

/** Returns an error sentence for an unacceptable callback URL, or undefined. The URL is kept byte-exact. */
export function callbackUrlProblem(url: unknown, policy: UrlPolicy): string | undefined {
  if (typeof url !== 'string' || url.length === 0) return 'delivery.url is required and must be a string';
  if (url.length > Limits.callbackUrlMaxChars) return `delivery.url is longer than ${Limits.callbackUrlMaxChars} characters`;
  if (UNSAFE_URL_CHARS.test(url)) return 'delivery.url must not contain spaces or control characters';
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return 'delivery.url is not a valid absolute URL';
  }
  const loopbackAllowed = policy.allowLoopbackCallbacks && isLoopbackLiteralHost(parsed.hostname);
  if (parsed.protocol !== 'https:' && !(parsed.protocol === 'http:' && loopbackAllowed)) {
    return 'delivery.url must use https:';
  }
  if (parsed.username || parsed.password || HAS_USERINFO.test(url)) return 'delivery.url must not contain user info';
  if (url.includes('#')) return 'delivery.url must not contain a fragment';
  return undefined;
}

export interface SubscribeRequest {
  url: string;
  secret: string;
  key: Uint8Array;
  ttlMs: number | null;
}

export function isObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

function isEmptyArguments(value: unknown): boolean {
  return value === undefined || (isObject(value) && Object.keys(value).length === 0);
}

const CHATGPT = EventsProfiles[DEFAULT_EVENTS_PROFILE];

/** The params and their `delivery` object, past the checks both methods begin with. Throws ProtocolFault(-32602). */
function selectedDelivery(params: unknown, profile: EventsProfile): { p: Record<string, unknown>; delivery: Record<string, unknown> } {
  if (!isObject(params)) throw invalidParams('params must be an object');
  if (params.name !== EVENT_NAME) {
    // SEP-3415: an unknown event name is NotFound, with data.kind saying what was not found.
    if (profile.unknownEventNotFound && typeof params.name === 'string') {
      throw new ProtocolFault(profile.codes.notFound, `unknown event; the only event is ${EVENT_NAME}`, { kind: 'event' });
    }
    throw invalidParams(`name: unknown event; the only event is ${EVENT_NAME}`);
  }
  if (!isEmptyArguments(params.arguments)) throw invalidParams(`arguments: ${EVENT_NAME} takes no arguments; send {} or omit it`);
  if (!isObject(params.delivery)) throw invalidParams('delivery is required and must be an object');
  return { p: params, delivery: params.delivery };
}

/** `events/subscribe` params, in the order of docs/contract/events.md. Throws ProtocolFault(-32602). */
export function parseSubscribeParams(params: unknown, policy: UrlPolicy, profile: EventsProfile = CHATGPT): SubscribeRequest {
  const { p, delivery } = selectedDelivery(params, profile);
  if (delivery.mode !== 'webhook') throw invalidParams('delivery.mode must be "webhook"');
  const urlProblem = callbackUrlProblem(delivery.url, policy);
  if (urlProblem) throw invalidParams(urlProblem);
  const key = typeof delivery.secret === 'string' ? decodeSecret(delivery.secret) : undefined;
  if (!key) {
    throw invalidParams(`delivery.secret must be "whsec_" followed by standard base64 of ${Limits.secretMinBytes} to ${Limits.secretMaxBytes} bytes`);
  }
  let ttl = p.ttlMs;
  // SEP-3415: a short ttlMs is raised to the minimum instead of refused.
  if (profile.clampShortTtl && Number.isInteger(ttl) && (ttl as number) >= 0 && (ttl as number) < Limits.ttlMinMs) ttl = Limits.ttlMinMs;
  if (!(ttl === undefined || ttl === null || (Number.isInteger(ttl) && (ttl as number) >= Limits.ttlMinMs))) {
    throw invalidParams(`ttlMs must be null or an integer of at least ${Limits.ttlMinMs}`);
  }
  if (p.cursor !== undefined && p.cursor !== null) throw invalidParams('cursor must be null: this server keeps no event history to replay');
  return { url: delivery.url as string, secret: delivery.secret as string, key, ttlMs: (ttl as number | null | undefined) ?? null };
}

/** `events/unsubscribe` params: name, arguments, delivery.url (mode optional, no secret). */
export function parseUnsubscribeParams(params: unknown, profile: EventsProfile = CHATGPT): { url: string } {
  const { delivery } = selectedDelivery(params, profile);
  if (delivery.mode !== undefined && delivery.mode !== 'webhook') throw invalidParams('delivery.mode must be "webhook"');
  if (typeof delivery.url !== 'string' || delivery.url.length === 0) throw invalidParams('delivery.url is required and must be a string');
  return { url: delivery.url };
}

/** The operator's TTL policy: a default and a cap, both within 60 s .. 7 days. */
export type TtlPolicy = Record<'defaultMs' | 'maxMs', number>;

export const DEFAULT_TTL_POLICY: TtlPolicy = { defaultMs: Limits.ttlDefaultMs, maxMs: Limits.ttlMaxMs };

/** Returns a sentence naming the problem with a TTL policy, or undefined when it is usable. */
export function ttlPolicyProblem(policy: TtlPolicy): string | undefined {
  const inRange = (ms: number) => Number.isInteger(ms) && ms >= Limits.ttlMinMs && ms <= Limits.ttlMaxMs;
  if (!inRange(policy.maxMs)) return `the TTL cap must be an integer from ${Limits.ttlMinMs} to ${Limits.ttlMaxMs} ms`;
  if (!inRange(policy.defaultMs) || policy.defaultMs > policy.maxMs) return `the TTL default must be an integer from ${Limits.ttlMinMs} ms to the cap`;
  return undefined;
}

/** The default when ttlMs is absent or null, so a grant is always finite; else min(ttlMs, cap). */
export function grantTtlMs(ttlMs: number | null | undefined, policy: TtlPolicy = DEFAULT_TTL_POLICY): number {
  if (ttlMs === undefined || ttlMs === null) return policy.defaultMs;
  return Math.min(ttlMs, policy.maxMs);
}
