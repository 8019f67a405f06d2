/**
 * What tells the operator that something is wrong, and where to look (docs/deploying-aws.md, "Alarms" and "Dashboard and metrics"):
 *
 * - three alarms, each firing on one breaching period, no data not being a breach: an event waits in
 *   the dead-letter queue; the delivery function failed (a crash or a timeout, not a refused
 *   callback); the API answered 5xx at least 5 times in 5 minutes;
 * - with `alarmEmail` set, an SNS topic that mails them, whose policy lets CloudWatch publish for
 *   these alarms of this account only;
 * - the dashboard (dashboard.ts).
 *
 * `alarmNames` is what `dm-dot status --aws` reads (the stack output AlarmNames). The alarms, the
 * topic, its policy, its e-mail subscription and the dashboard keep the logical IDs of the first
 * deployments (logical-ids.ts): a new subscription would wait for the operator to confirm it again,
 * and the dashboard's name is fixed.
 *
 * Deliberately not here: metrics of its own (the functions write theirs, lambda/metrics.ts), alarms
 * on throttling (the dashboard shows them: a busy dot is not an outage), an encrypted topic
 * (CloudWatch cannot publish to a topic encrypted with the AWS managed SNS key, and the messages
 * carry alarm names and metric values only), and any other kind of notification.
 */
import { Duration, Fn, Stack } from 'aws-cdk-lib';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import { SnsAction } from 'aws-cdk-lib/aws-cloudwatch-actions';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as sns from 'aws-cdk-lib/aws-sns';
import { EmailSubscription } from 'aws-cdk-lib/aws-sns-subscriptions';
import { Construct } from 'constructs';
import { DmDotDashboard, type DmDotDashboardProps } from './dashboard';
import { keepLogicalId } from './logical-ids';

/** What is watched: the same resources the dashboard shows, plus where alarms go. */
export interface ObservabilityProps extends DmDotDashboardProps {
  /** Mailed on every alarm; no topic without it. */
  readonly alarmEmail?: string;
}

export class Observability extends Construct {
  readonly alarms: cloudwatch.Alarm[];
  readonly alarmTopic?: sns.Topic;
  readonly dashboard: DmDotDashboard;

  constructor(scope: Construct, id: string, props: ObservabilityProps) {
    super(scope, id);

    const alarm = (alarmId: string, alarmDescription: string, metric: cloudwatch.IMetric, threshold: number) => {
      const created = new cloudwatch.Alarm(this, alarmId, {
        alarmDescription,
        metric,
        threshold,
        evaluationPeriods: 1,
        comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
        treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
      });
      // An alarm's state and history live with it.
      keepLogicalId(created, [alarmId, 'Resource']);
      return created;
    };
    this.alarms = [
      alarm(
        'DeadLetterAlarm',
        'dm-dot: an event could not be delivered and waits in the dead-letter queue (14 days). See RedriveCommand.',
        props.deadLetterQueue.metricApproximateNumberOfMessagesVisible({ period: Duration.minutes(1), statistic: cloudwatch.Stats.MAXIMUM }),
        1,
      ),
      alarm(
        'DeliveryErrorsAlarm',
        'dm-dot: the delivery function failed (crash or timeout), not a refused callback.',
        props.delivery.metricErrors({ period: Duration.minutes(5), statistic: cloudwatch.Stats.SUM }),
        1,
      ),
      alarm(
        'Api5xxAlarm',
        'dm-dot: the HTTP API answered 5xx at least 5 times in 5 minutes.',
        props.api.metricServerError({ period: Duration.minutes(5), statistic: cloudwatch.Stats.SUM }),
        5,
      ),
    ];

    if (props.alarmEmail) this.alarmTopic = this.mailAlarmsTo(props.alarmEmail);

    this.dashboard = new DmDotDashboard(this, 'Dashboard', {
      mcp: props.mcp,
      delivery: props.delivery,
      api: props.api,
      queue: props.queue,
      deadLetterQueue: props.deadLetterQueue,
      table: props.table,
    });
    keepLogicalId(this.dashboard.dashboard, ['Dashboard', 'Dashboard', 'Resource']);
  }

  /** The alarms' names, comma-separated (CloudFormation resolves them at deploy). */
  get alarmNames(): string {
    return Fn.join(',', this.alarms.map((a) => a.alarmName));
  }

  private mailAlarmsTo(email: string): sns.Topic {
    // Alarm messages carry alarm names and metric values only; CloudWatch cannot publish to a topic
    // encrypted with the AWS managed SNS key, so the topic stays unencrypted but refuses plain HTTP.
    const topic = new sns.Topic(this, 'AlarmTopic', { displayName: 'dm-dot alarms', enforceSSL: true });
    keepLogicalId(topic, ['AlarmTopic', 'Resource']);
    const subscription = topic.addSubscription(new EmailSubscription(email));
    keepLogicalId(subscription, ['AlarmTopic', email, 'Resource']);
    for (const a of this.alarms) a.addAlarmAction(new SnsAction(topic));
    // enforceSSL gives the topic a policy of its own, and a topic policy replaces the default one that
    // let the account's services publish: without this Allow every alarm fails with "not authorized to
    // perform: SNS:Publish" and no mail is ever sent
    // (https://repost.aws/knowledge-center/cloudwatch-receive-sns-for-alarm-trigger). Scoped to this
    // account and these alarms against the confused deputy
    // (https://docs.aws.amazon.com/sns/latest/dg/sns-access-policy-use-cases.html).
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
    return topic;
  }
}
