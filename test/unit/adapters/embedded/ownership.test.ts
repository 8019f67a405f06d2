/**
 * One server per state directory: the owner record, claimed in a write transaction. In one
 * process (two opens) and across real processes (children run through tsx), including a server
 * killed with SIGKILL, and the operator role, which never claims.
 */
import { spawn, spawnSync, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { open } from 'lmdb';
import { DATABASE_FILE, openEmbeddedDatabase, readOwner, StateDirInUse, type EmbeddedDatabase } from '../../../../lambda/adapters/embedded';
import { Limits } from '../../../../lambda/core/protocol';

const ROOT = resolve(__dirname, '../../../..');
const T0 = Date.UTC(2030, 0, 1);

let dir: string;
const opened: EmbeddedDatabase[] = [];
const children: ChildProcessWithoutNullStreams[] = [];

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'dm-dot-owner-'));
});

afterEach(async () => {
  for (const child of children.splice(0)) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  for (const db of opened.splice(0)) await db.close().catch(() => undefined);
  await rm(dir, { recursive: true, force: true });
});

async function server(): Promise<EmbeddedDatabase> {
  const db = await openEmbeddedDatabase(dir, { role: 'server' });
  opened.push(db);
  return db;
}

/** Writes the owner record as another process would have (the layout of ownership.ts). */
async function writeOwnerRecord(record: Record<string, unknown>): Promise<void> {
  const env = open(join(dir, DATABASE_FILE), { overlappingSync: false, noSubdir: true, maxDbs: 12 });
  await env.openDB('meta', { encoding: 'json' }).put('owner', record);
  await env.close();
}

const queued = (n: number) => ({
  eventId: `evt_${n.toString(16).padStart(32, '0')}`,
  status: 'queued' as const,
  subscriptionId: 'sub_a',
  attempts: 0,
  createdAt: T0,
  expiresAt: T0 + Limits.eventRecordMs,
  body: '{}',
});
const jobOf = (n: number) => ({ eventId: queued(n).eventId, subscriptionId: 'sub_a', body: '{}' });

describe('LOCAL-6: in one process', () => {
  it("a second server gets StateDirInUse naming the first one's pid and URL, and the first keeps its records", async () => {
    const first = await server();
    await first.setOwnerUrl('http://127.0.0.1:8787');
    await first.outbox.add(queued(1), jobOf(1));

    const second = openEmbeddedDatabase(dir, { role: 'server' });
    await expect(second).rejects.toBeInstanceOf(StateDirInUse);
    await expect(second).rejects.toMatchObject({ stateDir: dir, owner: { pid: process.pid, url: 'http://127.0.0.1:8787' } });
    await expect(second.catch((error: Error) => error.message)).resolves.toContain(`pid ${process.pid}, http://127.0.0.1:8787`);

    await expect(first.owner()).resolves.toMatchObject({ pid: process.pid, url: 'http://127.0.0.1:8787', alive: true });
    await expect(first.store.getEvent(queued(1).eventId, T0)).resolves.toStrictEqual(queued(1));
    await expect(first.jobs.counts()).resolves.toEqual({ queued: 1, deadLetters: 0 });
    // Still the owner: its URL can still be recorded.
    await expect(first.setOwnerUrl('http://127.0.0.1:9000')).resolves.toBeUndefined();
  });

  it('two servers opening at once: exactly one owns the directory', async () => {
    const results = await Promise.allSettled([openEmbeddedDatabase(dir, { role: 'server' }), openEmbeddedDatabase(dir, { role: 'server' })]);
    for (const result of results) if (result.status === 'fulfilled') opened.push(result.value);
    expect(results.filter((result) => result.status === 'fulfilled')).toHaveLength(1);
    const refused = results.find((result) => result.status === 'rejected');
    expect(refused?.status === 'rejected' && refused.reason).toBeInstanceOf(StateDirInUse);
  });

  it('a server that stopped releases the directory: the next one starts without a takeover', async () => {
    const first = await server();
    await first.close();
    const next = await server();
    expect(next.report.tookOverFrom).toBeUndefined();
  });

  it('an owner record whose pid now belongs to another process (another start time) is taken over', async () => {
    await server().then((db) => db.close());
    await writeOwnerRecord({ token: 'someone-else', pid: process.pid, startTime: '1', bootId: 'other-boot', hostname: 'h', startedAt: T0 });
    const db = await server();
    expect(db.report.tookOverFrom).toMatchObject({ pid: process.pid });
    await expect(db.owner()).resolves.toMatchObject({ pid: process.pid, alive: true });
  });

  it('a stopping server clears the owner record only while it is still its own', async () => {
    const db = await server();
    // Taken over meanwhile (it was deemed dead): the record is not this server's to remove.
    const other = { token: 'the-new-owner', pid: process.pid, hostname: 'h', startedAt: T0 };
    await writeOwnerRecord(other);
    await expect(db.release()).resolves.toBe(false);
    await db.close();
    const operator = await openEmbeddedDatabase(dir, { role: 'operator' }).catch((error: unknown) => error);
    expect(operator).toBeInstanceOf(StateDirInUse);
  });
});

describe('the operator role', () => {
  it('never claims: with no server it opens for direct use and leaves no owner record', async () => {
    const operator = await openEmbeddedDatabase(dir, { role: 'operator' });
    opened.push(operator);
    await expect(operator.owner()).resolves.toBeUndefined();
    await operator.outbox.add(queued(2), jobOf(2));
    // A server can still start; the operator's writes are there for it.
    const db = await server();
    expect(db.report.tookOverFrom).toBeUndefined();
    await expect(db.jobs.counts()).resolves.toEqual({ queued: 1, deadLetters: 0 });
  });

  it('with a live server it gets StateDirInUse naming that server, and readOwner finds it', async () => {
    const db = await server();
    await db.setOwnerUrl('http://127.0.0.1:8787');
    await expect(openEmbeddedDatabase(dir, { role: 'operator' })).rejects.toMatchObject({
      name: 'StateDirInUse',
      owner: { pid: process.pid, url: 'http://127.0.0.1:8787' },
    });
    await expect(readOwner(dir)).resolves.toMatchObject({ pid: process.pid, url: 'http://127.0.0.1:8787' });
    await expect(db.owner()).resolves.toMatchObject({ pid: process.pid, alive: true });
  });

  it('readOwner creates no database where there is none', async () => {
    await expect(readOwner(dir)).resolves.toBeUndefined();
    expect(existsSync(join(dir, DATABASE_FILE))).toBe(false);
  });
});

// ---- across processes ---------------------------------------------------------------------------

const CHILD = `
import { openEmbeddedDatabase } from ${JSON.stringify(join(ROOT, 'lambda/adapters/embedded/index'))};
import { createInterface } from 'node:readline';

const [mode, stateDir, arg] = process.argv.slice(2);
const say = (value: unknown) => process.stdout.write(JSON.stringify(value) + '\\n');
const lines = createInterface({ input: process.stdin });
const nextLine = () => new Promise<string>((done) => lines.once('line', done));

async function main(): Promise<void> {
  if (mode === 'server') {
    try {
      const db = await openEmbeddedDatabase(stateDir!, { role: 'server' });
      if (arg) await db.setOwnerUrl(arg);
      say({ owner: true, pid: process.pid });
      lines.once('close', () => void db.close().then(() => process.exit(0)));
    } catch (error) {
      say({ owner: false, name: (error as Error).name, ownerPid: (error as { owner?: { pid?: number } }).owner?.pid });
      process.exit(0);
    }
    return;
  }
  // mode 'claims': claim msg_0 .. msg_<arg - 1> once told to go.
  const db = await openEmbeddedDatabase(stateDir!, { role: 'operator' });
  say({ ready: true });
  await nextLine();
  const won: string[] = [];
  await Promise.all(Array.from({ length: Number(arg) }, async (_, i) => {
    if ((await db.store.claimReplayId('msg_' + i, ${T0}, 'child', 'POST /pup/challenge')).claimed) won.push('msg_' + i);
  }));
  await db.close();
  say({ won });
  process.exit(0);
}
void main();
`;

interface Child {
  process: ChildProcessWithoutNullStreams;
  next(): Promise<Record<string, unknown>>;
  exited: Promise<void>;
}

async function child(...args: string[]): Promise<Child> {
  return childUnder([], ...args);
}

/** A child run under a command prefix (`unshare --pid --fork`: another PID namespace). */
async function childUnder(prefix: string[], ...args: string[]): Promise<Child> {
  const script = join(dir, 'child.ts');
  if (!existsSync(script)) await writeFile(script, CHILD);
  const command = [...prefix, process.execPath, '--import', 'tsx', script, ...args];
  const proc = spawn(command[0]!, command.slice(1), { cwd: ROOT, stdio: ['pipe', 'pipe', 'pipe'] });
  children.push(proc);
  let stderr = '';
  proc.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<void>((done) => proc.once('exit', () => done()));
  const lines = createInterface({ input: proc.stdout });
  const queue: string[] = [];
  const waiting: ((line: string) => void)[] = [];
  lines.on('line', (line) => (waiting.shift() ?? ((l: string) => queue.push(l)))(line));
  const next = () =>
    new Promise<Record<string, unknown>>((done, fail) => {
      const take = (line: string) => done(JSON.parse(line) as Record<string, unknown>);
      const early = queue.shift();
      if (early !== undefined) return take(early);
      waiting.push(take);
      void exited.then(() => setTimeout(() => fail(new Error(`child exited without a line: ${stderr}`)), 50));
    });
  return { process: proc, next, exited };
}

/** Whether this machine lets us start a process in a new PID namespace (root, as on CI). */
const unshareWorks = (() => {
  const result = spawnSync('unshare', ['--pid', '--fork', 'true']);
  return result.status === 0;
})();
const inNamespaces = unshareWorks ? it : it.skip;

describe('across PID namespaces (containers sharing a volume)', () => {
  inNamespaces(
    'LOCAL-6, LOCAL-FAULT-6: a server in another PID namespace refuses a directory whose owner lives, names it, and leaves its record alone',
    async () => {
      const first = await server();
      await first.setOwnerUrl('http://127.0.0.1:8787');
      const before = await first.owner();
      const other = await childUnder(['unshare', '--pid', '--fork'], 'server', dir);
      // The other namespace's pid for itself is small (it is pid 1 or 2 there): the pid check could not tell.
      await expect(other.next()).resolves.toMatchObject({ owner: false, name: 'StateDirInUse', ownerPid: process.pid });
      await expect(first.owner()).resolves.toStrictEqual(before);
      await expect(first.setOwnerUrl('http://127.0.0.1:8787')).resolves.toBeUndefined();
    },
    30_000,
  );

  inNamespaces(
    'LOCAL-FAULT-6: the owner in another PID namespace holds the directory against this one, and once it is gone its record never blocks',
    async () => {
      const holder = await childUnder(['unshare', '--pid', '--fork', '--kill-child'], 'server', dir, 'http://127.0.0.1:8788');
      await expect(holder.next()).resolves.toMatchObject({ owner: true });
      await expect(openEmbeddedDatabase(dir, { role: 'server' })).rejects.toMatchObject({ name: 'StateDirInUse', owner: { url: 'http://127.0.0.1:8788' } });
      holder.process.kill('SIGKILL');
      await holder.exited;
      // unshare's child (pid 1 of its namespace) is killed by the kernel when unshare dies, a moment later.
      let db: EmbeddedDatabase | undefined;
      for (let tries = 0; !db && tries < 50; tries++) {
        db = await server().catch(async (error: unknown) => {
          if (!(error instanceof StateDirInUse)) throw error;
          await new Promise((r) => setTimeout(r, 100));
          return undefined;
        });
      }
      expect(db?.report.tookOverFrom).toMatchObject({ url: 'http://127.0.0.1:8788' });
    },
    30_000,
  );
});

describe('a stale record', () => {
  it("LOCAL-FAULT-6: a record naming a live pid (pid 1, a container's) whose socket nobody listens on never blocks a start", async () => {
    await server().then((db) => db.close());
    await writeOwnerRecord({ token: 'stale-owner', pid: 1, hostname: 'h', startedAt: T0, socket: '.owner-stale000.sock' });
    const db = await server();
    expect(db.report.tookOverFrom).toMatchObject({ pid: 1 });
  });
});

describe('across processes', () => {
  it('a server in another process holds the directory; once it is killed with SIGKILL, the next server takes over', async () => {
    const holder = await child('server', dir, 'http://127.0.0.1:8788');
    await expect(holder.next()).resolves.toMatchObject({ owner: true, pid: holder.process.pid });

    await expect(openEmbeddedDatabase(dir, { role: 'server' })).rejects.toMatchObject({
      name: 'StateDirInUse',
      owner: { pid: holder.process.pid, url: 'http://127.0.0.1:8788' },
    });

    holder.process.kill('SIGKILL');
    await holder.exited;
    const db = await server();
    expect(db.report.tookOverFrom).toMatchObject({ pid: holder.process.pid, url: 'http://127.0.0.1:8788' });
    await expect(db.owner()).resolves.toMatchObject({ pid: process.pid, alive: true });
  }, 30_000);

  it('two servers starting at once in two processes: exactly one owns, the other names it', async () => {
    const [a, b] = await Promise.all([child('server', dir), child('server', dir)]);
    const [ra, rb] = await Promise.all([a!.next(), b!.next()]);
    const answers = [ra, rb];
    const owners = answers.filter((answer) => answer.owner === true);
    expect(owners).toHaveLength(1);
    const loser = answers.find((answer) => answer.owner === false);
    expect(loser).toMatchObject({ name: 'StateDirInUse', ownerPid: owners[0]?.pid });
  }, 30_000);

  it('a check-and-set is atomic across processes: of two processes claiming the same ids at once, each id is claimed once', async () => {
    const n = 200;
    const other = await child('claims', dir, String(n));
    await expect(other.next()).resolves.toEqual({ ready: true });
    const operator = await openEmbeddedDatabase(dir, { role: 'operator' });
    opened.push(operator);
    other.process.stdin.write('go\n');
    const mine: string[] = [];
    await Promise.all(
      Array.from({ length: n }, async (_, i) => {
        if ((await operator.store.claimReplayId(`msg_${i}`, T0, 'parent', 'POST /pup/challenge')).claimed) mine.push(`msg_${i}`);
      }),
    );
    const theirs = ((await other.next()).won as string[]) ?? [];
    expect([...mine, ...theirs].sort()).toEqual(Array.from({ length: n }, (_, i) => `msg_${i}`).sort());
  }, 30_000);
});

describe('liveness, as status judges it', () => {
  // Beyond any pid_max: no process has it, here or in any namespace.
  const NO_SUCH_PID = 4_194_305;

  it('LOCAL-FAULT-6: an owner lives by its listening socket, not its pid: a live pid with no listener is not an owner, a listener is one whatever its pid says', async () => {
    const { listenOwnerSocket, ownerAlive } = await import('../../../../lambda/adapters/embedded/ownership');
    await server().then((db) => db.close());
    // This very process's pid, so a pid check says "alive"; nobody listens on the socket it names.
    await writeOwnerRecord({ token: 'no-listener', pid: process.pid, hostname: 'h', startedAt: T0, socket: '.owner-nolisten.sock' });
    const operator = await openEmbeddedDatabase(dir, { role: 'operator' });
    opened.push(operator);
    // Promise.resolve: the same assertion whether owner() answers at once or later.
    await expect(Promise.resolve(operator.owner())).resolves.toMatchObject({ pid: process.pid, alive: false });
    await expect(readOwner(dir)).resolves.toBeUndefined();
    await operator.close();

    // A listener under a pid that names no process here (an owner in another PID namespace).
    const listener = await listenOwnerSocket(dir, 'a-live-owner');
    expect(listener).toBeDefined();
    try {
      const record = { token: 'a-live-owner', pid: NO_SUCH_PID, hostname: 'h', startedAt: T0, socket: listener!.name, url: 'http://127.0.0.1:8799' };
      await expect(ownerAlive(dir, record)).resolves.toBe(true);
      await expect(ownerAlive(dir, { ...record, socket: '.owner-nolisten.sock', pid: process.pid })).resolves.toBe(false);
      await writeOwnerRecord(record);
      await expect(readOwner(dir)).resolves.toMatchObject({ pid: NO_SUCH_PID, url: 'http://127.0.0.1:8799' });
      await expect(openEmbeddedDatabase(dir, { role: 'operator' })).rejects.toMatchObject({ name: 'StateDirInUse', owner: { pid: NO_SUCH_PID } });
    } finally {
      listener!.close();
    }
    // Its listener gone, the same record is stale: the operator opens, and status calls it dead.
    const after = await openEmbeddedDatabase(dir, { role: 'operator' });
    opened.push(after);
    await expect(Promise.resolve(after.owner())).resolves.toMatchObject({ pid: NO_SUCH_PID, alive: false });
  });
});
