/**
 * How dm-dot says what happened (lambda/core/answers.ts), on each surface: the `send_to_dot` tool
 * results of every outcome (TOOL-8 to TOOL-11), the `POST /v1/messages` answers (DEL-REST-2,
 * DEL-REST-3), and the one mapping of a DependencyUnavailable: logged once with the request id
 * and its cause, answered with one generic sentence per surface (a tool error, a 503, -32603)
 * that never carries the cause's text.
 */
import { answerUnavailable, describeCause, describeReason, NO_SUBSCRIPTION_TEXT, restAnswerOf, toolResultOf } from '../../../lambda/core/answers';
import { DependencyUnavailable } from '../../../lambda/core/errors';
import { ErrorCodes, FailureReasons } from '../../../lambda/core/protocol';
import type { Logger } from '../../../lambda/ports';

const EVENT_ID = 'evt_0123456789abcdef0123456789abcdef';

/** A cause that must stay in the log: an internal host, an ARN, a table name. */
const CAUSE_TEXT = 'connect ECONNREFUSED 10.1.2.3:443 arn:aws:sqs:eu-west-1:123456789012:dm-dot-delivery table=DmDotTable';

function recordingLog() {
  const lines: Array<{ level: string; event: string; fields: Record<string, unknown> | undefined }> = [];
  const log: Logger = {
    info: (event, fields) => void lines.push({ level: 'info', event, fields }),
    warn: (event, fields) => void lines.push({ level: 'warn', event, fields }),
    error: (event, fields) => void lines.push({ level: 'error', event, fields }),
  };
  return { log, lines };
}

const context = { requestId: 'req-42', where: 'tools/call send_to_dot' };

describe('toolResultOf', () => {
  it('TOOL-8: invalid input is a tool error with the validation sentence, and no structured content', () => {
    expect(toolResultOf({ kind: 'invalid', error: 'message must be 1 to 16384 bytes' })).toStrictEqual({
      content: [{ type: 'text', text: 'message must be 1 to 16384 bytes' }],
      isError: true,
    });
  });

  it('TOOL-8, DEL-PIPE-1: no subscription is a tool error that says where a dot comes from', () => {
    const result = toolResultOf({ kind: 'no_subscription' });
    expect(result).toStrictEqual({ content: [{ type: 'text', text: NO_SUBSCRIPTION_TEXT }], isError: true });
    expect(NO_SUBSCRIPTION_TEXT).toMatch(/No dot is subscribed/);
    expect(NO_SUBSCRIPTION_TEXT).toContain('dm-dot dot');
  });

  it('TOOL-10: delivered is exactly the sentence of the contract, with structured content', () => {
    expect(toolResultOf({ kind: 'delivered', eventId: EVENT_ID })).toStrictEqual({
      content: [{ type: 'text', text: `ChatGPT accepted event ${EVENT_ID} for asynchronous processing by your dot.` }],
      isError: false,
      structuredContent: { eventId: EVENT_ID, status: 'delivered' },
    });
  });

  it('TOOL-11: queued is not an error, and says queued, not acknowledged yet, and retried', () => {
    const result = toolResultOf({ kind: 'queued', eventId: EVENT_ID });
    expect(result.isError).toBe(false);
    expect(result.structuredContent).toStrictEqual({ eventId: EVENT_ID, status: 'queued' });
    expect(result.content).toHaveLength(1);
    const text = result.content[0]!.text;
    expect(text).toContain(EVENT_ID);
    expect(text).toMatch(/queued/);
    expect(text).toMatch(/not acknowledged/);
    expect(text).toMatch(/retried/);
  });

  it.each(FailureReasons)('TOOL-8, DEL-PIPE-6: failed (%s) is a tool error that names the event and the category', (reason) => {
    const result = toolResultOf({ kind: 'failed', eventId: EVENT_ID, reason });
    expect(result.isError).toBe(true);
    expect(result.structuredContent).toStrictEqual({ eventId: EVENT_ID, status: 'failed' });
    expect(result.content[0]!.text).toBe(`Delivery of event ${EVENT_ID} was rejected: ${describeReason(reason)}. It will not be retried.`);
  });

  it('failed without a category: its subscription ended before it could be delivered', () => {
    expect(toolResultOf({ kind: 'failed', eventId: EVENT_ID, reason: null }).content[0]!.text).toBe(
      `Delivery of event ${EVENT_ID} was rejected: its subscription ended before it could be delivered. It will not be retried.`,
    );
  });

  it('TOOL-9: every outcome with an event names it in its text and carries {eventId, status}', () => {
    for (const outcome of [
      { kind: 'delivered', eventId: EVENT_ID },
      { kind: 'queued', eventId: EVENT_ID },
      { kind: 'failed', eventId: EVENT_ID, reason: 'timeout' },
    ] as const) {
      const result = toolResultOf(outcome);
      expect(result.content[0]!.text).toContain(EVENT_ID);
      expect(result.structuredContent?.eventId).toBe(EVENT_ID);
      expect(result.structuredContent?.status).toBe(outcome.kind);
    }
  });
});

describe('describeReason', () => {
  it('every failure category has its own plain sentence, none of them the fallback', () => {
    const sentences = FailureReasons.map((reason) => describeReason(reason));
    expect(new Set(sentences).size).toBe(FailureReasons.length);
    expect(sentences).not.toContain(describeReason(null));
    expect(describeReason('http_4xx')).toBe('the callback refused it (HTTP 4xx)');
  });

  it('no category, or one it does not know, reads as an ended subscription', () => {
    for (const reason of [null, undefined, '', 'bogus', 'HTTP_4XX']) {
      expect(describeReason(reason)).toBe('its subscription ended before it could be delivered');
    }
  });

  // Known gap (see the report): the table is a plain object, so a name it inherits (`toString`,
  // `constructor`) is found on its prototype and a function comes back instead of a sentence.
  it('a name the sentence table inherits from Object is not a category either', () => {
    for (const reason of ['toString', 'constructor', '__proto__']) {
      expect(describeReason(reason)).toBe('its subscription ended before it could be delivered');
    }
  });
});

describe('restAnswerOf', () => {
  it('DEL-REST-2: 200 delivered and 202 queued, with the event id', () => {
    expect(restAnswerOf({ kind: 'delivered', eventId: EVENT_ID })).toStrictEqual({ status: 200, body: { eventId: EVENT_ID, status: 'delivered' } });
    expect(restAnswerOf({ kind: 'queued', eventId: EVENT_ID })).toStrictEqual({ status: 202, body: { eventId: EVENT_ID, status: 'queued' } });
  });

  it('DEL-REST-2, DEL-REST-3: 400 invalid_input with the validation sentence', () => {
    expect(restAnswerOf({ kind: 'invalid', error: 'body must be JSON' })).toStrictEqual({
      status: 400,
      body: { error: { code: 'invalid_input', message: 'body must be JSON' } },
    });
  });

  it('DEL-REST-2, DEL-PIPE-1: 409 no_subscription, with the same sentence as the tool', () => {
    expect(restAnswerOf({ kind: 'no_subscription' })).toStrictEqual({
      status: 409,
      body: { error: { code: 'no_subscription', message: NO_SUBSCRIPTION_TEXT } },
    });
  });

  it('DEL-REST-2: 502 delivery_failed, carrying the event, its status and its category', () => {
    expect(restAnswerOf({ kind: 'failed', eventId: EVENT_ID, reason: 'http_4xx' })).toStrictEqual({
      status: 502,
      body: {
        error: {
          code: 'delivery_failed',
          message: 'Delivery was rejected: the callback refused it (HTTP 4xx).',
          eventId: EVENT_ID,
          status: 'failed',
          reason: 'http_4xx',
        },
      },
    });
  });

  it('a failure without a category reports reason `dropped`', () => {
    const answer = restAnswerOf({ kind: 'failed', eventId: EVENT_ID, reason: null });
    expect(answer.status).toBe(502);
    expect(answer.body).toMatchObject({ error: { reason: 'dropped', eventId: EVENT_ID } });
  });

  it('DEL-REST-3: every error body is {error:{code,message}} with string code and message', () => {
    for (const outcome of [{ kind: 'invalid', error: 'x' }, { kind: 'no_subscription' }, { kind: 'failed', eventId: EVENT_ID, reason: 'timeout' }] as const) {
      const { status, body } = restAnswerOf(outcome);
      expect(status).toBeGreaterThanOrEqual(400);
      const error = (body as { error: Record<string, unknown> }).error;
      expect(typeof error.code).toBe('string');
      expect(typeof error.message).toBe('string');
      expect(Object.keys(body as object)).toStrictEqual(['error']);
    }
  });
});

describe('answerUnavailable', () => {
  const cases = [
    ['storage', undefined],
    ['queue', undefined],
    ['queue', EVENT_ID],
  ] as const;

  it('TOOL-8: on the tool surface, a tool error; storage unavailable, nothing was sent', () => {
    const { log } = recordingLog();
    const result = answerUnavailable(log, 'tool', new DependencyUnavailable('storage', { cause: new Error(CAUSE_TEXT) }), context);
    expect(result).toStrictEqual({ content: [{ type: 'text', text: 'The storage is unavailable; nothing was sent. Try again shortly.' }], isError: true });
  });

  it('TOOL-8, TOOL-9: queue unavailable with an event: names the event and carries it as failed', () => {
    const { log } = recordingLog();
    const result = answerUnavailable(log, 'tool', new DependencyUnavailable('queue', { cause: new Error(CAUSE_TEXT), eventId: EVENT_ID }), context);
    expect(result).toStrictEqual({
      content: [{ type: 'text', text: `The delivery queue is unavailable, so event ${EVENT_ID} was not sent; try again shortly.` }],
      isError: true,
      structuredContent: { eventId: EVENT_ID, status: 'failed' },
    });
  });

  it('TOOL-8: a queue that did not confirm, and a record that could not be marked: "may still be delivered", never "not sent"', () => {
    const { log } = recordingLog();
    const error = new DependencyUnavailable('queue', { cause: new Error(CAUSE_TEXT), eventId: EVENT_ID, undecided: true });
    const result = answerUnavailable(log, 'tool', error, context);
    expect(result.isError).toBe(true);
    expect(result.structuredContent).toStrictEqual({ eventId: EVENT_ID, status: 'queued' });
    expect(result.content[0]!.text).toBe(
      `The delivery queue did not confirm event ${EVENT_ID}, and its record could not be marked failed: it may still be delivered. Check with dm-dot events show ${EVENT_ID} before sending it again.`,
    );
    expect(result.content[0]!.text).not.toContain('was not sent');
    const rest = answerUnavailable(log, 'rest', error, context);
    expect(rest.status).toBe(503);
    expect(JSON.stringify(rest.body)).toContain('may still be delivered');
  });

  it('queue unavailable without an event: the delivery queue, nothing was sent', () => {
    const { log } = recordingLog();
    const result = answerUnavailable(log, 'tool', new DependencyUnavailable('queue'), context);
    expect(result.content[0]!.text).toBe('The delivery queue is unavailable; nothing was sent. Try again shortly.');
    expect(result.structuredContent).toBeUndefined();
  });

  it.each(cases)('DEL-REST-2: on REST, a 503 with <dependency>_unavailable (%s, event %s)', (dependency, eventId) => {
    const { log } = recordingLog();
    const error = new DependencyUnavailable(dependency, eventId ? { cause: new Error(CAUSE_TEXT), eventId } : { cause: new Error(CAUSE_TEXT) });
    const answer = answerUnavailable(log, 'rest', error, context);
    expect(answer.status).toBe(503);
    const body = answer.body as { error: Record<string, unknown> };
    expect(Object.keys(body)).toStrictEqual(['error']);
    expect(body.error.code).toBe(`${dependency}_unavailable`);
    // The same sentence as the tool surface, so every surface says the same thing.
    expect(body.error.message).toBe(answerUnavailable(recordingLog().log, 'tool', error, context).content[0]!.text);
    if (eventId) expect(body.error.eventId).toBe(eventId);
    else expect('eventId' in body.error).toBe(false);
  });

  it.each(cases)('EV-SUB-17, HTTP-19: on JSON-RPC, -32603 and a generic sentence naming the dependency (%s, event %s)', (dependency, eventId) => {
    const { log } = recordingLog();
    const error = new DependencyUnavailable(dependency, eventId ? { cause: new Error(CAUSE_TEXT), eventId } : { cause: new Error(CAUSE_TEXT) });
    expect(answerUnavailable(log, 'rpc', error, context)).toStrictEqual({
      code: ErrorCodes.internalError,
      message: `The ${dependency} is unavailable; try again shortly.`,
    });
    expect(ErrorCodes.internalError).toBe(-32603);
  });

  it.each(['tool', 'rest', 'rpc'] as const)('HTTP-19: the %s answer never carries the cause’s text, or the error’s own message', (surface) => {
    const { log } = recordingLog();
    for (const [dependency, eventId] of cases) {
      const cause = new Error(CAUSE_TEXT);
      const error = new DependencyUnavailable(dependency, eventId ? { cause, eventId } : { cause });
      const json = JSON.stringify(answerUnavailable(log, surface, error, context));
      for (const leak of ['ECONNREFUSED', '10.1.2.3', 'arn:aws', '123456789012', 'DmDotTable', 'Error:', 'req-42', 'tools/call'])
        expect(json).not.toContain(leak);
    }
  });

  it('whatever the cause, each surface gives the one answer of its dependency', () => {
    const causes: unknown[] = [
      new Error(CAUSE_TEXT),
      new TypeError('x'),
      'a string',
      undefined,
      { code: 'ThrottlingException' },
      new DependencyUnavailable('storage'),
    ];
    for (const surface of ['tool', 'rest', 'rpc'] as const) {
      const answers = causes.map((cause) =>
        JSON.stringify(answerUnavailable(recordingLog().log, surface, new DependencyUnavailable('storage', { cause }), context)),
      );
      expect(new Set(answers).size).toBe(1);
    }
  });

  it('HTTP-19: logs once, as an error, with the request id, where, the dependency, the event and the cause', () => {
    const { log, lines } = recordingLog();
    answerUnavailable(log, 'rest', new DependencyUnavailable('queue', { cause: new Error(CAUSE_TEXT), eventId: EVENT_ID }), {
      requestId: 'req-7',
      where: 'POST /v1/messages',
    });
    expect(lines).toStrictEqual([
      {
        level: 'error',
        event: 'dependency_unavailable',
        fields: { requestId: 'req-7', where: 'POST /v1/messages', dependency: 'queue', eventId: EVENT_ID, cause: `Error: ${CAUSE_TEXT}` },
      },
    ]);
  });

  it('the log line carries no event id when there is none', () => {
    const { log, lines } = recordingLog();
    answerUnavailable(log, 'rpc', new DependencyUnavailable('storage', { cause: new RangeError('deadline') }), context);
    expect(lines).toHaveLength(1);
    expect(lines[0]?.fields).toStrictEqual({ requestId: 'req-42', where: context.where, dependency: 'storage', cause: 'RangeError: deadline' });
  });
});

describe('describeCause', () => {
  it('an error as its name and message; anything else as its string', () => {
    expect(describeCause(new TypeError('bad'))).toBe('TypeError: bad');
    expect(describeCause(new DependencyUnavailable('queue'))).toBe('DependencyUnavailable: queue unavailable');
    expect(describeCause('plain')).toBe('plain');
    expect(describeCause(undefined)).toBe('undefined');
    expect(describeCause(42)).toBe('42');
  });

  it('odd values that are not errors still describe themselves', () => {
    expect(describeCause(null)).toBe('null');
    expect(describeCause(Symbol('s'))).toBe('Symbol(s)');
    expect(describeCause({ code: 'ThrottlingException' })).toBe('[object Object]');
  });

  it('an object with a message reads like an error (an SDK error of another realm), and a nameless error is an Error', () => {
    expect(describeCause({ name: 'ThrottlingException', message: 'Rate exceeded' })).toBe('ThrottlingException: Rate exceeded');
    expect(describeCause({ message: 'no name' })).toBe('Error: no name');
    const nameless = new Error('x');
    nameless.name = '';
    expect(describeCause(nameless)).toBe('Error: x');
  });

  // Known gap (see the report): String() throws on an object without a prototype, so a thrown
  // value of that kind makes answerUnavailable itself throw inside the error path.
  it('never throws, even on an object without a prototype', () => {
    expect(() => describeCause(Object.create(null))).not.toThrow();
  });
});
