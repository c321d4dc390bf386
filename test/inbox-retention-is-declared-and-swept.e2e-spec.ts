import { randomUUID } from 'node:crypto';
import { startApp } from './support/apps';
import { FulfillmentDb } from './support/fulfillment-db';

describe('inbox retention', () => {
  const db = new FulfillmentDb();
  afterAll(() => db.close());

  it('is published for the ops replay, and message-ids older than it are forgotten in batches', async () => {
    const old = [randomUUID(), randomUUID(), randomUUID()];
    const recent = randomUUID();
    for (const [id, age] of [...old.map((id) => [id, '2 hours'] as const), [recent, '1 minute'] as const]) {
      await db.pool.query(
        `INSERT INTO inbox_messages (consumer, message_id, topic, kafka_partition, kafka_offset, outcome, received_at)
         VALUES ('fulfillment', $1, 'orders.order-events.v1', 0, 0, 'applied', now() - $2::interval)`,
        [id, age],
      );
    }

    const app = await startApp('fulfillment', { INBOX_RETENTION_SECONDS: '3600', INBOX_SWEEP_INTERVAL_SECONDS: '1' });
    try {
      await db.until(
        () => db.inbox(old[0]),
        (rows) => rows.length === 0,
        15_000,
      );
      for (const id of old) expect(await db.inbox(id)).toEqual([]);
      expect(await db.inbox(recent)).toEqual([{ consumer: 'fulfillment', outcome: 'applied' }]);
      const { rows } = await db.pool.query(`SELECT retention_seconds FROM inbox_consumers WHERE consumer = 'fulfillment'`);
      expect(rows).toEqual([{ retention_seconds: 3600 }]);
    } finally {
      await app.stop();
    }
  });
});
