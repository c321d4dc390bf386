import { EntityManager } from 'typeorm';
import { deleteInBatches, Queryable, queryRows, queryThenCommit } from '@app/platform';

/** A pending delivery a dispatcher holds (leased) while it POSTs it. */
export interface ClaimedDelivery {
  messageId: string;
  /** This claim's lease: only its own result may settle the row. */
  leaseId: string;
  orderId: string;
  eventType: string;
  payload: string;
  /** POSTs made before this one. */
  attempts: number;
}

/** What one POST came to: the row's next state, and when a pending one is due again. */
export interface Settlement {
  messageId: string;
  leaseId: string;
  /** Where it was POSTed (the configured WEBHOOK_URL at the time). */
  url: string;
  state: 'pending' | 'delivered' | 'dead';
  statusCode: number | null;
  /** For `pending`: the wait before the next attempt. */
  retryInMs: number | null;
  error: string | null;
}

/**
 * Leases up to `limit` due deliveries for `leaseMs`, under a lease id of this claim's own, reading the
 * index of pending deliveries from `floor` on (a DueFloor's). Per-order order: a delivery is taken only
 * when no earlier delivery of its order is still pending (in flight, waiting for a retry or not yet
 * due), so one order's webhooks reach the receiver in the order of its events. SKIP LOCKED and the
 * lease let several dispatchers (notifier instances) share the table without taking the same row.
 * One statement, a transaction of its own (the dispatcher sends it through `inOneStatement`).
 */
export async function claimDue(
  db: Queryable,
  leaseId: string,
  leaseMs: number,
  limit: number,
  floor = NO_FLOOR,
): Promise<ClaimedDelivery[]> {
  const { rows } = await queryThenCommit<ClaimedDelivery>(db, CLAIM_DUE, [leaseId, leaseMs, limit, floor]);
  return rows;
}

/**
 * The claim statement: $1 lease id, $2 lease in ms, $3 batch size, $4 the floor. Exported for the tests' EXPLAIN.
 * A candidate is claimed only if no earlier delivery of its order is pending. That check is a probe of
 * the pending-order index per candidate: `OFFSET 0` keeps it a subquery PostgreSQL runs for each row,
 * never an anti-join it plans. As an anti-join, the generic plan a session kept from an empty queue (a
 * notifier's first minutes) scanned the whole index for every candidate: 320,000 buffers for a claim of
 * 64 on a backlog of 5,000 (`webhook-claim-skips-what-it-delivered`).
 */
export const CLAIM_DUE = /* sql */ `
    UPDATE webhook_deliveries d
    SET lease_id = $1, leased_until = now() + make_interval(secs => $2::float8 / 1000)
    WHERE d.message_id IN (
      SELECT h.message_id FROM webhook_deliveries h
      WHERE h.state = 'pending' AND h.next_attempt_at >= $4::timestamptz AND h.next_attempt_at <= now()
        AND (h.leased_until IS NULL OR h.leased_until < now())
        AND NOT EXISTS (
          SELECT 1 FROM webhook_deliveries e
          WHERE e.state = 'pending' AND e.order_id = h.order_id AND e.sequence < h.sequence
          OFFSET 0)
      ORDER BY h.next_attempt_at
      LIMIT $3
      FOR UPDATE SKIP LOCKED)
    RETURNING d.message_id AS "messageId", d.lease_id AS "leaseId", d.order_id AS "orderId", d.event_type AS "eventType", d.payload, d.attempts`;

/** A floor below every due time: the claim reads the index of pending deliveries from its beginning. */
export const NO_FLOOR = '-infinity';

/**
 * Where the dispatcher's claims start in the index of pending deliveries (ordered by due time).
 *
 * A delivered row's entry stays in that index until a vacuum, and autovacuum comes to a table keeping
 * two weeks of deliveries only after a fifth of its rows changed: millions of deliveries apart at a
 * few hundred events/s. A claim that starts at the index's beginning steps over every entry delivered
 * since (an index scan marks each dead entry once; it still reads their pages), and the dispatcher
 * claims about once per event. So the claims start at a floor instead: at most the lowest due time of
 * any pending delivery (leased, blocked behind its order's earlier one, or waiting for a retry: all of
 * them), and at most `marginMs` before the look that found it. Looking again every `lookEveryMs`, the
 * dead entries below the floor are read by the looks alone.
 *
 * Why no delivery is left behind: every writer of a pending row's due time sets it at or after the start
 * of its own transaction (the recorder: now(); a retry: now() plus the wait; `ops webhooks:retry`: now(),
 * or leaves it). A look sees every delivery committed before it. One committed after it lies below its
 * floor only if its transaction began more than `marginMs` before the look (or the clock stepped
 * back); the next look sees that delivery and lowers the floor to it, so it is claimed at most
 * `lookEveryMs` late. Never lost, and per-order order does not depend on the floor.
 */
export class DueFloor {
  private floor = NO_FLOOR;
  private lookedAt = -Infinity;

  constructor(private readonly options: { lookEveryMs: number; marginMs: number }) {}

  /** The floor for the next claim; looks again when the last look is `lookEveryMs` old. */
  async current(manager: EntityManager, now = Date.now()): Promise<string> {
    if (now - this.lookedAt >= this.options.lookEveryMs) {
      const { rows } = await queryRows<{ floor: string }>(manager, LOOK_FOR_FLOOR, [this.options.marginMs]);
      this.floor = rows[0].floor;
      this.lookedAt = now;
    }
    return this.floor;
  }
}

/**
 * The lowest due time of the pending deliveries (PostgreSQL reads it from the index's first live
 * entry), or the margin before now if lower. As text: a JS Date would drop the microseconds.
 */
const LOOK_FOR_FLOOR = /* sql */ `
    SELECT least(min(next_attempt_at), now() - make_interval(secs => $1::float8 / 1000))::text AS floor
    FROM webhook_deliveries WHERE state = 'pending'`;

/**
 * Records what the POSTs came to, in one statement. Only rows still under the lease each result was
 * POSTed under change: if that lease ran out and the row was claimed again (by any dispatcher, this
 * one included), the newer claim's record wins (the receiver got the webhook twice, with one
 * webhook-id, and keeps one). Returns how many rows changed. One statement, a transaction of its own
 * (the dispatcher sends it through `inOneStatement`).
 */
export async function settle(db: Queryable, settlements: Settlement[]): Promise<number> {
  const { affected } = await queryThenCommit(db, SETTLE, settleParameters(settlements));
  return affected;
}

/** The settle statement (exported for the tests' EXPLAIN): each result's row found by its message id. */
export const SETTLE = /* sql */ `
    UPDATE webhook_deliveries d SET
      attempts = d.attempts + 1,
      state = r.state,
      status_code = r.status_code,
      url = r.url,
      last_error = r.error,
      next_attempt_at = CASE WHEN r.state = 'pending' THEN now() + make_interval(secs => r.retry_in_ms / 1000) ELSE d.next_attempt_at END,
      delivered_at = CASE WHEN r.state = 'delivered' THEN now() END,
      dead_at = CASE WHEN r.state = 'dead' THEN now() END,
      lease_id = NULL,
      leased_until = NULL
    FROM unnest($1::uuid[], $2::uuid[], $3::text[], $4::text[], $5::int[], $6::float8[], $7::text[])
      AS r(message_id, lease_id, url, state, status_code, retry_in_ms, error)
    WHERE d.message_id = r.message_id AND d.lease_id = r.lease_id AND d.state = 'pending'`;

/** SETTLE's parameters: one array per column of the results. */
export function settleParameters(settlements: Settlement[]): unknown[] {
  const column = <K extends keyof Settlement>(key: K) => settlements.map((s) => s[key]);
  return [
    column('messageId'),
    column('leaseId'),
    column('url'),
    column('state'),
    column('statusCode'),
    column('retryInMs'),
    column('error'),
  ];
}

/** Deletes delivered rows older than `retentionSeconds`, a bounded batch at a time; returns how many. */
export async function sweepDelivered(manager: EntityManager, retentionSeconds: number): Promise<number> {
  return deleteInBatches(
    manager,
    /* sql */ `
    DELETE FROM webhook_deliveries WHERE ctid = ANY(ARRAY(
      SELECT ctid FROM webhook_deliveries
      WHERE state = 'delivered' AND delivered_at < now() - make_interval(secs => $1)
      LIMIT $2))`,
    [retentionSeconds],
    { batchSize: 5_000 },
  );
}
