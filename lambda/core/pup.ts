/**
 * What the pup door means once a request's signature has verified (docs/contract/pup.md), as pure
 * functions: the challenge echo, the member-event envelope, the invocation context, the principal
 * pup callers act as, and the default manifest. pup's shapes are not public: each reading is the
 * documented one (docs/pup.md), lenient where pup may differ, strict where the contract is explicit.
 *
 * Deliberately not here: signature checks (core/inbound.ts), the replay guard and stored answers
 * (the store, driven by lambda/http/pup.ts), HTTP statuses, and logging. The context grants no
 * authority: nothing here lets it choose a principal, a subscription or a recipient.
 */
import * as z from 'zod/mini';
import { sha256Hex } from './identity';
import { isObject } from './validation';
import { EVENT_NAME, MCP_PROTOCOL_VERSION, PUP_CONTEXT_META_KEY, PupMemberEvents, PupRoutes, SERVER_NAME, TOOL_NAME } from './protocol';

/**
 * The principal every pup request acts as: not derived from the context (it grants no authority) nor
 * from the signing secret (a rotation must not change ids). The NUL byte keeps it apart from every
 * API key principal: an environment variable cannot hold a NUL.
 */
export const PUP_PRINCIPAL = sha256Hex('\u0000pup-door');

/** Both readings of pup's challenge: a JSON string is echoed as its own text; an object's `challenge` as `{"challenge": …}`. */
export function challengeAnswer(bodyText: string): { ok: true; body: string } | { ok: false; message: string } {
  let value: unknown;
  try {
    value = JSON.parse(bodyText);
  } catch {
    return { ok: false, message: 'The body is not valid JSON.' };
  }
  if (typeof value === 'string') return { ok: true, body: bodyText.trim() };
  if (isObject(value) && Object.hasOwn(value, 'challenge') && value.challenge !== null) {
    return { ok: true, body: JSON.stringify({ challenge: value.challenge }) };
  }
  return { ok: false, message: 'The challenge must be a JSON string, or an object with a non-null "challenge" field.' };
}

const Id = z.union([z.string().check(z.minLength(1), z.maxLength(256)), z.number()]);

const EventObject = z.looseObject({ type: z.optional(z.string()), name: z.optional(z.string()) });

const Envelope = z.looseObject({
  version: z.union([z.string().check(z.minLength(1)), z.number()]),
  id: z.string().check(z.minLength(1)),
  eventId: Id,
  occurredAt: z.string().check(z.refine((text) => !Number.isNaN(Date.parse(text)), 'not a date-time')),
  event: z.union([z.string().check(z.minLength(1)), EventObject]),
  context: z.record(z.string(), z.unknown()),
});

export interface PupEvent {
  /** The event type, e.g. `member.joined`. */
  type: string;
  /** One of PupMemberEvents; anything else is answered `{}` and logged, never refused. */
  known: boolean;
  eventId: string;
  /** The member the event is about, when pup names one (ids only: safe to log). */
  memberId?: string;
  installationId?: string;
}

export type PupEventParse = { ok: true; event: PupEvent } | { ok: false; code: 'invalid_envelope' | 'id_mismatch'; message: string };

/**
 * Validates an event envelope (`version`, `id`, `eventId`, `occurredAt`, `event`, `context`).
 * `event` is the type as a string, or an object carrying it as `type` or `name` with the member's
 * id beside it (`memberId`, `userId`, or `member.id` / `user.id`).
 */
export function parsePupEvent(value: unknown, webhookId: string): PupEventParse {
  const parsed = Envelope.safeParse(value);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const field = issue && issue.path.length > 0 ? issue.path.map(String).join('.') : 'the envelope';
    return {
      ok: false,
      code: 'invalid_envelope',
      message: `Invalid event envelope: ${field} is missing or has the wrong type (expected version, id, eventId, occurredAt, event, context).`,
    };
  }
  const envelope = parsed.data;
  if (envelope.id !== webhookId) return { ok: false, code: 'id_mismatch', message: 'The envelope id differs from the webhook-id header.' };
  const type = typeof envelope.event === 'string' ? envelope.event : (envelope.event.type ?? envelope.event.name);
  if (type === undefined || type === '') {
    return { ok: false, code: 'invalid_envelope', message: 'Invalid event envelope: event must be a type name, or an object with a "type" or "name".' };
  }
  const memberId = typeof envelope.event === 'object' ? memberIdOf(envelope.event) : undefined;
  const installationId = idText(envelope.context.installationId);
  return {
    ok: true,
    event: {
      type,
      known: (PupMemberEvents as readonly string[]).includes(type),
      eventId: String(envelope.eventId),
      ...(memberId !== undefined ? { memberId } : {}),
      ...(installationId !== undefined ? { installationId } : {}),
    },
  };
}

function memberIdOf(event: Record<string, unknown>): string | undefined {
  const member = isObject(event.member) ? event.member.id : undefined;
  const user = isObject(event.user) ? event.user.id : undefined;
  return [event.memberId, event.userId, member, user].map(idText).find((id) => id !== undefined);
}

const PupContext = z.looseObject({
  installationId: Id,
  askerId: z.optional(Id),
  channelId: z.optional(Id),
  callId: z.optional(Id),
  settings: z.optional(z.record(z.string(), z.unknown())),
  userRequest: z.optional(z.string()),
});

/** The context's ids, as text: the only part of it ever logged (never settings or userRequest). */
export type PupContextIds = { installationId: string } & Partial<Record<'askerId' | 'channelId' | 'callId', string>>;

export type PupContextCheck = { kind: 'absent' } | { kind: 'ok'; ids: PupContextIds } | { kind: 'invalid'; message: string };

/** Reads `params._meta["io.puphq/context"]` of one JSON-RPC message; absent is not an error, malformed names the field. */
export function pupContextOf(message: unknown): PupContextCheck {
  if (!isObject(message) || !isObject(message.params) || !isObject(message.params._meta)) return { kind: 'absent' };
  const meta = message.params._meta;
  if (!Object.hasOwn(meta, PUP_CONTEXT_META_KEY)) return { kind: 'absent' };
  const parsed = PupContext.safeParse(meta[PUP_CONTEXT_META_KEY]);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const field = issue && issue.path.length > 0 ? `.${issue.path.map(String).join('.')}` : '';
    return { kind: 'invalid', message: `Invalid params._meta["${PUP_CONTEXT_META_KEY}"]${field}: ${issue?.message ?? 'invalid'}.` };
  }
  const context = parsed.data;
  const ids: PupContextIds = { installationId: String(context.installationId) };
  for (const field of ['askerId', 'channelId', 'callId'] as const) if (context[field] !== undefined) ids[field] = String(context[field]);
  return { kind: 'ok', ids };
}

/** The default manifest when the operator supplies none: an example to adapt (pup's schema is not public); URLs are relative. */
export function defaultPupManifest(version: string): Record<string, unknown> {
  return {
    name: SERVER_NAME,
    version,
    description: 'Send a message to the ChatGPT dot this server serves.',
    // The only revision `/pup/mcp` serves: pup speaks 2026-07-28 stateless only.
    mcp: { url: PupRoutes.mcp, protocolVersion: MCP_PROTOCOL_VERSION },
    challengeUrl: PupRoutes.challenge,
    eventsUrl: PupRoutes.events,
    events: [...PupMemberEvents],
    tools: [{ name: TOOL_NAME, description: `Sends a message to the dot as a ${EVENT_NAME} event.` }],
  };
}

function idText(value: unknown): string | undefined {
  if (typeof value === 'string' && value !== '' && value.length <= 256) return value;
  if (typeof value === 'number' && Number.isFinite(value)) return String(value);
  return undefined;
}
