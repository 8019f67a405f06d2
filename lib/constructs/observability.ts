/**
 * What tells the operator that something is wrong, and where to look (docs/deploying-aws.md, "Alarms
 * and what to do", which has a paragraph per alarm, and "Dashboard and metrics"): nine alarms (each
 * description below says what it means), an SNS topic in every deploy (the stack output
 * AlarmTopicArn) that every alarm notifies when it fires and when it clears, and the dashboard
 * (dashboard.ts). `alarmEmail` subscribes an address to the topic; anyone may subscribe more later.
 *
 * Deliberately not here: metrics of its own (the functions write theirs, lambda/metrics.ts), alarms
 * on throttling (the dashboard shows them: a busy dot is not an outage), an encrypted topic (the end
 * of "Alarms and what to do" says why), and any other kind of notification.
 */
import { Duration, Stack } from 'aws-cdk-lib';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import { SnsAction } from 'aws-cdk-lib/aws-cloudwatch-actions';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as sns from 'aws-cdk-lib/aws-sns';
import { EmailSubscription } from 'aws-cdk-lib/aws-sns-subscriptions';
import { Construct } from 'constructs';
import { DEPENDENCIES, DimensionName, MetricName, REPAIR_ACTIONS } from '../../lambda/metrics';
import { DmDotDashboard, type DmDotDashboardProps, dmDot } from './dashboard';
import { Budgets } from '../../lambda/core/budgets';
import { DeliverySizing, redriveMaxReceiveCount } from './delivery-pipeline';
import { keepLogicalId } from './logical-ids';
import type { DmDotSettings } from '../settings';

/** SQS publishes its queue metrics once a minute: each alarm on a queue looks at one minute. */
const QUEUE_PERIOD = Duration.minutes(1);
/** The dm-dot counts (EMF) and API Gateway's are summed over five minutes: one mail per brown-out, not one per minute of it. */
const COUNT_PERIOD = Duration.minutes(5);
/** The reconciler runs every 5 minutes: its metrics are read per 5 minutes, and three periods without a run is its silence. */
const RECONCILER_PERIOD = Duration.millis(Budgets.reconcileEveryMs);
export const RECONCILER_SILENT_PERIODS = 3;

/**
 * DeliveryQueueAgeAlarm's threshold, whole seconds: the longest a job waits in the delivery queue
 * when everything works, the retry schedule plus one visibility timeout (a crashed or timed-out
 * worker's receive hides the job that long) and one function timeout per attempt (each attempt
 * holds the job while it runs).
 */
export function queueAgeAlarmThresholdS(retryDelaysS: readonly number[]): number {
  const scheduleS = retryDelaysS.reduce((sum, d) => sum + d, 0);
  const attempts = retryDelaysS.length + 1;
  return Math.ceil(scheduleS + DeliverySizing.visibilityTimeout.toSeconds() + attempts * DeliverySizing.timeout.toSeconds());
}

/** DeadLetterAgeAlarm's threshold, whole seconds, as docs/deploying-aws.md ("DeadLetterAgeAlarm") explains it. */
export function deadLetterAgeAlarmThresholdS(retryDelaysS: readonly number[]): number {
  const retentionS = DeliverySizing.deadLetterRetention.toSeconds();
  const scheduleS = retryDelaysS.reduce((sum, d) => sum + d, 0);
  const beforeRedriveS = scheduleS + redriveMaxReceiveCount(retryDelaysS) * DeliverySizing.visibilityTimeout.toSeconds();
  return Math.floor(retentionS - Duration.days(2).toSeconds() - beforeRedriveS);
}

export class Observability extends Construct {
  readonly alarms: cloudwatch.Alarm[];
  readonly alarmTopic: sns.Topic;
  /** Absent with `-c dashboard=false`. */
  readonly dashboard?: DmDotDashboard;

  constructor(scope: Construct, id: string, props: DmDotDashboardProps & { settings: DmDotSettings }) {
    super(scope, id);

    const alarm = (
      alarmId: string,
      alarmDescription: string,
      metric: cloudwatch.IMetric,
      threshold: number,
      { firstDeployed, ...options }: Partial<cloudwatch.AlarmProps> & { firstDeployed?: boolean } = {},
    ) => {
      const created = new cloudwatch.Alarm(this, alarmId, {
        alarmDescription,
        metric,
        threshold,
        evaluationPeriods: 1,
        ...options,
        comparisonOperator: options.comparisonOperator ?? cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
        treatMissingData: options.treatMissingData ?? cloudwatch.TreatMissingData.NOT_BREACHING,
      });
      if (firstDeployed) keepLogicalId(created, [alarmId, 'Resource']);
      return created;
    };
    const countSum = { period: COUNT_PERIOD, statistic: cloudwatch.Stats.SUM };
    const queueMax = { period: QUEUE_PERIOD, statistic: cloudwatch.Stats.MAXIMUM };
    const reconcilerSum = { period: RECONCILER_PERIOD, statistic: cloudwatch.Stats.SUM };
    const { retryDelaysS, alarmEmail } = props.settings;
    const queueAgeS = queueAgeAlarmThresholdS(retryDelaysS);
    this.alarms = [
      alarm(
        'DeadLetterAlarm',
        'dm-dot: a new event could not be delivered and waits in the dead-letter queue (14 days); returns to OK when no new one comes for 10 minutes. ' +
          'docs/deploying-aws.md "Alarms and what to do". See RedriveCommand.',
        newDeadLetters(),
        1,
        // DIFF needs the period before; any one period of the three with a rise fires it.
        { firstDeployed: true, evaluationPeriods: 3, datapointsToAlarm: 1 },
      ),
      alarm(
        'DeliveryErrorsAlarm',
        'dm-dot: the delivery function failed (crash or timeout), not a refused callback.',
        props.delivery.metricErrors(countSum),
        1,
        { firstDeployed: true },
      ),
      alarm('Api5xxAlarm', 'dm-dot: the HTTP API answered 5xx at least 5 times in 5 minutes.', props.api.metricServerError(countSum), 5, {
        firstDeployed: true,
      }),
      alarm(
        'DependencyUnavailableAlarm',
        'dm-dot: the MCP function answered a request "unavailable" (DynamoDB, SQS or Secrets Manager failed) in the last 5 minutes; ' +
          'ChatGPT got HTTP 200 with the error inside. docs/deploying-aws.md "Alarms and what to do".',
        summedOver(MetricName.dependencyUnavailable, DimensionName.dependency, DEPENDENCIES, 'answers "unavailable"'),
        1,
      ),
      alarm(
        'DeliveryQueueAgeAlarm',
        `dm-dot: a job has waited in the delivery queue longer than the retry schedule allows (${queueAgeS} s): ` +
          'nothing is consuming the queue. docs/deploying-aws.md "Alarms and what to do".',
        props.queue.metricApproximateAgeOfOldestMessage(queueMax),
        queueAgeS,
        { comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD },
      ),
      alarm(
        'DeadLetterAgeAlarm',
        'dm-dot: the oldest dead letter is about 2 days from the end of its 14-day retention: redrive it or copy it before SQS deletes it. ' +
          'docs/deploying-aws.md "Alarms and what to do".',
        // SQS's metric: the reconciler reads the queue every run, so SQS keeps publishing it, and a few minutes late matter nothing.
        props.deadLetterQueue.metricApproximateAgeOfOldestMessage(queueMax),
        deadLetterAgeAlarmThresholdS(retryDelaysS),
      ),
      alarm(
        'RecordsRepairedAlarm',
        'dm-dot: the reconciler had to repair event records (re-enqueued or failed) in the last 5 minutes: some write or send was lost. ' +
          'docs/deploying-aws.md "Alarms and what to do".',
        summedOver(MetricName.recordsRepaired, DimensionName.action, REPAIR_ACTIONS, 'records repaired'),
        1,
      ),
      alarm(
        'ReconcilerErrorsAlarm',
        'dm-dot: a reconciler run failed (a record it could not settle, the index or the dead-letter queue unreadable, a crash or a timeout) ' +
          'in the last 5 minutes; its reconcile_error log lines say which, ReconcileErrors counts them. docs/deploying-aws.md "Alarms and what to do".',
        props.reconciler.metricErrors(reconcilerSum),
        1,
      ),
      alarm(
        'ReconcilerSilentAlarm',
        'dm-dot: the reconciler has not run for 15 minutes (its schedule disabled or deleted, the function throttled): nothing settles stranded records, ' +
          'and the new dead letter alarm is blind. docs/deploying-aws.md "Alarms and what to do".',
        props.reconciler.metricInvocations(reconcilerSum),
        1,
        {
          evaluationPeriods: RECONCILER_SILENT_PERIODS,
          datapointsToAlarm: RECONCILER_SILENT_PERIODS,
          comparisonOperator: cloudwatch.ComparisonOperator.LESS_THAN_THRESHOLD,
          // Lambda publishes Invocations only for periods with a run: no data is the silence itself.
          treatMissingData: cloudwatch.TreatMissingData.BREACHING,
        },
      ),
    ];

    const topic = new sns.Topic(this, 'AlarmTopic', { displayName: 'dm-dot alarms', enforceSSL: true });
    this.alarmTopic = topic;
    keepLogicalId(topic, ['AlarmTopic', 'Resource']);
    for (const a of this.alarms) {
      a.addAlarmAction(new SnsAction(topic));
      a.addOkAction(new SnsAction(topic));
    }
    // enforceSSL's topic policy replaces the default one: without this Allow no alarm could publish. Why it
    // is scoped so: docs/deploying-aws.md, the last paragraph of "Alarms and what to do".
    topic.addToResourcePolicy(
      new iam.PolicyStatement({
        sid: 'AllowThisStacksAlarmsToPublish',
        effect: iam.Effect.ALLOW,
        principals: [new iam.ServicePrincipal('cloudwatch.amazonaws.com')],
        actions: ['sns:Publish'],
        resources: [topic.topicArn],
        conditions: {
          StringEquals: { 'aws:SourceAccount': Stack.of(this).account },
          ArnEquals: { 'aws:SourceArn': this.alarms.map((a) => a.alarmArn) },
        },
      }),
    );
    keepLogicalId(topic.node.findChild('Policy'), ['AlarmTopic', 'Policy', 'Resource']);
    if (alarmEmail) {
      const subscription = topic.addSubscription(new EmailSubscription(alarmEmail));
      keepLogicalId(subscription, ['AlarmTopic', alarmEmail, 'Resource']);
    }

    if (props.settings.dashboard) {
      this.dashboard = new DmDotDashboard(this, 'Dashboard', props);
      keepLogicalId(this.dashboard.dashboard, ['Dashboard', 'Dashboard', 'Resource']);
    }
  }
}

/**
 * New dead letters per reconciler period (docs/deploying-aws.md, DeadLetterAlarm): the rise of the
 * depth the reconciler counts from one run to the next, 0 without one, so the alarm clears and fires
 * again for the next letter. An operator's redrive out of the queue is no rise; a letter that comes
 * as another is redriven out within one period is not seen: the operator is looking.
 */
function newDeadLetters(): cloudwatch.IMetric {
  const depth = dmDot(MetricName.deadLetters, cloudwatch.Stats.MAXIMUM, { period: RECONCILER_PERIOD });
  return new cloudwatch.MathExpression({
    expression: 'IF(DIFF(depth) > 0, DIFF(depth), 0)',
    usingMetrics: { depth },
    period: RECONCILER_PERIOD,
    label: 'new dead letters',
  });
}

/**
 * One of dm-dot's own counts summed over every value of one dimension (an alarm cannot use
 * SEARCH, so each value is named; lambda/metrics.ts lists them).
 */
function summedOver(metricName: string, dimensionName: string, values: readonly string[], label: string): cloudwatch.IMetric {
  const usingMetrics = Object.fromEntries(
    values.map((value) => [value, dmDot(metricName, cloudwatch.Stats.SUM, { dimensionsMap: { [dimensionName]: value }, period: COUNT_PERIOD })]),
  );
  return new cloudwatch.MathExpression({
    expression: values.map((value) => `FILL(${value}, 0)`).join(' + '),
    usingMetrics,
    period: COUNT_PERIOD,
    label,
  });
}
