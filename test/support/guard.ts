/**
 * Shared helpers for the outbound guard tests (docs/contract/outbound-guard.md): a canary connector and resolver that record
 * every call (so a refusal can be shown to have attempted nothing), real node:http(s) servers bound
 * to 127.0.0.1 on ephemeral ports, and a throwaway self-signed certificate made with openssl.
 *
 * Network rule for every guard test: only loopback servers the test itself starts are contacted.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import net, { type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ConnectRequest, ConnectResponse, Connector, ResolvedAddress, Resolver } from '../../lambda/adapters/guarded-https';
import type { WebhookRequest } from '../../lambda/ports';

export const REFUSED = { kind: 'failure', reason: 'connection_refused' } as const;

export function familyOf(address: string): 4 | 6 {
  return address.includes(':') ? 6 : 4;
}

/** Host part of a URL for an IP literal: IPv6 gets brackets. */
export function urlHost(address: string): string {
  return address.includes(':') ? `[${address}]` : address;
}

export function webhookRequest(url: string, body: Uint8Array = Buffer.from('{"ok":true}'), headers: Record<string, string> = {}): WebhookRequest {
  return { url, headers: { 'content-type': 'application/json', ...headers }, body };
}

export interface CanaryConnector {
  connector: Connector;
  calls: ConnectRequest[];
}

/** Records every connection attempt and answers 200 with `body`, without touching the network. */
export function canaryConnector(reply: { status?: number; headers?: Record<string, string>; body?: string } = {}): CanaryConnector {
  const calls: ConnectRequest[] = [];
  const connector: Connector = async (request) => {
    calls.push(request);
    const chunk = Buffer.from(reply.body ?? 'ok');
    const response: ConnectResponse = {
      status: reply.status ?? 200,
      headers: reply.headers ?? {},
      body: (async function* () {
        yield chunk;
      })(),
      destroy: () => {},
    };
    return response;
  };
  return { connector, calls };
}

export interface RecordingResolver {
  resolver: Resolver;
  calls: string[];
}

/** Answers every lookup with `answers` (addresses in order) and records the host names asked. */
export function fixedResolver(...answers: string[]): RecordingResolver {
  const calls: string[] = [];
  const resolver: Resolver = async (hostname) => {
    calls.push(hostname);
    return answers.map((address): ResolvedAddress => ({ address, family: familyOf(address) }));
  };
  return { resolver, calls };
}

/** A resolver that must never be asked (IP literal URLs): it records and fails. */
export function forbiddenResolver(): RecordingResolver {
  const calls: string[] = [];
  const resolver: Resolver = async (hostname) => {
    calls.push(hostname);
    throw Object.assign(new Error(`unexpected lookup of ${hostname}`), { code: 'ENOTFOUND' });
  };
  return { resolver, calls };
}

export interface SeenRequest {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
}

export interface TestServer {
  /** e.g. http://127.0.0.1:41234 (no trailing slash). */
  origin: string;
  port: number;
  requests: SeenRequest[];
  close(): Promise<void>;
}

type Handler = (req: http.IncomingMessage, res: http.ServerResponse, body: Buffer) => void;

async function listen(server: http.Server | https.Server, scheme: 'http' | 'https', requests: SeenRequest[]): Promise<TestServer> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const port = (server.address() as AddressInfo).port;
  return {
    origin: `${scheme}://127.0.0.1:${port}`,
    port,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

function recordingListener(requests: SeenRequest[], handler: Handler): http.RequestListener {
  return (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      requests.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body });
      handler(req, res, body);
    });
  };
}

/** A node:http server on 127.0.0.1 with an ephemeral port; `handler` runs once the request body is read. */
export async function startHttpServer(handler: Handler): Promise<TestServer> {
  const requests: SeenRequest[] = [];
  return listen(http.createServer(recordingListener(requests, handler)), 'http', requests);
}

export interface SelfSigned {
  key: Buffer;
  cert: Buffer;
}

/** A fresh self-signed P-256 certificate for CN=localhost, made by openssl in a temp directory. */
export function selfSignedCertificate(): SelfSigned {
  const dir = mkdtempSync(join(tmpdir(), 'dmdot-guard-'));
  try {
    const keyPath = join(dir, 'k.pem');
    const certPath = join(dir, 'c.pem');
    execFileSync(
      'openssl',
      [
        'req',
        '-x509',
        '-newkey',
        'ec',
        '-pkeyopt',
        'ec_paramgen_curve:prime256v1',
        '-nodes',
        '-subj',
        '/CN=localhost',
        '-days',
        '1',
        '-keyout',
        keyPath,
        '-out',
        certPath,
      ],
      { stdio: 'pipe' },
    );
    return { key: readFileSync(keyPath), cert: readFileSync(certPath) };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** A node:https server on 127.0.0.1; `servernames` collects the SNI names clients sent. */
export async function startHttpsServer(credentials: SelfSigned, handler: Handler): Promise<TestServer & { servernames: string[] }> {
  const requests: SeenRequest[] = [];
  const servernames: string[] = [];
  const server = https.createServer(
    {
      key: credentials.key,
      cert: credentials.cert,
      SNICallback: (servername, callback) => {
        servernames.push(servername);
        callback(null, undefined);
      },
    },
    recordingListener(requests, handler),
  );
  const started = await listen(server, 'https', requests);
  return { ...started, servernames };
}

/**
 * A raw TCP server on 127.0.0.1: once the first bytes of a request arrive it writes `reply`
 * verbatim (for responses node:http will not produce) or, with `reply` undefined, stays silent.
 * `connections` counts accepted sockets.
 */
export async function startRawServer(reply: Buffer | undefined): Promise<{ port: number; connections: () => number; close(): Promise<void> }> {
  const sockets = new Set<net.Socket>();
  let accepted = 0;
  const server = net.createServer((socket) => {
    accepted++;
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => {});
    if (reply) socket.once('data', () => socket.end(reply));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  return {
    port: (server.address() as AddressInfo).port,
    connections: () => accepted,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}
