import { RunningApp, startApp } from './support/apps';
import { ApiClientSession, commandApiFixture } from './support/command-api';
import { FulfillmentDb } from './support/fulfillment-db';

/** The whole chain: command API -> outbox row -> relay -> Kafka -> fulfillment's inbox and shipment. */
describe('an order placed over HTTP', () => {
  const suite = commandApiFixture();
  const fulfillment = new FulfillmentDb();
  const apps: RunningApp[] = [];

  beforeAll(async () => {
    apps.push(await startApp('outbox-relay', { RELAY_POLL_INTERVAL_MS: '200' }));
    apps.push(await startApp('fulfillment', { KAFKA_SESSION_TIMEOUT_MS: '6000' }));
  });
  afterAll(async () => {
    await Promise.all(apps.map((app) => app.stop()));
    await fulfillment.close();
  });

  it('becomes a shipment within seconds, recorded with the outbox row id as its message-id; a cancel follows it', async () => {
    const { tenantId, apiKey } = await suite.db.tenant();
    const client = new ApiClientSession(suite.api.url, apiKey);
    const order = (await client.createOrder('e2e-1', { sku: 'SKU-7', quantity: 3 })).body;

    const [shipment] = await fulfillment.until(() => fulfillment.shipments(tenantId), (rows) => rows.length === 1, 90_000);
    const { rows } = await suite.db.pool.query(
      `SELECT id FROM outbox_messages WHERE tenant_id = $1 AND message_key = $2 AND event_type = 'OrderPlaced'`,
      [tenantId, order.id],
    );
    expect(shipment).toEqual({ order_id: order.id, status: 'pending', message_id: rows[0].id, quantity: 3 });
    expect(await fulfillment.inbox(rows[0].id)).toEqual([{ consumer: 'fulfillment', outcome: 'applied' }]);

    // A retried command replays; no second event, so still one shipment.
    expect((await client.createOrder('e2e-1', { sku: 'SKU-7', quantity: 3 })).headers['idempotent-replayed']).toBe('true');
    await client.cancelOrder(order.id, 'e2e-cancel', { reason: 'changed' });
    const cancelled = await fulfillment.until(() => fulfillment.shipments(tenantId), (rows) => rows[0]?.status === 'cancelled', 30_000);
    expect(cancelled).toHaveLength(1);
  });
});
