/**
 * Structured one-line JSON logs on stderr. Callers pass only safe fields: ids, categories, codes.
 * As a last line of defence every line is scrubbed of `whsec_` secrets and of the values
 * registered with `redact` (the API key).
 *
 * Deliberately not here: log shipping, levels from configuration, request bodies.
 */
export interface Logger {
  info(event: string, fields?: Record<string, unknown>): void;
  warn(event: string, fields?: Record<string, unknown>): void;
  error(event: string, fields?: Record<string, unknown>): void;
}

const SECRET_PATTERN = /whsec_[A-Za-z0-9+/=]*/g;

export function createLogger(sink: (line: string) => void = (line) => process.stderr.write(`${line}\n`)): Logger & { redact(value: string): void } {
  const redacted = new Set<string>();
  const emit = (level: string, event: string, fields: Record<string, unknown> = {}) => {
    let line = JSON.stringify({ level, event, time: new Date().toISOString(), ...fields }).replace(SECRET_PATTERN, 'whsec_[redacted]');
    for (const value of redacted) if (value) line = line.split(value).join('[redacted]');
    sink(line);
  };
  return {
    info: (event, fields) => emit('info', event, fields),
    warn: (event, fields) => emit('warn', event, fields),
    error: (event, fields) => emit('error', event, fields),
    redact: (value) => {
      if (value.length >= 8) redacted.add(value);
    },
  };
}
