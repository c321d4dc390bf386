import { randomUUID } from 'node:crypto';
import { Client } from 'pg';
import { migrate } from '@app/migrations';
import { ShipmentsHandler } from '../apps/fulfillment/src/shipments/fulfillment.handler';
import { recreate } from './support/global-setup';
import { explainPrepared, preparedOnSession } from './support/prepared-plans';
import { testEnv } from './support/test-env';

type Handled = Parameters<ShipmentsHandler['handle']>[1][number];

/** An order event as the consumer kit hands it to the handler (the handler reads the event and its id). */
function handled(type: 'OrderPlaced' | 'OrderCancelled', tenantId: string, orderId: string): Handled {
  const event = type === 'OrderPlaced' ? { tenantId, orderId, sku: 'SKU-1', quantity: 1 } : { tenantId, orderId };
  return { type, messageId: randomUUID(), event } as unknown as Handled;
}

/**
 * Fulfillment's statements are prepared on each session, and PostgreSQL may keep one generic plan per
 * statement, made from the statistics of that moment, until the table is next analyzed. A fulfillment
 * that started on empty tables (a new deployment) has such plans from an empty table, and a table that
 * rarely changes (the cancellation markers) is rarely analyzed. Each handler check against another
 * table was an outer or anti join, which such a plan made a hash join over a sequential scan of that
 * whole table, once per batch: the shipments for a cancel (23 ms at 100,000 shipments), the markers for
 * a placement (10 ms at 100,000 markers). Each check is a probe of the (tenant, order) key, whatever the
 * plan. The sessions here plan at the first run (`plan_cache_mode = force_generic_plan`): the plan
 * PostgreSQL may keep, made on the empty tables.
 */
describe('fulfillment checks planned while its tables were empty', () => {
  const target = new URL(testEnv.fulfillmentUrl);
  target.pathname = target.pathname.replace(/_test$/, '_checkplans_test');
  const url = target.toString();
  const handler = new ShipmentsHandler();

  beforeAll(async () => {
    await recreate(url);
    await migrate('fulfillment', url);
  }, 60_000);

  /**
   * On a fresh session: `type` events handled ten times on empty tables (each batch a transaction, as the
   * inbox runs it), then `pile` filled with 100,000 rows; returns the buffers the session's own prepared
   * statement for `statement` reads under EXPLAIN ANALYZE (rolled back).
   */
  async function buffersAfterPile(
    type: 'OrderPlaced' | 'OrderCancelled',
    pile: string,
    statement: string,
    parameters: (orderId: string) => string,
  ): Promise<number> {
    const client = new Client({ connectionString: url });
    await client.connect();
    try {
      await client.query(/* sql */ `TRUNCATE shipments, cancelled_orders`);
      await client.query(/* sql */ `SET plan_cache_mode = force_generic_plan`);
      for (let batch = 0; batch < 10; batch++) {
        await client.query('BEGIN');
        await handler.handle(client, [handled(type, 't', randomUUID())]);
        await client.query('COMMIT');
      }
      const prepared = await preparedOnSession(client, statement);
      expect(prepared).toEqual([{ name: expect.any(String), genericPlans: 10 }]);
      await client.query(pile);
      return (await explainPrepared(client, prepared[0].name, parameters(randomUUID()))).buffers;
    } finally {
      await client.end();
    }
  }

  it('a cancel checks for the shipment by its key before leaving a marker, once shipments pile up', async () => {
    const buffers = await buffersAfterPile(
      'OrderCancelled',
      /* sql */ `INSERT INTO shipments (id, tenant_id, order_id, sku, quantity, status, message_id)
               SELECT gen_random_uuid(), 't', gen_random_uuid(), 'SKU-1', 1, 'pending', gen_random_uuid() FROM generate_series(1, 100000)`,
      'INSERT INTO cancelled_orders',
      (orderId) => `'{t}', '{${orderId}}', '{${randomUUID()}}'`,
    );
    // One probe of the shipments' (tenant, order) key and the marker's insert: 7 buffers. A scan of every
    // shipment reads all 1,300 pages.
    expect(buffers).toBeLessThan(200);
  });

  it('a cancel finds the shipment it cancels by its key once shipments pile up', async () => {
    const buffers = await buffersAfterPile(
      'OrderCancelled',
      /* sql */ `INSERT INTO shipments (id, tenant_id, order_id, sku, quantity, status, message_id)
               SELECT gen_random_uuid(), 't', gen_random_uuid(), 'SKU-1', 1, 'pending', gen_random_uuid() FROM generate_series(1, 100000)`,
      'UPDATE shipments',
      (orderId) => `'{t}', '{${orderId}}'`,
    );
    // Found by the shipments' (tenant, order) key, updated by its id: a few buffers. A join over a scan of
    // every shipment reads all 1,400 pages.
    expect(buffers).toBeLessThan(200);
  });

  it('a placement looks up the cancellation marker by its key once markers pile up', async () => {
    const buffers = await buffersAfterPile(
      'OrderPlaced',
      /* sql */ `INSERT INTO cancelled_orders (tenant_id, order_id, message_id)
               SELECT 't', gen_random_uuid(), gen_random_uuid() FROM generate_series(1, 100000)`,
      'INSERT INTO shipments',
      (orderId) => `'{${randomUUID()}}', '{t}', '{${orderId}}', '{SKU-1}', '{1}', '{${randomUUID()}}'`,
    );
    // One probe of the markers' key and the shipment's insert: 8 buffers. A scan of every marker
    // reads all 935 pages.
    expect(buffers).toBeLessThan(200);
  });
});
