import { EntityManager } from 'typeorm';
import { Operations, OrderEventTypes, UUID_PATTERN } from '@app/contracts';
import { queryRows } from '@app/platform';
import { CheckResult, Mismatch } from './audit-report';

/** The id rule (libs/contracts) as a SQL literal: `::uuid` takes every text it matches, so a foreign key or effect id never aborts a check. */
const UUID = `'${UUID_PATTERN.source}'`;

/**
 * A check inside one database. `judged` selects every row the check covers, with a `problem`
 * column that is NULL when the row is fine and an `at` column to order examples by; it is counted in
 * one pass and read again only for the first `limit` mismatches.
 */
export async function judge(
  manager: EntityManager,
  name: string,
  judged: string,
  parameters: unknown[],
  limit: number,
  example: (row: any) => Mismatch,
  hint: string,
): Promise<CheckResult> {
  const { rows } = await queryRows<{ checked: number; mismatches: number }>(
    manager,
    /* sql */ `SELECT count(*)::int AS checked, count(problem)::int AS mismatches FROM (${judged}) judged`,
    parameters,
  );
  const { checked, mismatches } = rows[0];
  const examples =
    mismatches && limit
      ? (
          await queryRows(
            manager,
            /* sql */ `SELECT * FROM (${judged}) judged WHERE problem IS NOT NULL ORDER BY at, id LIMIT $${parameters.length + 1}`,
            [...parameters, limit],
          )
        ).rows.map(example)
      : [];
  return { name, checked, mismatches, examples, ...(mismatches ? { hint } : {}) };
}

/** Every live receipt that names an effect still has it: the order exists, for the receipt's tenant (and is cancelled, for a cancel). */
export function receiptsHaveEffects(manager: EntityManager, limit: number): Promise<CheckResult> {
  const judged = /* sql */ `
    SELECT r.effect_id AS id, r.tenant_id, r.operation, r.idempotency_key, r.effect_type, r.completed_at AS at,
           CASE
             WHEN r.effect_type <> 'order' THEN 'effect type unknown to the audit'
             WHEN o.id IS NULL THEN 'receipt names an order that does not exist'
             WHEN o.tenant_id <> r.tenant_id THEN 'receipt names an order of another tenant'
             WHEN r.operation = $1 AND o.status <> 'cancelled' THEN 'receipt says cancelled, the order is not'
           END AS problem
    FROM idempotency_receipts r
    LEFT JOIN orders o ON r.effect_type = 'order' AND o.id = CASE WHEN r.effect_id ~ ${UUID} THEN r.effect_id::uuid END
    WHERE r.completed_at IS NOT NULL AND r.expires_at > now() AND r.effect_type IS NOT NULL`;
  return judge(
    manager,
    'receipts-have-effects',
    judged,
    [Operations.cancelOrder],
    limit,
    (row) => ({
      problem: row.problem,
      tenant: row.tenant_id,
      operation: row.operation,
      key: row.idempotency_key,
      effect: `${row.effect_type}:${row.id}`,
      completedAt: row.at.toISOString(),
    }),
    'A retry of these keys would replay a response whose effect is gone: the orders database lost rows its receipts still describe (a partial restore, a manual delete). See docs/audit.md.',
  );
}

/**
 * Every order placed, and every cancellation, inside the outbox retention has its event row. Older
 * ones may have lost theirs to cleanup legitimately: an event is published after its order commits,
 * so a row of an order younger than the retention cannot have been cleaned up yet.
 */
export function ordersHaveOutboxEvents(manager: EntityManager, limit: number, retentionSeconds: number): Promise<CheckResult> {
  const judged = /* sql */ `
    SELECT e.id, e.tenant_id, e.event_type, e.at,
           CASE WHEN NOT EXISTS (
             SELECT 1 FROM outbox_messages m
             WHERE m.tenant_id = e.tenant_id AND m.message_key = e.id::text AND m.event_type = e.event_type
           ) THEN 'order has no ' || e.event_type || ' row in the outbox' END AS problem
    FROM (
      SELECT id, tenant_id, $2::text AS event_type, created_at AS at FROM orders
      WHERE created_at > now() - make_interval(secs => $1)
      UNION ALL
      SELECT id, tenant_id, $3::text, cancelled_at FROM orders
      WHERE cancelled_at IS NOT NULL AND cancelled_at > now() - make_interval(secs => $1)
    ) e`;
  const parameters = [retentionSeconds, OrderEventTypes.placed, OrderEventTypes.cancelled];
  return judge(
    manager,
    'orders-have-outbox-events',
    judged,
    parameters,
    limit,
    (row) => ({
      problem: row.problem,
      tenant: row.tenant_id,
      order: row.id,
      event: row.event_type,
      at: row.at.toISOString(),
    }),
    'Downstream never heard of these changes: their events were deleted from the outbox (by hand, or by a cleanup with a shorter retention than OUTBOX_RETENTION_SECONDS). See docs/audit.md.',
  );
}

/** Every order event in the outbox names an existing order of its own tenant, and its payload agrees. */
export function outboxEventsHaveOrders(manager: EntityManager, limit: number): Promise<CheckResult> {
  const judged = /* sql */ `
    SELECT m.id, m.tenant_id, m.message_key, m.event_type, m.created_at AS at, o.tenant_id AS order_tenant,
           CASE
             WHEN o.id IS NULL THEN 'event names an order that does not exist'
             WHEN o.tenant_id <> m.tenant_id THEN 'event tenant differs from its order''s tenant'
             WHEN m.payload->>'tenantId' IS DISTINCT FROM m.tenant_id THEN 'event payload names another tenant'
             WHEN m.message_key <> o.id::text THEN 'event is keyed by another spelling of its order id: another Kafka key than the order''s other events'
             WHEN m.payload->>'orderId' IS DISTINCT FROM m.message_key THEN 'event payload names another order'
           END AS problem
    FROM outbox_messages m
    LEFT JOIN orders o ON o.id = CASE WHEN m.message_key ~ ${UUID} THEN m.message_key::uuid END
    WHERE m.event_type IN ($1, $2)`;
  const parameters = [OrderEventTypes.placed, OrderEventTypes.cancelled];
  return judge(
    manager,
    'outbox-events-have-orders',
    judged,
    parameters,
    limit,
    (row) => ({
      problem: row.problem,
      messageId: row.id,
      event: row.event_type,
      tenant: row.tenant_id,
      order: row.message_key,
      orderTenant: row.order_tenant,
      createdAt: row.at.toISOString(),
    }),
    'These events describe no committed order of their tenant, yet consumers act on them: find who wrote them before any replay. ' +
      'One keyed by another spelling of its order id (written before ids were canonicalised) may have reached consumers out of order ' +
      "with its order's other events. See docs/audit.md.",
  );
}
