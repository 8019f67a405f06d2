/**
 * A counting proxy for the AWS wire: an HTTP server on 127.0.0.1 that stands in front of an AWS
 * emulator (DynamoDB Local, fauxqs), forwards every request (Host rewritten to the emulator's, and
 * for SQS the queue URL in the body: see `rewriteOwnOrigin`), relays the answer, and records each request's operation: the part after the last
 * `.` of `X-Amz-Target` (the JSON protocols: `DynamoDB_20120810.GetItem`, `AmazonSQS.SendMessage`)
 * or, for the query protocol, the `Action` parameter of the query string or form body.
 *
 * With `consumedCapacity`, for DynamoDB it also adds `ReturnConsumedCapacity: "INDEXES"` to each
 * request of an operation that takes it (unless the request already names one) and records the
 * `ConsumedCapacity` of the answer, table and indexes, per call. The answer is relayed unchanged
 * (the SDK checks its CRC32): the client sees a `ConsumedCapacity` field it did not ask for and
 * ignores it. The emulator does not check signatures, so the rewritten body's stale one does not
 * matter; against real AWS it would.
 *
 * Deliberately not here: faults and delays (test/support/aws-fault-proxy.ts injects those),
 * signature checks, and streaming: bodies are buffered (AWS API calls are small).
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface CountedCall {
  operation: string;
  /** Date.now() when the request arrived. */
  at: number;
  /** The emulator's HTTP status (0 until it answers, 502 when it could not be reached). */
  status: number;
  /** The answer's `ConsumedCapacity` (one entry per table touched), with `consumedCapacity` on. */
  capacity?: ConsumedCapacity[];
}

/** DynamoDB's ConsumedCapacity, as the wire carries it (only the fields this bench reads). */
export interface ConsumedCapacity {
  TableName?: string;
  CapacityUnits?: number;
  ReadCapacityUnits?: number;
  WriteCapacityUnits?: number;
  Table?: Units;
  GlobalSecondaryIndexes?: Record<string, Units>;
  LocalSecondaryIndexes?: Record<string, Units>;
}
export interface Units {
  CapacityUnits?: number;
  ReadCapacityUnits?: number;
  WriteCapacityUnits?: number;
}

/** The DynamoDB operations that take ReturnConsumedCapacity. */
const CAPACITY_OPERATIONS = new Set([
  'GetItem',
  'PutItem',
  'UpdateItem',
  'DeleteItem',
  'Query',
  'Scan',
  'BatchGetItem',
  'BatchWriteItem',
  'TransactGetItems',
  'TransactWriteItems',
]);

/** The request body with ReturnConsumedCapacity INDEXES added, or the body unchanged when the operation takes none or it is not JSON. */
function askForCapacity(operation: string, body: Buffer): Buffer {
  if (!CAPACITY_OPERATIONS.has(operation)) return body;
  try {
    const json = JSON.parse(body.toString('utf8')) as Record<string, unknown>;
    if (json.ReturnConsumedCapacity !== undefined && json.ReturnConsumedCapacity !== 'NONE') return body;
    return Buffer.from(JSON.stringify({ ...json, ReturnConsumedCapacity: 'INDEXES' }), 'utf8');
  } catch {
    return body;
  }
}

function capacityOf(body: Buffer): ConsumedCapacity[] | undefined {
  try {
    const consumed = (JSON.parse(body.toString('utf8')) as { ConsumedCapacity?: ConsumedCapacity | ConsumedCapacity[] }).ConsumedCapacity;
    if (consumed === undefined) return undefined;
    return Array.isArray(consumed) ? consumed : [consumed];
  } catch {
    return undefined;
  }
}

export interface CountingProxy {
  endpoint: string;
  /** Every request so far, oldest first. */
  calls: readonly CountedCall[];
  stop(): Promise<void>;
}

/** The operation of one AWS API request, from its target header or its `Action` parameter. */
export function operationOf(headers: http.IncomingHttpHeaders, url: string, body: Buffer): string {
  const target = headers['x-amz-target'];
  if (typeof target === 'string' && target) return target.split('.').pop() ?? target;
  const fromQuery = new URL(url, 'http://proxy').searchParams.get('Action');
  if (fromQuery) return fromQuery;
  if (String(headers['content-type'] ?? '').startsWith('application/x-www-form-urlencoded')) {
    const fromForm = new URLSearchParams(body.toString('utf8')).get('Action');
    if (fromForm) return fromForm;
  }
  return 'unknown';
}

export interface CountingProxyOptions {
  /**
   * Replace this proxy's own origin with the emulator's in request bodies: for SQS, whose requests
   * name the queue by its full URL (the SDK sends each call to the queue URL's host, so the queue
   * URL the client is given must be the proxy's), while fauxqs knows the queue by its own URL.
   */
  rewriteOwnOrigin?: boolean;
  /** DynamoDB: ask each call for its consumed capacity and record it (see the module header). */
  consumedCapacity?: boolean;
}

export async function startCountingProxy(upstream: string, options: CountingProxyOptions = {}): Promise<CountingProxy> {
  const target = new URL(upstream);
  let ownOrigin = '';
  const calls: CountedCall[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const received = Buffer.concat(chunks);
      const call: CountedCall = { operation: operationOf(req.headers, req.url ?? '/', received), at: Date.now(), status: 0 };
      let raw: Buffer = options.rewriteOwnOrigin && ownOrigin ? Buffer.from(received.toString('utf8').replaceAll(ownOrigin, target.origin), 'utf8') : received;
      if (options.consumedCapacity) raw = askForCapacity(call.operation, raw);
      calls.push(call);
      const upstreamReq = http.request(
        {
          host: target.hostname,
          port: target.port,
          method: req.method,
          path: req.url,
          headers: { ...req.headers, host: target.host, 'content-length': String(raw.byteLength) },
        },
        (upstreamRes) => {
          const answer: Buffer[] = [];
          upstreamRes.on('data', (c: Buffer) => answer.push(c));
          upstreamRes.on('end', () => {
            if (res.destroyed) return;
            const body = Buffer.concat(answer);
            call.status = upstreamRes.statusCode ?? 502;
            if (options.consumedCapacity) {
              const capacity = capacityOf(body);
              if (capacity) call.capacity = capacity;
            }
            const headers = { ...upstreamRes.headers };
            delete headers['transfer-encoding'];
            delete headers.connection;
            res.writeHead(upstreamRes.statusCode ?? 502, { ...headers, 'content-length': String(body.byteLength) });
            res.end(body);
          });
          upstreamRes.on('error', () => res.destroy());
        },
      );
      upstreamReq.on('error', () => {
        call.status = 502;
        if (!res.headersSent) res.writeHead(502).end();
        else res.destroy();
      });
      upstreamReq.end(raw);
    });
  });
  // Keep-alive sockets of the SDK must not keep the server open after stop().
  server.keepAliveTimeout = 1_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  ownOrigin = `http://127.0.0.1:${port}`;
  return {
    endpoint: `http://127.0.0.1:${port}`,
    calls,
    stop: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
