/**
 * Every time budget dm-dot keeps, in one table: how dm-dot fits its work inside the wire contract's
 * own limits (protocol.ts `Limits`).
 *
 * Deliberately not here: behaviour. Nothing in this module computes anything but a sum.
 */
import { Limits, MINUTE, SECOND } from './protocol';

export const Budgets = {
  // --- One MCP request: at most Limits.requestMs (5 s), on AWS and locally alike.
  /** Kept back for building the answer, the trip through API Gateway and a busy event loop. */
  mcpAnswerReserveMs: 800,
  /** Left after a callback POST on the request path (challenge, inline attempt) for the write after it. */
  mcpRecordReserveMs: 700,
  /** No POST starts with less than this to run: it could not tell a slow endpoint from a dead one. */
  minPostMs: 1 * SECOND,
  /** The inline attempt's lease runs this much past its POST: time to record its outcome, little delay if the process died. */
  inlineLeaseMarginMs: 1 * SECOND,

  // --- One Delivery Lambda invocation: its context's remaining time.
  /** Kept back from the remaining time, so the batch answer is always returned. */
  deliveryEndReserveMs: 1 * SECOND,
  /** A POST may only use time that leaves this much for recording its outcome (two or three writes). */
  deliveryRecordReserveMs: 3 * SECOND,
  /** A worker's deferral this short is slept in place instead of going back to the queue. */
  deferInPlaceMaxMs: 1 * SECOND,
  /** The worker's lease before its POST: the POST's 5 s plus recording its outcome; another copy meets it and defers. */
  workerLeaseMs: Limits.outboundDeadlineMs + 3 * SECOND,

  // --- AWS calls (SDK clients and the Secrets Manager reader), each inside the request deadline.
  awsConnectMs: 1 * SECOND,
  awsAttemptMs: 2 * SECOND,
  awsMaxAttempts: 3,

  // --- The outbox on AWS (core/outbox.ts): the record's PutItem, the job's SendMessage, and the
  // compensating write when either fails. docs/decisions.md says how these were measured.
  /** One attempt of the outbox's PutItem or SendMessage: two stalled ones and their backoff fit before the compensation's reserve. */
  outboxAttemptMs: 800,
  /** Kept back from the request deadline while the record is put and its job sent, for the compensating write. */
  outboxCompensationReserveMs: 1_000,

  // --- Secret reads on the MCP Lambda (the API key, pup's signing secrets).
  /** The longest one read may take, retries included (a read at init or in the background has no request deadline). */
  secretReadCapMs: 2_500,
  /** After a read that really failed (access denied, not found, unusable value): no second read before this. */
  secretRetryIntervalMs: 30 * SECOND,
  /** pup's secrets are re-read this often while warm, so a rotation needs no deploy. */
  pupSecretsRefreshMs: 2 * MINUTE,

  // --- The local runtime's HTTP server (node:http), against slow or stalled clients.
  /** A pup request, from its first byte to the answer (docs/contract/pup.md gives pup 5 s). */
  localPupRequestMs: 5 * SECOND,
  /** Any other request, from its first byte to the answer: 10 s to arrive, then the 5 s of the request itself. */
  localRequestMs: 15 * SECOND,
  /** Request headers must be complete within this (node:http `headersTimeout`). */
  localHeadersMs: 5 * SECOND,
  /** An idle keep-alive connection is closed after this. */
  localKeepAliveMs: 5 * SECOND,
  /** How often node:http checks the two timeouts above (its default, 30 s, would let a slow client stay far longer). */
  localTimeoutCheckMs: 1 * SECOND,

  // --- The reconciler (core/reconcile.ts): what settles a record left `queued` with no job.
  /** How often the scheduled reconciler runs. */
  reconcileEveryMs: 5 * MINUTE,
  /** Added to the retry schedule before a `queued` record counts as stranded: leases, delays, non-attempt receives, Retry-After. */
  reconcileMarginMs: 15 * MINUTE,
  /** Kept back from the reconciler's own timeout, so a run always ends with its metric written. */
  reconcileEndReserveMs: 5 * SECOND,

  // --- The operator CLI.
  /** One call of the CLI to a server, unless a shorter budget below applies (its HTTP client's default). */
  cliCallMs: 30 * SECOND,
  /** One call of the CLI to a route that answers within Limits.requestMs (a send, an MCP request): that, and room for the network. */
  cliAnsweredCallMs: 15 * SECOND,
  /** How often `dm-dot dot` checks that its subscription still stands: the most a clear or a key rotation goes unnoticed. */
  dotCheckMs: 60 * SECOND,
  /** The longest `dm-dot dot` waits before it tries a failed refresh again (it tries sooner as the expiry nears). */
  dotRefreshRetryMaxMs: 30 * SECOND,
  /** How long `dm-dot dot` keeps accepting a secret it replaced, past the server's overlap: clock skew and deliveries in flight. */
  dotSecretGraceMs: 60 * SECOND,
} as const;

/** The deadline (epoch ms) of an MCP request; only tests pass a `requestMs` shorter than the contract's 5 s. */
export function mcpDeadline(startedAt: number, requestMs: number = Limits.requestMs): number {
  return startedAt + requestMs - Budgets.mcpAnswerReserveMs;
}

/** The deadline of a Delivery Lambda invocation, from the Lambda context's remaining time. */
export function deliveryDeadline(startedAt: number, remainingMs: number | undefined): number {
  // Outside Lambda (tests, a context without the method): the outbound deadline plus room.
  const remaining =
    remainingMs === undefined || !Number.isFinite(remainingMs)
      ? Limits.outboundDeadlineMs + Budgets.deliveryRecordReserveMs + Budgets.deliveryEndReserveMs
      : remainingMs;
  return startedAt + remaining - Budgets.deliveryEndReserveMs;
}
