/**
 * The sequential outbox (lambda/core/outbox.ts) that AWS uses: the record is written first, then
 * its job is sent (DEL-PIPE-2, DEL-PIPE-3). What each failure leaves behind, over the in-memory
 * FakeStore and a FakeQueue: a failed put queues nothing (storage unavailable); a failed send
 * marks the new record `failed` and names the event (queue unavailable), so no record claims a
 * delivery that can never happen; and `reopen` (an operator's resend) is one compare-and-set,
 * then the send, with the status put back when the send fails.
 *
 * The contract every outbox passes is test/contract/outbox.contract.ts; this file pins the
 * sequential composition's own calls and compensations.
 */
import { sequentialOutbox } from '../../../lambda/core/outbox';
import { DependencyUnavailable } from '../../../lambda/core/errors';
import { EventStatus } from '../../../lambda/core/protocol';
import type { DeliveryJob, EventPatch, EventRecord } from '../../../lambda/ports';
import { FakeQueue, FakeStore, T0 } from '../../support/fakes';

const SECOND = 1000;
const DAY = 24 * 3600 * SECOND;
const EVENT_ID = 'evt_0123456789abcdef0123456789abcdef';
const BODY = `{"eventId":"${EVENT_ID}","name":"message.created","data":{"message":"hi"}}`;

function record(overrides: Partial<EventRecord> = {}): EventRecord {
  return {
    eventId: EVENT_ID,
    status: EventStatus.queued,
    subscriptionId: 'sub_a',
    generation: 'gen-a',
    attempts: 0,
    createdAt: T0,
    expiresAt: T0 + 15 * DAY,
    notBefore: T0 + 4 * SECOND,
    body: BODY,
    ...overrides,
  };
}

const job = (overrides: Partial<DeliveryJob> = {}): DeliveryJob => ({
  eventId: EVENT_ID,
  subscriptionId: 'sub_a',
  generation: 'gen-a',
  body: BODY,
  ...overrides,
});

let store: FakeStore;
let queue: FakeQueue;

beforeEach(() => {
  store = new FakeStore();
  queue = new FakeQueue();
});

/** The rejection of `promise`, which must reject with a DependencyUnavailable. */
async function unavailable(promise: Promise<unknown>): Promise<DependencyUnavailable> {
  const error = await promise.then(
    () => undefined,
    (caught: unknown) => caught,
  );
  expect(error).toBeInstanceOf(DependencyUnavailable);
  return error as DependencyUnavailable;
}

describe('add', () => {
  it('DEL-PIPE-2, DEL-PIPE-3, EV-GEN-3: writes the record, then sends its job with the delay given', async () => {
    const order: string[] = [];
    store.before.putEvent = () => void order.push('putEvent');
    queue.onEnqueue = () => void order.push('enqueue');
    await sequentialOutbox(store, queue).add(record(), job(), { delayMs: 4 * SECOND });
    expect(order).toStrictEqual(['putEvent', 'enqueue']);
    expect(store.events.get(EVENT_ID)).toStrictEqual(record());
    expect(queue.jobs).toStrictEqual([job()]);
    expect(queue.delays).toStrictEqual([4 * SECOND]);
  });

  it('without options the job is sent with none', async () => {
    await sequentialOutbox(store, queue).add(record(), job());
    expect(queue.delays).toStrictEqual([undefined]);
  });

  it('DEL-OUT-3: a record that cannot be written: storage unavailable, with the cause kept, nothing is sent, and a failed record stands in its place', async () => {
    store.failing.add('putEvent');
    const error = await unavailable(sequentialOutbox(store, queue).add(record(), job()));
    expect(error.dependency).toBe('storage');
    expect(error.eventId).toBeUndefined();
    expect((error.cause as Error).message).toBe('fake store: putEvent failed');
    expect(queue.jobs).toEqual([]);
    // The put may have been applied with its answer lost: a failed record keeps a late one out.
    expect(store.events.get(EVENT_ID)?.status).toBe(EventStatus.failed);
  });

  it('DEL-OUT-3: a put that failed and a compensation that failed too: the job is sent anyway, so the event will be settled (queued, with the event id)', async () => {
    store.failing.add('putEvent');
    store.failing.add('restoreEvent');
    const error = await unavailable(sequentialOutbox(store, queue).add(record(), job()));
    expect(error).toMatchObject({ dependency: 'storage', eventId: EVENT_ID, undecided: true, willSettle: true });
    // The worker delivers the record if the put landed, or restores it from this job if it did not.
    expect(queue.jobs.map((queued) => queued.eventId)).toEqual([EVENT_ID]);
  });

  it('DEL-OUT-3: a put, its compensation and the job all failing: undecided and nothing will settle it for sure', async () => {
    store.failing.add('putEvent');
    store.failing.add('restoreEvent');
    queue.fail = true;
    const error = await unavailable(sequentialOutbox(store, queue).add(record(), job()));
    expect(error).toMatchObject({ dependency: 'storage', eventId: EVENT_ID, undecided: true, willSettle: false });
  });

  it('DEL-OUT-2: keepBack runs the put and the send, and not the compensation', async () => {
    queue.fail = true;
    const kept: string[] = [];
    const outbox = sequentialOutbox(store, queue, {
      keepBack: async (fn) => {
        kept.push(`${store.calls.length}`);
        return fn();
      },
    });
    await unavailable(outbox.add(record(), job()));
    expect(kept).toHaveLength(2);
    expect(store.events.get(EVENT_ID)?.status).toBe(EventStatus.failed);
  });

  it('an event id that exists: storage unavailable; the first record and its job stay as they were', async () => {
    const outbox = sequentialOutbox(store, queue);
    await outbox.add(record(), job());
    const error = await unavailable(outbox.add(record({ subscriptionId: 'sub_b' }), job({ subscriptionId: 'sub_b' })));
    expect(error.dependency).toBe('storage');
    expect(store.events.get(EVENT_ID)?.subscriptionId).toBe('sub_a');
    expect(queue.jobs).toStrictEqual([job()]);
  });

  it('a job that cannot be sent: queue unavailable naming the event, and the record says failed, not queued', async () => {
    queue.fail = true;
    const error = await unavailable(sequentialOutbox(store, queue).add(record(), job()));
    expect(error.dependency).toBe('queue');
    expect(error.eventId).toBe(EVENT_ID);
    expect((error.cause as Error).message).toBe('fake queue: unavailable');
    expect(store.events.get(EVENT_ID)?.status).toBe('failed');
    expect(error.undecided).toBe(false);
    // The compensation is conditional: it only ever moves a record that still says queued.
    expect(store.callsOf('updateEvent').map((call) => call.args)).toStrictEqual([[EVENT_ID, { status: 'failed' }, { status: 'queued' }]]);
  });

  it('the compensation never overwrites an outcome that got there first', async () => {
    queue.fail = true;
    // A worker (from an earlier copy of the job) settles the event while the send fails.
    store.before.updateEvent = () => {
      store.events.get(EVENT_ID)!.status = EventStatus.delivered;
    };
    const error = await unavailable(sequentialOutbox(store, queue).add(record(), job()));
    expect(store.events.get(EVENT_ID)?.status).toBe('delivered');
    // The job did go out (a send whose answer was lost): the caller must not be told "not sent".
    expect(error.undecided).toBe(true);
  });

  it('a compensation that fails as well still reports the queue, not the storage', async () => {
    queue.fail = true;
    store.failing.add('updateEvent');
    const error = await unavailable(sequentialOutbox(store, queue).add(record(), job()));
    // Unanswered: the mark may have landed (nothing would ever send it) or not (the reconciler
    // re-enqueues it), so the caller is told "may still be delivered", never a plain "queued".
    expect(error).toMatchObject({ dependency: 'queue', eventId: EVENT_ID, undecided: true, willSettle: false });
    expect(store.events.get(EVENT_ID)?.status).toBe('queued');
  });

  it('DEL-OUT-2: a compensation applied whose answer was lost (the retry meets it): read back, "not sent" is true', async () => {
    queue.fail = true;
    // The SDK's first try applied the mark and its answer was lost; its retry fails the condition.
    store.before.updateEvent = () => {
      store.events.get(EVENT_ID)!.status = EventStatus.failed;
    };
    const error = await unavailable(sequentialOutbox(store, queue).add(record(), job()));
    expect(error).toMatchObject({ dependency: 'queue', eventId: EVENT_ID, undecided: false, willSettle: false });
    expect(store.callsOf('getEvent')).toHaveLength(1);
  });

  it('DEL-OUT-2: a compensation whose read-back fails too: undecided, and nothing promised', async () => {
    queue.fail = true;
    store.before.updateEvent = () => {
      store.events.get(EVENT_ID)!.status = EventStatus.failed;
    };
    store.failing.add('getEvent');
    const error = await unavailable(sequentialOutbox(store, queue).add(record(), job()));
    expect(error).toMatchObject({ dependency: 'queue', eventId: EVENT_ID, undecided: true, willSettle: false });
  });

  it('DEL-OUT-3: a failed put whose settling write landed with its answer lost: read back, "nothing was sent", and no job', async () => {
    store.failing.add('putEvent');
    // The settling write's first try created the failed record; its retry meets it and answers no.
    store.before.restoreEvent = () => {
      store.events.set(EVENT_ID, record({ status: EventStatus.failed }));
    };
    const error = await unavailable(sequentialOutbox(store, queue).add(record(), job()));
    expect(error).toMatchObject({ dependency: 'storage', undecided: false });
    expect(error.eventId).toBeUndefined();
    expect(queue.jobs).toEqual([]);
    expect(store.events.get(EVENT_ID)?.status).toBe(EventStatus.failed);
  });

  it('a DependencyUnavailable from the store itself passes through as it is', async () => {
    const own = new DependencyUnavailable('storage', { cause: new Error('deadline') });
    store.before.putEvent = () => {
      throw own;
    };
    await expect(sequentialOutbox(store, queue).add(record(), job())).rejects.toBe(own);
  });
});

describe('reopen (an operator resend)', () => {
  const NOW = T0 + 60 * SECOND;
  const settled = () =>
    record({
      status: EventStatus.failed,
      attempts: 6,
      lastError: 'http_5xx',
      lastHttpStatus: 503,
      log: [{ at: T0, outcome: 'http_5xx', statusClass: '5xx', durationMs: 10, counted: true }],
    });
  const patch: EventPatch = {
    status: EventStatus.queued,
    attempts: 0,
    lastError: null,
    notBefore: NOW,
    subscriptionId: 'sub_b',
    generation: 'gen-b',
    appendLog: { at: NOW, note: 'resent' },
  };
  const resend = job({ subscriptionId: 'sub_b', generation: 'gen-b' });

  beforeEach(() => {
    store.events.set(EVENT_ID, settled());
  });

  it('EV-GEN-3: applies the patch if the record is still as read (status and attempts), sends the job, then adds the note', async () => {
    await expect(sequentialOutbox(store, queue).reopen(settled(), patch, resend)).resolves.toBe(true);
    const { appendLog, ...fields } = patch;
    expect(store.callsOf('updateEvent').map((c) => c.args)).toStrictEqual([
      [EVENT_ID, fields, { status: 'failed', attempts: 6 }],
      [EVENT_ID, { appendLog }, { status: ['queued', 'delivered', 'failed', 'dropped', 'kept'] }],
    ]);
    expect(store.events.get(EVENT_ID)).toMatchObject({
      status: 'queued',
      attempts: 0,
      lastError: null,
      notBefore: NOW,
      subscriptionId: 'sub_b',
      generation: 'gen-b',
    });
    expect(store.events.get(EVENT_ID)?.log?.at(-1)).toStrictEqual({ at: NOW, note: 'resent' });
    expect(queue.jobs).toStrictEqual([resend]);
    expect(queue.delays).toStrictEqual([undefined]);
  });

  it.each([
    ['its status changed', (r: EventRecord) => void (r.status = EventStatus.dropped)],
    ['its attempt count changed', (r: EventRecord) => void (r.attempts = 7)],
  ])('answers false, and sends nothing, when %s since the read', async (_what, change) => {
    change(store.events.get(EVENT_ID)!);
    const current = structuredClone(store.events.get(EVENT_ID));
    await expect(sequentialOutbox(store, queue).reopen(settled(), patch, resend)).resolves.toBe(false);
    expect(store.events.get(EVENT_ID)).toStrictEqual(current);
    expect(queue.jobs).toEqual([]);
  });

  it('answers false for an event that is not stored', async () => {
    store.events.clear();
    await expect(sequentialOutbox(store, queue).reopen(settled(), patch, resend)).resolves.toBe(false);
    expect(queue.jobs).toEqual([]);
  });

  it('a store that fails: storage unavailable, nothing sent', async () => {
    store.failing.add('updateEvent');
    const error = await unavailable(sequentialOutbox(store, queue).reopen(settled(), patch, resend));
    expect(error.dependency).toBe('storage');
    expect(queue.jobs).toEqual([]);
  });

  it('a job that cannot be sent: queue unavailable naming the event, and the status is put back, not left queued', async () => {
    queue.fail = true;
    const error = await unavailable(sequentialOutbox(store, queue).reopen(settled(), patch, resend));
    expect(error).toMatchObject({ dependency: 'queue', eventId: EVENT_ID });
    expect(store.events.get(EVENT_ID)?.status).toBe('failed');
    expect(store.callsOf('updateEvent').at(-1)?.args[2]).toStrictEqual({ status: 'queued' });
    expect(store.callsOf('updateEvent').at(-1)?.args[1]).toMatchObject({ status: 'failed', attempts: 6 });
  });

  // lambda/ports.ts promises that "after a failed send the record is back as it was read"; the
  // embedded outbox's transaction does that by construction, this composition by putting back
  // every field it changed and adding the `resent` note only once the job is out.
  it('a job that cannot be sent: the record is back exactly as it was read', async () => {
    queue.fail = true;
    await unavailable(sequentialOutbox(store, queue).reopen(settled(), patch, resend));
    expect(store.events.get(EVENT_ID)).toStrictEqual(settled());
  });
});
