/**
 * The local runtime (docs/contract/local-runtime.md): the same app and core as the Lambdas, on
 * node:http, over the embedded database of the state directory (lambda/adapters/embedded) and an
 * in-process delivery worker (worker.ts) with the same retry schedule as AWS, plus the operator's
 * admin routes (admin-routes.ts). `startLocal` is what `npm start` and the end-to-end tests run.
 *
 * The order of start-up matters: the state directory is claimed first (the database's owner
 * record), so a second server on the same directory refuses before it writes anything, and the
 * first keeps serving undisturbed. Then the key, the worker, the HTTP server, and only then the
 * admin token, which only the owning server ever writes.
 *
 * Deliberately not here: TLS (put a tunnel or proxy in front), reading the environment (main.ts
 * does, once), and printing the API key: only the path of the file that holds it.
 */
import { mkdir } from 'node:fs/promises';
import { resolve } from 'node:path';
import { outsideDeadline, webhookWithinDeadline } from '../adapters/deadline';
import { openEmbeddedDatabase, StateUnreadable } from '../adapters/embedded';
import { createGuardedWebhookClient } from '../adapters/guarded-https';
import { loadOrCreateApiKey, newApiKey, publishAdminToken, rotateApiKeyFile, withdrawAdminToken } from '../adapters/state-files';
import type { LocalSettings } from '../config/settings';
import { Budgets } from '../core/budgets';
import { isLoopbackHostname, LOOPBACK_HOSTNAMES } from '../core/loopback';
import { describeCause } from '../core/answers';
import { createApp, type App } from '../http/app';
import { createLogger } from '../log';
import type { Clock, Logger, WebhookClient } from '../ports';
import { steadyClock } from './clock';
import { switchesOf } from '../operator/views';
import { recordRotation } from '../operator/access';
import { DEFAULT_RETRY_DELAYS_S, EventsProfiles } from '../core/protocol';
import { version } from '../version';
import { handleAdmin, isAdminPath, type AdminDeps } from './admin-routes';
import { startLocalServer } from './http-server';
import { retiringApp, type RetiringApp } from './retiring-app';
import { startDeliveryWorker } from './worker';

export type LocalRuntime = Awaited<ReturnType<typeof startLocal>>;

export interface LocalOptions {
  settings: LocalSettings;
  log?: Logger & { redact?(value: string): void };
  /** Tests may inject a webhook client; the default is the guarded client of docs/contract/outbound-guard.md. */
  webhook?: WebhookClient;
  clock?: Clock;
  /** Called with each start-up line (the listening line first). */
  announce?: (line: string) => void;
}

/** Connections open at once; past it a new one is answered 503 (http-server.ts). */
export const MAX_CONNECTIONS = 256;
/** pup bodies read at once; past it a pup POST is answered 503 before its body (http/pup.ts). */
export const MAX_PUP_BODIES = 32;

/** Expired items are removed this often (and at every start). */
const SWEEP_INTERVAL_MS = 10 * 60_000;

export async function startLocal(options: LocalOptions) {
  const { settings } = options;
  const log = options.log ?? createLogger();
  const announce = options.announce ?? ((line: string) => process.stdout.write(`${line}\n`));
  const clock = options.clock ?? steadyClock();

  await mkdir(settings.stateDir, { recursive: true, mode: 0o700 });
  const db = await openEmbeddedDatabase(settings.stateDir, { role: 'server', clock });
  const cleanups: (() => Promise<unknown>)[] = [() => db.close()];
  const unwind = async () => {
    for (const cleanup of cleanups.reverse()) await cleanup().catch(() => undefined);
  };
  try {
    for (const line of db.report.lines) log.info('state_dir', { note: line });
    // A damaged page met while serving (LOCAL-FAULT-10) does not stop the server (docs/decisions.md,
    // "A damaged page"): logged once, since the sentence says all there is to say and the page does
    // not heal while served. This listener and the worker's below go with db.close().
    db.onDamage((damage) => log.error('state_file_damaged', { note: damage.message }));
    const loaded = await loadOrCreateApiKey(settings.stateDir, settings.apiKey, { deferWrite: true });
    if (loaded.tightenedFrom !== undefined) log.warn('api_key_file_mode_fixed', { keyFile: loaded.file, was: loaded.tightenedFrom.toString(8), now: '600' });
    let key: { key: string; file?: string; generated: boolean } = loaded;
    log.redact?.(key.key);
    for (const secret of settings.pupSecrets.secrets) log.redact?.(secret);

    const guarded = options.webhook ?? createGuardedWebhookClient({ allowLoopback: settings.allowLoopbackCallbacks });
    // The attempts this process is making: its worker never POSTs an event the inline attempt
    // still holds, however late a busy event loop records the outcome (DEL-PIPE-21).
    const inFlight = new Set<string>();
    const worker = startDeliveryWorker({
      jobs: db.jobs,
      deps: { store: db.store, webhook: guarded, clock, retryDelaysS: settings.retryDelaysS, inFlight },
      concurrency: settings.deliveryConcurrency,
      log: withoutQuietDecisions(log),
      lastingFault: (error) => error instanceof StateUnreadable,
    });
    cleanups.push(() => worker.stop());
    db.onJobsChanged(() => worker.wake());

    // Work that finishes after its answer (an inline attempt the caller stopped waiting for, the
    // write that records a delivery the dot already accepted), outside the request's deadline;
    // `stop` waits for it, so a clean shutdown never leaves an accepted delivery unrecorded.
    const background = new Set<Promise<unknown>>();
    const runInBackground = <T>(work: () => Promise<T>): Promise<T> => {
      const running = outsideDeadline(work);
      const tracked = running
        .catch((error: unknown) => log.error('background_work_failed', { cause: describeCause(error) }))
        .finally(() => background.delete(tracked));
      background.add(tracked);
      return running;
    };
    cleanups.push(() => Promise.allSettled([...background]));

    // The app in force; a rotation replaces it (retiring-app.ts).
    let serving: RetiringApp | undefined;
    let admin: AdminDeps | undefined;
    const server = await startLocalServer(() => serving!.app, {
      host: settings.host,
      port: settings.port,
      maxConnections: MAX_CONNECTIONS,
      intercept: (req, res) => (isAdminPath(req.url) ? handleAdmin(admin!, req, res) : undefined),
      onTimeout: (path) => log.warn('request_timeout', { path }),
    });
    cleanups.push(() => server.close());
    await loaded.save?.();
    const { port } = server;
    const shownHost = settings.host.includes(':') ? `[${settings.host}]` : settings.host;
    // DNS rebinding protection: only our own addresses (with the port) and DMDOT_ALLOWED_HOSTS.
    const ownHosts = [shownHost, ...LOOPBACK_HOSTNAMES].map((h) => `${h}:${port}`);
    const allowedHosts = [...ownHosts, ...settings.allowedHosts];
    const adminHosts = new Set(ownHosts.filter((h) => isLoopbackHostname(h.slice(0, h.lastIndexOf(':')))));

    const buildApp = (apiKey: string): App =>
      createApp(
        {
          store: db.store,
          outbox: db.outbox,
          // What is left of each request's deadline (http-server.ts), as on AWS.
          webhook: webhookWithinDeadline(guarded, Budgets.mcpRecordReserveMs),
          clock,
          deliveryWaitMs: settings.deliveryWaitMs,
          retryDelaysS: settings.retryDelaysS,
          background: runInBackground,
          inFlight,
          urlPolicy: { allowLoopbackCallbacks: settings.allowLoopbackCallbacks },
          ttlPolicy: settings.ttlPolicy,
          version,
          log,
          access: db.store,
          eventsProfile: EventsProfiles[settings.eventsProfile],
          idempotency: db.store,
          ...(settings.inbox ? { inbox: db.store } : {}),
        },
        {
          apiKey,
          allowedOrigins: settings.allowedOrigins,
          allowedHosts,
          // Read once at start: a pup secret rotation on the local runtime is a restart.
          pup: {
            secrets: async () => settings.pupSecrets,
            maxBodiesInFlight: MAX_PUP_BODIES,
            ...(settings.pupManifest !== undefined ? { manifest: settings.pupManifest } : {}),
          },
        },
      );
    serving = retiringApp(buildApp(key.key));
    cleanups.push(() => serving!.app.close());

    const baseUrl = `http://${shownHost}:${port}`;
    await db.setOwnerUrl(baseUrl);
    const token = await publishAdminToken(settings.stateDir);
    cleanups.push(() => withdrawAdminToken(settings.stateDir, token));

    let rotating: Promise<unknown> = Promise.resolve();
    // In the order of docs/decisions.md, "A rotation serves the new key before the file shows it".
    const rotate = async (overlapMs: number) => {
      const previousKey = key.key;
      const next = newApiKey();
      log.redact?.(next);
      const recorded = await recordRotation(db.store, previousKey, next, overlapMs, clock.now());
      const previous = serving;
      serving = retiringApp(buildApp(next));
      try {
        await rotateApiKeyFile(settings.stateDir, next);
      } catch (error) {
        // The app of the old key was never retired: it serves again.
        const abandoned = serving;
        serving = previous!;
        abandoned.retire();
        await recordRotation(db.store, next, previousKey, 0, clock.now()).catch((undo: unknown) =>
          log.error('api_key_rotation_not_undone', { cause: describeCause(undo) }),
        );
        throw error;
      }
      key = { key: next, file: key.file!, generated: false };
      previous!.retire();
      log.warn('api_key_rotated', { keyFile: key.file, overlapMs });
      // The overlap's end as the server recorded it: the one the old key is refused after.
      return { keyFile: key.file!, overlapUntil: recorded.previousKeyUntil };
    };
    const rotateKey = (overlapMs = 0) => {
      // One rotation at a time: each records the key the previous one put in force.
      const rotation = rotating.then(() => rotate(overlapMs));
      rotating = rotation.catch(() => undefined);
      return rotation;
    };

    admin = {
      store: db.store,
      outbox: db.outbox,
      token,
      hosts: adminHosts,
      now: () => clock.now(),
      // Its commit wakes the worker (onJobsChanged), as a resend's does.
      redrive: () => db.jobs.redrive(clock.now()),
      queueCounts: () => db.jobs.counts(),
      describe: () => ({
        server: { url: baseUrl, pid: process.pid, version },
        stateDir: resolve(settings.stateDir),
        apiKey: key.file ? { from: 'file', file: key.file } : { from: 'MCP_API_KEY' },
        switches: switchesOf(settings),
      }),
      damage: () => db.damage()?.message,
      access: db.store,
      ...(key.file ? { rotateKey } : {}),
    };

    const sweeper = setInterval(() => {
      db.sweepExpired(clock.now()).catch((error: unknown) => log.warn('sweep_failed', { cause: describeCause(error) }));
    }, SWEEP_INTERVAL_MS).unref();
    cleanups.push(async () => clearInterval(sweeper));

    const url = `${baseUrl}/mcp`;
    for (const line of startupLines(settings, url, key)) announce(line);

    let stopping: Promise<void> | undefined;
    // The server drains first (LOCAL-FAULT-5), before anything it uses is closed.
    const stop = () => (stopping ??= server.close().then(unwind));
    return { url, port, app: () => serving!.app, db, worker, stop };
  } catch (error) {
    await unwind();
    throw error;
  }
}

/**
 * The worker's lines for a person watching `npm start`: a decision that changed nothing about the
 * event (a deferral, a copy that found it settled or lost the race) is not worth a line.
 */
function withoutQuietDecisions(log: Logger): Logger {
  return {
    info: (event, fields) => {
      if (event !== 'delivery' || (fields?.action !== 'defer' && fields?.action !== 'done')) log.info(event, fields);
    },
    warn: (event, fields) => log.warn(event, fields),
    error: (event, fields) => log.error(event, fields),
  };
}

/** The start-up lines: the listening line first (docs/contract/local-runtime.md), then where the key is and which switches are on. */
export function startupLines(settings: LocalSettings, url: string, key: { file?: string; generated: boolean }): string[] {
  const lines = [`dm-dot listening on ${url}`];
  if (key.generated) lines.push(`API key generated and stored in ${key.file} (mode 0600); \`dm-dot connect\` prints the connector URL`);
  else if (key.file) lines.push(`API key in ${key.file}; \`dm-dot connect\` prints the connector URL`);
  else lines.push('API key from MCP_API_KEY');
  const secrets = settings.pupSecrets.secrets.length;
  lines.push(
    settings.allowLoopbackCallbacks
      ? '  loopback callbacks: on (DMDOT_ALLOW_LOOPBACK_CALLBACKS): `dm-dot dot` can subscribe'
      : '  loopback callbacks: off; start with DMDOT_ALLOW_LOOPBACK_CALLBACKS=1 to try `dm-dot dot`',
    secrets > 0 ? `  pup door: on (${secrets} signing secret${secrets > 1 ? 's' : ''})` : '  pup door: off (no PUP_SIGNING_SECRETS)',
    settings.inbox
      ? '  inbox: on (DMDOT_INBOX): get_pending_messages and acknowledge_messages for the connector key'
      : '  inbox: off (DMDOT_INBOX=1 turns it on)',
    `  allowed origins: ${settings.allowedOrigins.join(', ') || 'none'}; extra hosts: ${settings.allowedHosts.join(', ') || 'none'}`,
    `  events profile: ${settings.eventsProfile} (DMDOT_EVENTS_PROFILE)`,
  );
  // The schedule only when it is not the default: a person who set it sees that it took effect.
  if (settings.retryDelaysS.join(',') !== DEFAULT_RETRY_DELAYS_S.join(',')) {
    lines.push(
      `  retry schedule: ${settings.retryDelaysS.join(',')} s after the first attempt (DMDOT_RETRY_DELAYS; default ${DEFAULT_RETRY_DELAYS_S.join(',')})`,
    );
  }
  lines.push(`  state directory: ${resolve(settings.stateDir)}`);
  for (const warning of settings.warnings) lines.push(`warning: ${warning}`);
  return lines;
}
