import { EntityManager } from 'typeorm';
import { queryRows } from '@app/platform';
import { DeliveryState } from './webhook-options';
import { DeliveryRecord } from './webhook-plan';

/** A row as webhooks:list shows it. */
export interface ListedDelivery extends DeliveryRecord {
  sequence: string;
  url: string;
  lastError: string | null;
  createdAt: Date;
  nextAttemptAt: Date | null;
  /** For a pending one: the earliest earlier pending delivery of its order, which goes first. */
  waitingBehind: string | null;
}

export interface DeliveryFilter {
  state?: DeliveryState;
  order?: string;
  tenant?: string;
}

export interface DeliverySummary {
  pending: number;
  delivered: number;
  dead: number;
  /** Pending ones a dispatcher is POSTing right now. */
  inFlight: number;
  /** Whole seconds since the oldest pending delivery was recorded; null when none is pending. */
  oldestPendingAgeSeconds: number | null;
}

/** "In flight" is judged by the database clock at the moment of reading, as the dispatcher's claim does. */
const COLUMNS = /* sql */ `
  d.message_id AS "messageId", d.tenant_id AS tenant, d.order_id AS "order", d.event_type AS "eventType", d.state,
  d.attempts, d.status_code AS "statusCode", d.leased_until AS "leasedUntil",
  (d.state = 'pending' AND d.leased_until IS NOT NULL AND d.leased_until > clock_timestamp()) AS "inFlight",
  d.payload IS NOT NULL AS "hasPayload", d.delivered_at AS "deliveredAt", d.dead_at AS "deadAt"`;

const FILTER = /* sql */ `($1::text IS NULL OR d.state = $1) AND ($2::uuid IS NULL OR d.order_id = $2) AND ($3::text IS NULL OR d.tenant_id = $3)`;

/** Newest first (by sequence, the order deliveries were recorded in). */
export async function listDeliveries(manager: EntityManager, filter: DeliveryFilter, limit: number): Promise<ListedDelivery[]> {
  const { rows } = await queryRows<ListedDelivery>(
    manager,
    /* sql */ `
    SELECT ${COLUMNS}, d.sequence::text AS sequence, d.url, d.last_error AS "lastError", d.created_at AS "createdAt",
           d.next_attempt_at AS "nextAttemptAt",
           CASE WHEN d.state = 'pending' THEN (
             SELECT e.message_id FROM webhook_deliveries e
             WHERE e.state = 'pending' AND e.order_id = d.order_id AND e.sequence < d.sequence
             ORDER BY e.sequence LIMIT 1) END AS "waitingBehind"
    FROM webhook_deliveries d
    WHERE ${FILTER}
    ORDER BY d.sequence DESC
    LIMIT $4`,
    [filter.state ?? null, filter.order ?? null, filter.tenant ?? null, limit],
  );
  return rows;
}

/** Counts per state of the deliveries matching `filter` (its state aside), and the age of the oldest pending one. */
export async function summarizeDeliveries(manager: EntityManager, filter: DeliveryFilter): Promise<DeliverySummary> {
  const { rows } = await queryRows<DeliverySummary>(
    manager,
    /* sql */ `
    SELECT count(*) FILTER (WHERE d.state = 'pending')::int AS pending,
           count(*) FILTER (WHERE d.state = 'delivered')::int AS delivered,
           count(*) FILTER (WHERE d.state = 'dead')::int AS dead,
           count(*) FILTER (WHERE d.state = 'pending' AND d.leased_until > clock_timestamp())::int AS "inFlight",
           floor(extract(epoch FROM clock_timestamp() - min(d.created_at) FILTER (WHERE d.state = 'pending')))::int AS "oldestPendingAgeSeconds"
    FROM webhook_deliveries d
    WHERE ${FILTER}`,
    [null, filter.order ?? null, filter.tenant ?? null],
  );
  return rows[0];
}

/**
 * The named deliveries, locked until the caller's transaction ends (call it inside one): a dispatcher's
 * claim skips a locked row, and one that leased it first shows as in flight.
 */
export async function lockDeliveries(manager: EntityManager, messageIds: string[]): Promise<DeliveryRecord[]> {
  const { rows } = await queryRows<DeliveryRecord>(
    manager,
    /* sql */ `SELECT ${COLUMNS} FROM webhook_deliveries d WHERE d.message_id = ANY($1::uuid[]) ORDER BY d.sequence FOR UPDATE`,
    [messageIds],
  );
  return rows;
}

/** Up to `limit` dead deliveries (of `tenant`), the longest dead first, locked as `lockDeliveries` does. */
export async function lockDead(manager: EntityManager, tenant: string | undefined, limit: number): Promise<DeliveryRecord[]> {
  const { rows } = await queryRows<DeliveryRecord>(
    manager,
    /* sql */ `
    SELECT ${COLUMNS} FROM webhook_deliveries d
    WHERE d.state = 'dead' AND ($1::text IS NULL OR d.tenant_id = $1)
    ORDER BY d.dead_at, d.sequence
    LIMIT $2
    FOR UPDATE`,
    [tenant ?? null, limit],
  );
  return rows;
}

/**
 * Makes the deliveries pending and due now. A dead or delivered one starts over (attempts 0, a whole
 * retry schedule) and keeps its last status code and error until the next attempt replaces them; a
 * pending one keeps its attempts and only skips the wait. Call under `lockDeliveries`/`lockDead`.
 */
export async function retryDeliveries(manager: EntityManager, messageIds: string[]): Promise<Map<string, Date>> {
  const { rows } = await queryRows<{ messageId: string; nextAttemptAt: Date }>(
    manager,
    /* sql */ `
    UPDATE webhook_deliveries SET
      next_attempt_at = CASE WHEN state = 'pending' THEN least(next_attempt_at, now()) ELSE now() END,
      attempts = CASE WHEN state = 'pending' THEN attempts ELSE 0 END,
      lease_id = CASE WHEN state = 'pending' THEN lease_id END,
      leased_until = CASE WHEN state = 'pending' THEN leased_until END,
      state = 'pending',
      delivered_at = NULL,
      dead_at = NULL
    WHERE message_id = ANY($1::uuid[])
    RETURNING message_id AS "messageId", next_attempt_at AS "nextAttemptAt"`,
    [messageIds],
  );
  return new Map(rows.map((row) => [row.messageId, row.nextAttemptAt]));
}

/** Gives the deliveries up: dead now, `reason` as their last error. Call under `lockDeliveries`. */
export async function deadLetterDeliveries(manager: EntityManager, messageIds: string[], reason: string): Promise<Map<string, Date>> {
  const { rows } = await queryRows<{ messageId: string; deadAt: Date }>(
    manager,
    /* sql */ `
    UPDATE webhook_deliveries SET state = 'dead', dead_at = now(), last_error = $2, lease_id = NULL, leased_until = NULL
    WHERE message_id = ANY($1::uuid[])
    RETURNING message_id AS "messageId", dead_at AS "deadAt"`,
    [messageIds, reason],
  );
  return new Map(rows.map((row) => [row.messageId, row.deadAt]));
}
