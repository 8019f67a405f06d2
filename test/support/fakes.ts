/**
 * In-memory fakes of the ports (lambda/ports.ts) for the core's unit tests.
 *
 * - FakeStore keeps the semantics of docs/contract/storage.md: every read treats an item at or past its expiry as absent,
 *   the subscription put is conditional (absent, same url, or expired), the delete is conditional
 *   on the url, event creation fails when the id exists, verifications last 24 h and replay ids
 *   10 minutes. Every call is logged, and any method can be made to fail.
 * - FakeClock: `sleep` advances time instead of waiting, so no test ever waits for real.
 * - ScriptedWebhookClient answers from a script (fixed responses or functions of the request) and
 *   records every request it was given.
 */
import type {
  AccessStore,
  DeploymentKeys,
  DeploymentRecord,
  SenderRecord,
  Clock,
  DeliveryJob,
  EnqueueOptions,
  EventExpectation,
  EventPatch,
  EventRecord,
  IdempotencyClaim,
  IdempotencyRecord,
  IdempotencyStore,
  InboxStore,
  PendingPosition,
  InboundAnswer,
  InboundAnswerResult,
  Outbox,
  PutSubscriptionResult,
  Queue,
  ReplayClaim,
  Store,
  SubscriptionExpectation,
  SubscriptionRecord,
  TransportFailure,
  WebhookClient,
  WebhookRequest,
  WebhookResponse,
} from '../../lambda/ports';
import { EventExists } from '../../lambda/core/errors';
import { sequentialOutbox } from '../../lambda/core/outbox';
import { Limits, type FailureReason } from '../../lambda/core/protocol';

const HOUR = 60 * 60 * 1000;
const VERIFICATION_MS = 24 * HOUR;
const REPLAY_MS = 10 * 60 * 1000;

/** A fixed, round instant used as "now" by tests that do not verify against the real clock. */
export const T0 = Date.UTC(2026, 10, 3, 10, 30, 0, 123);

export class FakeClock implements Clock {
  readonly sleeps: number[] = [];
  constructor(public current: number = T0) {}
  now(): number {
    return this.current;
  }
  async sleep(ms: number): Promise<void> {
    this.sleeps.push(ms);
    this.current += ms;
    await Promise.resolve();
  }
  advance(ms: number): void {
    this.current += ms;
  }
}

export type StoreMethod = keyof Store | keyof IdempotencyStore | keyof InboxStore;
const WRITES: ReadonlySet<StoreMethod> = new Set<StoreMethod>([
  'putSubscription',
  'deleteSubscription',
  'recordDeliveryOutcome',
  'putEvent',
  'updateEvent',
  'restoreEvent',
  'markVerified',
  'claimReplayId',
  'settleReplayId',
  'putInboundAnswer',
  'claimIdempotencyKey',
  'settleIdempotencyKey',
  'retakeIdempotencyKey',
  'acknowledgeEvent',
]);

export interface StoreCall {
  method: StoreMethod;
  args: unknown[];
}

const clone = <T>(value: T): T => structuredClone(value);

/** Same rule as the real adapters (lambda/adapters/items.ts isLive): live strictly before expiresAt. */
const isLive = (expiresAt: number, now: number): boolean => expiresAt > now;

export class FakeStore implements Store, IdempotencyStore, InboxStore {
  subscription: SubscriptionRecord | undefined;
  readonly events = new Map<string, EventRecord>();
  readonly verified = new Map<string, number>();
  readonly replayIds = new Map<string, { claimedAt: number; token: string; request: string; answer?: InboundAnswer }>();
  readonly calls: StoreCall[] = [];
  /** Methods that throw (a storage outage). */
  readonly failing = new Set<StoreMethod>();
  /** Runs before a method does its work (after logging), e.g. to simulate a concurrent writer. */
  readonly before: Partial<Record<StoreMethod, (...args: unknown[]) => void | Promise<void>>> = {};

  get writes(): StoreCall[] {
    return this.calls.filter((call) => WRITES.has(call.method));
  }

  callsOf(method: StoreMethod): StoreCall[] {
    return this.calls.filter((call) => call.method === method);
  }

  private async enter(method: StoreMethod, args: unknown[]): Promise<void> {
    this.calls.push({ method, args: clone(args) });
    await this.before[method]?.(...args);
    if (this.failing.has(method)) throw new Error(`fake store: ${method} failed`);
  }

  async getSubscription(now: number): Promise<SubscriptionRecord | undefined> {
    await this.enter('getSubscription', [now]);
    const item = this.subscription;
    return item && isLive(item.expiresAt, now) ? clone(item) : undefined;
  }

  async getStoredSubscription(): Promise<SubscriptionRecord | undefined> {
    await this.enter('getStoredSubscription', []);
    return this.subscription ? clone(this.subscription) : undefined;
  }

  async putSubscription(record: SubscriptionRecord, now: number, expected: SubscriptionExpectation): Promise<PutSubscriptionResult> {
    await this.enter('putSubscription', [record, now, expected]);
    const held = this.subscription;
    const matches =
      expected.kind === 'absent'
        ? held === undefined
        : expected.kind === 'same'
          ? held !== undefined && held.url === expected.url && held.generation === expected.generation
          : held !== undefined && !isLive(held.expiresAt, now) && held.generation === expected.generation;
    if (matches) {
      this.subscription = clone(record);
      return { ok: true };
    }
    return { ok: false, holder: held ? clone(held) : undefined };
  }

  async deleteSubscription(url: string): Promise<boolean> {
    await this.enter('deleteSubscription', [url]);
    if (this.subscription?.url !== url) return false;
    this.subscription = undefined;
    return true;
  }

  async recordDeliveryOutcome(subscriptionId: string, outcome: { deliveredAt?: number; error: FailureReason | null }): Promise<void> {
    await this.enter('recordDeliveryOutcome', [subscriptionId, outcome]);
    if (this.subscription?.id !== subscriptionId) return;
    if (outcome.deliveredAt !== undefined) this.subscription.lastDeliveryAt = outcome.deliveredAt;
    this.subscription.lastError = outcome.error;
  }

  async putEvent(record: EventRecord): Promise<void> {
    await this.enter('putEvent', [record]);
    const existing = this.events.get(record.eventId);
    if (existing && isLive(existing.expiresAt, record.createdAt)) throw new EventExists(record.eventId);
    this.events.set(record.eventId, clone(record));
  }

  async getEvent(eventId: string, now: number): Promise<EventRecord | undefined> {
    await this.enter('getEvent', [eventId, now]);
    const item = this.events.get(eventId);
    return item && isLive(item.expiresAt, now) ? clone(item) : undefined;
  }

  async updateEvent(eventId: string, patch: EventPatch, expected?: EventExpectation): Promise<boolean> {
    await this.enter('updateEvent', expected ? [eventId, patch, expected] : [eventId, patch]);
    const item = this.events.get(eventId);
    if (!item) return false;
    if (expected) {
      const statuses: readonly string[] = typeof expected.status === 'string' ? [expected.status] : expected.status;
      if (!statuses.includes(item.status) || (expected.attempts !== undefined && item.attempts !== expected.attempts)) return false;
      if (expected.notBefore !== undefined && (item.notBefore ?? null) !== expected.notBefore) return false;
    }
    const { body, appendLog, ...fields } = clone(patch);
    for (const [name, value] of Object.entries(fields)) if (value !== undefined) (item as unknown as Record<string, unknown>)[name] = value;
    // An inbox event keeps its bytes until it is acknowledged (ports.ts EventRecord.inbox).
    if (body === null) {
      if (!(item.inbox && item.acknowledgedAt === undefined)) delete item.body;
    } else if (body !== undefined) item.body = body;
    if (appendLog) item.log = [...(item.log ?? []), appendLog];
    return true;
  }

  async restoreEvent(record: EventRecord): Promise<boolean> {
    await this.enter('restoreEvent', [record]);
    const item = this.events.get(record.eventId);
    if (item && isLive(item.expiresAt, record.createdAt)) return false;
    this.events.set(record.eventId, clone(record));
    return true;
  }

  async isVerified(key: string, now: number): Promise<boolean> {
    await this.enter('isVerified', [key, now]);
    const at = this.verified.get(key);
    return at !== undefined && now - at < VERIFICATION_MS;
  }

  async markVerified(key: string, now: number): Promise<void> {
    await this.enter('markVerified', [key, now]);
    this.verified.set(key, now);
  }

  async claimReplayId(id: string, now: number, token: string, request: string): Promise<ReplayClaim> {
    await this.enter('claimReplayId', [id, now, token, request]);
    const held = this.replayIds.get(id);
    // Inclusive, as the real stores: the claim holds through at + 10 min; unsettled, through its lease.
    if (held && now - held.claimedAt <= REPLAY_MS && (held.answer || now - held.claimedAt <= Limits.replayLeaseMs)) {
      if (held.token === token) return { claimed: true };
      if (held.request !== request) return { claimed: false, sameRequest: false };
      return held.answer ? { claimed: false, sameRequest: true, answer: clone(held.answer) } : { claimed: false, sameRequest: true };
    }
    this.replayIds.set(id, { claimedAt: now, token, request });
    return { claimed: true };
  }

  async settleReplayId(id: string, token: string, answer: InboundAnswer | undefined): Promise<void> {
    await this.enter('settleReplayId', [id, token, answer]);
    const held = this.replayIds.get(id);
    if (!held || held.token !== token) return;
    if (answer) held.answer = clone(answer);
    else this.replayIds.delete(id);
  }

  readonly inboundAnswers = new Map<string, { answer: InboundAnswer; expiresAt: number }>();

  async putInboundAnswer(deliveryId: string, answer: InboundAnswer, now: number): Promise<InboundAnswerResult> {
    await this.enter('putInboundAnswer', [deliveryId, answer, now]);
    const held = this.inboundAnswers.get(deliveryId);
    if (held && isLive(held.expiresAt, now)) return { stored: false, answer: clone(held.answer) };
    this.inboundAnswers.set(deliveryId, { answer: clone(answer), expiresAt: now + Limits.pupEventAnswerMs });
    return { stored: true };
  }

  // ---- Idempotency keys and the inbox (ports.ts IdempotencyStore, InboxStore) ----------------------

  /** IDEMPOTENCY#<caller>#<key>, by `${caller}\u0000${key}`. */
  readonly idempotencyKeys = new Map<string, IdempotencyRecord>();

  async claimIdempotencyKey(caller: string, key: string, record: IdempotencyRecord, now: number): Promise<IdempotencyClaim> {
    await this.enter('claimIdempotencyKey', [caller, key, record, now]);
    const held = this.idempotencyKeys.get(`${caller}\u0000${key}`);
    if (held && isLive(held.expiresAt, now)) return { claimed: false, existing: clone(held) };
    this.idempotencyKeys.set(`${caller}\u0000${key}`, clone(record));
    return { claimed: true };
  }

  async settleIdempotencyKey(caller: string, key: string, eventId: string, outcome: 'done' | 'release'): Promise<void> {
    await this.enter('settleIdempotencyKey', [caller, key, eventId, outcome]);
    const held = this.idempotencyKeys.get(`${caller}\u0000${key}`);
    if (held?.eventId !== eventId) return;
    if (outcome === 'release') this.idempotencyKeys.delete(`${caller}\u0000${key}`);
    else {
      held.state = 'done';
      delete held.leaseUntil;
    }
  }

  async retakeIdempotencyKey(caller: string, key: string, staleEventId: string, record: IdempotencyRecord, now: number): Promise<boolean> {
    await this.enter('retakeIdempotencyKey', [caller, key, staleEventId, record, now]);
    const held = this.idempotencyKeys.get(`${caller}\u0000${key}`);
    if (!held || held.eventId !== staleEventId || held.state !== 'in_progress' || (held.leaseUntil ?? 0) > now) return false;
    this.idempotencyKeys.set(`${caller}\u0000${key}`, clone(record));
    return true;
  }

  async listPending(now: number, limit: number, after?: PendingPosition): Promise<EventRecord[]> {
    await this.enter('listPending', [now, limit, after]);
    const later = (e: EventRecord) => !after || e.createdAt > after.createdAt || (e.createdAt === after.createdAt && e.eventId > after.eventId);
    return [...this.events.values()]
      .filter((e) => e.inbox === true && e.acknowledgedAt === undefined && isLive(e.expiresAt, now) && later(e))
      .sort((a, b) => a.createdAt - b.createdAt || (a.eventId < b.eventId ? -1 : a.eventId > b.eventId ? 1 : 0))
      .slice(0, limit)
      .map(clone);
  }

  async acknowledgeEvent(eventId: string, at: number, now: number): Promise<'acknowledged' | 'already' | 'unknown'> {
    await this.enter('acknowledgeEvent', [eventId, at, now]);
    const item = this.events.get(eventId);
    if (!item || !isLive(item.expiresAt, now)) return 'unknown';
    if (item.acknowledgedAt !== undefined) return 'already';
    item.acknowledgedAt = at;
    if (item.status !== 'queued') delete item.body;
    return 'acknowledged';
  }

  async listEvents(now: number, filter: { status?: EventRecord['status'] } = {}): Promise<EventRecord[]> {
    await this.enter('listEvents', [now, filter]);
    return [...this.events.values()]
      .filter((e) => isLive(e.expiresAt, now) && (filter.status === undefined || e.status === filter.status))
      .sort((a, b) => b.createdAt - a.createdAt)
      .map(clone);
  }
}

/** A FakeStore and a FakeQueue behind the outbox that AWS uses (record first, then the job). */
export function fakeOutbox(store: Store, queue: Queue): Outbox {
  return sequentialOutbox(store, queue);
}

export class FakeQueue implements Queue {
  readonly jobs: DeliveryJob[] = [];
  fail = false;
  /** Runs after a job is accepted, e.g. a fake worker that settles the event. */
  onEnqueue?: (job: DeliveryJob) => void | Promise<void>;
  readonly delays: (number | undefined)[] = [];
  async enqueue(job: DeliveryJob, options: EnqueueOptions = {}): Promise<void> {
    if (this.fail) throw new Error('fake queue: unavailable');
    this.jobs.push(clone(job));
    this.delays.push(options.delayMs);
    await this.onEnqueue?.(job);
  }
}

export type Scripted = WebhookResponse | ((request: WebhookRequest) => WebhookResponse | Promise<WebhookResponse>);

/** Answers each POST with the next scripted entry; a POST past the end of the script fails the test. */
export class ScriptedWebhookClient implements WebhookClient {
  readonly requests: WebhookRequest[] = [];
  private readonly script: Scripted[];
  constructor(...script: Scripted[]) {
    this.script = script;
  }
  add(...more: Scripted[]): this {
    this.script.push(...more);
    return this;
  }
  async post(request: WebhookRequest): Promise<WebhookResponse> {
    this.requests.push({
      url: request.url,
      headers: { ...request.headers },
      body: new Uint8Array(request.body),
      ...(request.timeoutMs !== undefined ? { timeoutMs: request.timeoutMs } : {}),
    });
    const next = this.script.shift();
    if (next === undefined) throw new Error(`ScriptedWebhookClient: unexpected POST #${this.requests.length}`);
    return typeof next === 'function' ? next(request) : next;
  }
  get last(): WebhookRequest {
    const request = this.requests[this.requests.length - 1];
    if (!request) throw new Error('ScriptedWebhookClient: no request was made');
    return request;
  }
}

const utf8 = new TextEncoder();

export function respond(status: number, body: string | object = '', retryAfter?: string): WebhookResponse {
  const text = typeof body === 'string' ? body : JSON.stringify(body);
  return retryAfter === undefined
    ? { kind: 'response', status, body: utf8.encode(text) }
    : { kind: 'response', status, body: utf8.encode(text), retryAfter };
}

export function transportFailure(reason: TransportFailure): WebhookResponse {
  return { kind: 'failure', reason };
}

/** A callback that passes the challenge: 200 with the nonce echoed back. */
export function echoChallenge(request: WebhookRequest): WebhookResponse {
  const { challenge } = JSON.parse(new TextDecoder().decode(request.body)) as { challenge: string };
  return respond(200, { challenge });
}

export function bodyText(request: WebhookRequest): string {
  return new TextDecoder().decode(request.body);
}

/** The unit tests' AccessStore (DEPLOYMENT, SENDER#, RATE# in memory); passes the access contract suite. */
export class FakeAccessStore implements AccessStore {
  deployment: DeploymentRecord | undefined;
  readonly senders = new Map<string, SenderRecord>();
  readonly counters = new Map<string, { count: number; expiresAt: number }>();
  /** Every method throws while set (a storage outage). */
  failing = false;
  /** How many writes touchSender made (the lastUsedAt cadence). */
  touches = 0;

  private check(): void {
    if (this.failing) throw new Error('storage down (fake)');
  }

  async getDeployment() {
    this.check();
    return this.deployment ? { ...this.deployment } : undefined;
  }
  async createDeployment(record: DeploymentRecord) {
    this.check();
    this.deployment ??= { ...record };
    return { ...this.deployment };
  }
  async setDeploymentKeys(keys: DeploymentKeys) {
    this.check();
    if (!this.deployment) return false;
    const { previousKeyHash: _h, previousKeyUntil: _u, ...kept } = this.deployment;
    this.deployment = { ...kept, ...keys };
    return true;
  }
  async addSender(record: SenderRecord) {
    this.check();
    if (this.senders.has(record.name)) return false;
    this.senders.set(record.name, { ...record });
    return true;
  }
  async getSender(name: string) {
    this.check();
    const found = this.senders.get(name);
    return found ? { ...found } : undefined;
  }
  async listSenders() {
    this.check();
    return [...this.senders.values()].map((s) => ({ ...s })).sort((a, b) => (a.name < b.name ? -1 : 1));
  }
  async revokeSender(name: string, at: number) {
    this.check();
    const found = this.senders.get(name);
    if (!found || found.revokedAt !== undefined) return false;
    found.revokedAt = at;
    return true;
  }
  async touchSender(name: string, at: number, minIntervalMs: number) {
    this.check();
    const found = this.senders.get(name);
    if (!found || (found.lastUsedAt !== undefined && found.lastUsedAt > at - minIntervalMs)) return;
    found.lastUsedAt = at;
    this.touches++;
  }
  async countSend(name: string, window: number, limit: number, expiresAt: number) {
    this.check();
    const key = `${name}#${window}`;
    const counter = this.counters.get(key) ?? { count: 0, expiresAt };
    if (counter.count >= limit) return false;
    this.counters.set(key, { count: counter.count + 1, expiresAt });
    return true;
  }
}
