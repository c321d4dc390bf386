import { randomUUID } from 'node:crypto';
import { EntityManager } from 'typeorm';
import { canonicalUuid, Headers, ORDER_EVENT_VERSION, OrderCancelledV1, OrderEventTypes, OrderPlacedV1 } from '@app/contracts';
import { HandlerOutcome, InboxMessage, MalformedMessage } from '@app/inbox';
import { queryRows } from '@app/platform';

/**
 * OrderPlaced creates a shipment, OrderCancelled cancels it, inside the inbox transaction, a batch at a time.
 * Unknown event types and versions newer than this consumer reads are skipped (forward compatible);
 * a payload it cannot read, or whose tenant disagrees with the `tenant-id` header, is malformed.
 *
 * Decided from what fulfillment knows of the order, never from arrival order: per-key order holds
 * only for events that flow normally, and an OrderPlaced that was dead-lettered and re-driven, or
 * replayed, comes after its OrderCancelled. So a cancel that finds no shipment leaves a marker, and
 * an OrderPlaced that finds the marker records its shipment as cancelled: never a pending shipment
 * for a cancelled order, whatever the order of arrival.
 */
export async function handleOrderEvents(manager: EntityManager, messages: InboxMessage[]): Promise<HandlerOutcome[]> {
  // Read them all first: a malformed message fails the batch before any statement runs.
  const events = messages.map(read);
  // Consecutive events of one type are applied together, and the runs in partition order, so an
  // order's OrderCancelled behind its OrderPlaced in one batch still finds the shipment (and ahead of it, leaves the marker).
  const applicable = events.filter((event): event is OrderEvent => event !== undefined);
  for (let start = 0; start < applicable.length; ) {
    let end = start + 1;
    while (end < applicable.length && applicable[end].type === applicable[start].type) end++;
    const run = applicable.slice(start, end);
    await lockOrders(manager, run);
    if (run[0].type === OrderEventTypes.placed) await placeShipments(manager, run as Placed[]);
    else await cancelShipments(manager, run as Cancelled[]);
    start = end;
  }
  return events.map((event) => (event ? 'applied' : 'skipped'));
}

type Placed = { type: typeof OrderEventTypes.placed; messageId: string; event: OrderPlacedV1 };
type Cancelled = { type: typeof OrderEventTypes.cancelled; messageId: string; event: OrderCancelledV1 };
type OrderEvent = Placed | Cancelled;

/** The event a message carries, or undefined when fulfillment skips it (another type, a newer version). */
function read(message: InboxMessage): OrderEvent | undefined {
  const version = Number(message.headers[Headers.eventVersion] ?? '1');
  const known = message.eventType === OrderEventTypes.placed || message.eventType === OrderEventTypes.cancelled;
  if (!known || version > ORDER_EVENT_VERSION) return undefined;
  const payload = parse(message);
  if (message.eventType === OrderEventTypes.placed) {
    const placed = withFields<OrderPlacedV1>(payload, { orderId: 'string', tenantId: 'string', sku: 'string', quantity: 'number' });
    return { type: OrderEventTypes.placed, messageId: message.messageId!, event: { ...placed, orderId: orderIdOf(placed) } };
  }
  const cancelled = withFields<OrderCancelledV1>(payload, { orderId: 'string', tenantId: 'string' });
  return { type: OrderEventTypes.cancelled, messageId: message.messageId!, event: { ...cancelled, orderId: orderIdOf(cancelled) } };
}

async function placeShipments(manager: EntityManager, run: Placed[]): Promise<void> {
  // The unique (tenant, order) is a second line of defence; the inbox is what makes redelivery a no-op.
  await queryRows(
    manager,
    /* sql */ `
    INSERT INTO shipments (id, tenant_id, order_id, sku, quantity, status, message_id, cancelled_at)
    SELECT p.id, p.tenant_id, p.order_id, p.sku, p.quantity, CASE WHEN c.order_id IS NULL THEN 'pending' ELSE 'cancelled' END,
           p.message_id, c.cancelled_at
    FROM unnest($1::uuid[], $2::text[], $3::uuid[], $4::text[], $5::int[], $6::uuid[]) WITH ORDINALITY
         AS p(id, tenant_id, order_id, sku, quantity, message_id, n)
    LEFT JOIN cancelled_orders c ON c.tenant_id = p.tenant_id AND c.order_id = p.order_id
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

async function cancelShipments(manager: EntityManager, run: Cancelled[]): Promise<void> {
  const tenants = run.map(({ event }) => event.tenantId);
  const orders = run.map(({ event }) => event.orderId);
  await queryRows(
    manager,
    /* sql */ `
    UPDATE shipments s SET status = 'cancelled', cancelled_at = now()
    FROM unnest($1::text[], $2::uuid[]) AS c(tenant_id, order_id)
    WHERE s.tenant_id = c.tenant_id AND s.order_id = c.order_id AND s.status <> 'cancelled'`,
    [tenants, orders],
  );
  // No shipment yet: its OrderPlaced is dead-lettered or late. The marker is what it will find.
  await queryRows(
    manager,
    /* sql */ `
    INSERT INTO cancelled_orders (tenant_id, order_id, message_id)
    SELECT c.tenant_id, c.order_id, c.message_id
    FROM unnest($1::text[], $2::uuid[], $3::uuid[]) WITH ORDINALITY AS c(tenant_id, order_id, message_id, n)
    WHERE NOT EXISTS (SELECT 1 FROM shipments s WHERE s.tenant_id = c.tenant_id AND s.order_id = c.order_id)
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
async function lockOrders(manager: EntityManager, run: OrderEvent[]): Promise<void> {
  const keys = [...new Set(run.map(({ event }) => `${event.tenantId}/${event.orderId}`))].sort();
  await queryRows(
    manager,
    /* sql */ `
    SELECT pg_advisory_xact_lock(hashtext('fulfillment_orders'), hashtext(k))
    FROM (SELECT k FROM unnest($1::text[]) AS k ORDER BY k) AS keys`,
    [keys],
  );
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
