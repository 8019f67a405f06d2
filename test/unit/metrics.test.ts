/**
 * lambda/metrics.ts writes CloudWatch embedded metric format (EMF). Every line it writes is checked
 * against the specification, with a validator written here from the spec's text
 * (https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/CloudWatch_Embedded_Metric_Format_Specification.html):
 *   - the log event is one JSON object, nothing before or after it;
 *   - `_aws` holds `Timestamp` (integer milliseconds since the epoch) and `CloudWatchMetrics`, an
 *     array of MetricDirectives;
 *   - a MetricDirective holds `Namespace` (1..255 characters), `Dimensions` (at least one
 *     DimensionSet) and `Metrics` (at most 100 MetricDefinitions);
 *   - a DimensionSet holds at most 9 dimension keys (the spec's schema; newer pages allow 30), each a
 *     root member with a string value;
 *   - a MetricDefinition holds `Name` (1..255), a root member whose value is a number (or an array of
 *     at most 100 numbers), and an optional `Unit` from CloudWatch's list.
 * The values are checked too: what the handler passed in is what CloudWatch would extract.
 */
import { DEPENDENCIES, DimensionName, METRICS_NAMESPACE, MetricName, createMetrics, emfLine, statusClass, type Metrics } from '../../lambda/metrics';

type Json = Record<string, unknown>;

const UNITS = new Set(
  (
    'Seconds Microseconds Milliseconds Bytes Kilobytes Megabytes Gigabytes Terabytes Bits Kilobits Megabits ' +
    'Gigabits Terabits Percent Count Bytes/Second Kilobytes/Second Megabytes/Second Gigabytes/Second ' +
    'Terabytes/Second Bits/Second Kilobits/Second Megabits/Second Gigabits/Second Terabits/Second Count/Second None'
  ).split(' '),
);

/** Every way `line` breaks the EMF specification; empty when it is a valid document. */
function emfViolations(line: string): string[] {
  const bad: string[] = [];
  if (line !== line.trim() || line.includes('\n')) bad.push('data before or after the JSON object');
  let root: unknown;
  try {
    root = JSON.parse(line);
  } catch {
    return ['not JSON'];
  }
  if (typeof root !== 'object' || root === null || Array.isArray(root)) return ['root is not an object'];
  const doc = root as Json;
  const aws = doc._aws as Json | undefined;
  if (typeof aws !== 'object' || aws === null) return ['no _aws object'];
  if (!Number.isInteger(aws.Timestamp)) bad.push('_aws.Timestamp is not an integer');
  const directives = aws.CloudWatchMetrics;
  if (!Array.isArray(directives)) return [...bad, '_aws.CloudWatchMetrics is not an array'];
  for (const [i, d] of (directives as Json[]).entries()) {
    const at = `directive ${i}`;
    if (typeof d.Namespace !== 'string' || d.Namespace.length < 1 || d.Namespace.length > 255) bad.push(`${at}: Namespace`);
    if (!Array.isArray(d.Dimensions) || d.Dimensions.length < 1) bad.push(`${at}: Dimensions must hold at least one DimensionSet`);
    for (const set of (d.Dimensions as unknown[]) ?? []) {
      if (!Array.isArray(set) || set.length > 9) bad.push(`${at}: a DimensionSet must be an array of at most 9 keys`);
      for (const key of (set as unknown[]) ?? []) {
        if (typeof key !== 'string' || key.length < 1 || key.length > 255) bad.push(`${at}: dimension key ${String(key)}`);
        else if (typeof doc[key] !== 'string') bad.push(`${at}: dimension target ${key} is not a string member of the root`);
        else if (!/^[\x20-\x7e]+$/.test(doc[key] as string) || (doc[key] as string).trim() === '') bad.push(`${at}: dimension value of ${key}`);
      }
    }
    if (!Array.isArray(d.Metrics) || d.Metrics.length > 100) bad.push(`${at}: Metrics must be an array of at most 100`);
    for (const m of (d.Metrics as Json[]) ?? []) {
      const name = m.Name;
      if (typeof name !== 'string' || name.length < 1 || name.length > 255) {
        bad.push(`${at}: metric Name`);
        continue;
      }
      const value = doc[name];
      const numeric = (v: unknown) => typeof v === 'number' && Number.isFinite(v);
      if (!(numeric(value) || (Array.isArray(value) && value.length <= 100 && value.every(numeric)))) {
        bad.push(`${at}: metric target ${name} is not a number`);
      }
      if (m.Unit !== undefined && !UNITS.has(m.Unit as string)) bad.push(`${at}: Unit ${String(m.Unit)}`);
      for (const k of Object.keys(m)) if (!['Name', 'Unit', 'StorageResolution'].includes(k)) bad.push(`${at}: extra member ${k}`);
    }
  }
  return bad;
}

/** The metrics CloudWatch would extract from one line: `name{dim=value,...} = value unit`. */
function extracted(line: string): string[] {
  const doc = JSON.parse(line) as Json;
  const out: string[] = [];
  for (const d of (doc._aws as Json).CloudWatchMetrics as Json[]) {
    for (const set of d.Dimensions as string[][]) {
      for (const m of d.Metrics as Json[]) {
        const dims = set.map((k) => `${k}=${doc[k] as string}`).join(',');
        out.push(`${d.Namespace as string}/${m.Name as string}{${dims}} = ${String(doc[m.Name as string])} ${m.Unit as string}`);
      }
    }
  }
  return out.sort();
}

function recording(now = 1_764_500_000_123): { metrics: Metrics; lines: string[] } {
  const lines: string[] = [];
  return { metrics: createMetrics({ sink: (l) => lines.push(l), clock: () => now }), lines };
}

describe('the validator itself catches what the spec forbids', () => {
  test.each([
    ['prefix before the object', `2026-11-30T12:00:00.000Z\tabc\tINFO\t{"_aws":{"Timestamp":1,"CloudWatchMetrics":[]}}`, /not JSON/],
    ['no _aws', '{"a":1}', /no _aws/],
    ['timestamp in seconds as a string', '{"_aws":{"Timestamp":"1","CloudWatchMetrics":[]}}', /Timestamp/],
    ['metric target missing', '{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Namespace":"N","Dimensions":[[]],"Metrics":[{"Name":"X"}]}]}}', /metric target X/],
    [
      'dimension target not a string',
      '{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Namespace":"N","Dimensions":[["D"]],"Metrics":[]}]},"D":3}',
      /dimension target D/,
    ],
    ['no DimensionSet', '{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Namespace":"N","Dimensions":[],"Metrics":[]}]}}', /at least one DimensionSet/],
    [
      'unknown unit',
      '{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Namespace":"N","Dimensions":[[]],"Metrics":[{"Name":"X","Unit":"ms"}]}]},"X":1}',
      /Unit ms/,
    ],
  ])('%s', (_name, line, problem) => {
    expect(emfViolations(line).join('; ')).toMatch(problem);
  });
});

describe('delivery decisions', () => {
  test('DEL-RUN-6: a delivered record: one line, valid EMF, Deliveries by Outcome and by Outcome and Via, plus attempt, duration and latency without dimensions', () => {
    const { metrics, lines } = recording();
    metrics.delivery({ outcome: 'delivered', via: 'worker', attempt: 2, durationMs: 312, latencyMs: 4_321 });
    expect(lines).toHaveLength(1);
    const line = lines[0] as string;
    expect(emfViolations(line)).toEqual([]);
    expect((JSON.parse(line) as { _aws: { Timestamp: number } })._aws.Timestamp).toBe(1_764_500_000_123);
    expect(extracted(line)).toEqual(
      [
        `${METRICS_NAMESPACE}/${MetricName.deliveries}{Outcome=delivered} = 1 Count`,
        `${METRICS_NAMESPACE}/${MetricName.deliveries}{Outcome=delivered,Via=worker} = 1 Count`,
        `${METRICS_NAMESPACE}/${MetricName.deliveryAttempt}{} = 2 Count`,
        `${METRICS_NAMESPACE}/${MetricName.deliveryDuration}{} = 312 Milliseconds`,
        `${METRICS_NAMESPACE}/${MetricName.deliveryLatency}{} = 4321 Milliseconds`,
      ].sort(),
    );
  });

  test('a decision without attempt or latency leaves those metrics out instead of inventing values', () => {
    const { metrics, lines } = recording();
    metrics.delivery({ outcome: 'malformed', via: 'worker', durationMs: 3 });
    expect(emfViolations(lines[0] as string)).toEqual([]);
    expect(extracted(lines[0] as string)).toEqual(
      [
        `DmDot/Deliveries{Outcome=malformed} = 1 Count`,
        `DmDot/Deliveries{Outcome=malformed,Via=worker} = 1 Count`,
        `DmDot/DeliveryDuration{} = 3 Milliseconds`,
      ].sort(),
    );
  });

  test('unusable numbers are dropped, never written as null (which would break the whole line)', () => {
    const { metrics, lines } = recording();
    metrics.delivery({ outcome: 'retry', via: 'inline', attempt: Number.NaN, durationMs: Number.POSITIVE_INFINITY, latencyMs: 5 });
    expect(emfViolations(lines[0] as string)).toEqual([]);
    expect(extracted(lines[0] as string)).toEqual(
      [`DmDot/Deliveries{Outcome=retry} = 1 Count`, `DmDot/Deliveries{Outcome=retry,Via=inline} = 1 Count`, `DmDot/DeliveryLatency{} = 5 Milliseconds`].sort(),
    );
  });
});

describe('requests', () => {
  test('one line per request: Requests by route and status class and by status class alone, latency without dimensions', () => {
    const { metrics, lines } = recording();
    metrics.request({ route: 'POST /mcp', status: 202, durationMs: 48 });
    const line = lines[0] as string;
    expect(emfViolations(line)).toEqual([]);
    expect(extracted(line)).toEqual(
      [
        `DmDot/Requests{Route=POST /mcp,StatusClass=2xx} = 1 Count`,
        `DmDot/Requests{StatusClass=2xx} = 1 Count`,
        `DmDot/RequestLatency{} = 48 Milliseconds`,
      ].sort(),
    );
  });

  test.each([
    [200, '2xx'],
    [304, '3xx'],
    [401, '4xx'],
    [503, '5xx'],
    [99, 'unknown'],
    [600, 'unknown'],
    [200.5, 'unknown'],
  ])('status %d is class %s', (status, cls) => {
    expect(statusClass(status)).toBe(cls);
  });

  test('dimension values stay valid: control and non-ASCII characters removed, empty becomes "unknown"', () => {
    const { metrics, lines } = recording();
    metrics.request({ route: 'GET /pup/manifest.json\u0000\u00e9', status: 200, durationMs: 1 });
    metrics.request({ route: '\u00e9', status: 200, durationMs: 1 });
    for (const line of lines) expect(emfViolations(line)).toEqual([]);
    expect((JSON.parse(lines[0] as string) as Json)[DimensionName.route]).toBe('GET /pup/manifest.json');
    expect((JSON.parse(lines[1] as string) as Json)[DimensionName.route]).toBe('unknown');
  });
});

describe('failed dependencies', () => {
  test.each(DEPENDENCIES)('ARCH-ALARM-1: %s: one valid line, DependencyUnavailable by Dependency only (a bounded dimension)', (dependency) => {
    const { metrics, lines } = recording();
    metrics.dependencyUnavailable(dependency);
    expect(lines).toHaveLength(1);
    expect(emfViolations(lines[0] as string)).toEqual([]);
    expect(extracted(lines[0] as string)).toEqual([`DmDot/DependencyUnavailable{Dependency=${dependency}} = 1 Count`]);
  });
});

describe('the emitter', () => {
  test('writes to stdout with a newline and nothing else by default (no console prefix)', () => {
    const writes: string[] = [];
    const spy = jest.spyOn(process.stdout, 'write').mockImplementation((chunk: string | Uint8Array) => {
      writes.push(String(chunk));
      return true;
    });
    try {
      createMetrics({ clock: () => 1 }).request({ route: 'GET /healthz', status: 200, durationMs: 2 });
    } finally {
      spy.mockRestore();
    }
    expect(writes).toHaveLength(1);
    expect(writes[0]?.endsWith('\n')).toBe(true);
    expect(emfViolations((writes[0] as string).slice(0, -1))).toEqual([]);
  });

  test('disabled: writes nothing', () => {
    const lines: string[] = [];
    const metrics = createMetrics({ enabled: false, sink: (l) => lines.push(l) });
    metrics.delivery({ outcome: 'delivered', via: 'worker', durationMs: 1 });
    metrics.request({ route: 'POST /mcp', status: 200, durationMs: 1 });
    metrics.dependencyUnavailable('storage');
    expect(lines).toEqual([]);
  });

  test('a failing sink never reaches the caller', () => {
    const metrics = createMetrics({
      sink: () => {
        throw new Error('EPIPE');
      },
    });
    expect(() => metrics.delivery({ outcome: 'delivered', via: 'worker', durationMs: 1 })).not.toThrow();
    expect(() => metrics.request({ route: 'POST /mcp', status: 500, durationMs: 1 })).not.toThrow();
  });

  test('emfLine with no usable metric writes no line at all', () => {
    expect(emfLine(1, { A: 'b' }, [{ dimensionSets: [['A']], metrics: [{ name: 'X', unit: 'Count', value: Number.NaN }] }])).toBeUndefined();
  });
});
