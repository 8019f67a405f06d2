/**
 * Metrics in CloudWatch embedded metric format (EMF): one JSON line on stdout per delivery decision,
 * per HTTP request and per answer a failed dependency forced, which CloudWatch Logs turns into
 * metrics in the `DmDot` namespace: no API call, nothing to flush. `process.stdout.write`, not
 * `console.log`, whose prefix the spec forbids ("no additional data at the beginning or end").
 *
 * Every distinct combination of dimension values is one custom metric, priced per month, so only
 * bounded values become dimensions; ids, URLs, hosts and the API key never do. The stack's dashboard
 * reads the names below, so they are defined once, here.
 *
 * Deliberately not here: the AWS SDK or PutMetricData, buffering across invocations, high-resolution
 * metrics, and any value that could carry a secret (callers pass outcomes, routes and numbers).
 * A metric must never break a request: bad values are dropped, and a failing sink is ignored.
 */

import type { DeliveryMetrics } from './ports';

export const METRICS_NAMESPACE = 'DmDot';

export const MetricName = {
  /** One per delivery decision, by `Outcome`, and by `Outcome` and `Via` (inline or worker). */
  deliveries: 'Deliveries',
  /** The attempt number a decision was made at (1 = first attempt). */
  deliveryAttempt: 'DeliveryAttempt',
  /** How long one decision took (worker: storage reads, the POST, the queue call; inline: the POST and its record). */
  deliveryDuration: 'DeliveryDuration',
  /** From the message's enqueue to its delivery: what the dot experienced. Delivered records only. */
  deliveryLatency: 'DeliveryLatency',
  /** One per HTTP request the MCP function answered, by `Route` and `StatusClass`. */
  requests: 'Requests',
  /** How long the MCP function took to answer one request. */
  requestLatency: 'RequestLatency',
  /** One per answer forced by a failed dependency, by `Dependency`: often an HTTP 200 API Gateway's 5xx never sees. Alarmed. */
  dependencyUnavailable: 'DependencyUnavailable',
  /** Records the reconciler had to repair (re-enqueued or failed), by `Action`: emitted by the reconciler, alarmed. */
  recordsRepaired: 'RecordsRepaired',
  /** Per reconciler run, what it could not do (a record it could not settle, a read that failed), 0 included: alarmed. */
  reconcileErrors: 'ReconcileErrors',
  /** Per reconciler run, the dead-letter queue's depth: the new dead letter alarm reads its rises, sooner than SQS's metrics. */
  deadLetters: 'DeadLetters',
} as const;

export const DimensionName = {
  outcome: 'Outcome',
  via: 'Via',
  route: 'Route',
  statusClass: 'StatusClass',
  dependency: 'Dependency',
  action: 'Action',
} as const;

/** The values of the reconciler's `Action` (RecordsRepaired): the alarm sums exactly these. */
export const REPAIR_ACTIONS = ['requeued', 'failed'] as const;
export type RepairAction = (typeof REPAIR_ACTIONS)[number];

/** The values of `Dependency` (core/errors.ts's, and the API key's Secrets Manager read): the alarm sums exactly these. */
export const DEPENDENCIES = ['storage', 'queue', 'secrets'] as const;
export type MetricDependency = (typeof DEPENDENCIES)[number];

// The delivery vocabulary is the ports' (the core reports decisions through them); the dashboard reads it here.
export { DELIVERY_OUTCOMES, DELIVERY_VIAS, type DeliveryMetric, type DeliveryOutcome, type DeliveryVia } from './ports';

export const STATUS_CLASSES = ['2xx', '3xx', '4xx', '5xx'] as const;

export interface Metrics extends DeliveryMetrics {
  /** `route`: the route template (`POST /mcp`), never the path as sent: it could carry the key. */
  request(metric: { route: string; status: number; durationMs: number }): void;
  /** One request was answered "unavailable" because this dependency failed. */
  dependencyUnavailable(dependency: MetricDependency): void;
}

/** One metric directive: the dimension sets it applies to and the metrics it extracts. */
interface Directive {
  dimensionSets: string[][];
  metrics: Array<{ name: string; unit: 'Count' | 'Milliseconds'; value: number }>;
}

/** Dimension values must be non-empty ASCII without control characters (CloudWatch Dimension). */
function dimensionValue(value: string): string {
  const clean = value
    .replace(/[^\x20-\x7e]/g, '')
    .trim()
    .slice(0, 255);
  return clean === '' ? 'unknown' : clean;
}

/** The EMF document for one event, as one line of JSON, without directives of unusable values; undefined when none remain. */
export function emfLine(timestamp: number, dimensions: Readonly<Record<string, string>>, directives: readonly Directive[]): string | undefined {
  const root: Record<string, unknown> = {};
  const cloudWatchMetrics: unknown[] = [];
  for (const directive of directives) {
    const metrics = directive.metrics.filter((m) => Number.isFinite(m.value));
    if (metrics.length === 0) continue;
    for (const m of metrics) root[m.name] = m.value;
    cloudWatchMetrics.push({
      Namespace: METRICS_NAMESPACE,
      Dimensions: directive.dimensionSets,
      Metrics: metrics.map((m) => ({ Name: m.name, Unit: m.unit })),
    });
  }
  if (cloudWatchMetrics.length === 0) return undefined;
  for (const [name, value] of Object.entries(dimensions)) root[name] = dimensionValue(value);
  return JSON.stringify({ _aws: { Timestamp: Math.round(timestamp), CloudWatchMetrics: cloudWatchMetrics }, ...root });
}

export function statusClass(status: number): string {
  return Number.isInteger(status) && status >= 100 && status <= 599 ? `${Math.floor(status / 100)}xx` : 'unknown';
}

export interface MetricsOptions {
  /** Where a line goes; stdout by default. */
  sink?: (line: string) => void;
  clock?: () => number;
  /** false: a no-op emitter (outside Lambda nobody turns the lines into metrics). */
  enabled?: boolean;
}

/** `write` takes any directives; `count` writes one Count metric by every dimension given. */
function emfWriter(options: MetricsOptions) {
  const sink = options.sink ?? ((line: string) => void process.stdout.write(`${line}\n`));
  const clock = options.clock ?? Date.now;
  const write = (dimensions: Record<string, string>, directives: Directive[]) => {
    if (options.enabled === false) return;
    try {
      const line = emfLine(clock(), dimensions, directives);
      if (line !== undefined) sink(line);
    } catch {
      // A metric is never worth a failed request, a retried delivery or a failed run.
    }
  };
  const count = (dimensions: Record<string, string>, name: string, value: number) =>
    write(dimensions, [{ dimensionSets: [Object.keys(dimensions)], metrics: [{ name, unit: 'Count', value }] }]);
  return { write, count };
}

export function createMetrics(options: MetricsOptions = {}): Metrics {
  const { write, count } = emfWriter(options);
  return {
    delivery({ outcome, via, attempt, durationMs, latencyMs }) {
      // By Outcome alone too: the totals (and the alarms on them) need no sum over Via.
      write({ [DimensionName.outcome]: outcome, [DimensionName.via]: via }, [
        {
          dimensionSets: [[DimensionName.outcome], [DimensionName.outcome, DimensionName.via]],
          metrics: [{ name: MetricName.deliveries, unit: 'Count', value: 1 }],
        },
        {
          dimensionSets: [[]],
          metrics: [
            { name: MetricName.deliveryDuration, unit: 'Milliseconds', value: durationMs },
            ...(attempt === undefined ? [] : [{ name: MetricName.deliveryAttempt, unit: 'Count' as const, value: attempt }]),
            ...(latencyMs === undefined ? [] : [{ name: MetricName.deliveryLatency, unit: 'Milliseconds' as const, value: latencyMs }]),
          ],
        },
      ]);
    },
    request({ route, status, durationMs }) {
      write({ [DimensionName.route]: route, [DimensionName.statusClass]: statusClass(status) }, [
        {
          dimensionSets: [[DimensionName.route, DimensionName.statusClass], [DimensionName.statusClass]],
          metrics: [{ name: MetricName.requests, unit: 'Count', value: 1 }],
        },
        { dimensionSets: [[]], metrics: [{ name: MetricName.requestLatency, unit: 'Milliseconds', value: durationMs }] },
      ]);
    },
    dependencyUnavailable: (dependency) => count({ [DimensionName.dependency]: dependency }, MetricName.dependencyUnavailable, 1),
  };
}

/** The reconciler's metrics, each written on every run, 0 included, so an alarm on them sees data while all is well. */
export function createRepairMetrics(options: MetricsOptions = {}) {
  const { count } = emfWriter(options);
  return {
    repaired: (action: RepairAction, value: number) => count({ [DimensionName.action]: action }, MetricName.recordsRepaired, value),
    errors: (value: number) => count({}, MetricName.reconcileErrors, value),
    deadLetters: (value: number) => count({}, MetricName.deadLetters, value),
  };
}
