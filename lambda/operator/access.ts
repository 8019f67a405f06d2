/**
 * The operator's actions on who may call (docs/contract/http.md, keys), over the AccessStore: add,
 * list and revoke sender keys, and record a connector key rotation. Every backing runs these same
 * functions. A sender key is returned once, by `addSender`, and never stored or shown again.
 *
 * Deliberately not here: where the connector key itself lives (written after `recordRotation`), and printing.
 */
import { ensureDeployment, keyHashOf, newSenderKey, newSenderNameProblem } from '../core/access';
import { AccessLimits } from '../core/protocol';
import type { AccessStore, SenderRecord } from '../ports';
import { iso } from './views';

/** One sender as `senders list` shows it: never its key, nor its hash. */
export type SenderView = ReturnType<typeof senderView>;

export function senderView(record: SenderRecord) {
  return {
    name: record.name,
    rate: record.rate,
    createdAt: iso(record.createdAt)!,
    lastUsedAt: iso(record.lastUsedAt),
    revokedAt: iso(record.revokedAt),
    revoked: record.revokedAt !== undefined,
  };
}

export type AddSenderResult =
  | { added: true; name: string; key: string; rate: number | null }
  | { added: false; name: string; why: 'invalid_name' | 'invalid_rate' | 'exists'; message: string };

export function senderRateProblem(rate: number | null): string | undefined {
  if (rate === null) return undefined;
  return Number.isInteger(rate) && rate >= 1 && rate <= AccessLimits.maxSenderRate
    ? undefined
    : `the rate is messages per minute, an integer from 1 to ${AccessLimits.maxSenderRate}`;
}

export async function addSender(access: AccessStore, name: string, rate: number | null, now: number): Promise<AddSenderResult> {
  const nameProblem = newSenderNameProblem(name);
  if (nameProblem) return { added: false, name, why: 'invalid_name', message: nameProblem };
  const rateProblem = senderRateProblem(rate);
  if (rateProblem) return { added: false, name, why: 'invalid_rate', message: rateProblem };
  const key = newSenderKey(name);
  const added = await access.addSender({ name, keyHash: keyHashOf(key), rate, createdAt: now });
  if (!added) return { added: false, name, why: 'exists', message: `a sender named ${name} exists already (a revoked name stays taken); choose another name` };
  return { added: true, name, key, rate };
}

export async function listSenders(access: AccessStore): Promise<SenderView[]> {
  return (await access.listSenders()).map(senderView);
}

/** Revokes a sender, and says what is true when it answers (HTTP-KEY-ROT-3). */
export async function revokeSender(
  access: AccessStore,
  name: string,
  now: number,
): Promise<{ revoked: boolean; name: string; why?: 'not_found' | 'already_revoked' }> {
  // A revocation is never undone and a name is added once, so the second round decides.
  for (let round = 0; round < 2; round++) {
    if (await access.revokeSender(name, now)) return { revoked: true, name };
    const stored = await access.getSender(name);
    if (!stored) return { revoked: false, name, why: 'not_found' };
    if (stored.revokedAt !== undefined) return { revoked: false, name, why: 'already_revoked' };
  }
  throw new Error(`revokeSender: sender ${name} is live but its revocation was not written`);
}

/**
 * Records a rotation (HTTP-KEY-10, HTTP-KEY-11) before the new key is put in force, creating the
 * DEPLOYMENT item first if there is none (with the principal of the key being replaced).
 */
export async function recordRotation(access: AccessStore, previousKey: string, newKey: string, overlapMs: number, now: number) {
  if (!Number.isInteger(overlapMs) || overlapMs < 0 || overlapMs > AccessLimits.maxOverlapMs) throw new RangeError('overlap out of range');
  const deployment = await ensureDeployment(access, previousKey, now);
  const until = overlapMs > 0 ? now + overlapMs : undefined;
  const written = await access.setDeploymentKeys({
    keyHash: keyHashOf(newKey),
    rotatedAt: now,
    ...(until !== undefined ? { previousKeyHash: keyHashOf(previousKey), previousKeyUntil: until } : {}),
  });
  if (!written) throw new Error('the DEPLOYMENT item disappeared during the rotation');
  return { principal: deployment.principal, previousKeyUntil: iso(until) };
}

/** `1h`, `30m`, `90s`, `2d`, or milliseconds as a bare integer; undefined when unreadable. */
export function parseDuration(text: string): number | undefined {
  const match = /^(\d+)(ms|s|m|h|d)?$/.exec(text.trim());
  if (!match) return undefined;
  const unit = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 }[(match[2] ?? 'ms') as 'ms' | 's' | 'm' | 'h' | 'd'];
  const ms = Number(match[1]) * unit;
  return Number.isSafeInteger(ms) ? ms : undefined;
}
