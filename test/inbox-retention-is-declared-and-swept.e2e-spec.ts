import { randomUUID } from 'node:crypto';
import { startApp } from './support/apps';
import { FulfillmentDb } from './support/fulfillment-db';
import { NotifierDb } from './support/notifier-db';

describe('inbox retention', () => {
  const db = new FulfillmentDb();
  const notifier = new NotifierDb();
  afterAll(() => Promise.all([db.close(), notifier.close()]));

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

  /**
   * The notifier's delivery record is its second line of dedupe (one row per message-id) and what the
   * audit checks events against: a delivered webhook is kept as long as its inbox row, and a webhook
   * still to deliver, or given up and waiting for an operator, is never swept, however old.
   */
  it('the notifier forgets delivered webhooks past it with its message-ids, and never one it has yet to deliver or gave up', async () => {
    const tenantId = `t-sweep-${randomUUID().slice(0, 8)}`;
    const rows = { oldDelivered: randomUUID(), recentDelivered: randomUUID(), oldPending: randomUUID(), oldDead: randomUUID() };
    for (const [id, state, age] of [
      [rows.oldDelivered, 'delivered', '2 hours'],
      [rows.recentDelivered, 'delivered', '50 minutes'],
      [rows.oldPending, 'pending', '2 hours'],
      [rows.oldDead, 'dead', '2 hours'],
    ] as const) {
      await notifier.pool.query(
        `INSERT INTO webhook_deliveries (message_id, tenant_id, order_id, event_type, url, payload, state, attempts, status_code,
                                         created_at, next_attempt_at, delivered_at, dead_at)
         VALUES ($1, $2, gen_random_uuid(), 'OrderPlaced', 'http://127.0.0.1:9/hooks', '{}', $3::text,
                 CASE WHEN $3::text = 'pending' THEN 0 ELSE 1 END, CASE WHEN $3::text = 'delivered' THEN 200 END, now() - $4::interval,
                 CASE WHEN $3::text = 'pending' THEN now() + interval '1 day' END,
                 CASE WHEN $3::text = 'delivered' THEN now() - $4::interval END, CASE WHEN $3::text = 'dead' THEN now() - $4::interval END)`,
        [id, tenantId, state, age],
      );
      await notifier.pool.query(
        `INSERT INTO inbox_messages (consumer, message_id, topic, kafka_partition, kafka_offset, outcome, received_at)
         VALUES ('notifier', $1, 'orders.order-events.v1', 0, 0, 'applied', now() - $2::interval)`,
        [id, age],
      );
    }
    const left = async () =>
      (
        await notifier.pool.query<{ message_id: string; state: string }>(
          `SELECT message_id, state FROM webhook_deliveries WHERE tenant_id = $1 ORDER BY message_id`,
          [tenantId],
        )
      ).rows;

    const app = await startApp('notifier', {
      INBOX_RETENTION_SECONDS: '3600',
      INBOX_SWEEP_INTERVAL_SECONDS: '1',
      WEBHOOK_URL: 'http://127.0.0.1:9/hooks',
    });
    try {
      await notifier.until(left, (deliveries) => deliveries.length < 4, 15_000);
      await notifier.until(
        () => notifier.inbox(rows.oldDelivered),
        (inbox) => inbox.length === 0,
        15_000,
      );
      expect(await left()).toEqual(
        [
          { message_id: rows.recentDelivered, state: 'delivered' },
          { message_id: rows.oldPending, state: 'pending' },
          { message_id: rows.oldDead, state: 'dead' },
        ].sort((a, b) => a.message_id.localeCompare(b.message_id)),
      );
      expect(await notifier.inbox(rows.recentDelivered)).toEqual([{ consumer: 'notifier', outcome: 'applied' }]);
    } finally {
      await app.stop();
      await notifier.pool.query(`DELETE FROM webhook_deliveries WHERE tenant_id = $1`, [tenantId]);
      await notifier.pool.query(`DELETE FROM inbox_messages WHERE message_id = ANY($1::uuid[])`, [Object.values(rows)]);
    }
  });
});
