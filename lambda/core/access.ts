/**
 * Who is calling (docs/contract/http.md, keys): the connector key in force, the previous connector
 * key during a rotation's overlap, or a named sender key (`dmsk_<name>_<secret>`, looked up by name,
 * accepted by hash unless revoked); and the deployment's stable principal, kept in the one
 * DEPLOYMENT item (created once by a conditional put, then kept for the life of the app).
 *
 * With a store the DEPLOYMENT item, not the key the app was built with, says which connector keys
 * are in force: HTTP-KEY-13 and HTTP-KEY-14 (AccessLimits.deploymentCacheMs, deploymentRecheckMs).
 *
 * Deliberately not here: where the key is configured or rotated (the runtimes and the operator),
 * HTTP answers (http/app.ts) and which methods a sender may call (mcp/server.ts).
 */
import { randomBytes } from 'node:crypto';
import type { AccessStore, Clock, DeploymentRecord, SenderRecord } from '../ports';
import { guardDependency } from './errors';
import { principalOf, sha256Hex } from './identity';
import { AccessLimits, CONNECTOR_SENDER, RESERVED_SENDER_NAMES, SENDER_KEY_PREFIX, SENDER_NAME_PATTERN } from './protocol';
import { constantTimeEqual, constantTimeMatcher } from './signing';

/** What an authenticated request carries into the MCP server and the send path. */
export interface Identity {
  /** `connector`: may do everything; `sender`: tools/list, send_to_dot and POST /v1/messages only. */
  role: 'connector' | 'sender';
  /** What an event records: `connector` or the sender's name. */
  sender: string;
  /** Messages per minute (senders only); undefined: no limit. */
  rate?: number;
  /** The deployment's principal (read once, then kept). */
  principal(): Promise<string>;
}

const SENDER_KEY = new RegExp(`^${SENDER_KEY_PREFIX}([a-z0-9][a-z0-9-]{0,31})_([A-Za-z0-9_-]{43})$`);

/** The hash a key is stored as: hex SHA-256 of the whole key. */
export function keyHashOf(key: string): string {
  return sha256Hex(key);
}

export function senderNameProblem(name: string): string | undefined {
  return SENDER_NAME_PATTERN.test(name) ? undefined : 'a sender name is 1 to 32 lower-case letters, digits and dashes, starting with a letter or digit';
}

/**
 * What is wrong with `name` for a new sender: its shape, or a name the log gives another caller, so
 * no two callers are logged alike. Only adding checks this: older such senders can still be revoked.
 */
export function newSenderNameProblem(name: string): string | undefined {
  const shape = senderNameProblem(name);
  if (shape) return shape;
  return (RESERVED_SENDER_NAMES as readonly string[]).includes(name)
    ? `"${name}" is reserved (${RESERVED_SENDER_NAMES.join(', ')} name the connector key, pup and dm-dot itself in the log); choose another name`
    : undefined;
}

/** A new sender key: the name routes the lookup, 32 random bytes authenticate. */
export function newSenderKey(name: string): string {
  if (newSenderNameProblem(name)) throw new Error('newSenderKey: invalid sender name');
  return `${SENDER_KEY_PREFIX}${name}_${randomBytes(32).toString('base64url')}`;
}

/** The sender name a key of the sender shape names; undefined for any other key. */
export function senderNameOf(key: string): string | undefined {
  return SENDER_KEY.exec(key)?.[1];
}

/** The DEPLOYMENT item, created if absent (racing first requests both get the winner's). */
export async function ensureDeployment(access: AdmissionStore, connectorKey: string, now: number): Promise<DeploymentRecord> {
  const stored = await access.getDeployment();
  if (stored) return stored;
  return access.createDeployment(deploymentFor(connectorKey, now));
}

/** Its principal is the hash of the key in force: what subscription ids were made from before the item existed. */
function deploymentFor(connectorKey: string, now: number): DeploymentRecord {
  return { principal: principalOf(connectorKey), keyHash: keyHashOf(connectorKey), createdAt: now };
}

/** What the request path reads and writes of the access items; the rest is the operator's (operator/access.ts). */
export type AdmissionStore = Pick<AccessStore, 'getDeployment' | 'createDeployment' | 'getSender' | 'touchSender' | 'countSend'>;

export interface Authenticator {
  /** The identity behind the first credential that authenticates, or undefined. Throws DependencyUnavailable('storage'). */
  identify(offered: readonly string[]): Promise<Identity | undefined>;
  /** For the refusal only: the name of a revoked sender whose very key is among `offered`. */
  revokedSender(offered: readonly string[]): Promise<string | undefined>;
}

/** `access` absent (tests of the HTTP surface alone): only `apiKey` is accepted, and its hash is the principal. */
export function createAuthenticator(options: { apiKey: string; access?: AdmissionStore; clock: Clock }): Authenticator {
  const { apiKey, access, clock } = options;
  // A rotation recorded before this moment is one this app's key already follows.
  const builtAt = clock.now();
  let principal: Promise<string> | undefined;
  let deployment: { record: DeploymentRecord | undefined; readAt: number } | undefined;
  let recheckedAt = -Infinity;
  // After a failed read the app's own key goes on without waiting for storage again, for a window.
  let unreadableUntil = -Infinity;

  const connectorPrincipal = (): Promise<string> => {
    if (!access) return Promise.resolve(principalOf(apiKey));
    if (!principal) {
      // The key check's read already says (a principal never changes); it found no item: straight to the conditional put.
      const read = deployment;
      const stored = () => (read ? access.createDeployment(deploymentFor(apiKey, clock.now())) : ensureDeployment(access, apiKey, clock.now()));
      const pending = read?.record ? Promise.resolve(read.record.principal) : guardDependency('storage', stored).then((record) => record.principal);
      // A failed read is not kept: the next request reads again.
      pending.catch(() => {
        if (principal === pending) principal = undefined;
      });
      principal = pending;
    }
    return principal;
  };
  const connector: Identity = { role: 'connector', sender: CONNECTOR_SENDER, principal: connectorPrincipal };
  // The configured key is hashed once, not on every request.
  const isApiKey = constantTimeMatcher(apiKey);

  /** True when `key` is a connector key in force by the DEPLOYMENT item (read at most `maxAgeMs` ago); `configured`: the app's own key. */
  async function connectorKeyInForce(key: string, configured: boolean, now: number, maxAgeMs: number = AccessLimits.deploymentCacheMs): Promise<boolean> {
    if (configured && now < unreadableUntil) return true;
    let record = deployment?.record;
    if (!deployment || now - deployment.readAt >= maxAgeMs || maxAgeMs <= 0) {
      try {
        record = await guardDependency('storage', () => access!.getDeployment());
      } catch (error) {
        if (!configured) throw error;
        unreadableUntil = now + AccessLimits.deploymentCacheMs;
        return true;
      }
      deployment = { record, readAt: now };
    }
    if (!record || (configured && (record.rotatedAt ?? 0) < builtAt)) return configured;
    const hash = keyHashOf(key);
    if (constantTimeEqual(hash, record.keyHash)) return true;
    const overlapping = record.previousKeyHash !== undefined && record.previousKeyUntil !== undefined && now < record.previousKeyUntil;
    return overlapping && constantTimeEqual(hash, record.previousKeyHash!);
  }

  async function asSender(key: string, name: string): Promise<Identity | undefined> {
    const record: SenderRecord | undefined = await guardDependency('storage', () => access!.getSender(name));
    // Hash both sides and compare: the same time whatever the stored value is.
    if (!record || !constantTimeEqual(keyHashOf(key), record.keyHash) || record.revokedAt !== undefined) return undefined;
    const now = clock.now();
    if (record.lastUsedAt === undefined || now - record.lastUsedAt >= AccessLimits.senderLastUsedRefreshMs) {
      // Best effort, at most once a minute per sender: a failure here must not refuse the request.
      await access!.touchSender(name, now, AccessLimits.senderLastUsedRefreshMs).catch(() => undefined);
    }
    return { role: 'sender', sender: name, ...(record.rate !== null ? { rate: record.rate } : {}), principal: connectorPrincipal };
  }

  return {
    async identify(offered) {
      // Every credential is compared with the connector key, so the time taken does not tell which one was wrong.
      const matched = offered.map((key) => isApiKey(key));
      if (!access) return matched.includes(true) ? connector : undefined;
      for (const [i, key] of offered.entries()) {
        if (key === '') continue;
        const name = senderNameOf(key);
        if (name !== undefined) {
          const sender = await asSender(key, name);
          if (sender) return sender;
          continue;
        }
        const now = clock.now();
        if (await connectorKeyInForce(key, matched[i]!, now)) return connector;
        // Refused by the cached item: read it again, in case the key was rotated in since.
        if (deployment !== undefined && deployment.readAt < now && now - recheckedAt >= AccessLimits.deploymentRecheckMs) {
          recheckedAt = now;
          if (await connectorKeyInForce(key, matched[i]!, now, 0)) return connector;
        }
      }
      return undefined;
    },
    async revokedSender(offered) {
      if (!access) return undefined;
      for (const key of offered) {
        const name = key === '' ? undefined : senderNameOf(key);
        if (name === undefined) continue;
        const record = await guardDependency('storage', () => access.getSender(name));
        if (record?.revokedAt !== undefined && constantTimeEqual(keyHashOf(key), record.keyHash)) return name;
      }
      return undefined;
    },
  };
}

/** Refused: `retryAfterMs` until the next window opens, and the same rounded up to whole seconds (at least 1) for Retry-After. */
export type Admission = { ok: true } | { ok: false; retryAfterMs: number; retryAfterSeconds: number };

/**
 * Counts one send against the sender's rate (a fixed one-minute window). Called where each send
 * runs, so every `tools/call` counts, whatever carries it (a batch, a task, either surface).
 */
export async function admitSend(access: AdmissionStore | undefined, identity: Identity, now: number): Promise<Admission> {
  if (!access || identity.role !== 'sender' || identity.rate === undefined) return { ok: true };
  const window = Math.floor(now / AccessLimits.rateWindowMs);
  const endsAt = (window + 1) * AccessLimits.rateWindowMs;
  const counted = await guardDependency('storage', () => access.countSend(identity.sender, window, identity.rate!, endsAt + AccessLimits.rateCounterGraceMs));
  if (counted) return { ok: true };
  const retryAfterMs = Math.max(1, endsAt - now);
  return { ok: false, retryAfterMs, retryAfterSeconds: Math.max(1, Math.ceil(retryAfterMs / 1000)) };
}
