import { Queryable } from '@app/platform';
import { Fingerprint } from './fingerprint';
import { claimDecided, claimScope, CommandResult, completeReceipt, IdempotentRequest, StoredResponse } from './receipt-store';

/** `created`: first execution; `replayed`: the stored response; `re-executed`: the old receipt had expired. */
export type IdempotencyOutcome = 'created' | 'replayed' | 're-executed';

export interface IdempotentResponse {
  outcome: IdempotencyOutcome;
  response: StoredResponse;
  expiresAt: Date;
  /** The outbox message-ids this execution enqueued; none on a replay. */
  messageIds: string[];
  /**
   * The committed receipt behind the response, for ReplayCache: its fingerprint as stored, and now() of
   * the transaction that read or wrote it. Absent on a replay the cache answered.
   */
  receipt?: { fingerprint: Fingerprint; databaseNow: Date };
}

/**
 * Runs `execute` at most once per scope and retention window, inside the caller's transaction:
 * claim the scope, execute (told the transaction's now(), see `Claim`), store the response on the
 * receipt and, in the same statement, the command's events in the outbox (and whatever else the
 * command gives it to carry). The caller commits all of it together, or an exception rolls back
 * the effect, its events and the receipt together. Where the caller's transaction is `inTransaction`'s
 * on a pipelined pool, that last statement carries the COMMIT (`queryThenCommit`): send nothing after it.
 */
export async function runIdempotent(
  db: Queryable,
  request: IdempotentRequest,
  execute: (db: Queryable, claim: { now: Date }) => Promise<CommandResult>,
): Promise<IdempotentResponse> {
  const claim = await claimScope(db, request);
  const receipt = { fingerprint: claim.fingerprint, databaseNow: claim.now };
  if (claim.kind === 'replay') {
    return { outcome: 'replayed', response: claim.response, expiresAt: claim.expiresAt, messageIds: [], receipt };
  }
  const { effect, withReceipt, messageIds = [], retentionSeconds, ...response } = await execute(db, { now: claim.now });
  const expiresAt = await completeReceipt(db, request.scope, { ...response, effect, withReceipt, retentionSeconds });
  return { outcome: claim.kind === 'claimed' ? 'created' : 're-executed', response, expiresAt, messageIds, receipt };
}

/**
 * `runIdempotent` for a command whose answer is decided before it runs (`claimDecided`): the claim,
 * the answer, the effect and the events in the transaction's one statement. Undefined when that
 * statement could not decide (an expired receipt, or one committed while it waited): nothing was
 * written, and the caller runs `runIdempotent` in a new transaction.
 */
export async function runDecided(
  db: Queryable,
  request: IdempotentRequest,
  decided: CommandResult,
): Promise<IdempotentResponse | undefined> {
  const claim = await claimDecided(db, request, decided);
  if (claim.kind === 'undecided') return undefined;
  const receipt = { fingerprint: claim.fingerprint, databaseNow: claim.now };
  if (claim.kind === 'replay') {
    return { outcome: 'replayed', response: claim.response, expiresAt: claim.expiresAt, messageIds: [], receipt };
  }
  const { status, headers, body } = decided;
  return {
    outcome: 'created',
    response: { status, headers, body },
    expiresAt: claim.expiresAt,
    messageIds: decided.messageIds ?? [],
    receipt,
  };
}
