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
}

/** The committed receipt of a scope, or null. A request still in flight is invisible until it commits. */
export async function findReceipt(db: Queryable, scope: IdempotencyScope): Promise<ReceiptView | null> {
  const { rows } = await queryRows<Record<string, any>>(
    db,
    /* sql */ `
    SELECT response_status, effect_type, effect_id, region, fingerprint_version,
           created_at, completed_at, expires_at, now() >= expires_at AS expired
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
  };
}

/**
 * Deletes expired receipts in batches of `batchSize`, each batch its own short statement so it never
 * holds many locks; rows a re-executing request has locked are skipped. Stops after `maxBatches`.
 */
export async function sweepExpiredReceipts(db: Queryable, batches: BatchedDelete = {}): Promise<number> {
  return deleteInBatches(
    db,
    /* sql */ `
    DELETE FROM idempotency_receipts r
    USING (
      SELECT tenant_id, operation, idempotency_key FROM idempotency_receipts
      WHERE expires_at <= now()
      ORDER BY expires_at
      LIMIT $1
      FOR UPDATE SKIP LOCKED
    ) expired
    WHERE (r.tenant_id, r.operation, r.idempotency_key) = (expired.tenant_id, expired.operation, expired.idempotency_key)
      AND r.expires_at <= now()`,
    [],
    { maxBatches: 1_000, ...batches },
  );
}
