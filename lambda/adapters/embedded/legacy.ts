/**
 * What a state directory of an earlier layout leaves behind, brought up to date at open:
 *
 * - `upgradeLayout` (every open): a file of layout 1 kept the keys of queued events in `queued`;
 *   layout 2 keeps them in the Store's `queued` index, whose attributes the item itself carries.
 * - `importLegacyLayout` (a server's first start): the earlier file layout, imported once:
 *
 *   store.json                {version, items: [{pk, ttl, ...record}]}  every store item, as is
 *   queue/evt_*.json          {job, receives, dueAt, reason?}           queued jobs (with `reason`: a
 *                                                                        dead letter moved back, so redriven)
 *   queue/evt_*.json.tmp      a job write that may not have finished
 *   dead-letter/evt_*.json    {job, receives, dueAt, reason, deadLetteredAt}
 *
 *   Everything is read and checked first (a file that cannot be read or parsed stops the import
 *   with StateUnreadable naming it, and nothing is imported), then written in one transaction,
 *   and only then are the old files renamed aside (`store.json.imported`, ...), never deleted.
 *   What is already in the database is kept, so an interrupted import can simply run again. A
 *   `.json.tmp` job is imported when it is a complete job and no `.json` of its event exists;
 *   otherwise its event, if still `queued` without a job, is marked `failed` (its caller never
 *   got an answer).
 * - `repairQueuedWithoutJobs` (every server start): every live `queued` record has a job, which
 *   only an import (or a record written by hand) can break; such a record gets a job from its
 *   kept bytes (`body`), due now, or, without them, is marked `failed`; both are reported by id.
 *
 * Deliberately not here: jobs without a record (the worker restores the record when it meets one,
 * as the Delivery Lambda does), and `store.json.tmp-*` files (never committed writes of the old store).
 */
import { lstat, readdir, readFile, rename } from 'node:fs/promises';
import { join } from 'node:path';
import { EventStatus, FailureReasons, type DeadLetterReason } from '../../core/protocol';
import { eventUpdate, newEventWrite } from '../../core/store/events';
import { ItemKeys, QueuedIndex, isLive, recordOf } from '../../core/store/items';
import type { DeliveryJob, EventRecord } from '../../ports';
import { StateUnreadable } from './errors';
import { getItem, SCHEMA_VERSION, setItem, write, type Databases, type StoredItem } from './environment';
import { unreadable } from './file-check';
import { hasJobInTxn, putJobInTxn } from './jobs';
import { LmdbTable } from './table';

/** Layout 1 (or a file without a layout) to layout 2; environment.ts has refused a newer one. */
export async function upgradeLayout(dbs: Databases): Promise<void> {
  try {
    if (dbs.meta.get('schema') === SCHEMA_VERSION) return;
    await write(dbs, () => {
      const stored = dbs.meta.get('schema');
      if (stored === SCHEMA_VERSION) return;
      for (const key of stored === 1 ? [...dbs.queued.getKeys()] : []) {
        const item = dbs.items.get(key);
        if (typeof item?.eventId === 'string') setItem(dbs, key, { ...newEventWrite(recordOf<EventRecord>(item)).item, ttl: item.ttl });
        void dbs.queued.remove(key);
      }
      void dbs.meta.put('schema', SCHEMA_VERSION);
    });
  } catch (error) {
    throw error instanceof StateUnreadable ? error : unreadable(dbs.file, error);
  }
}

const LegacyFiles = { store: 'store.json', queue: 'queue', deadLetter: 'dead-letter' } as const;

/** The kinds of store item an import counts, by key prefix, and what the line calls one. */
const KINDS = {
  subscription: [ItemKeys.subscription, 'subscription'],
  events: [ItemKeys.event(''), 'event'],
  verified: [ItemKeys.verified(''), 'verification'],
  replay: [ItemKeys.replay(''), 'replay id'],
  answers: [ItemKeys.inboundAnswer(''), 'inbound answer'],
  other: ['', 'other item'],
} as const;
type Kind = keyof typeof KINDS;

/** `reason` is present on a dead letter, and on a dead letter moved back into queue/. */
type JobEntry = Exclude<ReturnType<typeof parseJobEntry>, string> & { fromTmp?: boolean };

const JOB_FILE = /^(evt_[0-9a-f]{32})\.json$/;
const TMP_FILE = /^(evt_[0-9a-f]{32})\.json\.tmp$/;
const DEAD_LETTER_REASONS: ReadonlySet<string> = new Set<string>([...FailureReasons, 'receive_limit', 'malformed']);

/** lstat's answer, or undefined when there is nothing there. */
const lstatIfAny = (path: string) => lstat(path).catch((error: NodeJS.ErrnoException) => (error.code === 'ENOENT' ? undefined : Promise.reject(error)));

/** Which parts of the earlier layout are still in place (not yet imported). */
async function presence(stateDir: string): Promise<Record<keyof typeof LegacyFiles, boolean>> {
  const is = (name: string, directory: boolean) =>
    lstatIfAny(join(stateDir, name)).then(
      (info) => info !== undefined && info.isDirectory() === directory,
      (error: Error) => Promise.reject(legacyUnreadable(join(stateDir, name), `it cannot be examined (${error.message})`, error)),
    );
  return { store: await is(LegacyFiles.store, false), queue: await is(LegacyFiles.queue, true), deadLetter: await is(LegacyFiles.deadLetter, true) };
}

export async function legacyLayoutPresent(stateDir: string): Promise<boolean> {
  return Object.values(await presence(stateDir)).some(Boolean);
}

/** Imports the earlier layout if there is one; undefined when there is nothing to import. */
export async function importLegacyLayout(dbs: Databases, stateDir: string, now: number) {
  const present = await presence(stateDir);
  if (!Object.values(present).some(Boolean)) return undefined;
  const items = present.store ? await readStoreFile(join(stateDir, LegacyFiles.store)) : [];
  const jobs: JobEntry[] = [];
  const brokenTmps: string[] = [];
  if (present.queue) {
    const dir = join(stateDir, LegacyFiles.queue);
    const names = await listDir(dir);
    const committed = new Set(names.flatMap((name) => JOB_FILE.exec(name)?.[1] ?? []));
    for (const name of names) {
      const eventId = JOB_FILE.exec(name)?.[1];
      if (eventId) jobs.push(await readJobFile(join(dir, name), eventId));
      const tmp = TMP_FILE.exec(name)?.[1];
      if (tmp && !committed.has(tmp)) {
        // A write that may not have finished: used only when it is a complete job.
        const parsed = parseJobEntry(await readText(join(dir, name)), tmp);
        if (typeof parsed === 'string') brokenTmps.push(tmp);
        else jobs.push({ ...parsed, fromTmp: true });
      }
    }
  }
  const deadLetters: (JobEntry & { reason: DeadLetterReason })[] = [];
  if (present.deadLetter) {
    const dir = join(stateDir, LegacyFiles.deadLetter);
    for (const name of await listDir(dir)) {
      const eventId = JOB_FILE.exec(name)?.[1];
      if (!eventId) continue;
      const entry = await readJobFile(join(dir, name), eventId);
      if (!DEAD_LETTER_REASONS.has(entry.reason ?? '')) throw legacyUnreadable(join(dir, name), 'it has no known dead-letter reason');
      deadLetters.push(entry as JobEntry & { reason: DeadLetterReason });
    }
  }
  const counts = await write(dbs, () => {
    const kinds = { subscription: 0, events: 0, verified: 0, replay: 0, answers: 0, other: 0 };
    // alreadyPresent: kept as they were (an earlier, interrupted import).
    const result = { items: kinds, jobs: 0, jobsFromTmp: 0, deadLetters: 0, alreadyPresent: 0 };
    for (const { pk, ttl, fields } of items) {
      if (getItem(dbs, pk) !== undefined) result.alreadyPresent++;
      else {
        const kind = kindOf(pk);
        // An event carries the Store's index attributes, as if the Store had written it.
        setItem(dbs, pk, { ...(kind === 'events' ? newEventWrite(fields as unknown as EventRecord).item : fields), ttl });
        result.items[kind]++;
      }
    }
    for (const entry of jobs) {
      if (hasJobInTxn(dbs, entry.eventId)) {
        result.alreadyPresent++;
        continue;
      }
      // A dead letter moved back by the old `dm-dot redrive`: a new round, as its next pick-up would have given it.
      if (entry.reason !== undefined) putJobInTxn(dbs, { ...entry.job, redriven: true }, now, now);
      else putJobInTxn(dbs, entry.job, entry.dueAt, now, entry.receives);
      result.jobs++;
      if (entry.fromTmp) result.jobsFromTmp++;
    }
    for (const { eventId, job, reason, receives, deadLetteredAt } of deadLetters) {
      if (dbs.deadLetters.get(eventId) !== undefined) result.alreadyPresent++;
      else {
        void dbs.deadLetters.put(eventId, { job, reason, receives, deadLetteredAt: deadLetteredAt ?? now });
        result.deadLetters++;
      }
    }
    const failedEvents = brokenTmps.filter((eventId) => !hasJobInTxn(dbs, eventId) && failQueuedInTxn(dbs, eventId, now));
    return { ...result, failedEvents };
  });
  const movedAside: string[] = [];
  for (const name of ['store', 'queue', 'deadLetter'] as const) if (present[name]) movedAside.push(await moveAside(stateDir, LegacyFiles[name]));
  const { items: kinds, jobs: jobCount, jobsFromTmp, deadLetters: letterCount, failedEvents, alreadyPresent } = counts;
  const parts = [
    ...(Object.keys(KINDS) as Kind[]).map((kind) => count(kinds[kind], KINDS[kind][1])),
    count(jobCount, 'queued job') + (jobsFromTmp > 0 ? ` (${jobsFromTmp} from a half-renamed file)` : ''),
    count(letterCount, 'dead letter'),
    failedEvents.length > 0 ? `${count(failedEvents.length, 'event')} marked failed (its job was never fully queued: ${idList(failedEvents)})` : '',
    alreadyPresent > 0 ? `${alreadyPresent} already in the database, kept` : '',
  ].filter((part) => part !== '');
  const what = parts.length > 0 ? parts.join(', ') : 'nothing in it';
  // One line for the log: what was imported and where the old files went.
  return { ...counts, movedAside, line: `imported the earlier file layout of ${stateDir}: ${what}; moved aside ${movedAside.join(', ')}` };
}

async function readStoreFile(file: string): Promise<{ pk: string; ttl: number; fields: Record<string, unknown> }[]> {
  const text = await readText(file);
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (error) {
    throw legacyUnreadable(file, `it is not valid JSON (${(error as Error).message})`, error);
  }
  const items = (parsed as { items?: unknown } | null)?.items;
  if (!Array.isArray(items)) throw legacyUnreadable(file, 'it has no list of items');
  return items.map((item: unknown, index) => {
    if (typeof item !== 'object' || item === null) throw legacyUnreadable(file, `item ${index} is not an object`);
    const { pk, ttl, ...fields } = item as Record<string, unknown>;
    if (typeof pk !== 'string' || pk === '') throw legacyUnreadable(file, `item ${index} has no key (pk)`);
    if (typeof ttl !== 'number' || !Number.isFinite(ttl)) throw legacyUnreadable(file, `item ${index} has no ttl`);
    return { pk, ttl, fields };
  });
}

async function readJobFile(file: string, eventId: string): Promise<JobEntry> {
  const parsed = parseJobEntry(await readText(file), eventId);
  if (typeof parsed === 'string') throw legacyUnreadable(file, parsed);
  return parsed;
}

/** The entry, or why it is not one. */
function parseJobEntry(text: string, eventId: string) {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (error) {
    return text.trim() === '' ? 'it is empty' : `it is not valid JSON (${(error as Error).message})`;
  }
  if (typeof parsed !== 'object' || parsed === null) return 'it is not a job entry';
  const { job, receives, dueAt, reason, deadLetteredAt } = parsed as Record<string, unknown>;
  if (typeof job !== 'object' || job === null) return 'it holds no job';
  const { eventId: id, subscriptionId, body, generation, redriven } = job as Record<string, unknown>;
  if (id !== eventId) return 'its job is of another event than its name says';
  if (typeof subscriptionId !== 'string' || typeof body !== 'string') return 'its job has no subscription id or body';
  if (!['undefined', 'string'].includes(typeof generation)) return 'its job has a malformed generation';
  if (!['undefined', 'boolean'].includes(typeof redriven)) return 'its job has a malformed redriven flag';
  if (typeof receives !== 'number' || !Number.isInteger(receives) || receives < 0) return 'it has no receive count';
  if (typeof dueAt !== 'number' || !Number.isFinite(dueAt)) return 'it has no due time';
  if (!['undefined', 'string'].includes(typeof reason)) return 'it has a malformed reason';
  const at = typeof deadLetteredAt === 'string' ? Date.parse(deadLetteredAt) : Number.NaN;
  // Undefined fields are left out by the JSON encoding of every sub-database.
  const entry = { eventId, subscriptionId, body, generation, redriven } as DeliveryJob;
  return { eventId, job: entry, receives, dueAt, reason: reason as string | undefined, deadLetteredAt: Number.isNaN(at) ? undefined : at };
}

/** `op`'s result, or the sentence saying that `path` cannot be `what` (read, listed) and why. */
const io = <T>(path: string, what: string, op: Promise<T>) =>
  op.catch((error: NodeJS.ErrnoException) => Promise.reject(legacyUnreadable(path, `it cannot be ${what} (${error.code ?? error.message})`, error)));
const readText = (file: string) => io(file, 'read', readFile(file, 'utf8'));
const listDir = (dir: string) => io(dir, 'listed', readdir(dir)).then((names) => names.sort());

function legacyUnreadable(file: string, problem: string, cause?: unknown): StateUnreadable {
  return new StateUnreadable(
    file,
    `${problem}, so the earlier file layout was not imported (nothing was)`,
    'Repair that file, or move it out of the state directory (an event whose job file is moved is marked failed, or queued again from its kept ' +
      'bytes), then start again',
    cause === undefined ? undefined : { cause },
  );
}

/** Renames `name` to `name.imported` (or `name.imported.2`, ... when that is taken). */
async function moveAside(stateDir: string, name: string): Promise<string> {
  for (let n = 1; ; n++) {
    const target = `${name}.imported${n === 1 ? '' : `.${n}`}`;
    if (await lstatIfAny(join(stateDir, target))) continue;
    try {
      await rename(join(stateDir, name), join(stateDir, target));
    } catch (error) {
      throw new StateUnreadable(
        join(stateDir, name),
        `it was imported but could not be renamed to ${target} (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`,
        'Rename or move it yourself, then start again (importing it again keeps what is already in the database)',
        { cause: error },
      );
    }
    return `${name} -> ${target}`;
  }
}

function kindOf(pk: string): Kind {
  const kinds = Object.entries(KINDS) as [Kind, (typeof KINDS)[Kind]][];
  return kinds.find(([, [prefix]]) => (prefix.endsWith('#') ? pk.startsWith(prefix) : pk === prefix))?.[0] ?? 'other';
}

/** `n thing(s)`, or nothing for none. */
const count = (n: number, one: string) => (n > 0 ? `${n} ${one}${n === 1 ? '' : 's'}` : '');

/** Event ids for a log line: all of a few, the first ten of many. */
function idList(ids: readonly string[]): string {
  return ids.length <= 10 ? ids.join(', ') : `${ids.slice(0, 10).join(', ')} and ${ids.length - 10} more`;
}

/** Event ids given a job from their kept bytes, or marked failed; a line for the log when there are any. */
export type RepairReport = { requeued: string[]; failed: string[]; line?: string };

/** Inside a write: marks a `queued` event `failed` (a job that can never be sent). True when it was. */
function failQueuedInTxn(dbs: Databases, eventId: string, now: number): boolean {
  const planned = eventUpdate(eventId, { status: EventStatus.failed }, { status: EventStatus.queued }, now)!;
  return new LmdbTable(dbs).applyInTxn({ kind: 'update', ...planned }).ok;
}

/** The event's record when it is live, `queued` and without a job. */
function queuedWithoutJob(dbs: Databases, eventId: string, now: number): StoredItem | undefined {
  const item = getItem(dbs, ItemKeys.event(eventId));
  return item?.status === EventStatus.queued && isLive(item.expiresAt, now) && !hasJobInTxn(dbs, eventId) ? item : undefined;
}

export async function repairQueuedWithoutJobs(dbs: Databases, now: number): Promise<RepairReport> {
  // Found from the index of queued events (not every event), then re-checked inside the write:
  // the search holds no writer lock.
  const candidates: string[] = [];
  for (const [, , key] of dbs.indexes.get(QueuedIndex.name)!.getKeys()) {
    const eventId = dbs.items.get(key)?.eventId;
    if (typeof eventId === 'string' && queuedWithoutJob(dbs, eventId, now)) candidates.push(eventId);
  }
  if (candidates.length === 0) return { requeued: [], failed: [] };
  const report = await write(dbs, () => {
    const requeued: string[] = [];
    const failed: string[] = [];
    for (const eventId of candidates) {
      const item = queuedWithoutJob(dbs, eventId, now);
      if (!item) continue;
      const { subscriptionId, body, generation } = item;
      if (typeof body === 'string' && typeof subscriptionId === 'string') {
        putJobInTxn(dbs, { eventId, subscriptionId, body, generation } as DeliveryJob, now, now);
        requeued.push(eventId);
      } else if (failQueuedInTxn(dbs, eventId, now)) failed.push(eventId);
    }
    return { requeued, failed };
  });
  const parts = [
    report.requeued.length > 0 ? `${report.requeued.length} queued again from their kept bytes (${idList(report.requeued)})` : '',
    report.failed.length > 0 ? `${report.failed.length} marked failed, having no kept bytes to send (${idList(report.failed)})` : '',
  ].filter((part) => part !== '');
  return parts.length > 0 ? { ...report, line: `queued events without a delivery job: ${parts.join('; ')}` } : report;
}
