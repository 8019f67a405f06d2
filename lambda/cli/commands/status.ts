/**
 * `dm-dot status`. A damaged page of the state file is exit 1 (what the status says cannot all be
 * trusted): one the running server has met, or, with no server, one found by reading the whole file.
 */
import type { DescribeAlarmsOutput } from '@aws-sdk/client-cloudwatch';
import { showSubscription } from '../../operator/actions';
import type { SubscriptionView } from '../../operator/views';
import { type AwsSession, describeAwsError, withAws } from '../aws/session';
import { storeOf } from '../backings';
import type { Context } from '../context';
import { OperationError } from '../errors';
import { type LocalStatus, localStatus } from '../local-server/local-operator';
import { awsStackOptions, define, wantsAws } from '../options';
import { fields, relative, shortTime } from '../output';
import { SUBSCRIPTION_JSON } from './subscription';

export const command = (ctx: Context) =>
  define({
    name: 'status',
    summary: 'everything at a glance',
    details:
      'The server and its address, the switches in force, the subscription and its delivery status, and how many events are queued, failed and ' +
      'dead-lettered. ' +
      'Locally it asks the running server, or reads the database when none runs (and says so), and reports a damaged page of the database file (exit 1). ' +
      'With --aws: the stack outputs, the state of its CloudWatch alarms, the depths of its queues and the subscription. ' +
      'Exit 0 when it could look, 1 when it could not.',
    options: awsStackOptions(),
    json:
      'locally {"mode": "local", "server": {"running": true, "url", "pid", "version"} | {"running": false}, "stateDir", "readFrom": "server" | ' +
      '"database" | "nothing", ' +
      '"apiKey": {"from": "file", "file"} | {"from": "MCP_API_KEY"} | {"from": "none", "file"}, "switches": {"loopbackCallbacks", "pup": ' +
      '{"secrets": N} | false, "allowedOrigins", "allowedHosts", "retryDelaysS", "deliveryWaitMs", "eventsProfile": "chatgpt" | "sep-3415"}, ' +
      `"subscription": ${SUBSCRIPTION_JSON} | null, "events": {"queued", "delivered", "failed", "dropped"} | null, "jobs": {"queued", ` +
      '"deadLetters"} | null, "damage": sentence | null}; ' +
      'with --aws {"mode": "aws", "stack", "region", "outputs": {name: value}, "alarms": [{"name", "state", "reason", "updatedAt"}] | null, ' +
      '"queues": {"delivery": {"visible", "inFlight", "delayed"} | null, "deadLetter": {...} | null}, "subscription": ... | null, "eventsProfile": ' +
      '"chatgpt" | "sep-3415" | null, "problems": [sentence, ...]}.',
    async run(values) {
      if (wantsAws(values)) return withAws(ctx, values, (session) => awsStatus(ctx, session));
      const status = await localStatus(ctx);
      ctx.result({ mode: 'local', ...status }, () => describeLocal(status));
      if (status.damage !== null) throw new OperationError(status.damage, 'state_damaged');
    },
  });

function describeSubscriptionLine(s: SubscriptionView | null): string {
  if (!s) return 'none (no dot is subscribed)';
  const delivery = s.lastError ? `last error ${s.lastError}` : s.lastDeliveryAt ? 'delivering' : 'nothing delivered yet';
  return (
    `${s.id} for callback host ${s.callbackHost}; expires ${shortTime(s.expiresAt)} (${relative(s.expiresAt)}); last delivery ` +
    `${shortTime(s.lastDeliveryAt)}; ${delivery}`
  );
}

export function describeLocal(status: LocalStatus): string {
  const s = status.switches;
  const server = status.server.running
    ? `running at ${status.server.url} (pid ${status.server.pid}${status.server.version ? `, dm-dot ${status.server.version}` : ''})`
    : status.readFrom === 'database'
      ? `not running (what follows is read from its database; the switches are those npm start would use in this environment)`
      : `not running, and nothing is recorded yet (npm start creates the state directory)`;
  const key =
    status.apiKey.from === 'MCP_API_KEY'
      ? 'from MCP_API_KEY'
      : status.apiKey.from === 'file'
        ? `in ${status.apiKey.file} (dm-dot connect prints the connector URL)`
        : `none yet (npm start generates ${status.apiKey.file})`;
  const rows: [string, string][] = [
    ['server', server],
    ['state directory', status.stateDir],
    ...(status.damage !== null ? [['damaged', status.damage] as [string, string]] : []),
    ['API key', key],
    [
      'loopback callbacks',
      s.loopbackCallbacks ? 'on (dm-dot dot can subscribe)' : 'off (DMDOT_ALLOW_LOOPBACK_CALLBACKS=1 npm start lets dm-dot dot subscribe)',
    ],
    [
      'pup',
      s.pup
        ? `configured (${s.pup.secrets} signing secret${s.pup.secrets > 1 ? 's' : ''})`
        : 'not configured (no PUP_SIGNING_SECRETS: its POST routes answer 503)',
    ],
    [
      'events profile',
      `${s.eventsProfile ?? 'chatgpt'}${
        s.eventsProfile === 'sep-3415' ? ' (SEP-3415 codes -32023..-32027)' : ' (ChatGPT codes -32011..-32015; DMDOT_EVENTS_PROFILE=sep-3415 for SEP-3415)'
      }`,
    ],
    ['allowed origins', s.allowedOrigins.join(', ') || "none (requests with an Origin are refused, except the server's own)"],
    ['allowed hosts', s.allowedHosts.length ? `the server's own addresses and ${s.allowedHosts.join(', ')}` : "the server's own addresses only"],
    ['subscription', describeSubscriptionLine(status.subscription)],
  ];
  if (status.events) {
    const e = status.events;
    const kept = e.kept ? `, ${e.kept} kept in the inbox` : '';
    rows.push(['events', `${e.queued} queued, ${e.failed} failed, ${e.delivered} delivered, ${e.dropped} dropped${kept}`]);
  }
  if (status.jobs) {
    // An event settled otherwise than delivered (failed inline, dropped with its subscription) keeps
    // its job until the worker next looks at it: jobs beyond the queued events are those, not
    // deliveries still to come (a delivered write removes its job in the same transaction).
    const settled = status.events ? Math.max(0, status.jobs.queued - status.events.queued) : 0;
    const waiting =
      settled > 0
        ? `${status.jobs.queued} waiting (${settled} for events already settled: the worker clears ${settled > 1 ? 'those' : 'it'} within seconds)`
        : `${status.jobs.queued} waiting`;
    rows.push(['delivery jobs', `${waiting}, ${status.jobs.deadLetters} dead-lettered${status.jobs.deadLetters ? ' (dm-dot redrive)' : ''}`]);
  }
  return fields(rows);
}

async function depth(session: AwsSession, url: string | undefined, problems: string[], what: string) {
  if (!url) return null;
  try {
    const a = await session.queueAttributes(url, [
      'ApproximateNumberOfMessages',
      'ApproximateNumberOfMessagesNotVisible',
      'ApproximateNumberOfMessagesDelayed',
    ]);
    return {
      visible: Number(a.ApproximateNumberOfMessages ?? 0),
      inFlight: Number(a.ApproximateNumberOfMessagesNotVisible ?? 0),
      delayed: Number(a.ApproximateNumberOfMessagesDelayed ?? 0),
    };
  } catch (error) {
    problems.push(`${what}: ${(error as Error).message}`);
    return null;
  }
}

type AlarmState = { name: string; state: string; reason: string | null; updatedAt: string | null };

async function alarmsOf(session: AwsSession, names: string[], problems: string[]): Promise<AlarmState[] | null> {
  if (names.length === 0) return [];
  const { DescribeAlarmsCommand } = await import('@aws-sdk/client-cloudwatch');
  const client = await session.client('cloudwatch');
  const found: AlarmState[] = [];
  try {
    // DescribeAlarms takes at most 100 names per call.
    for (let i = 0; i < names.length; i += 100) {
      const result: DescribeAlarmsOutput = await client.send(new DescribeAlarmsCommand({ AlarmNames: names.slice(i, i + 100), MaxRecords: 100 }));
      for (const alarm of [...(result.MetricAlarms ?? []), ...(result.CompositeAlarms ?? [])]) {
        found.push({
          name: alarm.AlarmName ?? '?',
          state: alarm.StateValue ?? 'UNKNOWN',
          reason: alarm.StateReason ?? null,
          updatedAt: alarm.StateUpdatedTimestamp ? new Date(alarm.StateUpdatedTimestamp).toISOString() : null,
        });
      }
    }
  } catch (error) {
    problems.push(`could not read the alarms: ${describeAwsError(error)}`);
    return null;
  }
  for (const name of names) if (!found.some((a) => a.name === name)) found.push({ name, state: 'MISSING', reason: 'no such alarm', updatedAt: null });
  return found;
}

/**
 * The MCP function's events profile (DMDOT_EVENTS_PROFILE; the stack sets it only when it is not
 * the default). Null when it cannot be read: not worth failing the rest of the status for.
 */
async function profileOf(session: AwsSession, functionName: string | undefined): Promise<string | null> {
  if (!functionName) return null;
  try {
    const { GetFunctionConfigurationCommand } = await import('@aws-sdk/client-lambda');
    const config = (await (await session.client('lambda')).send(new GetFunctionConfigurationCommand({ FunctionName: functionName }))) as {
      Environment?: { Variables?: Record<string, string> };
    };
    return config.Environment?.Variables?.DMDOT_EVENTS_PROFILE || 'chatgpt';
  } catch {
    return null;
  }
}

async function awsStatus(ctx: Context, session: AwsSession): Promise<void> {
  const outputs = await session.outputs();
  const problems: string[] = [];
  const alarmNames = (outputs.AlarmNames ?? '')
    .split(',')
    .map((n) => n.trim())
    .filter(Boolean);
  if (!outputs.AlarmNames) problems.push(`stack ${session.stack} has no output AlarmNames (deploy the current version of the stack)`);
  const subscription = async (): Promise<SubscriptionView | null> => {
    if (!outputs.TableName) {
      problems.push(`stack ${session.stack} has no output TableName`);
      return null;
    }
    try {
      return await showSubscription((await storeOf(session)).store, Date.now());
    } catch (error) {
      problems.push(`could not read the subscription in table ${outputs.TableName}: ${describeAwsError(error)}`);
      return null;
    }
  };
  const [alarms, delivery, deadLetter, sub, eventsProfile] = await ctx.progress(
    'reading alarms, queues and the subscription',
    Promise.all([
      alarmsOf(session, alarmNames, problems),
      depth(session, outputs.DeliveryQueueUrl, problems, 'delivery queue'),
      depth(session, outputs.DeadLetterQueueUrl, problems, 'dead-letter queue'),
      subscription(),
      profileOf(session, outputs.McpFunctionName),
    ]),
  );
  const doc = {
    mode: 'aws',
    stack: session.stack,
    region: session.region ?? null,
    outputs,
    alarms,
    queues: { delivery, deadLetter },
    subscription: sub,
    eventsProfile,
    problems,
  };
  ctx.result(doc, () => {
    const rows: [string, string][] = [
      ['stack', `${session.stack}${session.region ? ` (${session.region})` : ''}`],
      ['MCP endpoint', outputs.McpEndpoint ?? '-'],
      ['subscription', describeSubscriptionLine(sub)],
      ['events profile', eventsProfile ?? 'unreadable (lambda:GetFunctionConfiguration on the MCP function)'],
      ['alarms', alarms === null ? 'unreadable' : alarms.length === 0 ? 'none' : alarms.map((a) => `${a.name}: ${a.state}`).join('; ')],
      ['delivery queue', delivery ? `${delivery.visible} waiting, ${delivery.inFlight} in flight, ${delivery.delayed} delayed` : 'unreadable'],
      ['dead letters', deadLetter ? `${deadLetter.visible}${deadLetter.visible ? ' (dm-dot redrive --aws)' : ''}` : 'unreadable'],
    ];
    const outputRows = Object.entries(outputs).map(([k, v]) => [`  ${k}`, v] as [string, string]);
    return `${fields(rows)}\noutputs:\n${fields(outputRows)}${problems.length ? `\nproblems:\n${problems.map((p) => `  ${p}\n`).join('')}` : ''}`;
  });
  if (problems.length) throw new OperationError(`could not look at everything: ${problems.join('; ')}`, 'partial');
}
