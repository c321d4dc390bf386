import { EntityManager } from 'typeorm';
import { BatchedDelete, deleteInBatches, Queryable, QUEUE_PLANNER_SETTINGS, queryRows } from '@app/platform';

export interface OutboxRow {
  id: string;
  sequence: string;
  topic: string;
  message_key: string;
  event_type: string;
  event_version: number;
  tenant_id: string;
  payload: unknown;
  /** The payload as PostgreSQL prints the jsonb, when the query read it as text: sent as it is, never parsed. */
  payload_json?: string;
  headers: Record<string, string>;
  created_at: Date;
}

/**
 * Settings of the relay's own session, made once when it opens.
 * - `synchronous_commit = off`: a mark lost in a database crash only republishes its rows, which at
 *   least once allows, so the relay's commits need not wait for the WAL flush (the command
 *   transaction's still do).
 * - QUEUE_PLANNER_SETTINGS (libs/platform): its claims walk the unpublished index by an index scan,
 *   which marks the published rows' dead entries once, never a bitmap scan that visits them all on every
 *   claim; and every statement of this session on the outbox has an index for what it reads (the parked
 *   and unpublished indexes, the primary key), so it is planned with them whatever the statistics say.
 *   With bitmap scans, 200 commands/s made this session one of the busiest processes on the machine; on a
 *   table never analyzed, the planner read the parked keys with a scan of the whole table once per claim.
 */
export async function prepareRelaySession(manager: EntityManager): Promise<void> {
  await manager.query(/* sql */ `SET synchronous_commit = off`);
  for (const [name, value] of Object.entries(QUEUE_PLANNER_SETTINGS)) await manager.query(/* sql */ `SET ${name} = ${value}`);
}

/**
 * Locks the next unpublished rows of the given shards, oldest sequence first, inside the caller's
 * transaction (`FOR UPDATE SKIP LOCKED`: rows another relay holds are skipped, never waited for).
 * Reads from `floor` on (claim-floor.ts: every row of the shards below it is published), never from a
 * watermark of what was claimed: a row whose transaction committed late, with a lower sequence, is
 * still found. Keys with a parked row are held back, so a key's later events never overtake it.
 */
export async function claimBatch(
  on: Queryable,
  {
    shards,
    shardCount,
    limit,
    exclude = [],
    floor = 0n,
  }: { shards: number[]; shardCount: number; limit: number; exclude?: string[]; floor?: bigint },
): Promise<OutboxRow[]> {
  // The parked keys are read once per claim, through the parked index only (the fenced CTE keeps
  // `published_at IS NULL` out of it): written as a correlated NOT EXISTS, a planner working from
  // statistics taken before a burst of commits checked each claimed row by scanning every unpublished row.
  const { rows } = await queryRows<OutboxRow>(on, CLAIM, [shardCount, shards, limit, exclude, floor.toString()]);
  return rows;
}

/**
 * The claim statement: $1 shard count, $2 owned shards, $3 batch size, $4 ids to pass over (the batch the
 * caller has in flight, claimed by a transaction it already committed), $5 the claim floor. Exported for
 * the benchmark's EXPLAIN.
 * The ids in flight are the first unpublished rows the index scan meets, so each of up to 500 of them is
 * checked against all 500: written as `<> ALL($4)`, the generic plan a prepared statement settles on
 * after five runs compares them one by one (~4 ms of PostgreSQL's time per claim); `NOT IN (SELECT
 * unnest($4))` is a hashed subplan in every plan.
 */
export const CLAIM = /* sql */ `
    WITH parked AS MATERIALIZED (
      SELECT message_key, published_at FROM outbox_messages WHERE parked_at IS NOT NULL
    )
    SELECT o.id, o.sequence, o.topic, o.message_key, o.event_type, o.event_version, o.tenant_id,
           o.payload::text AS payload_json, o.headers, o.created_at
    FROM outbox_messages o
    WHERE o.published_at IS NULL
      AND o.sequence >= $5
      AND o.parked_at IS NULL
      AND o.key_hash % $1 = ANY($2::int[])
      AND o.id NOT IN (SELECT unnest($4::uuid[]))
      AND NOT EXISTS (SELECT 1 FROM parked p WHERE p.published_at IS NULL AND p.message_key = o.message_key)
    ORDER BY o.sequence
    LIMIT $3
    FOR UPDATE OF o SKIP LOCKED`;

/** Marks rows published in the caller's transaction; counted as one successful attempt each. */
export async function markPublished(on: Queryable, ids: string[]): Promise<void> {
  if (!ids.length) return;
  await queryRows(
    on,
    /* sql */ `UPDATE outbox_messages SET published_at = now(), attempts = attempts + 1, last_error = NULL WHERE id = ANY($1::uuid[])`,
    [ids],
  );
}

/** Parks a row Kafka refused for its own sake (not an outage): kept, reported, and its key held back. */
export async function parkMessage(on: Queryable, id: string, error: string): Promise<void> {
  await queryRows(on, /* sql */ `UPDATE outbox_messages SET parked_at = now(), attempts = attempts + 1, last_error = $2 WHERE id = $1`, [
    id,
    error.slice(0, 2000),
  ]);
}

export interface OutboxBacklog {
  unpublished: number;
  parked: number;
  oldestUnpublishedAgeSeconds: number | null;
}

export async function outboxBacklog(manager: EntityManager): Promise<OutboxBacklog> {
  const { rows } = await queryRows<{ unpublished: string; parked: string; oldest_age: number | null }>(
    manager,
    /* sql */ `
    SELECT count(*) AS unpublished,
           count(*) FILTER (WHERE parked_at IS NOT NULL) AS parked,
           extract(epoch FROM now() - min(created_at))::float8 AS oldest_age
    FROM outbox_messages WHERE published_at IS NULL`,
  );
  return {
    unpublished: Number(rows[0].unpublished),
    parked: Number(rows[0].parked),
    oldestUnpublishedAgeSeconds: rows[0].oldest_age,
  };
}

/** Published rows past the retention (`$1` seconds): the only rows a cleanup may delete. */
const PUBLISHED_BEFORE = /* sql */ `published_at IS NOT NULL AND published_at < now() - make_interval(secs => $1)`;

/** How many rows `deletePublishedBefore` would delete now (unpublished and parked rows never count). */
export async function countPublishedBefore(manager: EntityManager, retentionSeconds: number): Promise<number> {
  const { rows } = await queryRows<{ n: string }>(
    manager,
    /* sql */ `SELECT count(*) AS n FROM outbox_messages WHERE ${PUBLISHED_BEFORE}`,
    [retentionSeconds],
  );
  return Number(rows[0].n);
}

/**
 * Deletes published rows older than `retentionSeconds`, `batchSize` at a time, each batch its own
 * statement, until none is left. The retention must cover the longest replay an operator may need.
 */
export async function deletePublishedBefore(
  manager: EntityManager,
  { retentionSeconds, ...batches }: { retentionSeconds: number } & BatchedDelete,
): Promise<number> {
  return deleteInBatches(
    manager,
    /* sql */ `
    DELETE FROM outbox_messages WHERE id IN (
      SELECT id FROM outbox_messages
      WHERE ${PUBLISHED_BEFORE}
      ORDER BY published_at
      LIMIT $2
      FOR UPDATE SKIP LOCKED
    )`,
    [retentionSeconds],
    batches,
  );
}
