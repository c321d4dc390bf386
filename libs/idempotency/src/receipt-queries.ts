import { BatchedDelete, deleteInBatches, Queryable, queryRows } from '@app/platform';
import { IdempotencyScope } from './scope';

export interface ReceiptView {
  operation: string;
  key: string;
  status: 'completed' | 'expired';
  responseStatus: number;
  effect: { type: string; id: string } | null;
  region: string;
  fingerprintVersion: number;
  createdAt: string;
  completedAt: string;
  expiresAt: string;
  /** Null: no tombstone. Otherwise, from expiresAt until then the key is refused (IDEMPOTENCY.KEY_EXPIRED). */
  tombstoneUntil: string | null;
}

/** The committed receipt of a scope, or null. A request still in flight is invisible until it commits. */
export async function findReceipt(db: Queryable, scope: IdempotencyScope): Promise<ReceiptView | null> {
  const { rows } = await queryRows<Record<string, any>>(
    db,
    /* sql */ `
    SELECT response_status, effect_type, effect_id, region, fingerprint_version,
           created_at, completed_at, expires_at, tombstone_until,
           now() >= expires_at OR compacted_at IS NOT NULL AS expired
    FROM idempotency_receipts
    WHERE tenant_id = $1 AND operation = $2 AND idempotency_key = $3`,
    [scope.tenantId, scope.operation, scope.key],
  );
  const row = rows[0];
  if (!row) return null;
  return {
    operation: scope.operation,
    key: scope.key,
    status: row.expired ? 'expired' : 'completed',
    responseStatus: row.response_status,
    effect: row.effect_type ? { type: row.effect_type, id: row.effect_id } : null,
    region: row.region,
    fingerprintVersion: row.fingerprint_version,
    createdAt: row.created_at.toISOString(),
    completedAt: row.completed_at.toISOString(),
    expiresAt: row.expires_at.toISOString(),
    tombstoneUntil: row.tombstone_until?.toISOString() ?? null,
  };
}

export interface ReceiptSweep {
  /** Receipts whose expiry and tombstone (if any) were both over. */
  deleted: number;
  /** Receipts expired inside their tombstone whose stored response was dropped; the rows stay to refuse their keys. */
  compacted: number;
}

/**
 * Forgets what expired, in batches of `batchSize`, each batch its own short statement so it never holds
 * many locks; rows a re-executing request has locked are skipped. Deletes the receipts whose expiry and
 * tombstone are both over, then compacts those expired inside their tombstone: the response headers and
 * body (the bulky part) go, status, effect, fingerprint and times stay. At most `maxBatches` of each;
 * none after `signal` aborts (the next sweep takes the rest).
 */
export async function sweepExpiredReceipts(
  db: Queryable,
  batches: Pick<BatchedDelete, 'batchSize' | 'maxBatches' | 'signal'> = {},
): Promise<ReceiptSweep> {
  const options = { maxBatches: 1_000, ...batches };
  const deleted = await deleteInBatches(
    db,
    /* sql */ `
    DELETE FROM idempotency_receipts r
    USING (
      SELECT tenant_id, operation, idempotency_key FROM idempotency_receipts
      WHERE GREATEST(expires_at, tombstone_until) <= now()
      ORDER BY GREATEST(expires_at, tombstone_until)
      LIMIT $1
      FOR UPDATE SKIP LOCKED
    ) forgotten
    WHERE (r.tenant_id, r.operation, r.idempotency_key) = (forgotten.tenant_id, forgotten.operation, forgotten.idempotency_key)
      AND GREATEST(r.expires_at, r.tombstone_until) <= now()`,
    [],
    options,
  );
  // The same batching for an UPDATE: each statement compacts at most a batch, walking only uncompacted tombstones.
  const compacted = await deleteInBatches(
    db,
    /* sql */ `
    UPDATE idempotency_receipts r
    SET response_headers = NULL, response_body = NULL, compacted_at = now()
    FROM (
      SELECT tenant_id, operation, idempotency_key FROM idempotency_receipts
      WHERE tombstone_until IS NOT NULL AND compacted_at IS NULL AND expires_at <= now() AND tombstone_until > now()
      ORDER BY expires_at
      LIMIT $1
      FOR UPDATE SKIP LOCKED
    ) due
    WHERE (r.tenant_id, r.operation, r.idempotency_key) = (due.tenant_id, due.operation, due.idempotency_key)
      AND r.compacted_at IS NULL AND r.expires_at <= now() AND r.tombstone_until > now()`,
    [],
    options,
  );
  return { deleted, compacted };
}
