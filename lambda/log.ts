/**
 * The logger behind the `Logger` port: one JSON line per event on stderr (what CloudWatch and log
 * collectors read), or, on a terminal, one readable line per event for a person watching
 * `npm start` (a request, a delivery decision). Callers pass only safe fields: ids, categories,
 * codes, durations. As a last line of defence every line is scrubbed of `whsec_` secrets, of
 * `key=` values and sender keys (a client may type its key anywhere in a URL), and of the values
 * registered with `redact` (the API key, pup's secrets).
 *
 * Deliberately not here: log shipping, levels from configuration, request bodies.
 */
import type { Logger } from './ports';

export type { Logger };

/** A `whsec_` secret in standard or URL-safe base64: every character either alphabet uses. */
const WEBHOOK_SECRET = /whsec_[A-Za-z0-9+/=_-]*/g;

/** Replaces every `whsec_` secret in `text`: the one scrubber of them, for log lines and the CLI's output. */
export function scrubWebhookSecrets(text: string): string {
  return text.replace(WEBHOOK_SECRET, 'whsec_[redacted]');
}

/**
 * A `key=` parameter anywhere in a line (a query string, or a key typed into the path as
 * `/mcp&key=…`), up to the next separator, and a sender key wherever it appears (its name stays:
 * it is no secret). Matched case-insensitively; `idempotencyKey=` and the like are not `key=`.
 */
const KEY_PARAMETER = /(^|[^A-Za-z0-9_])(key=)[^&#;\s"\\]*/gi;
const SENDER_KEY = /\b(dmsk_[a-z0-9][a-z0-9-]{0,31}_)[A-Za-z0-9_-]{43}/g;

/** Replaces the value of every `key=` parameter and every sender key in `text`. */
export function scrubApiKeys(text: string): string {
  return text.replace(KEY_PARAMETER, '$1$2[redacted]').replace(SENDER_KEY, '$1[redacted]');
}

export interface LoggerOptions {
  format?: 'json' | 'text';
  sink?: (line: string) => void;
  /** The clock of the time stamps (tests). */
  now?: () => Date;
}

/** A line break in a value never starts a second line: it is written as its JSON escape. */
function oneLine(text: string): string {
  return text.replace(/[\r\n\u2028\u2029]/g, (c) => JSON.stringify(c).slice(1, -1));
}

/** JSON.stringify that never throws (a BigInt, a cycle): a log line must not fail its caller. */
function safeJson(value: unknown): string {
  try {
    // Without a replacer first: it is called for every field of every line, and a BigInt, the
    // one value it changes, makes this first try throw.
    return JSON.stringify(value) ?? String(value);
  } catch {
    try {
      return JSON.stringify(value, (_key, v: unknown) => (typeof v === 'bigint' ? v.toString() : v)) ?? String(value);
    } catch {
      return '"[unserializable]"';
    }
  }
}

/** The readable form of the two events a person watches for; anything else as `level event k=v`. */
export function textLine(level: string, event: string, fields: Record<string, unknown>, at: Date): string {
  return oneLine(`${at.toISOString().slice(11, 19)}  ${textBody(level, event, fields)}`);
}

function textBody(level: string, event: string, fields: Record<string, unknown>): string {
  if (event === 'request') return `${String(fields.method)} ${String(fields.path)} → ${String(fields.status)}  ${String(fields.ms)} ms`;
  if (event === 'delivery') return `${String(fields.eventId)}  ${describeDecision(fields)}`;
  const rest = Object.entries(fields)
    .filter(([, value]) => value !== undefined)
    .map(([name, value]) => `${name}=${typeof value === 'string' ? value : safeJson(value)}`)
    .join(' ');
  return `${level === 'info' ? '' : `${level}  `}${event}${rest ? `  ${rest}` : ''}`;
}

/** `delivered (attempt 1, inline)`, `retry in 4 s (http_5xx, attempt 2)`, `failed: http_4xx …`, `dropped …`, a dead-letter copy. */
function describeDecision(fields: Record<string, unknown>): string {
  const via = fields.via ? String(fields.via) : '';
  const attempt = fields.attempt !== undefined ? `attempt ${String(fields.attempt)}` : '';
  const note = (...parts: string[]) => (parts.filter(Boolean).length > 0 ? ` (${parts.filter(Boolean).join(', ')})` : '');
  switch (fields.action) {
    case 'delivered':
      return `delivered${note(attempt, via)}`;
    case 'retry':
      if (fields.outcomeUnknown) {
        return `no answer within its deadline on ${attempt}: the dot may have it; sent again in ${String(fields.delayS)} s with the same id${note(via)}`;
      }
      return `retry in ${String(fields.delayS)} s${note(`${String(fields.reason)} on ${attempt}`, via)}`;
    case 'failed':
      return (
        `failed: ${String(fields.reason)}${note(attempt, via)}; kept in the dead ` +
        `letters${fields.subscriptionEnded ? '; the 410 ended its subscription' : ''}`
      );
    case 'dead_letter_copy':
      // The job of an event that failed already (inline, or a dead-letter send that failed): no POST now.
      return (
        `its copy kept in the dead letters: it failed before (${String(fields.reason)}${fields.attempt ? ` on ${attempt}` : ''}), no new ` +
        `attempt${note(via)}`
      );
    case 'malformed':
      return `a queued message that is not a delivery job: kept in the dead letters as malformed${note(via)}`;
    case 'dropped':
      return `dropped: its subscription ended (or was replaced) before it could be delivered${note(via)}`;
    default:
      return `${String(fields.action)}${fields.status ? ` ${String(fields.status)}` : ''}${note(via)}`;
  }
}

/**
 * A sink that writes the lines of one turn of the event loop together, in one write, and what is
 * still held at exit; not for Lambda (docs/decisions.md, "The local server's log lines are written
 * once per turn of the event loop").
 */
export function batchedSink(write: (text: string) => void = (text) => process.stderr.write(text)): (line: string) => void {
  let held: string[] = [];
  const flush = () => {
    if (held.length === 0) return;
    const text = `${held.join('\n')}\n`;
    held = [];
    write(text);
  };
  process.on('exit', flush);
  return (line) => {
    if (held.push(line) === 1) setImmediate(flush);
  };
}

export function createLogger(options: LoggerOptions | ((line: string) => void) = {}): Logger & { redact(value: string): void } {
  const {
    format = 'json',
    sink = (line: string) => process.stderr.write(`${line}\n`),
    now = () => new Date(),
  } = typeof options === 'function' ? { sink: options } : options;
  // Each registered value as written and as JSON escapes it (a key may hold a quote or a
  // backslash), worked out once at `redact`, not on every line.
  const redacted = new Set<string>();
  const scrub = (line: string) => {
    let out = scrubApiKeys(scrubWebhookSecrets(line));
    for (const form of redacted) if (out.includes(form)) out = out.split(form).join('[redacted]');
    return out;
  };
  const emit = (level: string, event: string, fields: Record<string, unknown> = {}) => {
    const at = now();
    // A caller's field never passes for the logger's own level, event or time.
    const { level: _level, event: _event, time: _time, ...rest } = fields;
    const line = format === 'text' ? textLine(level, event, rest, at) : safeJson({ level, event, time: at.toISOString(), ...rest });
    sink(scrub(line));
  };
  return {
    info: (event, fields) => emit('info', event, fields),
    warn: (event, fields) => emit('warn', event, fields),
    error: (event, fields) => emit('error', event, fields),
    redact: (value) => {
      if (value.length < 8) return;
      redacted.add(value);
      redacted.add(JSON.stringify(value).slice(1, -1));
    },
  };
}
