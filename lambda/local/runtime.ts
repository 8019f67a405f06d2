/**
 * The local runtime (SPEC 9): the same app and core as the Lambdas, on node:http, with the file
 * store and the file-backed delivery queue in the state directory. `startLocal` is what
 * `npm start` runs and what the end-to-end tests start on an ephemeral port.
 *
 * It also serves the operator's admin routes (lambda/local/admin.ts) on the same node:http server,
 * behind their own token, so that `dm-dot` commands never write the state directory under it.
 *
 * Deliberately not here: TLS (put a tunnel or proxy in front), and printing the API key: only the
 * path of the file that holds it.
 */
import { randomBytes } from 'node:crypto';
import { readFile, writeFile, mkdir } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { join, resolve } from 'node:path';
import { Readable } from 'node:stream';
import { createGuardedWebhookClient } from '../adapters/guarded-https';
import { FileQueue } from '../adapters/file-queue';
import { FileStore } from '../adapters/file-store';
import type { Settings } from '../config';
import { createApp, type App } from '../http/app';
import { createLogger, type Logger } from '../log';
import { handleAdmin, isAdminPath, publishAdmin, withdrawAdmin, type AdminDeps } from './admin';
import { systemClock, type Clock, type WebhookClient } from '../ports';
import { version } from '../version';

export interface LocalRuntime {
  url: string;
  port: number;
  app: App;
  queue: FileQueue;
  stop(): Promise<void>;
}

export interface LocalOptions {
  settings: Settings;
  apiKey?: string;
  log?: Logger & { redact?(value: string): void };
  /** Tests may inject a webhook client; the default is the guarded client of SPEC 7. */
  webhook?: WebhookClient;
  clock?: Clock;
  /** Called once with the startup lines (the listening line first). */
  announce?: (line: string) => void;
}

/** Reads the key from MCP_API_KEY, else from `<state dir>/api-key`, generating it (0600) on first start. */
export async function loadOrCreateApiKey(stateDir: string, fromEnv: string | undefined): Promise<{ key: string; generatedAt?: string }> {
  if (fromEnv !== undefined && fromEnv !== '') return { key: fromEnv };
  const file = resolve(stateDir, 'api-key');
  try {
    const stored = (await readFile(file, 'utf8')).trim();
    if (stored) return { key: stored };
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  }
  await mkdir(stateDir, { recursive: true, mode: 0o700 });
  const key = randomBytes(32).toString('base64url');
  await writeFile(file, `${key}\n`, { mode: 0o600, flag: 'wx' });
  return { key, generatedAt: file };
}

export async function startLocal(options: LocalOptions): Promise<LocalRuntime> {
  const { settings } = options;
  const log = options.log ?? createLogger();
  const announce = options.announce ?? ((line: string) => process.stdout.write(`${line}\n`));
  const { key, generatedAt } = await loadOrCreateApiKey(settings.stateDir, options.apiKey);
  log.redact?.(key);
  for (const secret of settings.pup.secrets.secrets) log.redact?.(secret);
  const clock = options.clock ?? systemClock;
  const store = await FileStore.open(settings.stateDir);
  const webhook = options.webhook ?? createGuardedWebhookClient({ allowLoopback: settings.allowLoopbackCallbacks });
  const deliveryDeps = { store, webhook, clock, retryDelaysS: settings.retryDelaysS };
  const queue = await FileQueue.start({
    stateDir: settings.stateDir,
    deps: deliveryDeps,
    concurrency: settings.deliveryConcurrency,
    onError: (error, eventId) => log.error('delivery_worker_error', { eventId, cause: error instanceof Error ? error.message : String(error) }),
  });
  // Work that finishes after its answer (recording a delivery the dot already accepted); `stop`
  // waits for it, so a clean shutdown never leaves an accepted delivery unrecorded.
  const background = new Set<Promise<unknown>>();
  const waitUntil = (work: Promise<unknown>): void => {
    const tracked = work
      .catch((error: unknown) => log.error('background_work_failed', { cause: error instanceof Error ? error.message : String(error) }))
      .finally(() => background.delete(tracked));
    background.add(tracked);
  };
  let ready: (app: App) => void = () => undefined;
  const appReady = new Promise<App>((done) => (ready = done));
  let admin: AdminDeps | undefined;
  const server = http.createServer((req, res) => {
    // Operator routes (lambda/local/admin.ts) exist only here, never in the app the Lambdas run.
    if (isAdminPath(req.url)) {
      void appReady.then(() => handleAdmin(admin!, req, res));
      return;
    }
    void appReady.then((app) => serve(app, req, res));
  });
  server.requestTimeout = 30_000;
  await new Promise<void>((resolveListen, reject) => {
    server.once('error', reject);
    server.listen(settings.port, settings.host, () => resolveListen());
  });
  const port = (server.address() as AddressInfo).port;
  const shownHost = settings.host.includes(':') ? `[${settings.host}]` : settings.host;
  // DNS rebinding protection: only our own addresses (with the port) and DMDOT_ALLOWED_HOSTS.
  const allowedHosts = [shownHost, '127.0.0.1', 'localhost', '[::1]'].map((h) => `${h}:${port}`).concat(settings.allowedHosts);
  const app = createApp(
    {
      store,
      queue,
      webhook,
      clock,
      deliveryWaitMs: settings.deliveryWaitMs,
      retryDelaysS: settings.retryDelaysS,
      waitUntil,
      urlPolicy: { allowLoopbackCallbacks: settings.allowLoopbackCallbacks },
      ttlPolicy: settings.ttlPolicy,
      version,
      log,
    },
    {
      apiKey: key,
      allowedOrigins: settings.allowedOrigins,
      allowedHosts,
      // Read once at start: a pup secret rotation on the local runtime is a restart.
      pup: { secrets: async () => settings.pup.secrets, ...(settings.pup.manifest !== undefined ? { manifest: settings.pup.manifest } : {}) },
    },
  );
  const token = await publishAdmin(settings.stateDir, { pid: process.pid, url: `http://${shownHost}:${port}` });
  admin = { store, token, now: () => clock.now(), redrive: () => queue.redrive() };
  ready(app);
  const url = `http://${shownHost}:${port}/mcp`;
  announce(`dm-dot listening on ${url}`);
  if (generatedAt) announce(`API key generated and stored in ${generatedAt} (mode 0600); connect with ${url}?key=<contents of that file>`);

  let stopping: Promise<void> | undefined;
  const stop = () =>
    (stopping ??= (async () => {
      await new Promise<void>((done) => {
        server.close(() => done());
        server.closeAllConnections();
      });
      await Promise.allSettled([...background]);
      await queue.stop();
      await app.close();
      await withdrawAdmin(settings.stateDir, process.pid);
    })());
  return { url, port, app, queue, stop };
}

async function serve(app: App, req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
  try {
    const headers = new Headers();
    for (const [name, value] of Object.entries(req.headers)) {
      if (value === undefined) continue;
      for (const v of Array.isArray(value) ? value : [value]) headers.append(name, v);
    }
    const hasBody = req.method !== 'GET' && req.method !== 'HEAD';
    const request = new Request(`http://localhost${req.url ?? '/'}`, {
      method: req.method ?? 'GET',
      headers,
      ...(hasBody ? { body: Readable.toWeb(req) as ReadableStream, duplex: 'half' } : {}),
    } as RequestInit);
    const response = await app.handle(request, { host: req.headers.host ?? '' });
    res.writeHead(response.status, Object.fromEntries(response.headers));
    if (response.body) {
      for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) res.write(chunk);
    }
    res.end();
  } catch {
    if (!res.headersSent) res.writeHead(400, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ error: { code: 'bad_request', message: 'The request could not be read.' } }));
  }
}
