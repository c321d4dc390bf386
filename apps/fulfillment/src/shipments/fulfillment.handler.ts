import { randomUUID } from 'node:crypto';
import { Injectable } from '@nestjs/common';
import { orderEventSchemas, OrderEventTypes } from '@app/contracts';
import { ConsumedEvent, EventHandler } from '@app/inbox';
import { Queryable, queryRows } from '@app/platform';

type OrderEvent = ConsumedEvent<typeof orderEventSchemas>;
type Placed = Extract<OrderEvent, { type: typeof OrderEventTypes.placed }>;
type Cancelled = Extract<OrderEvent, { type: typeof OrderEventTypes.cancelled }>;

/**
 * OrderPlaced creates a shipment, OrderCancelled cancels it, inside the inbox transaction, a batch at a time.
 * The kit (libs/inbox consumer-kit) hands it only the order events it reads, checked by their zod
 * schemas (libs/contracts): other types and newer versions are skipped, unreadable payloads dead-lettered.
 *
 * Decided from what fulfillment knows of the order, never from arrival order: per-key order holds
 * only for events that flow normally, and an OrderPlaced that was dead-lettered and re-driven, or
 * replayed, comes after its OrderCancelled. So a cancel that finds no shipment leaves a marker, and
 * an OrderPlaced that finds the marker records its shipment as cancelled: never a pending shipment
 * for a cancelled order, whatever the order of arrival.
 */
@Injectable()
export class ShipmentsHandler implements EventHandler<typeof orderEventSchemas> {
  async handle(db: Queryable, events: OrderEvent[]): Promise<void> {
    // Consecutive events of one type are applied together, and the runs in partition order, so an
    // order's OrderCancelled behind its OrderPlaced in one batch still finds the shipment (and ahead of it, leaves the marker).
    for (let start = 0; start < events.length;) {
      let end = start + 1;
      while (end < events.length && events[end].type === events[start].type) end++;
      const run = events.slice(start, end);
      await lockOrders(db, run);
      if (run[0].type === OrderEventTypes.placed) await placeShipments(db, run as Placed[]);
      else await cancelShipments(db, run as Cancelled[]);
      start = end;
    }
  }
}

/*
 * Each lookup by an event's (tenant, order) in another table (a placement's marker, a cancel's
 * shipment, both for its update and for its marker) is a subquery with `OFFSET 0`, which PostgreSQL
 * runs per event as a probe of that table's key and never turns into a join. As a join, the generic
 * plan a session keeps for a prepared statement, made from the statistics of its moment, read the
 * whole other table once per batch when that moment was an empty table (a new deployment; the
 * markers, rarely analyzed): fulfillment-checks-planned-on-empty-tables,
 * plans-made-on-empty-tables-stay-probes.
 */
async function placeShipments(db: Queryable, run: Placed[]): Promise<void> {
  // The unique (tenant, order) is a second line of defence; the inbox is what makes redelivery a no-op.
  await queryRows(
    db,
    /* sql */ `
    INSERT INTO shipments (id, tenant_id, order_id, sku, quantity, status, message_id, cancelled_at)
    SELECT p.id, p.tenant_id, p.order_id, p.sku, p.quantity, CASE WHEN c.order_id IS NULL THEN 'pending' ELSE 'cancelled' END,
           p.message_id, c.cancelled_at
    FROM unnest($1::uuid[], $2::text[], $3::uuid[], $4::text[], $5::int[], $6::uuid[]) WITH ORDINALITY
         AS p(id, tenant_id, order_id, sku, quantity, message_id, n)
    LEFT JOIN LATERAL (
      SELECT m.order_id, m.cancelled_at FROM cancelled_orders m
      WHERE m.tenant_id = p.tenant_id AND m.order_id = p.order_id OFFSET 0
    ) c ON true
    ORDER BY p.n
    ON CONFLICT (tenant_id, order_id) DO NOTHING`,
    [
      run.map(() => randomUUID()),
      run.map(({ event }) => event.tenantId),
      run.map(({ event }) => event.orderId),
      run.map(({ event }) => event.sku),
      run.map(({ event }) => event.quantity),
      run.map(({ messageId }) => messageId),
    ],
  );
}

async function cancelShipments(db: Queryable, run: Cancelled[]): Promise<void> {
  const tenants = run.map(({ event }) => event.tenantId);
  const orders = run.map(({ event }) => event.orderId);
  await queryRows(
    db,
    /* sql */ `
    UPDATE shipments s SET status = 'cancelled', cancelled_at = now()
    FROM unnest($1::text[], $2::uuid[]) AS c(tenant_id, order_id),
    LATERAL (SELECT f.id FROM shipments f WHERE f.tenant_id = c.tenant_id AND f.order_id = c.order_id OFFSET 0) found
    WHERE s.id = found.id AND s.status <> 'cancelled'`,
    [tenants, orders],
  );
  // No shipment yet: its OrderPlaced is dead-lettered or late. The marker is what it will find.
  await queryRows(
    db,
    /* sql */ `
    INSERT INTO cancelled_orders (tenant_id, order_id, message_id)
    SELECT c.tenant_id, c.order_id, c.message_id
    FROM unnest($1::text[], $2::uuid[], $3::uuid[]) WITH ORDINALITY AS c(tenant_id, order_id, message_id, n)
    WHERE NOT EXISTS (SELECT 1 FROM shipments s WHERE s.tenant_id = c.tenant_id AND s.order_id = c.order_id OFFSET 0)
    ORDER BY c.n
    ON CONFLICT (tenant_id, order_id) DO NOTHING`,
    [tenants, orders, run.map(({ messageId }) => messageId)],
  );
}

/**
 * Serialises the events of one order until commit. Normally they are on one partition and never
 * meet; during a rebalance two members may briefly both handle a partition, and without the lock
 * neither an OrderPlaced nor an OrderCancelled of one order would see the other's uncommitted row.
 * A run's locks are taken in one statement, in key order, so two batches cannot deadlock on them;
 * the statements that follow see everything committed before the locks were granted.
 */
async function lockOrders(db: Queryable, run: OrderEvent[]): Promise<void> {
  const keys = [...new Set(run.map(({ event }) => `${event.tenantId}/${event.orderId}`))].sort();
  await queryRows(
    db,
    /* sql */ `
    SELECT pg_advisory_xact_lock(hashtext('fulfillment_orders'), hashtext(k))
    FROM (SELECT k FROM unnest($1::text[]) AS k ORDER BY k) AS keys`,
    [keys],
  );
}
