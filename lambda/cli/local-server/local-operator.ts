/**
 * The local backing of every operator command: the running server's admin routes when a server
 * owns the state directory (it is the only writer then), else the embedded database opened as
 * operator, which refuses with StateDirInUse if a server started meanwhile: then the command goes
 * through that server after all. A recorded server that accepts no connection (it died a moment
 * ago) falls back to the database; nothing was done through it, so nothing is done twice.
 *
 * Deliberately not here: AWS (backings.ts) and printing.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { LocalSettings } from '../../config/settings';
import { AdminRoutes, type EventStatus } from '../../core/protocol';
import { clearSubscription, eventCounts, listEventViews, resendEvent, showEvent, showSubscription, type ResendResult } from '../../operator/actions';
import { addSender, listSenders, revokeSender, recordRotation, type AddSenderResult, type SenderView } from '../../operator/access';
import { switchesOf, type EventDetail, type EventView, type SubscriptionView, type Switches } from '../../operator/views';
import type { Context } from '../context';
import { OperationError, ServerGone } from '../errors';
import type { Operator } from '../../operator/surface';
import type { AccessStore } from '../../ports';
import { adminCaller, findServer, type RunningServer } from './server';
import { keyFileOf, readKeyFile } from './target';

export type KeySource = { from: 'file'; file: string } | { from: 'MCP_API_KEY' } | { from: 'none'; file: string };

export interface LocalStatus {
  server: { running: true; url: string; pid: number; version: string | null } | { running: false };
  stateDir: string;
  /** Where the figures come from: the running server, the database itself, or nowhere yet. */
  readFrom: 'server' | 'database' | 'nothing';
  apiKey: KeySource;
  /** The running server's, or (no server) those npm start would use with this environment. */
  switches: Switches;
  subscription: SubscriptionView | null;
  events: Record<EventStatus, number> | null;
  jobs: { queued: number; deadLetters: number } | null;
  /** A damaged page of the state file, as the sentence naming it and what to do; null while none was met. */
  damage: string | null;
}

/** What every backing offers a command: the operator surface and the sender keys (operator/access.ts). */
export interface CliOperator extends Operator {
  senders: SenderOperations;
}

export interface LocalOperator extends CliOperator {
  via: 'server' | 'database';
  server?: RunningServer;
  redrive(): Promise<number>;
  status(): Promise<LocalStatus>;
  /**
   * Writes a new key file (and, through a running server, swaps it in at once); the old key is
   * accepted `overlapMs` more, `overlapUntil` as recorded (null without an overlap).
   */
  rotateKey(overlapMs?: number): Promise<{ keyFile: string; overlapUntil?: string | null }>;
}

/** The sender keys of a store; the running server's admin routes answer the same. */
export function senderOperationsOf(access: AccessStore, now: () => number = Date.now) {
  return {
    add: (name: string, rate: number | null) => addSender(access, name, rate, now()),
    list: () => listSenders(access),
    revoke: (name: string) => revokeSender(access, name, now()),
  };
}

export type SenderOperations = ReturnType<typeof senderOperationsOf>;

/** The status of `status` and `connect`: the running server's, the database's, or (neither yet) what npm start would use. */
export function localStatus(ctx: Context): Promise<LocalStatus> {
  const settings = ctx.settings.local();
  return withLocalOperator(ctx, (op) => ctx.progress(`reading the status from ${op.where}`, op.status()), {
    whenNothing: async (stateDir) =>
      stopped(settings, stateDir, await keyFileOf(stateDir), 'nothing', { subscription: null, events: null, jobs: null, damage: null }),
  });
}

/** The status with no server running: what the database holds, or nothing yet; the switches npm start would use. */
function stopped(
  settings: LocalSettings,
  stateDir: string,
  keyFile: string,
  readFrom: 'database' | 'nothing',
  read: Pick<LocalStatus, 'subscription' | 'events' | 'jobs' | 'damage'>,
): LocalStatus {
  const apiKey: KeySource = settings.apiKey ? { from: 'MCP_API_KEY' } : { from: existsSync(keyFile) ? 'file' : 'none', file: keyFile };
  return { server: { running: false }, stateDir, readFrom, apiKey, switches: switchesOf(settings), ...read };
}

const KEY_FROM_ENV =
  'the API key comes from MCP_API_KEY, so there is no key file to rotate: put a new value in MCP_API_KEY (at least 32 characters) and restart the server';

function serverOperator(ctx: Context, server: RunningServer, stateDir: string, settings: LocalSettings): LocalOperator {
  const admin = adminCaller(ctx, server, stateDir);
  const call = async <T>(method: string, path: string) => (await admin<T>(method, path)).body;
  return {
    via: 'server',
    server,
    where: `the running server at ${server.url}`,
    listEvents: async (status) => (await call<{ events: EventView[] }>('GET', `${AdminRoutes.events}${status ? `?status=${status}` : ''}`)).events,
    async showEvent(eventId) {
      const answer = await admin<{ event: EventDetail }>('GET', `${AdminRoutes.events}/${eventId}`);
      return answer.status === 404 ? null : answer.body.event;
    },
    resendEvent: (eventId) => call<ResendResult>('POST', `${AdminRoutes.events}/${eventId}/resend`),
    showSubscription: async () => (await call<{ subscription: SubscriptionView | null }>('GET', AdminRoutes.subscription)).subscription,
    clearSubscription: (expectedId) =>
      call<{ cleared: boolean; id: string | null }>('DELETE', `${AdminRoutes.subscription}?id=${encodeURIComponent(expectedId)}`),
    redrive: async () => (await call<{ moved: number }>('POST', AdminRoutes.redrive)).moved,
    async status() {
      type Answer = Partial<Pick<LocalStatus, 'stateDir' | 'switches' | 'subscription' | 'events' | 'damage'>> & {
        server?: { url?: string; pid?: number; version?: string };
        apiKey?: { from?: string; file?: string };
        queue?: LocalStatus['jobs'];
      };
      const body = await call<Answer>('GET', AdminRoutes.status);
      const keyFile = body.apiKey?.file ?? (await keyFileOf(stateDir));
      return {
        server: { running: true, url: body.server?.url ?? server.url, pid: body.server?.pid ?? server.pid, version: body.server?.version ?? null },
        stateDir: body.stateDir ?? stateDir,
        readFrom: 'server',
        apiKey: body.apiKey?.from === 'MCP_API_KEY' ? { from: 'MCP_API_KEY' } : { from: 'file', file: keyFile },
        switches: body.switches ?? switchesOf(settings),
        subscription: body.subscription ?? null,
        events: body.events ?? null,
        jobs: body.queue ?? null,
        damage: body.damage ?? null,
      };
    },
    senders: {
      add: (name, rate) => call<AddSenderResult>('POST', `${AdminRoutes.senders}?name=${encodeURIComponent(name)}${rate === null ? '' : `&rate=${rate}`}`),
      list: async () => (await call<{ senders: SenderView[] }>('GET', AdminRoutes.senders)).senders,
      revoke: (name) => call<{ revoked: boolean; name: string }>('DELETE', `${AdminRoutes.senders}?name=${encodeURIComponent(name)}`),
    },
    async rotateKey(overlapMs = 0) {
      const answer = await admin<{ rotated?: boolean; keyFile?: string; overlapUntil?: string | null }>(
        'POST',
        `${AdminRoutes.key}${overlapMs > 0 ? `?overlapMs=${overlapMs}` : ''}`,
      );
      if (answer.status === 409) throw new OperationError(KEY_FROM_ENV, 'key_from_environment');
      return {
        keyFile: answer.body.keyFile ?? (await keyFileOf(stateDir)),
        ...(answer.body.overlapUntil !== undefined ? { overlapUntil: answer.body.overlapUntil } : {}),
      };
    },
  };
}

type Database = Awaited<ReturnType<typeof import('../../adapters/embedded').openEmbeddedDatabase>>;

function databaseOperator(ctx: Context, db: Database, settings: LocalSettings, keyFile: string): LocalOperator {
  const now = () => Date.now();
  return {
    via: 'database',
    where: `the database in ${db.stateDir} (no server running)`,
    listEvents: (status) => listEventViews(db.store, now(), status),
    showEvent: (eventId) => showEvent(db.store, now(), eventId),
    resendEvent: (eventId) => resendEvent({ store: db.store, outbox: db.outbox }, now(), eventId),
    showSubscription: () => showSubscription(db.store, now()),
    clearSubscription: (expectedId) => clearSubscription(db.store, now(), expectedId),
    redrive: () => db.jobs.redrive(now()),
    async status() {
      // The whole file is read first, as a server's start would: a status that says all is well
      // of a directory the server refuses to start on would be no health check.
      const verified = db.verify();
      const reads = await Promise.allSettled([showSubscription(db.store, now()), eventCounts(db.store, now()), db.jobs.counts()]);
      // A damaged page is reported with whatever could still be read beside it, as the server does.
      const damage = (db.damage() ?? verified)?.message ?? null;
      const failed = reads.find((read) => read.status === 'rejected');
      if (failed && damage === null) throw failed.reason;
      const value = <T>(read: PromiseSettledResult<T>) => (read.status === 'fulfilled' ? read.value : null);
      const jobs = value(reads[2]);
      const counts = jobs && { queued: jobs.queued, deadLetters: jobs.deadLetters };
      return stopped(settings, db.stateDir, keyFile, 'database', { subscription: value(reads[0]), events: value(reads[1]), jobs: counts, damage });
    },
    senders: senderOperationsOf(db.store, now),
    async rotateKey(overlapMs = 0) {
      if (settings.apiKey) throw new OperationError(`MCP_API_KEY is set in this environment: ${KEY_FROM_ENV}`, 'key_from_environment');
      if (!existsSync(keyFile)) throw new OperationError(`there is no key to rotate: ${keyFile} does not exist (npm start generates it)`, 'no_key');
      const { newApiKey, rotateApiKeyFile } = await import('../../adapters/state-files');
      const previous = (await readKeyFile(db.stateDir)).key;
      if (!previous) throw new OperationError(`there is no key to rotate: ${keyFile} cannot be read`, 'no_key');
      ctx.keepSecret(previous);
      const next = newApiKey();
      ctx.keepSecret(next);
      // Recorded before the file changes, as the server does (operator/access.ts recordRotation).
      const recorded = await recordRotation(db.store, previous, next, overlapMs, now());
      const rotated = await rotateApiKeyFile(db.stateDir, next);
      ctx.keepSecret(rotated.key);
      return { keyFile: rotated.file, overlapUntil: recorded.previousKeyUntil };
    },
  };
}

/**
 * Runs `work` against the running server, or (none runs) the database opened as operator, closed
 * afterwards; `whenNothing` answers instead of a failure when there is no database yet. A server
 * that started in between, or one recorded but not answering, is handled as the header says.
 */
export async function withLocalOperator<T>(
  ctx: Context,
  work: (op: LocalOperator) => Promise<T>,
  options: { whenNothing?: (stateDir: string) => Promise<T> } = {},
): Promise<T> {
  const settings = ctx.settings.local();
  const { stateDir } = settings;
  const keyFile = await keyFileOf(stateDir);
  let triedServer: string | undefined;
  for (let round = 0; round < 3; round++) {
    const server = await findServer(stateDir);
    if (server && server.url !== triedServer) {
      try {
        return await work(serverOperator(ctx, server, stateDir, settings));
      } catch (error) {
        if (!(error instanceof ServerGone)) throw error;
        triedServer = server.url;
        ctx.note(`the server at ${server.url} (pid ${server.pid}) does not answer; using the database directly`);
      }
    }
    const embedded = await import('../../adapters/embedded');
    if (!existsSync(join(stateDir, embedded.DATABASE_FILE))) {
      if (options.whenNothing) return options.whenNothing(stateDir);
      throw new OperationError(
        `no database in ${stateDir} yet: start the server once with npm start (it creates one), or point DMDOT_STATE_DIR at its state directory`,
        'no_state',
      );
    }
    let db: Database;
    try {
      db = await embedded.openEmbeddedDatabase(stateDir, { role: 'operator' });
    } catch (error) {
      if (error instanceof embedded.StateDirInUse) {
        // A server owns it after all: go through it (next round), unless it is the one that did not answer.
        if (error.owner.url !== undefined && error.owner.url === triedServer) {
          throw new OperationError(
            `the server (pid ${error.owner.pid}, ${error.owner.url}) owns ${stateDir} but does not answer: stop it, or wait until it is up`,
            'server_unreachable',
          );
        }
        continue;
      }
      if (error instanceof embedded.StateUnreadable) throw new OperationError(error.message, 'state_unreadable');
      throw error;
    }
    try {
      return await work(databaseOperator(ctx, db, settings, keyFile));
    } catch (error) {
      // A damaged page met by the command: its sentence, as a refusal to open would have said it.
      if (error instanceof embedded.StateUnreadable) throw new OperationError(error.message, 'state_unreadable');
      throw error;
    } finally {
      await db.close();
    }
  }
  throw new OperationError(`the state directory ${stateDir} changed hands several times while this command ran; try again`, 'busy');
}
