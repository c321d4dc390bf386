import { randomUUID } from 'node:crypto';
import { EntityManager } from 'typeorm';
import { canonicalUuid, Headers, ORDER_EVENT_VERSION, OrderCancelledV1, OrderEventTypes, OrderPlacedV1 } from '@app/contracts';
import { HandlerOutcome, InboxMessage, MalformedMessage } from '@app/inbox';
import { queryRows } from '@app/platform';

/**
 * OrderPlaced creates a shipment, OrderCancelled cancels it, inside the inbox transaction.
 * Unknown event types and versions newer than this consumer reads are skipped (forward compatible);
 * a payload it cannot read, or whose tenant disagrees with the `tenant-id` header, is malformed.
 *
 * Decided from what fulfillment knows of the order, never from arrival order: per-key order holds
 * only for events that flow normally, and an OrderPlaced that was dead-lettered and re-driven, or
 * replayed, comes after its OrderCancelled. So a cancel that finds no shipment leaves a marker, and
 * an OrderPlaced that finds the marker records its shipment as cancelled: never a pending shipment
 * for a cancelled order, whatever the order of arrival.
 */
export async function handleOrderEvent(manager: EntityManager, message: InboxMessage): Promise<HandlerOutcome> {
  const version = Number(message.headers[Headers.eventVersion] ?? '1');
  const known = message.eventType === OrderEventTypes.placed || message.eventType === OrderEventTypes.cancelled;
  if (!known || version > ORDER_EVENT_VERSION) return 'skipped';

  const payload = parse(message);
  if (message.eventType === OrderEventTypes.placed) {
    const placed = withFields<OrderPlacedV1>(payload, { orderId: 'string', tenantId: 'string', sku: 'string', quantity: 'number' });
    await placeShipment(manager, { ...placed, orderId: orderIdOf(placed) }, message.messageId!);
  } else {
    const cancelled = withFields<OrderCancelledV1>(payload, { orderId: 'string', tenantId: 'string' });
    await cancelShipment(manager, { ...cancelled, orderId: orderIdOf(cancelled) }, message.messageId!);
  }
  return 'applied';
}

async function placeShipment(manager: EntityManager, placed: OrderPlacedV1, messageId: string): Promise<void> {
  await lockOrder(manager, placed.tenantId, placed.orderId);
  // The unique (tenant, order) is a second line of defence; the inbox is what makes redelivery a no-op.
  await queryRows(
    manager,
    /* sql */ `
    WITH cancelled AS (SELECT cancelled_at FROM cancelled_orders WHERE tenant_id = $2 AND order_id = $3)
    INSERT INTO shipments (id, tenant_id, order_id, sku, quantity, status, message_id, cancelled_at)
    VALUES ($1, $2, $3, $4, $5, CASE WHEN EXISTS (SELECT 1 FROM cancelled) THEN 'cancelled' ELSE 'pending' END, $6,
            (SELECT cancelled_at FROM cancelled))
    ON CONFLICT (tenant_id, order_id) DO NOTHING`,
    [randomUUID(), placed.tenantId, placed.orderId, placed.sku, placed.quantity, messageId],
  );
}

async function cancelShipment(manager: EntityManager, cancelled: OrderCancelledV1, messageId: string): Promise<void> {
  await lockOrder(manager, cancelled.tenantId, cancelled.orderId);
  await queryRows(
    manager,
    /* sql */ `
    UPDATE shipments SET status = 'cancelled', cancelled_at = now()
    WHERE tenant_id = $1 AND order_id = $2 AND status <> 'cancelled'`,
    [cancelled.tenantId, cancelled.orderId],
  );
  // No shipment yet: its OrderPlaced is dead-lettered or late. The marker is what it will find.
  await queryRows(
    manager,
    /* sql */ `
    INSERT INTO cancelled_orders (tenant_id, order_id, message_id)
    SELECT $1, $2, $3 WHERE NOT EXISTS (SELECT 1 FROM shipments WHERE tenant_id = $1 AND order_id = $2)
    ON CONFLICT (tenant_id, order_id) DO NOTHING`,
    [cancelled.tenantId, cancelled.orderId, messageId],
  );
}

/**
 * Serialises the events of one order until commit. Normally they are on one partition and never
 * meet; during a rebalance two members may briefly both handle a partition, and without the lock
 * neither an OrderPlaced nor an OrderCancelled of one order would see the other's uncommitted row.
 */
async function lockOrder(manager: EntityManager, tenantId: string, orderId: string): Promise<void> {
  await queryRows(manager, /* sql */ `SELECT pg_advisory_xact_lock(hashtext('fulfillment_orders'), hashtext($1 || '/' || $2))`, [
    tenantId,
    orderId,
  ]);
}

/** The order id in its canonical form: events written before ids were canonical may carry another spelling. */
function orderIdOf(event: { orderId: string }): string {
  const orderId = canonicalUuid(event.orderId);
  if (!orderId) throw new MalformedMessage('payload.orderId must be a UUID');
  return orderId;
}

function parse(message: InboxMessage): Record<string, unknown> {
  let payload: unknown;
  try {
    payload = JSON.parse(message.value ?? '');
  } catch {
    throw new MalformedMessage('payload is not JSON');
  }
  if (typeof payload !== 'object' || payload === null) throw new MalformedMessage('payload is not a JSON object');
  const tenantId = (payload as { tenantId?: unknown }).tenantId;
  if (tenantId !== message.headers[Headers.tenantId]) {
    throw new MalformedMessage(`payload tenant ${String(tenantId)} does not match the tenant-id header`);
  }
  return payload as Record<string, unknown>;
}

function withFields<T>(payload: Record<string, unknown>, fields: Partial<Record<keyof T, 'string' | 'number'>>): T {
  for (const [field, type] of Object.entries(fields)) {
    const value = payload[field];
    if (typeof value !== type || (type === 'number' && !Number.isInteger(value))) {
      throw new MalformedMessage(`payload.${field} must be ${type === 'number' ? 'an integer' : 'a string'}`);
    }
  }
  return payload as T;
}
