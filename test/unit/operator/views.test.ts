/**
 * What an operator sees (lambda/operator/views.ts): the subscription, a line of the delivery log
 * and one event with its attempts, as plain JSON-ready views with ISO times and nulls for what
 * is missing. And what the views hide, whatever the record holds: the signing secrets, the
 * callback's path and query (only its host is shown), the principal, and the event's kept bytes
 * (STORE-7: an attempt log never holds a body or a header). Each view's exact key set is pinned,
 * so a field added to a view is a decision, not an accident.
 */
import { EventStatus } from '../../../lambda/core/protocol';
import type { EventRecord, LogEntry, SubscriptionRecord } from '../../../lambda/ports';
import { EVENT_STATUSES, eventDetail, eventView, isEventStatus, isResendable, subscriptionView } from '../../../lambda/operator/views';

/** 2026-11-03T10:30:00.123Z */
const T0 = Date.UTC(2026, 10, 3, 10, 30, 0, 123);
const SECOND = 1000;
const DAY = 24 * 3600 * SECOND;

const SECRET = 'whsec_c2VjcmV0LW9mLXRoZS1zdWJzY3JpcHRpb24tMDEyMzQ1Njc4OQ==';
const PREVIOUS_SECRET = 'whsec_cHJldmlvdXMtc2VjcmV0LW9mLXRoZS1zdWJzY3JpcHRpb24=';
const PATH_TOKEN = 'path-token-of-the-dot-0123456789';
const QUERY_TOKEN = 'query-token-of-the-dot-abcdef';
const PRINCIPAL = 'principal-sha256-0123456789abcdef0123456789abcdef';
const MESSAGE = 'a private message the operator must not read';

function subscription(overrides: Partial<SubscriptionRecord> = {}): SubscriptionRecord {
  return {
    id: 'sub_0123456789abcdef0123456789abcdef',
    generation: 'gen-1',
    url: `https://dot.example:8443/hooks/${PATH_TOKEN}?token=${QUERY_TOKEN}#frag`,
    name: 'message.created',
    secret: SECRET,
    previousSecret: PREVIOUS_SECRET,
    previousSecretUntil: T0 + 600 * SECOND,
    principal: PRINCIPAL,
    createdAt: T0,
    refreshedAt: T0 + SECOND,
    expiresAt: T0 + 7 * DAY,
    ...overrides,
  };
}

const EVENT_ID = 'evt_0123456789abcdef0123456789abcdef';
const BODY = JSON.stringify({ eventId: EVENT_ID, name: 'message.created', timestamp: new Date(T0).toISOString(), data: { message: MESSAGE }, cursor: null });

function event(overrides: Partial<EventRecord> = {}): EventRecord {
  return {
    eventId: EVENT_ID,
    status: EventStatus.failed,
    subscriptionId: 'sub_0123456789abcdef0123456789abcdef',
    generation: 'gen-1',
    attempts: 6,
    lastError: 'http_5xx',
    lastHttpStatus: 503,
    createdAt: T0,
    expiresAt: T0 + 15 * DAY,
    notBefore: T0 + 10 * SECOND,
    body: BODY,
    log: [
      { at: T0, outcome: 'timeout', statusClass: null, durationMs: 3000, counted: false },
      { at: T0 + 4 * SECOND, outcome: 'http_5xx', statusClass: '5xx', durationMs: 120, counted: true },
      { at: T0 + 60 * SECOND, note: 'redriven' },
    ],
    ...overrides,
  };
}

describe('CLI-6: subscriptionView', () => {
  it('shows the id, the callback host and the times as ISO strings; null for no delivery yet', () => {
    expect(subscriptionView(subscription())).toStrictEqual({
      id: 'sub_0123456789abcdef0123456789abcdef',
      callbackHost: 'dot.example:8443',
      createdAt: '2026-11-03T10:30:00.123Z',
      refreshedAt: '2026-11-03T10:30:01.123Z',
      expiresAt: '2026-11-10T10:30:00.123Z',
      lastDeliveryAt: null,
      lastError: null,
    });
  });

  it('shows the last delivery and the last error when the record has them', () => {
    const view = subscriptionView(subscription({ lastDeliveryAt: T0 + 5 * SECOND, lastError: 'http_4xx' }));
    expect(view.lastDeliveryAt).toBe('2026-11-03T10:30:05.123Z');
    expect(view.lastError).toBe('http_4xx');
    expect(subscriptionView(subscription({ lastError: null })).lastError).toBeNull();
  });

  it('the host leaves out user info and the default port', () => {
    expect(subscriptionView(subscription({ url: 'https://user:pass-word-123@dot.example:443/x' })).callbackHost).toBe('dot.example');
    expect(subscriptionView(subscription({ url: 'http://[::1]:9000/x' })).callbackHost).toBe('[::1]:9000');
  });

  it('a URL that cannot be parsed is shown as such, never as the raw text', () => {
    const view = subscriptionView(subscription({ url: `not a url ${PATH_TOKEN}` }));
    expect(view.callbackHost).toBe('(unparseable)');
    expect(JSON.stringify(view)).not.toContain(PATH_TOKEN);
  });

  it('never shows a secret, the callback’s path, query or fragment, the principal or the user info', () => {
    const views = [
      subscriptionView(subscription()),
      subscriptionView(subscription({ url: `https://user:${QUERY_TOKEN}@dot.example/${PATH_TOKEN}` })),
      subscriptionView(subscription({ lastDeliveryAt: T0, lastError: 'timeout' })),
    ];
    for (const view of views) {
      const json = JSON.stringify(view);
      for (const hidden of [SECRET, PREVIOUS_SECRET, 'whsec_', PATH_TOKEN, QUERY_TOKEN, 'frag', PRINCIPAL, 'user']) expect(json).not.toContain(hidden);
    }
  });
});

describe('CLI-4: eventView (a line of the delivery log)', () => {
  it('shows status, attempts, the last error and HTTP status, and the times as ISO strings', () => {
    expect(eventView(event({ status: EventStatus.delivered, attempts: 2, lastError: null, lastHttpStatus: 200, deliveredAt: T0 + 5 * SECOND }))).toStrictEqual({
      eventId: EVENT_ID,
      status: 'delivered',
      attempts: 2,
      lastError: null,
      lastHttpStatus: 200,
      createdAt: '2026-11-03T10:30:00.123Z',
      deliveredAt: '2026-11-03T10:30:05.123Z',
      sender: null,
      acknowledgedAt: null,
    });
  });

  it('RCPT-4: shows when the dot acknowledged the event (the READ column), as an ISO string', () => {
    expect(eventView(event({ acknowledgedAt: T0 + 9 * SECOND })).acknowledgedAt).toBe('2026-11-03T10:30:09.123Z');
  });

  it("HTTP-KEY-3: shows who sent the event: connector or the sender's name", () => {
    expect(eventView(event({ sender: 'connector' })).sender).toBe('connector');
    expect(eventView(event({ sender: 'billing' })).sender).toBe('billing');
  });

  it('what the record does not have is null, never undefined (the JSON keeps every key)', () => {
    const bare: EventRecord = { eventId: EVENT_ID, status: EventStatus.queued, subscriptionId: 'sub_x', attempts: 0, createdAt: T0, expiresAt: T0 + DAY };
    const view = eventView(bare);
    expect(view).toStrictEqual({
      eventId: EVENT_ID,
      status: 'queued',
      attempts: 0,
      lastError: null,
      lastHttpStatus: null,
      createdAt: '2026-11-03T10:30:00.123Z',
      deliveredAt: null,
      sender: null,
      acknowledgedAt: null,
    });
    expect(Object.keys(JSON.parse(JSON.stringify(view)) as object)).toHaveLength(9);
  });

  it('never shows the kept bytes, the subscription, its generation or the lease', () => {
    const json = JSON.stringify(eventView(event()));
    for (const hidden of [MESSAGE, 'message.created', 'sub_', 'gen-1', 'notBefore', 'body', 'log']) expect(json).not.toContain(hidden);
  });
});

describe('eventDetail (one event and its log)', () => {
  it('CLI-5: lists every attempt and every note, oldest first, with ISO times', () => {
    expect(eventDetail(event())).toStrictEqual({
      ...eventView(event()),
      log: [
        { at: '2026-11-03T10:30:00.123Z', kind: 'attempt', outcome: 'timeout', statusClass: null, durationMs: 3000, counted: false },
        { at: '2026-11-03T10:30:04.123Z', kind: 'attempt', outcome: 'http_5xx', statusClass: '5xx', durationMs: 120, counted: true },
        { at: '2026-11-03T10:31:00.123Z', kind: 'note', note: 'redriven' },
      ],
      resendable: true,
    });
  });

  it('an event without a log has an empty one', () => {
    expect(eventDetail(event({ log: undefined })).log).toStrictEqual([]);
  });

  it('STORE-7: an attempt entry shows only time, outcome, status class, duration and counted, whatever else it holds', () => {
    // An entry as a careless (or older) writer might have stored it.
    const leaky = {
      at: T0,
      outcome: 'http_4xx',
      statusClass: '4xx',
      durationMs: 5,
      counted: true,
      body: MESSAGE,
      headers: { 'webhook-signature': 'v1,abc' },
    } as unknown as LogEntry;
    const note = { at: T0, note: 'resent', body: MESSAGE } as unknown as LogEntry;
    const detail = eventDetail(event({ log: [leaky, note] }));
    expect(detail.log).toStrictEqual([
      { at: '2026-11-03T10:30:00.123Z', kind: 'attempt', outcome: 'http_4xx', statusClass: '4xx', durationMs: 5, counted: true },
      { at: '2026-11-03T10:30:00.123Z', kind: 'note', note: 'resent' },
    ]);
    const json = JSON.stringify(detail);
    expect(json).not.toContain(MESSAGE);
    expect(json).not.toContain('webhook-signature');
  });

  it('never shows the kept bytes, though it says whether they allow a resend', () => {
    const detail = eventDetail(event());
    expect(detail.resendable).toBe(true);
    expect(JSON.stringify(detail)).not.toContain(MESSAGE);
    expect(Object.keys(detail).sort()).toStrictEqual([
      'acknowledgedAt',
      'attempts',
      'createdAt',
      'deliveredAt',
      'eventId',
      'lastError',
      'lastHttpStatus',
      'log',
      'resendable',
      'sender',
      'status',
    ]);
  });
});

describe('isResendable', () => {
  it.each([
    [EventStatus.failed, true],
    [EventStatus.dropped, true],
    [EventStatus.queued, false],
    [EventStatus.delivered, false],
  ])('an event %s with its bytes kept: %s', (status, expected) => {
    expect(isResendable(event({ status }))).toBe(expected);
    expect(eventDetail(event({ status })).resendable).toBe(expected);
  });

  it('a failed or dropped event whose bytes are gone cannot be resent', () => {
    expect(isResendable(event({ status: EventStatus.failed, body: undefined }))).toBe(false);
    expect(isResendable(event({ status: EventStatus.dropped, body: undefined }))).toBe(false);
  });

  it('an empty body is still bytes to resend', () => {
    expect(isResendable(event({ body: '' }))).toBe(true);
  });
});

describe('event statuses', () => {
  it('are exactly the five of STORE-4 (kept: the inbox, INBOX-5)', () => {
    expect([...EVENT_STATUSES].sort()).toStrictEqual(['delivered', 'dropped', 'failed', 'kept', 'queued']);
  });

  it.each(['queued', 'delivered', 'failed', 'dropped', 'kept'])('%s is a status', (value) => {
    expect(isEventStatus(value)).toBe(true);
  });

  it.each(['', 'Failed', 'FAILED', 'pending', 'cancelled', ' failed', 'toString', '__proto__'])('%j is not', (value) => {
    expect(isEventStatus(value)).toBe(false);
  });
});
