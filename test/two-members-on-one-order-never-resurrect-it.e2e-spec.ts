import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import { Client } from 'pg';
import { ShipmentsHandler } from '../apps/fulfillment/src/shipments/fulfillment.handler';
import { searchSettings } from './support/search';
import { testEnv } from './support/test-env';

type Handled = Parameters<ShipmentsHandler['handle']>[1][number];

/** An order event as the consumer kit hands it to the handler (the handler reads the event and its id). */
function handled(type: 'OrderPlaced' | 'OrderCancelled', tenantId: string, orderId: string): Handled {
  const event =
    type === 'OrderPlaced'
      ? { tenantId, orderId, sku: 'SKU-1', quantity: 1 }
      : { tenantId, orderId, reason: 'changed', cancelledAt: new Date().toISOString() };
  return { type, messageId: randomUUID(), event } as unknown as Handled;
}

/**
 * An order's events are on one partition, and one member of the group applies them in order. During a
 * rebalance, though, two members may briefly both apply a partition (one of them a zombie that has not
 * noticed it lost it), and an OrderPlaced and its OrderCancelled can be in two open transactions at
 * once. Neither sees the other's uncommitted row: the cancel finds no shipment and leaves a marker,
 * the placement finds no marker and ships, and the order would end up cancelled with a pending
 * shipment. Searched: which member starts first, how many orders the two batches share, and when the
 * first commits; each member's batch runs in a transaction of its own, on real sessions, with the
 * handler fulfillment runs. Every order must end with its shipment cancelled.
 */
describe('two members applying one order at once never leave it shipped after its cancel', () => {
  const handler = new ShipmentsHandler();
  const members = [new Client({ connectionString: testEnv.fulfillmentUrl }), new Client({ connectionString: testEnv.fulfillmentUrl })];
  const tenants: string[] = [];

  beforeAll(() => Promise.all(members.map((member) => member.connect())));
  afterAll(async () => {
    await members[0].query(`DELETE FROM shipments WHERE tenant_id = ANY($1)`, [tenants]);
    await members[0].query(`DELETE FROM cancelled_orders WHERE tenant_id = ANY($1)`, [tenants]);
    await Promise.all(members.map((member) => member.end()));
  });

  it('an OrderPlaced and its OrderCancelled in two open transactions: the shipment ends cancelled', async () => {
    const plans = fc.record({
      orders: fc.integer({ min: 1, max: 6 }),
      placementFirst: fc.boolean(),
      commitAfterMs: fc.integer({ min: 0, max: 30 }),
    });
    await fc.assert(
      fc.asyncProperty(plans, async ({ orders, placementFirst, commitAfterMs }) => {
        const tenantId = `t-members-${randomUUID().slice(0, 8)}`;
        tenants.push(tenantId);
        const ids = Array.from({ length: orders }, () => randomUUID());
        const placements = ids.map((id) => handled('OrderPlaced', tenantId, id));
        const cancels = ids.map((id) => handled('OrderCancelled', tenantId, id));
        const [first, second] = placementFirst ? [placements, cancels] : [cancels, placements];
        const [one, other] = members;

        try {
          await one.query('BEGIN');
          await handler.handle(one, first);
          await other.query('BEGIN');
          // The other member's batch meets the first's uncommitted rows: it must wait for them, not pass them by.
          const secondApplied = handler.handle(other, second);
          await new Promise((resolve) => setTimeout(resolve, commitAfterMs));
          await one.query('COMMIT');
          await secondApplied;
          await other.query('COMMIT');
        } catch (error) {
          await Promise.all(members.map((member) => member.query('ROLLBACK')));
          throw error;
        }

        const { rows } = await one.query<{ order_id: string; status: string }>(
          `SELECT order_id, status FROM shipments WHERE tenant_id = $1 ORDER BY order_id`,
          [tenantId],
        );
        expect(rows).toEqual([...ids].sort().map((order_id) => ({ order_id, status: 'cancelled' })));
      }),
      searchSettings({ fast: 20, long: 200 }),
    );
  });
});
