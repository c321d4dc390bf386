import { randomUUID } from 'node:crypto';
import { Client } from 'pg';
import { migrate } from '@app/migrations';
import { ShipmentsHandler } from '../apps/fulfillment/src/shipments/fulfillment.handler';
import { recreate } from './support/global-setup';
import { testEnv } from './support/test-env';

type Handled = Parameters<ShipmentsHandler['handle']>[1];

/** An OrderCancelled as the consumer kit hands it to the handler (the handler reads the event and its id). */
function cancelled(tenantId: string, orderId: string): Handled[number] {
  return { type: 'OrderCancelled', messageId: randomUUID(), event: { tenantId, orderId } } as unknown as Handled[number];
}

/**
 * Fulfillment's statements are prepared on each session, and after five runs PostgreSQL may keep one
 * generic plan, made from the statistics of that moment, until the table is next analyzed. A
 * fulfillment that started on empty tables (a new deployment) has such plans from an empty table.
 * The marker a cancel leaves when it finds no shipment was decided by an anti-join against shipments,
 * which such a plan made a hash join over a sequential scan of every shipment, once per batch of
 * cancels: 23 ms per cancel at 100,000 shipments, growing with the table until autovacuum's analyze.
 * The check is a probe of the (tenant, order) key, whatever the plan.
 */
describe('a cancel planned while fulfillment had no shipments', () => {
  const target = new URL(testEnv.fulfillmentUrl);
  target.pathname = target.pathname.replace(/_test$/, '_cancelplan_test');
  const url = target.toString();
  const client = new Client({ connectionString: url });

  beforeAll(async () => {
    await recreate(url);
    await migrate('fulfillment', url);
    await client.connect();
  }, 60_000);
  afterAll(() => client.end());

  it('looks up the shipment by its key once shipments pile up', async () => {
    const handler = new ShipmentsHandler();
    // The plan PostgreSQL may keep: one generic plan, made at the first run, here on the empty table. (Its own
    // rule decides after five runs whether to keep one; with this statement it now keeps planning per run.)
    await client.query(/* sql */ `SET plan_cache_mode = force_generic_plan`);
    // Cancels of orders it has no shipment for, each in a transaction of its own as the inbox runs them.
    for (let batch = 0; batch < 10; batch++) {
      await client.query('BEGIN');
      await handler.handle(client, [cancelled('t', randomUUID())]);
      await client.query('COMMIT');
    }
    const { rows: prepared } = await client.query<{ name: string; generic_plans: number }>(/* sql */ `
      SELECT name, generic_plans::int FROM pg_prepared_statements WHERE statement LIKE '%INSERT INTO cancelled_orders%'`);
    expect(prepared).toHaveLength(1);
    expect(prepared[0].generic_plans).toBe(10);

    await client.query(/* sql */ `
      INSERT INTO shipments (id, tenant_id, order_id, sku, quantity, status, message_id)
      SELECT gen_random_uuid(), 't', gen_random_uuid(), 'SKU-1', 1, 'pending', gen_random_uuid() FROM generate_series(1, 100000)`);
    await client.query('BEGIN');
    try {
      const { rows } = await client.query<{ 'QUERY PLAN': any[] }>(
        `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) EXECUTE ${prepared[0].name}('{t}', '{${randomUUID()}}', '{${randomUUID()}}')`,
      );
      const root = rows[0]['QUERY PLAN'][0].Plan;
      // One probe of the shipments' (tenant, order) key and the marker's insert: 7 buffers.
      // A scan of every shipment reads all 1,300 pages.
      expect(root['Shared Hit Blocks'] + root['Shared Read Blocks']).toBeLessThan(200);
    } finally {
      await client.query('ROLLBACK');
    }
  });
});
