/**
 * One CloudWatch dashboard that answers "is dm-dot delivering?" at a glance, without opening the
 * consoles of four services: deliveries by outcome, delivery latency and attempts, dead letters,
 * MCP requests and errors, throttles, and the reconciler's failed runs.
 *
 * The dm-dot graphs read the metrics the functions write in embedded metric format
 * (lambda/metrics.ts: names, dimensions and the outcome list come from there, so the two cannot
 * drift apart); the rest are the metrics AWS publishes for SQS, Lambda, API Gateway and DynamoDB.
 *
 * Deliberately not here: alarms (observability.ts owns them; the dashboard shows their metrics),
 * cross-region or cross-account widgets, and Logs Insights widgets (they bill per GB scanned on
 * every view).
 */
import { Aws, Duration, Fn } from 'aws-cdk-lib';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import type { IFunction } from 'aws-cdk-lib/aws-lambda';
import type { HttpApi } from 'aws-cdk-lib/aws-apigatewayv2';
import type * as sqs from 'aws-cdk-lib/aws-sqs';
import { Construct } from 'constructs';
import { DELIVERY_OUTCOMES, DELIVERY_VIAS, DimensionName, METRICS_NAMESPACE, MetricName, STATUS_CLASSES } from '../../lambda/metrics';

export interface DmDotDashboardProps {
  readonly mcp: IFunction;
  readonly delivery: IFunction;
  readonly api: HttpApi;
  readonly queue: sqs.IQueue;
  readonly deadLetterQueue: sqs.IQueue;
  readonly table: dynamodb.ITable;
  readonly reconciler: IFunction;
}

/** Every graph aggregates over this period: short enough to see a burst, long enough to be cheap to read. */
export const DASHBOARD_PERIOD = Duration.minutes(5);

/** Three graphs a row. */
const graph = (props: cloudwatch.GraphWidgetProps) => new cloudwatch.GraphWidget({ width: 8, height: 6, ...props });

/** One of the metrics the functions write (lambda/metrics.ts), per DASHBOARD_PERIOD unless told. */
export const dmDot = (metricName: string, statistic: string, options: Pick<cloudwatch.MetricProps, 'dimensionsMap' | 'label' | 'period'> = {}) =>
  new cloudwatch.Metric({ namespace: METRICS_NAMESPACE, metricName, statistic, period: DASHBOARD_PERIOD, ...options });

export class DmDotDashboard extends Construct {
  readonly dashboard: cloudwatch.Dashboard;
  /** The dashboard in the CloudWatch console (commercial partition). */
  readonly url: string;

  constructor(scope: Construct, id: string, props: DmDotDashboardProps) {
    super(scope, id);
    const sum = { period: DASHBOARD_PERIOD, statistic: cloudwatch.Stats.SUM };
    const max = { period: DASHBOARD_PERIOD, statistic: cloudwatch.Stats.MAXIMUM };

    this.dashboard = new cloudwatch.Dashboard(this, 'Dashboard', {
      // Dashboards are per account, not per region: the region keeps two deployments apart.
      dashboardName: Fn.join('-', [Aws.STACK_NAME, Aws.REGION]),
      defaultInterval: Duration.hours(3),
    });

    this.dashboard.addWidgets(
      new cloudwatch.TextWidget({
        width: 24,
        height: 2,
        markdown:
          '## dm-dot\n' +
          "Deliveries count every decision, inline (the MCP function's first attempt) and worker (the delivery function) alike; " +
          'a message delivered inline shows up again as `already_final` when its safety-net copy reaches the worker. Dead letters wait 14 days: ' +
          'see the stack output `RedriveCommand`.',
      }),
    );

    this.dashboard.addWidgets(
      graph({
        title: 'Deliveries by outcome (per 5 min)',
        stacked: true,
        left: DELIVERY_OUTCOMES.map((outcome) =>
          dmDot(MetricName.deliveries, cloudwatch.Stats.SUM, { dimensionsMap: { [DimensionName.outcome]: outcome }, label: outcome }),
        ),
      }),
      graph({
        title: 'Delivery latency, enqueue to delivered (ms)',
        left: [
          dmDot(MetricName.deliveryLatency, cloudwatch.Stats.p(50), { label: 'p50' }),
          dmDot(MetricName.deliveryLatency, cloudwatch.Stats.p(99), { label: 'p99' }),
          dmDot(MetricName.deliveryDuration, cloudwatch.Stats.p(99), { label: 'worker time per record p99' }),
        ],
      }),
      graph({
        title: 'Attempts, and who delivered',
        left: [
          dmDot(MetricName.deliveryAttempt, cloudwatch.Stats.AVERAGE, { label: 'attempt number, average' }),
          dmDot(MetricName.deliveryAttempt, cloudwatch.Stats.MAXIMUM, { label: 'attempt number, highest' }),
        ],
        right: [
          dmDot(MetricName.deliveries, cloudwatch.Stats.SUM, { dimensionsMap: { [DimensionName.outcome]: 'retry' }, label: 'retries scheduled' }),
          ...DELIVERY_VIAS.map((via) =>
            dmDot(MetricName.deliveries, cloudwatch.Stats.SUM, {
              dimensionsMap: { [DimensionName.outcome]: 'delivered', [DimensionName.via]: via },
              label: `delivered, ${via}`,
            }),
          ),
        ],
      }),
    );

    this.dashboard.addWidgets(
      graph({
        title: 'Dead-letter queue and delivery queue',
        left: [
          // As the reconciler counts them every run (what DeadLetterAlarm reads), in flight and delayed included.
          dmDot(MetricName.deadLetters, cloudwatch.Stats.MAXIMUM, { label: 'dead letters' }),
          props.queue.metricApproximateNumberOfMessagesVisible({ ...max, label: 'queued, visible' }),
          props.queue.metricApproximateNumberOfMessagesNotVisible({ ...max, label: 'queued, waiting for a retry' }),
        ],
        right: [props.queue.metricApproximateAgeOfOldestMessage({ ...max, label: 'oldest queued message (s)' })],
      }),
      graph({
        title: 'MCP function: requests by status class',
        stacked: true,
        left: STATUS_CLASSES.map((cls) =>
          dmDot(MetricName.requests, cloudwatch.Stats.SUM, { dimensionsMap: { [DimensionName.statusClass]: cls }, label: cls }),
        ),
        right: [props.mcp.metricErrors({ ...sum, label: 'function errors' })],
      }),
      graph({
        title: 'Request latency (ms)',
        left: [
          dmDot(MetricName.requestLatency, cloudwatch.Stats.p(50), { label: 'MCP function p50' }),
          dmDot(MetricName.requestLatency, cloudwatch.Stats.p(99), { label: 'MCP function p99' }),
          props.api.metricLatency({ period: DASHBOARD_PERIOD, statistic: cloudwatch.Stats.p(99), label: 'API Gateway p99' }),
        ],
      }),
    );

    const api4xx = props.api.metricClientError({ ...sum });
    const app4xx = dmDot(MetricName.requests, cloudwatch.Stats.SUM, { dimensionsMap: { [DimensionName.statusClass]: '4xx' } });
    this.dashboard.addWidgets(
      graph({
        title: 'Throttles',
        left: [
          props.mcp.metricThrottles({ ...sum, label: 'MCP function throttled' }),
          props.delivery.metricThrottles({ ...sum, label: 'delivery function throttled' }),
          // API Gateway reports throttling (429) inside its 4xx count; what the function did not answer
          // itself is API Gateway's own refusal, throttling for the most part.
          new cloudwatch.MathExpression({
            expression: 'api4xx - FILL(app4xx, 0)',
            usingMetrics: { api4xx, app4xx },
            period: DASHBOARD_PERIOD,
            label: '4xx from API Gateway itself (mostly 429)',
          }),
          // Only the operations dm-dot makes (each is one metric the graph reads).
          props.table.metricThrottledRequestsForOperations({
            ...sum,
            operations: [dynamodb.Operation.GET_ITEM, dynamodb.Operation.PUT_ITEM, dynamodb.Operation.UPDATE_ITEM, dynamodb.Operation.DELETE_ITEM],
          }),
        ],
      }),
      graph({
        title: 'Function errors and invocations',
        left: [
          props.mcp.metricErrors({ ...sum, label: 'MCP errors' }),
          props.delivery.metricErrors({ ...sum, label: 'delivery errors' }),
          // A reconciler run with an error fails (ReconcileErrors says how many records): one line,
          // so the dashboard stays within the free tier's 50 metrics.
          props.reconciler.metricErrors({ ...sum, label: 'reconciler failed runs' }),
        ],
        right: [props.mcp.metricInvocations({ ...sum, label: 'MCP invocations' }), props.delivery.metricInvocations({ ...sum, label: 'delivery invocations' })],
      }),
      graph({
        title: 'API Gateway',
        left: [props.api.metricCount({ ...sum, label: 'requests' }), api4xx.with({ label: '4xx' }), props.api.metricServerError({ ...sum, label: '5xx' })],
      }),
    );

    this.url = `https://${Aws.REGION}.console.aws.amazon.com/cloudwatch/home?region=${Aws.REGION}#dashboards:name=${this.dashboard.dashboardName}`;
  }
}
