import { Queryable, queryRows } from './query-rows';

export interface BatchedDelete {
  /** Rows per DELETE statement (default 1,000): no statement holds many row locks or runs long. */
  batchSize?: number;
  /** Stop after this many statements even if rows remain (a periodic sweep comes round again). */
  maxBatches?: number;
  /** After each statement: how many rows it deleted (for an operator's progress bar). */
  onBatch?: (deleted: number) => void;
  /** Once aborted (a shutdown), no further statement starts: the statement in flight is the last. */
  signal?: AbortSignal;
}

/**
 * The one batched delete: runs `sql` (a DELETE whose last parameter, after `params`, is the batch
 * size, as its LIMIT) one statement at a time until a statement deletes fewer rows than a batch.
 * Each statement commits on its own, so a long sweep never blocks the writers beside it, and one cut
 * short by `signal` leaves nothing half done. Returns how many rows were deleted.
 */
export async function deleteInBatches(
  db: Queryable,
  sql: string,
  params: unknown[],
  { batchSize = 1_000, maxBatches = Infinity, onBatch, signal }: BatchedDelete = {},
): Promise<number> {
  let deleted = 0;
  for (let batch = 0; batch < maxBatches && !signal?.aborted; batch++) {
    const { affected } = await queryRows(db, sql, [...params, batchSize]);
    deleted += affected;
    onBatch?.(affected);
    if (affected < batchSize) break;
  }
  return deleted;
}
