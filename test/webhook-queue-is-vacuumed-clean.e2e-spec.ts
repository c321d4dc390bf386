import { randomUUID } from 'node:crypto';
import { CLAIM_DUE, NO_FLOOR } from '../apps/notifier/src/webhooks/delivery-store';
import { deliveriesOfTheirOwn, deliverAllDue } from './support/deliveries-of-their-own';
import { deadToEverySnapshot } from './support/snapshots';

/**
 * The notifier's deliveries are a queue that keeps its delivered rows (for INBOX_RETENTION_SECONDS, then
 * swept), and the dispatcher claims through an index of pending rows only. A delivered row's entry
 * in that index goes when a vacuum cleans the indexes; until then every claim walks it. PostgreSQL's
 * vacuum skips cleaning the indexes when fewer than 2 % of the table's pages have dead rows ("index
 * scan bypassed"), which a receiver outage's backlog is on a table holding days of deliveries: the walk
 * would stay until enough other rows died. The table asks every vacuum to clean its indexes.
 */
describe('the dispatcher claim after a delivered backlog was vacuumed on a large table', () => {
  const db = deliveriesOfTheirOwn('wqvacuum', async (dataSource) => {
    // Days of deliveries, vacuumed: none of them in the index of pending rows.
    await dataSource.query(/* sql */ `
      INSERT INTO webhook_deliveries (message_id, tenant_id, order_id, url, status_code, attempts, delivered_at, event_type, payload, state, next_attempt_at)
      SELECT gen_random_uuid(), 't', gen_random_uuid(), 'http://127.0.0.1:1/hook', 204, 1, now(), 'OrderPlaced', '{}', 'delivered', now()
      FROM generate_series(1, 200000)`);
    await dataSource.query(/* sql */ `VACUUM ANALYZE webhook_deliveries`);
    // A receiver outage's backlog of 1,000 pending deliveries (0.5 % of the pages), then delivered by the
    // dispatcher's own claim and settle.
    await dataSource.query(/* sql */ `
      INSERT INTO webhook_deliveries (message_id, tenant_id, order_id, url, event_type, payload, state, next_attempt_at)
      SELECT gen_random_uuid(), 't', gen_random_uuid(), 'http://127.0.0.1:1/hook', 'OrderPlaced', '{}', 'pending', now() - interval '1 minute'
      FROM generate_series(1, 1000)`);
    await deadToEverySnapshot(dataSource, async (manager) => expect(await deliverAllDue(manager, 1_000)).toBe(1_000));
  });

  it('leaves the claim nothing to walk once a vacuum ran', async () => {
    // What autovacuum does when it comes.
    const dataSource = db();
    await dataSource.query(/* sql */ `VACUUM webhook_deliveries`);
    const runner = dataSource.createQueryRunner();
    await runner.startTransaction();
    try {
      const [{ 'QUERY PLAN': plan }] = await runner.query(`EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ${CLAIM_DUE}`, [
        randomUUID(),
        60_000,
        100,
        NO_FLOOR, // from the index's beginning, as the dispatcher's looks for its floor read it
      ]);
      // Left in the index, the 1,000 dead entries send the claim to each of their rows' heap pages (45
      // buffers on the code before); cleaned, it reads the index's one page and finds nothing to claim.
      expect(plan[0].Plan['Actual Rows']).toBe(0);
      expect(plan[0].Plan['Shared Hit Blocks'] + plan[0].Plan['Shared Read Blocks']).toBeLessThan(10);
    } finally {
      await runner.rollbackTransaction();
      await runner.release();
    }
  });
});
