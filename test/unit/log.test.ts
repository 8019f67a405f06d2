/**
 * The logger (lambda/log.ts): one JSON line per event by default (what CloudWatch and log
 * collectors read), or one readable text line per event (what lambda/local/main.ts picks when
 * stderr is a terminal), each handed whole to the sink. Both shapes carry the fields they were
 * given; neither throws on odd values (undefined, null, nested objects, errors, long strings);
 * and every line is scrubbed of `whsec_` secrets and of registered values (HTTP-10: the key
 * never appears in a log line).
 *
 * The sink and the clock are injected; the default sink is checked against a spy on stderr.
 */
import { scrub } from '../../lambda/cli/errors';
import { spawnSync } from 'node:child_process';
import { batchedSink, createLogger, textLine, type LoggerOptions } from '../../lambda/log';

/** 2026-11-03T10:30:00.123Z */
const AT = new Date(Date.UTC(2026, 10, 3, 10, 30, 0, 123));

function capture(options: Omit<LoggerOptions, 'sink'> = {}) {
  const lines: string[] = [];
  const log = createLogger({ now: () => AT, ...options, sink: (line) => lines.push(line) });
  return { log, lines };
}

const parsed = (line: string | undefined): Record<string, unknown> => JSON.parse(line ?? 'null') as Record<string, unknown>;

describe('JSON lines (the default)', () => {
  it('one line per call: level, event, the clock’s ISO time, then the fields', () => {
    const { log, lines } = capture();
    log.info('request', { requestId: 'req-1', status: 200, ms: 12 });
    log.warn('slow', { ms: 4001 });
    log.error('dependency_unavailable', { dependency: 'queue' });
    expect(lines).toHaveLength(3);
    for (const line of lines) expect(line).not.toContain('\n');
    expect(parsed(lines[0])).toStrictEqual({ level: 'info', event: 'request', time: '2026-11-03T10:30:00.123Z', requestId: 'req-1', status: 200, ms: 12 });
    expect(parsed(lines[1])).toStrictEqual({ level: 'warn', event: 'slow', time: '2026-11-03T10:30:00.123Z', ms: 4001 });
    expect(parsed(lines[2])).toStrictEqual({ level: 'error', event: 'dependency_unavailable', time: '2026-11-03T10:30:00.123Z', dependency: 'queue' });
  });

  it('level, event and time come first, in that order, for a reader scanning the raw lines', () => {
    const { log, lines } = capture();
    log.info('started', { port: 8787 });
    expect(lines[0]).toBe('{"level":"info","event":"started","time":"2026-11-03T10:30:00.123Z","port":8787}');
  });

  it('with no fields, a line of level, event and time only', () => {
    const { log, lines } = capture();
    log.info('stopped');
    expect(parsed(lines[0])).toStrictEqual({ level: 'info', event: 'stopped', time: AT.toISOString() });
  });

  it('is the format when none is given, and a bare function is taken as the sink', () => {
    const lines: string[] = [];
    const log = createLogger((line) => lines.push(line));
    log.info('hello', { n: 1 });
    expect(lines).toHaveLength(1);
    expect(parsed(lines[0])).toMatchObject({ level: 'info', event: 'hello', n: 1 });
    expect(Number.isNaN(Date.parse(String(parsed(lines[0]).time)))).toBe(false);
  });

  it('the default sink writes each line to stderr, newline-terminated', () => {
    const written: string[] = [];
    const spy = jest.spyOn(process.stderr, 'write').mockImplementation(((chunk: string | Uint8Array) => {
      written.push(String(chunk));
      return true;
    }) as typeof process.stderr.write);
    try {
      const log = createLogger({ now: () => AT });
      log.warn('to_stderr', { a: 1 });
    } finally {
      spy.mockRestore();
    }
    expect(written).toStrictEqual(['{"level":"warn","event":"to_stderr","time":"2026-11-03T10:30:00.123Z","a":1}\n']);
  });

  it('odd values never throw, and every line stays one line of valid JSON', () => {
    const { log, lines } = capture();
    const long = 'x'.repeat(200_000);
    const error = new TypeError('bad thing');
    expect(() => {
      log.info('undefined_field', { gone: undefined, kept: 1 });
      log.info('null_field', { nothing: null });
      log.info('nested', { a: { b: { c: [1, { d: 'e' }] } } });
      log.error('error_value', { error });
      log.info('long', { long });
      log.info('multiline', { text: 'one\ntwo\r\nthree\u2028four' });
      log.info('numbers', { nan: Number.NaN, inf: Number.POSITIVE_INFINITY, neg: -0 });
      log.info('function_and_symbol', { fn: () => 1, sym: Symbol('s') });
      log.info('unicode', { text: 'ünïcødé → ✓ \u0000' });
    }).not.toThrow();
    expect(lines).toHaveLength(9);
    for (const line of lines) {
      expect(line).not.toMatch(/[\n\r]/);
      expect(() => JSON.parse(line)).not.toThrow();
    }
    expect(parsed(lines[0])).toStrictEqual({ level: 'info', event: 'undefined_field', time: AT.toISOString(), kept: 1 });
    expect(parsed(lines[1])).toMatchObject({ nothing: null });
    expect(parsed(lines[2])).toMatchObject({ a: { b: { c: [1, { d: 'e' }] } } });
    expect(parsed(lines[3])).toMatchObject({ level: 'error', event: 'error_value' });
    expect(parsed(lines[4]).long).toBe(long);
    expect(parsed(lines[5]).text).toBe('one\ntwo\r\nthree\u2028four');
    expect(parsed(lines[6])).toMatchObject({ nan: null, inf: null });
    expect(parsed(lines[8]).text).toBe('ünïcødé → ✓ \u0000');
  });

  // Known gap (see the report): JSON.stringify throws on a BigInt or a cycle, and the logger lets
  // it escape into the caller (a request handler), so a bad log field fails the request.
  it('a BigInt or a circular value does not throw out of the logger', () => {
    const { log } = capture();
    const cycle: Record<string, unknown> = { name: 'loop' };
    cycle.self = cycle;
    expect(() => log.info('bigint', { n: 10n })).not.toThrow();
    expect(() => log.info('cycle', { cycle })).not.toThrow();
  });
});

describe('text lines (a terminal)', () => {
  it('a request reads as time, method, path, status and duration', () => {
    const { log, lines } = capture({ format: 'text' });
    log.info('request', { method: 'POST', path: '/mcp', status: 200, ms: 12, requestId: 'req-1' });
    expect(lines).toStrictEqual(['10:30:00  POST /mcp → 200  12 ms']);
  });

  it.each([
    [{ action: 'delivered', attempt: 1, via: 'inline' }, 'delivered (attempt 1, inline)'],
    [{ action: 'delivered', attempt: 3, via: 'worker' }, 'delivered (attempt 3, worker)'],
    [{ action: 'delivered' }, 'delivered'],
    [{ action: 'retry', delayS: 4, reason: 'http_5xx', attempt: 2, via: 'worker' }, 'retry in 4 s (http_5xx on attempt 2, worker)'],
    [{ action: 'failed', reason: 'http_4xx', attempt: 1 }, 'failed: http_4xx (attempt 1); kept in the dead letters'],
    [
      { action: 'failed', reason: 'http_4xx', attempt: 3, via: 'worker', subscriptionEnded: true },
      'failed: http_4xx (attempt 3, worker); kept in the dead letters; the 410 ended its subscription',
    ],
    [{ action: 'dropped', via: 'worker' }, 'dropped: its subscription ended (or was replaced) before it could be delivered (worker)'],
    [
      { action: 'retry', delayS: 1, reason: 'timeout', attempt: 1, via: 'inline', outcomeUnknown: true },
      'no answer within its deadline on attempt 1: the dot may have it; sent again in 1 s with the same id (inline)',
    ],
    [{ action: 'deferred', status: 'leased', via: 'worker' }, 'deferred leased (worker)'],
    // The safety-net copy of an event that failed inline: one POST, so one failure and one copy.
    [
      { action: 'dead_letter_copy', reason: 'http_4xx', attempt: 1, via: 'worker' },
      'its copy kept in the dead letters: it failed before (http_4xx on attempt 1), no new attempt (worker)',
    ],
  ])('a delivery decision %j reads as “%s”', (fields, text) => {
    const { log, lines } = capture({ format: 'text' });
    log.info('delivery', { eventId: 'evt_0123', ...fields });
    expect(lines).toStrictEqual([`10:30:00  evt_0123  ${text}`]);
  });

  it('any other event: `level  event  k=v …`, no level for info, strings bare and the rest as JSON', () => {
    const { log, lines } = capture({ format: 'text' });
    log.info('started', { url: 'http://127.0.0.1:8787/mcp', port: 8787, tls: false, gone: undefined, nested: { a: [1, 'b'] } });
    log.warn('slow', { ms: 4001 });
    log.error('dependency_unavailable', { dependency: 'queue', eventId: 'evt_1' });
    log.info('bare');
    log.warn('bare_warn', {});
    expect(lines).toStrictEqual([
      '10:30:00  started  url=http://127.0.0.1:8787/mcp port=8787 tls=false nested={"a":[1,"b"]}',
      '10:30:00  warn  slow  ms=4001',
      '10:30:00  error  dependency_unavailable  dependency=queue eventId=evt_1',
      '10:30:00  bare',
      '10:30:00  warn  bare_warn',
    ]);
  });

  it('odd values never throw, and the fields still show', () => {
    const { log, lines } = capture({ format: 'text' });
    const long = 'y'.repeat(200_000);
    expect(() => {
      log.info('request', {});
      log.info('delivery', {});
      log.info('odd', { nothing: null, gone: undefined, error: new Error('boom'), long, deep: { a: { b: { c: {} } } } });
    }).not.toThrow();
    expect(lines[0]).toBe('10:30:00  undefined undefined → undefined  undefined ms');
    expect(lines[1]).toBe('10:30:00  undefined  undefined');
    expect(lines[2]).toContain('nothing=null');
    expect(lines[2]).not.toContain('gone=');
    expect(lines[2]).toContain(`long=${long}`);
    expect(lines[2]).toContain('deep={"a":{"b":{"c":{}}}}');
    expect(lines[2]).toContain('error=');
  });

  it('textLine is the same function the logger uses, with the time of the given instant (UTC)', () => {
    expect(textLine('warn', 'x', { a: 'b' }, AT)).toBe('10:30:00  warn  x  a=b');
    expect(textLine('info', 'x', {}, new Date(Date.UTC(2026, 0, 1, 23, 59, 59, 999)))).toBe('23:59:59  x');
  });

  // Known gap (see the report): a string value is printed raw, so a newline in it splits one
  // event into two lines on the terminal (and could forge a second, fake-looking line).
  it('a value with a newline still makes one line', () => {
    const { log, lines } = capture({ format: 'text' });
    log.info('odd', { text: 'one\ntwo' });
    expect(lines).toHaveLength(1);
    expect(lines[0]).not.toContain('\n');
  });
});

describe('scrubbing (the last line of defence)', () => {
  const secret = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw+/=';

  it.each(['json', 'text'] as const)('%s: a whsec_ secret anywhere in a line is replaced', (format) => {
    const { log, lines } = capture({ format });
    log.info('oops', { secret, nested: { deeper: `prefix ${secret} suffix` } });
    log.info('request', { method: 'POST', path: `/x?s=${secret}`, status: 500, ms: 1 });
    expect(lines).toHaveLength(2);
    for (const line of lines) {
      expect(line).not.toContain('MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw');
      expect(line).toContain('whsec_[redacted]');
    }
  });

  it.each(['json', 'text'] as const)('%s: a whsec_ secret in URL-safe base64 is replaced whole, as the CLI scrubs it (one scrubber)', (format) => {
    const { log, lines } = capture({ format });
    const urlSafe = 'whsec_MfKQ9r8G_KYqrTwj-UPD8ILPZIo2LaLaSw';
    log.info('oops', { urlSafe });
    expect(lines[0]).not.toContain('KYqrTwj');
    expect(lines[0]).not.toContain('UPD8ILPZ');
    expect(scrub(`dot said ${urlSafe}`, [])).toBe('dot said whsec_[redacted]');
  });

  it.each(['json', 'text'] as const)('HTTP-10 (%s): a registered value (the API key) never appears in a line', (format) => {
    const { log, lines } = capture({ format });
    const key = 'k3y-Th4t-Must-N0t-Leak';
    log.redact(key);
    log.info('oops', { key, url: `https://host/mcp?key=${key}`, nested: { twice: `${key}${key}` } });
    log.error(`event-${key}`);
    expect(lines).toHaveLength(2);
    for (const line of lines) {
      expect(line).not.toContain(key);
      expect(line).toContain('[redacted]');
    }
  });

  it('values shorter than 8 characters are not registered (they would blank out ordinary words)', () => {
    const { log, lines } = capture();
    log.redact('info');
    log.redact('');
    log.info('information', { text: 'info' });
    expect(parsed(lines[0])).toMatchObject({ level: 'info', event: 'information', text: 'info' });
  });

  it('redaction applies to lines written after registering, from every level', () => {
    const { log, lines } = capture();
    const key = 'registered-later-value';
    log.info('before', { key });
    log.redact(key);
    log.warn('after', { key });
    log.error('after', { key });
    expect(lines[0]).toContain(key);
    expect(lines[1]).not.toContain(key);
    expect(lines[2]).not.toContain(key);
  });

  // Known gap (see the report): the scrub runs on the serialized line, so a registered value with
  // a character JSON escapes (`"` or `\`, allowed in MCP_API_KEY) is written in its escaped form.
  it('HTTP-10: a registered value with a quote or backslash does not appear escaped in a JSON line', () => {
    const { log, lines } = capture();
    const key = 'my"api\\key-of-enough-length';
    log.redact(key);
    log.info('oops', { key });
    expect(lines[0]).not.toContain(JSON.stringify(key).slice(1, -1));
  });
});

describe('HTTP-10: a key typed anywhere in a URL is scrubbed', () => {
  const SENDER = `dmsk_billing_${'A1b2-C3d4_'.repeat(4)}xyz`;

  it.each(['json', 'text'] as const)('HTTP-KEY-LOG-1 (%s): a key= value in a path or query and a sender key never reach a line verbatim', (format) => {
    const { log, lines } = capture({ format });
    log.info('request', { method: 'POST', path: '/mcp&key=typed-into-the-path-0123', status: 404, ms: 1 });
    log.info('request', { method: 'GET', path: '/mcp;KEY=another%2Dsecret-0123&x=1', status: 404, ms: 1 });
    log.warn('request_timeout', { path: `/v1/messages/${SENDER}` });
    const all = lines.join('\n');
    for (const secret of ['typed-into-the-path-0123', 'another%2Dsecret-0123', SENDER.slice(-43)]) expect(all).not.toContain(secret);
    expect(all).toContain('/mcp&key=[redacted]');
    expect(all).toContain('x=1');
    expect(all).toContain('dmsk_billing_[redacted]');
  });

  it('HTTP-KEY-LOG-1: names that merely end in "key" are left alone', () => {
    const { log, lines } = capture({ format: 'text' });
    log.warn('api_key_rotated', { keyFile: '/state/api-key', idempotencyKey: 'abc' });
    expect(lines[0]).toContain('keyFile=/state/api-key');
    expect(lines[0]).toContain('idempotencyKey=abc');
  });
});

describe('the batched sink (the local server)', () => {
  it('writes the lines of one turn together, in order, in one write, once the turn ends', async () => {
    const writes: string[] = [];
    const sink = batchedSink((text) => writes.push(text));
    sink('one');
    sink('two');
    expect(writes).toStrictEqual([]);
    await new Promise((done) => setImmediate(done));
    sink('three');
    await new Promise((done) => setImmediate(done));
    expect(writes).toStrictEqual(['one\ntwo\n', 'three\n']);
  });

  it('a line logged just before the process exits is still written', () => {
    const script = `const { batchedSink } = require(${JSON.stringify(require.resolve('../../lambda/log'))}); const sink = batchedSink(); sink('last words'); process.exit(3);`;
    const child = spawnSync(process.execPath, ['--require', 'tsx/cjs', '-e', script], { encoding: 'utf8' });
    expect(child.status).toBe(3);
    expect(child.stderr).toBe('last words\n');
  });
});
