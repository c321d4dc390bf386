import { Topics } from '@app/contracts';
import { RunningApp, startApp } from './support/apps';
import { ApiClientSession, commandApiFixture } from './support/command-api';
import { FulfillmentDb } from './support/fulfillment-db';
import { ensureServiceTopics, skipConsumerBacklog, testKafka } from './support/kafka';
import { NotifierDb } from './support/notifier-db';
import { WebhookReceiver } from './support/webhook-receiver';

/** The whole chain: command API -> outbox row -> relay -> Kafka -> fulfillment's shipment and the notifier's webhook. */
describe('an order placed over HTTP', () => {
  const suite = commandApiFixture();
  const fulfillment = new FulfillmentDb();
  const notifier = new NotifierDb();
  const receiver = new WebhookReceiver();
  const apps: RunningApp[] = [];

  beforeAll(async () => {
    // Start both consumer groups at the shared topic's end, past what earlier suites published.
    const kafka = testKafka('e2e-chain');
    await ensureServiceTopics(kafka);
    await skipConsumerBacklog(kafka, ['fulfillment', 'notifier'], Topics.orderEvents);
    await receiver.start();
    // The receiver fails every first delivery: the retry must carry the same Idempotency-Key.
    receiver.scriptEveryNewKey([503]);
    apps.push(await startApp('outbox-relay', { RELAY_POLL_INTERVAL_MS: '200' }));
    apps.push(await startApp('fulfillment', { KAFKA_SESSION_TIMEOUT_MS: '6000' }));
    apps.push(
      await startApp('notifier', {
        KAFKA_SESSION_TIMEOUT_MS: '6000',
        WEBHOOK_URL: receiver.url,
        WEBHOOK_RETRY_SCHEDULE: '200ms,1s',
        NOTIFIER_RETRY_MIN_MS: '50',
        NOTIFIER_RETRY_MAX_MS: '200',
      }),
    );
  });
  afterAll(async () => {
    await Promise.all(apps.map((app) => app.stop()));
    await receiver.stop();
    await fulfillment.close();
    await notifier.close();
  });

  it('becomes a shipment within seconds, recorded with the outbox row id as its message-id; a cancel follows it', async () => {
    const { tenantId, apiKey } = await suite.db.tenant();
    const client = new ApiClientSession(suite.api.url, apiKey);
    const order = (await client.createOrder('e2e-1', { sku: 'SKU-7', quantity: 3 })).body;

    const [shipment] = await fulfillment.until(
      () => fulfillment.shipments(tenantId),
      (rows) => rows.length === 1,
      90_000,
    );
    const { rows } = await suite.db.pool.query(
      `SELECT id FROM outbox_messages WHERE tenant_id = $1 AND message_key = $2 AND event_type = 'OrderPlaced'`,
      [tenantId, order.id],
    );
    expect(shipment).toEqual({ order_id: order.id, status: 'pending', message_id: rows[0].id, quantity: 3 });
    expect(await fulfillment.inbox(rows[0].id)).toEqual([{ consumer: 'fulfillment', outcome: 'applied' }]);

    const delivered = await notifier.until(
      () => notifier.delivery(rows[0].id),
      (found) => found[0]?.state === 'delivered',
      90_000,
    );
    expect(delivered).toHaveLength(1);
    const webhooks = receiver.forTenant(tenantId);
    expect(webhooks.map((w) => [w.status, w.idempotencyKey])).toEqual([
      [503, rows[0].id],
      [200, rows[0].id],
    ]);
    expect(webhooks[1].headers['webhook-id']).toBe(rows[0].id);
    expect(webhooks[1].body).toMatchObject({ type: 'order.placed', data: { orderId: order.id, tenantId } });

    // A retried command replays; no second event, so still one shipment.
    expect((await client.createOrder('e2e-1', { sku: 'SKU-7', quantity: 3 })).headers['idempotent-replayed']).toBe('true');
    await client.cancelOrder(order.id, 'e2e-cancel', { reason: 'changed' });
    const cancelled = await fulfillment.until(
      () => fulfillment.shipments(tenantId),
      (rows) => rows[0]?.status === 'cancelled',
      30_000,
    );
    expect(cancelled).toHaveLength(1);
  }, 240_000); // the sum of the waits above, not a target
});
