import { CarriedWrite, carrying, Queryable, queryRows, queryThenCommit, sqlState } from '@app/platform';
import { Fingerprint, fingerprint, SemanticFields } from './fingerprint';
import { IdempotencyError } from './idempotency.error';
import { IdempotencyScope } from './scope';

/** The response a scope remembers and replays: status, the headers worth replaying (Location), body. */
export interface StoredResponse {
  status: number;
  headers: Record<string, string>;
  body: unknown;
}

/** What an idempotent command produced: its response and, when it changed something, a reference to it. */
export interface CommandResult extends StoredResponse {
  effect?: { type: string; id: string };
  /**
   * Written by the statement that stores the response (one round trip, same transaction): the outbox
   * rows of the events the command emits (`outboxWrite` in libs/outbox) and, when nothing can refuse
   * it (so the response need not wait for its outcome), the effect itself.
   */
  withReceipt?: CarriedWrite[];
  /** Outbox message-ids the execution enqueued: reported for logs, not stored on the receipt. */
  messageIds?: string[];
  /**
   * Remember this outcome at most this long instead of the operation's retention: for answers that are
   * the same whenever they are computed again (an order that does not exist), so they cost no day-long receipt.
   */
  retentionSeconds?: number;
}

export interface IdempotentRequest {
  scope: IdempotencyScope;
  /** The operation's declared semantic fields; their fingerprint decides "same request" vs "key reused". */
  fields: SemanticFields;
  retentionSeconds: number;
  /**
   * After expiry, refuse the key this much longer (IDEMPOTENCY.KEY_EXPIRED) instead of running it anew:
   * a tombstone until expires_at + tombstoneSeconds, stored on the receipt. 0 or absent: none.
   */
  tombstoneSeconds?: number;
  /** The deployment's region: recorded, since another region's store has its own scopes. */
  region: string;
}

/**
 * `now`: PostgreSQL's now() in the claiming transaction (its start), the same in every statement of it, so
 * also the value of each `now()` and `DEFAULT now()` the command writes after the claim. `fingerprint`:
 * the receipt's, as stored (on a claim, the request's).
 */
export type Claim = { expiresAt: Date; now: Date; fingerprint: Fingerprint } & (
  { kind: 'claimed' | 'reclaimed' } | { kind: 'replay'; response: StoredResponse }
);

const LOCK_NOT_AVAILABLE = '55P03';

/**
 * Expired on this transaction's clock, or already compacted by a sweep whose clock was a little ahead:
 * a compacted receipt has no response left to replay.
 */
const EXPIRED = /* sql */ `(now() >= expires_at OR compacted_at IS NOT NULL)`;
const TOMBSTONED = /* sql */ `coalesce(now() < tombstone_until, false)`;

/**
 * The claim, as the CTE `claimed`: a receipt for the scope, unless one exists (then nothing).
 * Parameters $1-$8 (`claimParameters`); `withAnswer`, also $9-$13: the receipt is completed at once
 * with the response and effect of a decided command.
 */
function claimCte(withAnswer: boolean): string {
  const [columns, values] = withAnswer
    ? [', response_status, response_headers, response_body, effect_type, effect_id, completed_at', ', $9, $10, $11, $12, $13, now()']
    : ['', ''];
  return /* sql */ `
  claimed AS (
    INSERT INTO idempotency_receipts
      (tenant_id, operation, idempotency_key, fingerprint, fingerprint_version, region, expires_at, tombstone_until${columns})
    VALUES ($1, $2, $3, $4, $5, $6, now() + make_interval(secs => $7),
            CASE WHEN $8::int > 0 THEN now() + make_interval(secs => $7 + $8::int) END${values})
    ON CONFLICT (tenant_id, operation, idempotency_key) DO NOTHING
    RETURNING expires_at
  )`;
}
const CLAIM = claimCte(false);
const CLAIM_WITH_ANSWER = claimCte(true);

/** A committed receipt as a claim finds it (ClaimRow). */
const RECEIPT_FOUND = /* sql */ `
  false AS claimed, now(), expires_at, tombstone_until, fingerprint, fingerprint_version, response_status, response_headers,
  response_body, ${EXPIRED} AS expired, ${TOMBSTONED} AS tombstoned`;

/**
 * After the claim (CTE `claimed`): the claim it made, or else the receipt committed before the
 * statement began (read in the same statement, so one round trip serves both usual cases). A receipt
 * committed while the claim waited on it is not in the statement's snapshot: then no row.
 */
const CLAIM_OR_RECEIPT = /* sql */ `
  SELECT true AS claimed, now(), expires_at, NULL::timestamptz AS tombstone_until, NULL::text AS fingerprint,
         NULL::smallint AS fingerprint_version, NULL::smallint AS response_status, NULL::jsonb AS response_headers,
         NULL::json AS response_body, false AS expired, false AS tombstoned
  FROM claimed
  UNION ALL
  SELECT ${RECEIPT_FOUND}
  FROM idempotency_receipts
  WHERE tenant_id = $1 AND operation = $2 AND idempotency_key = $3 AND NOT EXISTS (SELECT FROM claimed)`;

function claimParameters(request: IdempotentRequest, print: Fingerprint, retentionSeconds: number, tombstoneSeconds: number): unknown[] {
  const { tenantId, operation, key } = request.scope;
  return [tenantId, operation, key, print.value, print.version, request.region, retentionSeconds, tombstoneSeconds];
}

/**
 * Claims `request.scope` inside the caller's transaction, or finds the committed receipt to replay.
 *
 * The claim is an INSERT … ON CONFLICT DO NOTHING: while another transaction holds the same scope
 * uncommitted, this statement waits on the unique index (bounded by the connection's lock_timeout,
 * which becomes IDEMPOTENCY.IN_PROGRESS) and then sees the winner's committed receipt. An expired
 * receipt is replaced by a conditional UPDATE, so racing re-executions after expiry also yield one;
 * while its tombstone lasts it is not replaced but refused (IDEMPOTENCY.KEY_EXPIRED), whatever the fields.
 * Database errors propagate: they never read as "no receipt".
 */
export async function claimScope(db: Queryable, request: IdempotentRequest): Promise<Claim> {
  const current = fingerprint(request.fields);
  const tombstoneSeconds = request.tombstoneSeconds ?? 0;
  // A row can vanish between statements (swept after expiry); then the claim simply runs again.
  for (let attempt = 0; attempt < 3; attempt++) {
    const claimed = await whileClaiming(() =>
      queryRows<ClaimRow>(
        db,
        /* sql */ `WITH ${CLAIM}\n${CLAIM_OR_RECEIPT}`,
        claimParameters(request, current, request.retentionSeconds, tombstoneSeconds),
      ),
    );
    if (claimed.rows[0]?.claimed) {
      return { kind: 'claimed', expiresAt: claimed.rows[0].expires_at, now: claimed.rows[0].now, fingerprint: current };
    }

    // The receipt committed while the claim waited on it: the second statement reads it.
    const existing = claimed.rows[0] ?? (await readReceipt(db, request.scope));
    if (!existing) continue;
    const replay = replayOrRefuse(request, existing);
    if (replay) return replay;

    // Expired, and only once the tombstone is over too: a late retry racing the end of a tombstone never executes early.
    const replaced = await whileClaiming(() =>
      queryRows<{ expires_at: Date; now: Date }>(
        db,
        /* sql */ `
        UPDATE idempotency_receipts
        SET fingerprint = $4, fingerprint_version = $5, region = $6,
            response_status = NULL, response_headers = NULL, response_body = NULL,
            effect_type = NULL, effect_id = NULL, completed_at = NULL, compacted_at = NULL,
            created_at = now(), expires_at = now() + make_interval(secs => $7),
            tombstone_until = CASE WHEN $8::int > 0 THEN now() + make_interval(secs => $7 + $8::int) END
        WHERE tenant_id = $1 AND operation = $2 AND idempotency_key = $3
          AND now() >= expires_at AND (tombstone_until IS NULL OR now() >= tombstone_until)
        RETURNING expires_at, now()`,
        claimParameters(request, current, request.retentionSeconds, tombstoneSeconds),
      ),
    );
    if (replaced.rows.length) {
      return { kind: 'reclaimed', expiresAt: replaced.rows[0].expires_at, now: replaced.rows[0].now, fingerprint: current };
    }
  }
  throw new IdempotencyError('IDEMPOTENCY.IN_PROGRESS', 'The receipt for this key kept changing; retry shortly.');
}

/**
 * What a committed receipt means for `request`: refused while it is expired and tombstoned
 * (IDEMPOTENCY.KEY_EXPIRED), refused when it is another request's (IDEMPOTENCY.KEY_REUSED), replayed
 * otherwise; undefined once it has expired (it may be replaced).
 */
function replayOrRefuse(request: IdempotentRequest, existing: ClaimRow): Claim | undefined {
  if (existing.expired && existing.tombstoned) {
    const expiredAt = existing.expires_at.toISOString();
    const tombstoneUntil = existing.tombstone_until!.toISOString();
    throw new IdempotencyError(
      'IDEMPOTENCY.KEY_EXPIRED',
      `This Idempotency-Key expired at ${expiredAt} and is refused until ${tombstoneUntil}: the action it named ` +
        'may already have happened. Use a new key for a new action.',
      { expiredAt, tombstoneUntil },
    );
  }
  if (existing.expired) return undefined;
  const stored = { value: existing.fingerprint, version: existing.fingerprint_version };
  refuseAnotherRequest(request.fields, stored);
  return {
    kind: 'replay',
    expiresAt: existing.expires_at,
    now: existing.now,
    fingerprint: stored,
    response: { status: existing.response_status, headers: existing.response_headers, body: existing.response_body },
  };
}

/**
 * Claims `request.scope` with `decided`, the answer of a command that is known before it runs (nothing
 * the database holds can change it), in one statement that is the transaction's only one: the receipt
 * is inserted complete, and `decided.withReceipt` is written only if that insert claimed the scope.
 * Sent alone by `inOneStatement`, it is a transaction of its own; in `inTransaction`'s on a pipelined
 * pool, BEGIN, the statement and COMMIT go in one write. Either way one round trip. Otherwise the
 * statement finds the committed receipt, and nothing is written: it is replayed or refused as by
 * `claimScope`. A receipt committed while the statement waited on it (a racing duplicate's) is not in
 * its snapshot: a second statement, a read, finds it. `undecided` when the receipt has expired (it is
 * replaced only by `claimScope`'s conditional UPDATE) or is gone (swept meanwhile): the caller then
 * runs the command the general way, in a new transaction.
 */
export async function claimDecided(
  db: Queryable,
  request: IdempotentRequest,
  decided: CommandResult,
): Promise<Claim | { kind: 'undecided' }> {
  const current = fingerprint(request.fields);
  // As completeReceipt does: a shorter retention asked for by the answer, and then no tombstone.
  const retentionSeconds = Math.min(request.retentionSeconds, decided.retentionSeconds ?? Infinity);
  const tombstoneSeconds = decided.retentionSeconds === undefined ? (request.tombstoneSeconds ?? 0) : 0;
  const [sql, parameters] = carrying(
    decided.withReceipt ?? [],
    CLAIM_OR_RECEIPT,
    [
      ...claimParameters(request, current, retentionSeconds, tombstoneSeconds),
      decided.status,
      JSON.stringify(decided.headers),
      JSON.stringify(decided.body),
      decided.effect?.type ?? null,
      decided.effect?.id ?? null,
    ],
    { before: CLAIM_WITH_ANSWER, onlyIf: 'EXISTS (SELECT FROM claimed)' },
  );
  const { rows } = await whileClaiming(() => queryThenCommit<ClaimRow>(db, sql, parameters));
  const row = rows[0];
  if (row?.claimed) return { kind: 'claimed', expiresAt: row.expires_at, now: row.now, fingerprint: current };
  // No row: the receipt was committed while the statement waited on it (a racing duplicate). A read of
  // its own, with a snapshot taken after the wait, finds it: replayed or refused without running again.
  const existing = row ?? (await readReceipt(db, request.scope));
  return (existing && replayOrRefuse(request, existing)) ?? { kind: 'undecided' };
}

/** The scope's committed receipt as a claim finds it (ClaimRow), read by a statement of its own. */
async function readReceipt(db: Queryable, scope: IdempotencyScope): Promise<ClaimRow | undefined> {
  const { rows } = await queryRows<ClaimRow>(
    db,
    /* sql */ `SELECT ${RECEIPT_FOUND} FROM idempotency_receipts WHERE tenant_id = $1 AND operation = $2 AND idempotency_key = $3`,
    [scope.tenantId, scope.operation, scope.key],
  );
  return rows[0];
}

/** Same key, different meaning: `fields` differ from the request whose receipt has the `stored` fingerprint (under its version). */
export function refuseAnotherRequest(fields: SemanticFields, stored: Fingerprint): void {
  if (fingerprint(fields, stored.version).value !== stored.value) {
    throw new IdempotencyError('IDEMPOTENCY.KEY_REUSED', 'This Idempotency-Key was already used with a different request.');
  }
}

/**
 * Stores the command's response on the receipt this transaction claimed, with `result.withReceipt` in
 * the same statement: the transaction's last, which carries its COMMIT where the transaction is
 * `inTransaction`'s on a pipelined pool (`queryThenCommit`). Returns when the receipt expires (sooner
 * with `result.retentionSeconds`; such an answer, the same whenever it is computed again, also keeps
 * no tombstone: running it again changes nothing).
 */
export async function completeReceipt(db: Queryable, scope: IdempotencyScope, result: CommandResult): Promise<Date> {
  const [sql, parameters] = carrying(
    result.withReceipt ?? [],
    /* sql */ `
    UPDATE idempotency_receipts
    SET response_status = $4, response_headers = $5, response_body = $6,
        effect_type = $7, effect_id = $8, completed_at = now(),
        expires_at = CASE WHEN $9::int IS NULL THEN expires_at ELSE LEAST(expires_at, now() + make_interval(secs => $9::int)) END,
        tombstone_until = CASE WHEN $9::int IS NULL THEN tombstone_until END
    WHERE tenant_id = $1 AND operation = $2 AND idempotency_key = $3
    RETURNING expires_at`,
    [
      scope.tenantId,
      scope.operation,
      scope.key,
      result.status,
      JSON.stringify(result.headers),
      JSON.stringify(result.body),
      result.effect?.type ?? null,
      result.effect?.id ?? null,
      result.retentionSeconds ?? null,
    ],
  );
  // The receipt row is this transaction's own (inserted or updated by its claim): the statement finds it.
  const { rows } = await queryThenCommit<{ expires_at: Date }>(db, sql, parameters);
  if (rows.length !== 1) throw new Error('the claimed receipt is missing from its own transaction');
  return rows[0].expires_at;
}

interface ClaimRow {
  claimed: boolean;
  now: Date;
  fingerprint: string;
  fingerprint_version: number;
  response_status: number;
  response_headers: Record<string, string>;
  response_body: unknown;
  expires_at: Date;
  tombstone_until: Date | null;
  expired: boolean;
  tombstoned: boolean;
}

async function whileClaiming<T>(statement: () => Promise<T>): Promise<T> {
  try {
    return await statement();
  } catch (error) {
    if (sqlState(error) === LOCK_NOT_AVAILABLE) {
      throw new IdempotencyError(
        'IDEMPOTENCY.IN_PROGRESS',
        'A request with this Idempotency-Key is still being processed; retry after it finishes.',
      );
    }
    throw error;
  }
}
