/**
 * Imports a state directory of the earlier file layout into the embedded database, once, on the
 * first start of a server:
 *
 *   store.json                {version, items: [{pk, ttl, ...record}]}  every store item, as is
 *   queue/evt_*.json          {job, receives, dueAt, reason?}           queued jobs (with `reason`:
 *                                                                        a dead letter an operator
 *                                                                        moved back, so redriven)
 *   queue/evt_*.json.tmp      a job write that may not have finished
 *   dead-letter/evt_*.json    {job, receives, dueAt, reason, deadLetteredAt}
 *
 * Everything is read and checked first; a file that cannot be read or parsed stops the import
 * with StateUnreadable naming it, and nothing is imported. Then one transaction writes it all,
 * and only after it committed are the old files renamed aside (`store.json.imported`,
 * `queue.imported/`, `dead-letter.imported/`): nothing is deleted. Items, jobs and dead letters
 * already in the database are kept, so an import interrupted before the renames can simply run
 * again.
 *
 * A `.json.tmp` job is imported when it parses as a complete job and no `.json` of that event
 * exists; otherwise it is left where it is, and if its event is still `queued` without a job, the
 * record is marked `failed`: its job was never fully written, so its caller never got an answer.
 *
 * Deliberately not here: the general repair of queued records without a job (repair.ts runs after
 * this at every start), and `store.json.tmp-*` files (never committed writes of the old store).
 */
import { lstat, readdir, readFile, rename } from 'node:fs/promises';
import { join } from 'node:path';
import { FailureReasons, type DeadLetterReason } from '../../core/protocol';
import { newEventWrite } from '../../core/store/events';
import { ItemKeys } from '../../core/store/items';
import type { DeliveryJob, EventRecord } from '../../ports';
import { StateUnreadable } from './errors';
import { getItem, idList, putItem, write, type Databases } from './environment';
import { hasJobInTxn, putJobInTxn } from './jobs';
import { failQueuedInTxn } from './table';

export const LegacyFiles = { store: 'store.json', queue: 'queue', deadLetter: 'dead-letter' } as const;

export interface LegacyImport {
  /** One line for the log: what was imported and where the old files went. */
  line: string;
  items: { subscription: number; events: number; verified: number; replay: number; answers: number; other: number };
  jobs: number;
  /** Of `jobs`: taken from a complete `.json.tmp`. */
  jobsFromTmp: number;
  deadLetters: number;
  /** Already in the database (an earlier, interrupted import): kept as they were. */
  alreadyPresent: number;
  /** Queued records marked failed because their job file was half-written. */
  failedEvents: string[];
  /** `old -> new` names of the renamed files. */
  movedAside: string[];
}

interface JobEntry {
  eventId: string;
  job: DeliveryJob;
  receives: number;
  dueAt: number;
  /** Present on a dead letter, and on a dead letter moved back into queue/. */
  reason?: string;
  deadLetteredAt?: number;
  fromTmp?: boolean;
}

interface LegacyData {
  items: { pk: string; ttl: number; fields: Record<string, unknown> }[];
  jobs: JobEntry[];
  deadLetters: (JobEntry & { reason: DeadLetterReason })[];
  /** Event ids of `.json.tmp` files that are not a complete job (and have no `.json`). */
  brokenTmps: string[];
  present: { store: boolean; queue: boolean; deadLetter: boolean };
}

const JOB_FILE = /^(evt_[0-9a-f]{32})\.json$/;
const TMP_FILE = /^(evt_[0-9a-f]{32})\.json\.tmp$/;
const DEAD_LETTER_REASONS: ReadonlySet<string> = new Set<string>([...FailureReasons, 'receive_limit', 'malformed']);

/** True when any part of the earlier layout is still in place (not yet imported). */
export async function legacyLayoutPresent(stateDir: string): Promise<boolean> {
  const present = await presence(stateDir);
  return present.store || present.queue || present.deadLetter;
}

/** Imports the earlier layout if there is one; undefined when there is nothing to import. */
export async function importLegacyLayout(dbs: Databases, stateDir: string, now: number): Promise<LegacyImport | undefined> {
  const data = await readLegacy(stateDir);
  if (!data) return undefined;
  const counts = await write(dbs, () => {
    const items = { subscription: 0, events: 0, verified: 0, replay: 0, answers: 0, other: 0 };
    let alreadyPresent = 0;
    for (const item of data.items) {
      if (getItem(dbs, item.pk) !== undefined) {
        alreadyPresent++;
        continue;
      }
      // An event carries the Store's index attributes, as if the Store had written it.
      const fields = item.pk.startsWith(ItemKeys.event('')) ? newEventWrite(item.fields as unknown as EventRecord).item : item.fields;
      putItem(dbs, item.pk, { ...fields, ttl: item.ttl });
      items[kindOf(item.pk)]++;
    }
    let jobs = 0;
    let jobsFromTmp = 0;
    for (const entry of data.jobs) {
      if (hasJobInTxn(dbs, entry.eventId)) {
        alreadyPresent++;
        continue;
      }
      if (entry.reason !== undefined) {
        // A dead letter moved back by the old `dm-dot redrive`: a new round, as its next pick-up would have given it.
        putJobInTxn(dbs, { ...entry.job, redriven: true }, now, now);
      } else putJobInTxn(dbs, entry.job, entry.dueAt, now, entry.receives);
      jobs++;
      if (entry.fromTmp) jobsFromTmp++;
    }
    let deadLetters = 0;
    for (const entry of data.deadLetters) {
      if (dbs.deadLetters.get(entry.eventId) !== undefined) {
        alreadyPresent++;
        continue;
      }
      void dbs.deadLetters.put(entry.eventId, { job: entry.job, reason: entry.reason, receives: entry.receives, deadLetteredAt: entry.deadLetteredAt ?? now });
      deadLetters++;
    }
    const failedEvents: string[] = [];
    for (const eventId of data.brokenTmps) {
      if (hasJobInTxn(dbs, eventId)) continue;
      if (failQueuedInTxn(dbs, eventId, now)) failedEvents.push(eventId);
    }
    return { items, jobs, jobsFromTmp, deadLetters, alreadyPresent, failedEvents };
  });
  const movedAside: string[] = [];
  for (const [name, isPresent] of [
    [LegacyFiles.store, data.present.store],
    [LegacyFiles.queue, data.present.queue],
    [LegacyFiles.deadLetter, data.present.deadLetter],
  ] as const) {
    if (isPresent) movedAside.push(await moveAside(stateDir, name));
  }
  const result = { ...counts, movedAside };
  return { ...result, line: describe(stateDir, result) };
}

async function presence(stateDir: string): Promise<LegacyData['present']> {
  const kind = async (name: string) => {
    try {
      const info = await lstat(join(stateDir, name));
      return info.isDirectory() ? 'dir' : 'file';
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return 'none';
      throw legacyUnreadable(join(stateDir, name), `it cannot be examined (${(error as Error).message})`, error);
    }
  };
  return {
    store: (await kind(LegacyFiles.store)) === 'file',
    queue: (await kind(LegacyFiles.queue)) === 'dir',
    deadLetter: (await kind(LegacyFiles.deadLetter)) === 'dir',
  };
}

async function readLegacy(stateDir: string): Promise<LegacyData | undefined> {
  const present = await presence(stateDir);
  if (!present.store && !present.queue && !present.deadLetter) return undefined;
  const data: LegacyData = { items: [], jobs: [], deadLetters: [], brokenTmps: [], present };
  if (present.store) data.items = await readStoreFile(join(stateDir, LegacyFiles.store));
  if (present.queue) {
    const dir = join(stateDir, LegacyFiles.queue);
    const names = await listDir(dir);
    const committed = new Set(names.flatMap((name) => JOB_FILE.exec(name)?.[1] ?? []));
    for (const name of names) {
      const job = JOB_FILE.exec(name);
      if (job?.[1]) {
        const file = join(dir, name);
        const parsed = parseJobEntry(await readText(file), job[1]);
        if (typeof parsed === 'string') throw legacyUnreadable(file, parsed);
        data.jobs.push(parsed);
        continue;
      }
      const tmp = TMP_FILE.exec(name);
      if (tmp?.[1] && !committed.has(tmp[1])) {
        // A write that may not have finished: used only when it is a complete job.
        const parsed = parseJobEntry(await readText(join(dir, name)), tmp[1]);
        if (typeof parsed === 'string') data.brokenTmps.push(tmp[1]);
        else data.jobs.push({ ...parsed, fromTmp: true });
      }
    }
  }
  if (present.deadLetter) {
    const dir = join(stateDir, LegacyFiles.deadLetter);
    for (const name of await listDir(dir)) {
      const match = JOB_FILE.exec(name);
      if (!match?.[1]) continue;
      const file = join(dir, name);
      const parsed = parseJobEntry(await readText(file), match[1]);
      if (typeof parsed === 'string') throw legacyUnreadable(file, parsed);
      if (parsed.reason === undefined || !DEAD_LETTER_REASONS.has(parsed.reason)) throw legacyUnreadable(file, 'it has no known dead-letter reason');
      data.deadLetters.push({ ...parsed, reason: parsed.reason as DeadLetterReason });
    }
  }
  return data;
}

async function readStoreFile(file: string): Promise<LegacyData['items']> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(await readText(file));
  } catch (error) {
    if (error instanceof StateUnreadable) throw error;
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

/** The entry, or why it is not one. */
function parseJobEntry(text: string, eventId: string): JobEntry | string {
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
  if (generation !== undefined && typeof generation !== 'string') return 'its job has a malformed generation';
  if (redriven !== undefined && typeof redriven !== 'boolean') return 'its job has a malformed redriven flag';
  if (typeof receives !== 'number' || !Number.isInteger(receives) || receives < 0) return 'it has no receive count';
  if (typeof dueAt !== 'number' || !Number.isFinite(dueAt)) return 'it has no due time';
  if (reason !== undefined && typeof reason !== 'string') return 'it has a malformed reason';
  const at = typeof deadLetteredAt === 'string' ? Date.parse(deadLetteredAt) : Number.NaN;
  return {
    eventId,
    job: {
      eventId,
      subscriptionId,
      body,
      ...(generation !== undefined ? { generation } : {}),
      ...(redriven !== undefined ? { redriven } : {}),
    },
    receives,
    dueAt,
    ...(reason !== undefined ? { reason } : {}),
    ...(Number.isNaN(at) ? {} : { deadLetteredAt: at }),
  };
}

async function readText(file: string): Promise<string> {
  try {
    return await readFile(file, 'utf8');
  } catch (error) {
    throw legacyUnreadable(file, `it cannot be read (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`, error);
  }
}

async function listDir(dir: string): Promise<string[]> {
  try {
    return (await readdir(dir)).sort();
  } catch (error) {
    throw legacyUnreadable(dir, `it cannot be listed (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`, error);
  }
}

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
    try {
      await lstat(join(stateDir, target));
      continue;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    }
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

function kindOf(pk: string): keyof LegacyImport['items'] {
  if (pk === ItemKeys.subscription) return 'subscription';
  if (pk.startsWith(ItemKeys.event(''))) return 'events';
  if (pk.startsWith(ItemKeys.verified(''))) return 'verified';
  if (pk.startsWith(ItemKeys.replay(''))) return 'replay';
  if (pk.startsWith(ItemKeys.inboundAnswer(''))) return 'answers';
  return 'other';
}

function describe(stateDir: string, result: Omit<LegacyImport, 'line'>): string {
  const count = (n: number, one: string, many: string) => `${n} ${n === 1 ? one : many}`;
  const { items } = result;
  const parts = [
    items.subscription > 0 ? count(items.subscription, 'subscription', 'subscriptions') : '',
    items.events > 0 ? count(items.events, 'event', 'events') : '',
    items.verified > 0 ? count(items.verified, 'verification', 'verifications') : '',
    items.replay > 0 ? count(items.replay, 'replay id', 'replay ids') : '',
    items.answers > 0 ? count(items.answers, 'inbound answer', 'inbound answers') : '',
    items.other > 0 ? count(items.other, 'other item', 'other items') : '',
    result.jobs > 0
      ? `${count(result.jobs, 'queued job', 'queued jobs')}${result.jobsFromTmp > 0 ? ` (${result.jobsFromTmp} from a half-renamed file)` : ''}`
      : '',
    result.deadLetters > 0 ? count(result.deadLetters, 'dead letter', 'dead letters') : '',
    result.failedEvents.length > 0
      ? `${count(result.failedEvents.length, 'event', 'events')} marked failed (its job was never fully queued: ${idList(result.failedEvents)})`
      : '',
    result.alreadyPresent > 0 ? `${result.alreadyPresent} already in the database, kept` : '',
  ].filter((part) => part !== '');
  return (
    `imported the earlier file layout of ${stateDir}: ${parts.length > 0 ? parts.join(', ') : 'nothing in it'}; moved aside ` +
    `${result.movedAside.join(', ')}`
  );
}
