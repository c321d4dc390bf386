import { randomUUID } from 'node:crypto';
import { EntityManager } from 'typeorm';
import { Headers, ORDER_EVENT_VERSION, OrderCancelledV1, OrderEventTypes, OrderPlacedV1 } from '@app/contracts';
import { HandlerOutcome, InboxMessage, MalformedMessage } from '@app/inbox';
import { queryRows } from '@app/platform';

/**
 * OrderPlaced creates a shipment, OrderCancelled cancels it, inside the inbox transaction.
 * Unknown event types and versions newer than this consumer reads are skipped (forward compatible);
 * a payload it cannot read, or whose tenant disagrees with the `tenant-id` header, is malformed.
 */
export async function handleOrderEvent(manager: EntityManager, message: InboxMessage): Promise<HandlerOutcome> {
  const version = Number(message.headers[Headers.eventVersion] ?? '1');
  const known = message.eventType === OrderEventTypes.placed || message.eventType === OrderEventTypes.cancelled;
  if (!known || version > ORDER_EVENT_VERSION) return 'skipped';

  const payload = parse(message);
  if (message.eventType === OrderEventTypes.placed) {
    const placed = withFields<OrderPlacedV1>(payload, { orderId: 'string', tenantId: 'string', sku: 'string', quantity: 'number' });
    // The unique (tenant, order) is a second line of defence; the inbox is what makes redelivery a no-op.
    await queryRows(
      manager,
      /* sql */ `
      INSERT INTO shipments (id, tenant_id, order_id, sku, quantity, status, message_id)
      VALUES ($1, $2, $3, $4, $5, 'pending', $6)
      ON CONFLICT (tenant_id, order_id) DO NOTHING`,
      [randomUUID(), placed.tenantId, placed.orderId, placed.sku, placed.quantity, message.messageId],
    );
  } else {
    const cancelled = withFields<OrderCancelledV1>(payload, { orderId: 'string', tenantId: 'string' });
    await queryRows(
      manager,
      /* sql */ `
      UPDATE shipments SET status = 'cancelled', cancelled_at = now()
      WHERE tenant_id = $1 AND order_id = $2 AND status <> 'cancelled'`,
      [cancelled.tenantId, cancelled.orderId],
    );
  }
  return 'applied';
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
