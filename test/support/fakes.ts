/**
 * In-memory fakes of the ports (lambda/ports.ts) for the core's unit tests.
 *
 * - FakeStore and FakeAccessStore are the one Store (lambda/core/store) over a MapTable, so they
 *   mean what the real stores mean; every call is logged, and any method can be made to fail.
 * - FakeClock: `sleep` advances time instead of waiting, so no test ever waits for real.
 * - ScriptedWebhookClient answers from a script (fixed responses or functions of the request) and
 *   records every request it was given.
 */
import type {
  DeploymentRecord,
  SenderRecord,
  Clock,
  DeliveryJob,
  EnqueueOptions,
  EventRecord,
  IdempotencyRecord,
  IdempotencyStore,
  InboxStore,
  Outbox,
  Queue,
  Store,
  SubscriptionRecord,
  TransportFailure,
  WebhookClient,
  WebhookRequest,
  WebhookResponse,
} from '../../lambda/ports';
import { IdempotencyStoreMethods, InboxStoreMethods, StoreMethods } from '../../lambda/adapters/deferred';
import { sequentialOutbox } from '../../lambda/core/outbox';
import { newEventWrite } from '../../lambda/core/store/events';
import { ItemKeys, ttl } from '../../lambda/core/store/items';
import { TableStore } from '../../lambda/core/store/store';
import { MapTable } from './map-table';

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
/** The Store's methods a FakeStore logs (and can make fail); `writes` are the ones that write. */
const STORE_METHODS: readonly StoreMethod[] = [...StoreMethods, ...IdempotencyStoreMethods, ...InboxStoreMethods];
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

/** The event records of a MapTable, as a Map by event id (what tests read, arrange and change in place). */
class EventRecords implements Iterable<[string, EventRecord]> {
  constructor(private readonly table: MapTable) {}
  private ids(): string[] {
    return [...this.table.records.keys()].filter((key) => key.startsWith(EVENT_PREFIX)).map((key) => key.slice(EVENT_PREFIX.length));
  }
  get(eventId: string): EventRecord | undefined {
    return this.table.records.get(ItemKeys.event(eventId)) as EventRecord | undefined;
  }
  /** Stores the record as the Store would have written it (with its ttl and index keys). */
  set(eventId: string, record: EventRecord): this {
    this.table.set(ItemKeys.event(eventId), newEventWrite(record).item);
    return this;
  }
  has(eventId: string): boolean {
    return this.table.records.has(ItemKeys.event(eventId));
  }
  delete(eventId: string): boolean {
    return this.table.records.delete(ItemKeys.event(eventId));
  }
  clear(): void {
    for (const eventId of this.ids()) this.delete(eventId);
  }
  get size(): number {
    return this.ids().length;
  }
  keys(): IterableIterator<string> {
    return this.ids()[Symbol.iterator]();
  }
  values(): IterableIterator<EventRecord> {
    return this.ids()
      .map((eventId) => this.get(eventId)!)
      [Symbol.iterator]();
  }
  entries(): IterableIterator<[string, EventRecord]> {
    return this.ids()
      .map((eventId): [string, EventRecord] => [eventId, this.get(eventId)!])
      [Symbol.iterator]();
  }
  [Symbol.iterator](): IterableIterator<[string, EventRecord]> {
    return this.entries();
  }
}

const EVENT_PREFIX = ItemKeys.event('');

/** The idempotency keys of a MapTable, as a Map by `caller + "\u0000" + key` (what tests read and arrange). */
class IdempotencyRecords {
  constructor(private readonly table: MapTable) {}
  private static keyOf(scoped: string): string {
    const [caller = '', key = ''] = scoped.split('\u0000');
    return ItemKeys.idempotency(caller, key);
  }
  private entries(): [string, IdempotencyRecord][] {
    const prefix = ItemKeys.idempotency('', '').slice(0, -1);
    return [...this.table.records]
      .filter(([key]) => key.startsWith(prefix))
      .map(([key, item]): [string, IdempotencyRecord] => {
        const [caller, ...rest] = key.slice(prefix.length).split('#');
        const { ttl: _ttl, ...record } = item as unknown as IdempotencyRecord & { ttl?: number };
        return [`${caller}\u0000${rest.join('#')}`, record];
      });
  }
  get(scoped: string): IdempotencyRecord | undefined {
    const item = this.table.records.get(IdempotencyRecords.keyOf(scoped)) as (IdempotencyRecord & { ttl?: number }) | undefined;
    if (!item) return undefined;
    const { ttl: _ttl, ...record } = item;
    return record;
  }
  set(scoped: string, record: IdempotencyRecord): this {
    this.table.set(IdempotencyRecords.keyOf(scoped), { ...record, ttl: ttl.of(record.expiresAt) });
    return this;
  }
  has(scoped: string): boolean {
    return this.table.records.has(IdempotencyRecords.keyOf(scoped));
  }
  get size(): number {
    return this.entries().length;
  }
}

/**
 * The one Store (lambda/core/store) over a MapTable, with what unit tests need besides: every
 * call logged, any method made to fail or preceded by a hook, and the records at hand.
 */
export class FakeStore extends TableStore {
  declare readonly table: MapTable;
  readonly events: EventRecords;
  readonly calls: StoreCall[] = [];
  /** Methods that throw (a storage outage). */
  readonly failing = new Set<StoreMethod>();
  /** Runs before a method does its work (after logging), e.g. to simulate a concurrent writer. */
  readonly before: Partial<Record<StoreMethod, (...args: unknown[]) => void | Promise<void>>> = {};

  /** The idempotency keys, by `caller + "\u0000" + key`. */
  readonly idempotencyKeys: IdempotencyRecords;

  constructor(table = new MapTable()) {
    super(table);
    this.events = new EventRecords(table);
    this.idempotencyKeys = new IdempotencyRecords(table);
    for (const method of STORE_METHODS) {
      // The class's own method, so a test's subclass that overrides one is still wrapped, not shadowed.
      const inner = ((Object.getPrototypeOf(this) as Record<string, unknown>)[method] as (...args: unknown[]) => Promise<unknown>).bind(this);
      Object.defineProperty(this, method, {
        writable: true,
        configurable: true,
        value: async (...args: unknown[]) => {
          while (args.length > 0 && args[args.length - 1] === undefined) args.pop();
          this.calls.push({ method, args: clone(args) });
          await this.before[method]?.(...args);
          if (this.failing.has(method)) throw new Error(`fake store: ${method} failed`);
          return inner(...args);
        },
      });
    }
  }

  /** The stored SUBSCRIPTION record, expired or not (a test may set or change it in place). */
  get subscription(): SubscriptionRecord | undefined {
    return this.table.records.get(ItemKeys.subscription) as SubscriptionRecord | undefined;
  }
  set subscription(record: SubscriptionRecord | undefined) {
    if (record === undefined) this.table.records.delete(ItemKeys.subscription);
    else this.table.set(ItemKeys.subscription, { ...record, ttl: ttl.subscription(record.expiresAt) });
  }

  /** The verification cache: key -> verifiedAt. */
  get verified(): Map<string, number> {
    const prefix = ItemKeys.verified('');
    const entries = [...this.table.records].filter(([key]) => key.startsWith(prefix));
    return new Map(entries.map(([key, item]) => [key.slice(prefix.length), item.verifiedAt as number]));
  }

  get writes(): StoreCall[] {
    return this.calls.filter((call) => WRITES.has(call.method));
  }

  callsOf(method: StoreMethod): StoreCall[] {
    return this.calls.filter((call) => call.method === method);
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
  return retryAfter === undefined ? { kind: 'response', status, body: utf8.encode(text) } : { kind: 'response', status, body: utf8.encode(text), retryAfter };
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

/** The unit tests' AccessStore: the one Store over a MapTable, with a switch for an outage and a count of lastUsedAt writes. */
export class FakeAccessStore extends TableStore {
  declare readonly table: MapTable;
  /** Every method throws while set (a storage outage). */
  failing = false;
  /** How many writes touchSender made (the lastUsedAt cadence). */
  touches = 0;

  constructor(table = new MapTable()) {
    super(table);
    for (const method of ACCESS_METHODS) {
      // The class's own method, so a test's subclass that overrides one is still wrapped, not shadowed.
      const inner = ((Object.getPrototypeOf(this) as Record<string, unknown>)[method] as (...args: unknown[]) => Promise<unknown>).bind(this);
      Object.defineProperty(this, method, {
        writable: true,
        configurable: true,
        value: async (...args: unknown[]) => {
          if (this.failing) throw new Error('storage down (fake)');
          const usedBefore = method === 'touchSender' ? this.senders.get(args[0] as string)?.lastUsedAt : undefined;
          const result = await inner(...args);
          if (method === 'touchSender' && this.senders.get(args[0] as string)?.lastUsedAt !== usedBefore) this.touches++;
          return result;
        },
      });
    }
  }

  get deployment(): DeploymentRecord | undefined {
    return this.table.records.get(ItemKeys.deployment) as DeploymentRecord | undefined;
  }

  /** The senders by name. */
  get senders(): Map<string, SenderRecord> {
    const prefix = ItemKeys.sender('');
    const entries = [...this.table.records].filter(([key]) => key.startsWith(prefix));
    return new Map(entries.map(([key, item]) => [key.slice(prefix.length), item as unknown as SenderRecord]));
  }
}

const ACCESS_METHODS = [
  'getDeployment',
  'createDeployment',
  'setDeploymentKeys',
  'addSender',
  'getSender',
  'listSenders',
  'revokeSender',
  'touchSender',
  'countSend',
] as const;
