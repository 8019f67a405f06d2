/**
 * A fresh Standard Webhooks signing secret (`whsec_` + base64), as a dot would choose one: shared by
 * the end-to-end helpers (node:test) and the in-process AWS world (Jest), so it imports neither.
 */
import { randomBytes } from 'node:crypto';

export function newSecret(bytes = 32): string {
  return `whsec_${randomBytes(bytes).toString('base64')}`;
}
