/**
 * A fault-injecting endpoint for the AWS SDK (the AWS side of the fault suite): an HTTP
 * server on 127.0.0.1 that stands in front of DynamoDB Local, fauxqs or the fake Secrets Manager
 * (point the client's `endpoint`, or `AWS_ENDPOINT_URL_*`, at it) and, per call, as a rule decides:
 *
 *   pass        forward to the emulator and relay its answer
 *   stall       accept the request and never answer (nothing reaches the emulator)
 *   lost        forward (the emulator applies it) and never answer: the caller cannot know
 *   throttle    HTTP 400 ThrottlingException, in the service's JSON error shape
 *   throughput  HTTP 400 ProvisionedThroughputExceededException (DynamoDB; others: ThrottlingException)
 *   error500    HTTP 500 with the service's internal error type (nothing reaches the emulator)
 *   applied500  forward (the emulator applies it), then answer HTTP 500 instead of its answer: a
 *               500 may have succeeded, as DynamoDB's error documentation says, and the SDK retries it
 *
 * Error shapes follow the services' JSON protocols: `{"__type": "<namespace>#<Code>", "message"}`
 * with `Content-Type: application/x-amz-json-1.0` (DynamoDB, SQS) or `-1.1` (Secrets Manager),
 * as https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Programming.Errors.html shows
 * for DynamoDB; SQS adds `x-amzn-query-error: <Code>;Sender` (its JSON protocol's compatibility
 * header). The SDK reads the code after `#`, so it sees exactly what AWS would send.
 *
 * Deliberately not here: signatures (not checked), latency other than "never", and choosing rates
 * (the test's rule does: it sees the service, the action and the parsed JSON body).
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export type Service = 'dynamodb' | 'sqs' | 'secretsmanager';
export type Fault = 'pass' | 'stall' | 'lost' | 'throttle' | 'throughput' | 'error500' | 'applied500';

export interface Call {
  service: Service;
  /** e.g. GetItem, SendMessage, GetSecretValue (from X-Amz-Target). */
  action: string;
  /** The request's JSON body, parsed (undefined when it is not JSON). */
  body: unknown;
}

export type Rule = (call: Call) => Fault;

export interface FaultProxy {
  endpoint: string;
  setRule(rule: Rule): void;
  /** Calls seen, by `<action>:<fault>`. */
  counts(): Record<string, number>;
  /** Passed calls whose caller gave up before the service answered (its deadline passed), by action. */
  abandoned(): Record<string, number>;
  /** Requests held open right now (stall, lost). */
  held(): number;
  /** Answers every held request with a 500 and forgets it (so a test can end cleanly). */
  releaseHeld(): void;
  stop(): Promise<void>;
}

const SHAPES: Record<Service, { contentType: string; namespace: string; throttle: string; throughput: string; internal: string }> = {
  dynamodb: {
    contentType: 'application/x-amz-json-1.0',
    namespace: 'com.amazonaws.dynamodb.v20120810',
    throttle: 'ThrottlingException',
    throughput: 'ProvisionedThroughputExceededException',
    internal: 'InternalServerError',
  },
  sqs: {
    contentType: 'application/x-amz-json-1.0',
    namespace: 'com.amazonaws.sqs',
    throttle: 'ThrottlingException',
    throughput: 'ThrottlingException',
    internal: 'InternalFailure',
  },
  secretsmanager: {
    contentType: 'application/x-amz-json-1.1',
    namespace: 'com.amazonaws.secretsmanager',
    throttle: 'ThrottlingException',
    throughput: 'ThrottlingException',
    internal: 'InternalServiceError',
  },
};

const MESSAGES: Record<string, string> = {
  ThrottlingException: 'Rate of requests exceeds the allowed throughput.',
  ProvisionedThroughputExceededException: 'The level of configured provisioned throughput for the table was exceeded.',
};

export interface FaultProxyOptions {
  /**
   * SQS: replace this proxy's own origin in request bodies with the emulator's. The SDK sends each
   * call to the host of its queue URL, so a client that must go through the proxy is given a queue
   * URL on the proxy's origin, while fauxqs knows the queue by its own URL (as the counting proxy's
   * option of the same name).
   */
  rewriteOwnOrigin?: boolean;
}

export async function startFaultProxy(service: Service, upstream: string, options: FaultProxyOptions = {}): Promise<FaultProxy> {
  let rule: Rule = () => 'pass';
  let ownOrigin = '';
  const counts: Record<string, number> = {};
  const abandoned: Record<string, number> = {};
  const held = new Set<http.ServerResponse>();
  const shape = SHAPES[service];
  const target = new URL(upstream);

  function reply(res: http.ServerResponse, status: number, code: string): void {
    const headers: Record<string, string> = { 'content-type': shape.contentType, 'x-amzn-requestid': `fault-${Date.now()}` };
    if (service === 'sqs') headers['x-amzn-query-error'] = `${code};${status >= 500 ? 'Receiver' : 'Sender'}`;
    res.writeHead(status, headers);
    res.end(JSON.stringify({ __type: `${shape.namespace}#${code}`, message: MESSAGES[code] ?? 'We encountered an internal error. Please try again.' }));
  }

  function hold(res: http.ServerResponse): void {
    held.add(res);
    res.once('close', () => held.delete(res));
  }

  function forward(
    req: http.IncomingMessage,
    raw: Buffer,
    onAnswer: (status: number, headers: http.IncomingHttpHeaders, body: Buffer) => void,
    onError: () => void,
  ): void {
    const upstreamReq = http.request(
      {
        host: target.hostname,
        port: target.port,
        method: req.method,
        path: req.url,
        headers: { ...req.headers, host: target.host, 'content-length': String(raw.byteLength) },
      },
      (upstreamRes) => {
        const chunks: Buffer[] = [];
        upstreamRes.on('data', (c: Buffer) => chunks.push(c));
        upstreamRes.on('end', () => onAnswer(upstreamRes.statusCode ?? 502, upstreamRes.headers, Buffer.concat(chunks)));
        upstreamRes.on('error', onError);
      },
    );
    upstreamReq.on('error', onError);
    upstreamReq.end(raw);
  }

  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const received = Buffer.concat(chunks);
      const raw = options.rewriteOwnOrigin && ownOrigin ? Buffer.from(received.toString('utf8').replaceAll(ownOrigin, target.origin), 'utf8') : received;
      const action =
        String(req.headers['x-amz-target'] ?? '')
          .split('.')
          .pop() ?? '';
      let body: unknown;
      try {
        body = JSON.parse(raw.toString('utf8'));
      } catch {
        body = undefined;
      }
      const fault = rule({ service, action, body });
      const key = `${action}:${fault}`;
      counts[key] = (counts[key] ?? 0) + 1;
      switch (fault) {
        case 'stall':
          return hold(res);
        case 'throttle':
          return reply(res, 400, shape.throttle);
        case 'throughput':
          return reply(res, 400, shape.throughput);
        case 'error500':
          return reply(res, 500, shape.internal);
        case 'lost':
          hold(res);
          return forward(
            req,
            raw,
            () => undefined,
            () => undefined,
          );
        case 'applied500': {
          const answer500 = () => {
            if (!res.headersSent && !res.destroyed) reply(res, 500, shape.internal);
          };
          return forward(req, raw, answer500, answer500);
        }
        case 'pass': {
          // A caller that gives up before the service answers is a fact a test can read,
          // counted when the connection closes unanswered.
          let answered = false;
          res.once('close', () => {
            if (!answered) abandoned[action] = (abandoned[action] ?? 0) + 1;
          });
          return forward(
            req,
            raw,
            (status, headers, answer) => {
              answered = true;
              if (res.destroyed) return;
              const relayed = { ...headers };
              delete relayed['transfer-encoding'];
              delete relayed.connection;
              res.writeHead(status, { ...relayed, 'content-length': String(answer.byteLength) });
              res.end(answer);
            },
            () => {
              answered = true;
              if (!res.headersSent && !res.destroyed) reply(res, 500, shape.internal);
            },
          );
        }
      }
    });
  });
  // Keep-alive sockets of the SDK must not keep the server open after stop().
  server.keepAliveTimeout = 1_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  ownOrigin = `http://127.0.0.1:${port}`;

  return {
    endpoint: `http://127.0.0.1:${port}`,
    setRule: (next) => {
      rule = next;
    },
    counts: () => ({ ...counts }),
    abandoned: () => ({ ...abandoned }),
    held: () => held.size,
    releaseHeld: () => {
      for (const res of held) if (!res.destroyed && !res.headersSent) reply(res, 500, shape.internal);
      held.clear();
    },
    stop: () =>
      new Promise<void>((resolve) => {
        for (const res of held) res.destroy();
        held.clear();
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

/** A rule that picks faults at the given rates (0..1 each, the rest passes), from a seeded generator. */
export function rateRule(rates: Partial<Record<Exclude<Fault, 'pass'>, number>>, seed = 1): Rule {
  let state = seed >>> 0 || 1;
  const next = () => {
    // xorshift32: reproducible runs for a given seed.
    state ^= state << 13;
    state >>>= 0;
    state ^= state >>> 17;
    state ^= state << 5;
    state >>>= 0;
    return state / 0x1_0000_0000;
  };
  const entries = Object.entries(rates) as [Exclude<Fault, 'pass'>, number][];
  return () => {
    let roll = next();
    for (const [fault, rate] of entries) {
      if (roll < rate) return fault;
      roll -= rate;
    }
    return 'pass';
  };
}
