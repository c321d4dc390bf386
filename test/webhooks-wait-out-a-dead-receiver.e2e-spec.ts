import { randomBytes, randomUUID } from 'node:crypto';
import { Producer } from 'kafkajs';
import { Webhook } from 'standardwebhooks';
import { OrderEventTypes } from '@app/contracts';
import { RunningApp, startApp } from './support/apps';
import { produceOrderEvent, readyForNotifiers, testKafka } from './support/kafka';
import { NotifierDb } from './support/notifier-db';
import { LONG_RUN } from './support/search';
import { WebhookReceiver } from './support/webhook-receiver';
import { mulberry32 } from './workload/driver';

/**
 * A receiver that answers 503 to everything for a while (12 s here, a minute under `npm run
 * test:faults`) while orders keep coming. It must delay only its own deliveries: the notifier keeps
 * consuming (every event recorded within seconds, offsets committed: no lag piles up on Kafka), and
 * once the receiver is back every webhook arrives, exactly one 2xx per webhook-id, each order's
 * webhooks in the order of its events, each one signed. Two notifier instances share the work (the
 * topic's partitions and the delivery table), as a scaled-out deployment does.
 */
const OUTAGE_MS = LONG_RUN ? 60_000 : 12_000;
const ORDERS = LONG_RUN ? 1_000 : 200;

describe('a receiver that is down for a while delays only its own deliveries', () => {
  const kafka = testKafka('webhook-outage');
  const db = new NotifierDb();
  const receiver = new WebhookReceiver();
  const secret = `whsec_${randomBytes(32).toString('base64')}`;
  const seed = Number(process.env.SEED ?? Date.now() % 1_000_000);
  let producer: Producer;
  let apps: RunningApp[] = [];

  beforeAll(async () => {
    producer = await readyForNotifiers(kafka);
    await receiver.start();
    const env = {
      WEBHOOK_URL: receiver.url,
      WEBHOOK_SECRET: secret,
      WEBHOOK_TIMEOUT_MS: '1000',
      // Waits that outlast the outage: up to ~2.5 minutes of retries before a delivery would be dead.
      WEBHOOK_RETRY_SCHEDULE: '1s,2s,4s,8s,8s,8s,8s,8s,8s,8s,8s,8s,8s,8s,8s,8s,8s,8s,8s,8s',
      KAFKA_SESSION_TIMEOUT_MS: '6000',
    };
    apps = await Promise.all([startApp('notifier', env), startApp('notifier', env)]);
  }, 90_000);

  afterAll(async () => {
    await Promise.all(apps.map((app) => app.stop()));
    await producer?.disconnect();
    await receiver.stop();
    await db.close();
  });

  it(`${ORDERS} orders during a ${OUTAGE_MS / 1000} s outage: recorded at once, all delivered after it, once each, in order`, async () => {
    const random = mulberry32(seed);
    const tenantId = `t-outage-${randomUUID().slice(0, 8)}`;
    receiver.failFor(OUTAGE_MS, 503);
    const outageEnds = Date.now() + OUTAGE_MS;

    // Orders arrive over the first half of the outage; about a third are cancelled a moment later.
    const events: { messageId: string; orderId: string; type: string }[] = [];
    const spreadMs = OUTAGE_MS / 2;
    for (let i = 0; i < ORDERS; i++) {
      const orderId = randomUUID();
      const placedAt = new Date().toISOString();
      const placed = await produceOrderEvent(producer, {
        type: OrderEventTypes.placed,
        tenantId,
        key: orderId,
        payload: { orderId, tenantId, sku: `SKU-${i}`, quantity: 1 + (i % 5), customerRef: null, placedAt },
      });
      events.push({ messageId: placed, orderId, type: 'order.placed' });
      if (random() < 0.33) {
        const cancelled = await produceOrderEvent(producer, {
          type: OrderEventTypes.cancelled,
          tenantId,
          key: orderId,
          payload: { orderId, tenantId, reason: 'changed my mind', cancelledAt: new Date().toISOString() },
        });
        events.push({ messageId: cancelled, orderId, type: 'order.cancelled' });
      }
      await new Promise((resolve) => setTimeout(resolve, (spreadMs / ORDERS) * random() * 2));
    }
    const lastProduced = Date.now();

    // The consumer keeps up while the receiver is down: every event is recorded (its offsets committed after) within seconds.
    await db.until(
      () => db.deliveries(tenantId),
      (rows) => rows.length === events.length,
      30_000,
    );
    const recordedAfterMs = Date.now() - lastProduced;
    expect(Date.now()).toBeLessThan(outageEnds);
    expect(recordedAfterMs).toBeLessThan(10_000);
    const inbox = await db.pool.query(
      `SELECT count(*)::int AS n FROM inbox_messages WHERE consumer = 'notifier' AND message_id = ANY($1::uuid[]) AND outcome = 'applied'`,
      [events.map((e) => e.messageId)],
    );
    expect(inbox.rows[0].n).toBe(events.length);
    const during = receiver.forTenant(tenantId);
    expect(during.length).toBeGreaterThan(0); // it was tried
    expect(during.every((r) => r.status === 503)).toBe(true);

    // Once it is back, everything arrives.
    const rows = await db.until(
      () => db.deliveries(tenantId),
      (all) => all.every((r) => r.state === 'delivered'),
      OUTAGE_MS + 120_000,
    );
    expect(rows).toHaveLength(events.length);

    const requests = receiver.forTenant(tenantId);
    const accepted = new Map<string, number>();
    for (const request of requests) {
      expect(() => new Webhook(secret).verify(request.raw, request.headers as Record<string, string>)).not.toThrow();
      if (request.status < 300) accepted.set(request.idempotencyKey!, (accepted.get(request.idempotencyKey!) ?? 0) + 1);
    }
    // Exactly one 2xx per webhook-id, for every event; none before the outage ended.
    expect(events.filter((e) => accepted.get(e.messageId) !== 1)).toEqual([]);
    expect(accepted.size).toBe(events.length);
    expect(requests.filter((r) => r.status < 300 && r.at < outageEnds)).toEqual([]);

    // Per order: nothing of the cancellation reached the receiver before its placement was accepted.
    const placedAcceptedAt = new Map<string, number>();
    const outOfOrder: string[] = [];
    for (const request of requests) {
      const { type, data } = request.body;
      if (type === 'order.placed' && request.status < 300) placedAcceptedAt.set(data.orderId, request.at);
      if (type === 'order.cancelled' && !placedAcceptedAt.has(data.orderId)) outOfOrder.push(data.orderId);
    }
    expect(outOfOrder).toEqual([]);
    console.log(
      `webhook outage (seed ${seed}): ${events.length} events recorded ${recordedAfterMs} ms after the last was produced; ` +
        `${requests.length} POSTs, all delivered ${((Math.max(...requests.map((r) => r.at)) - outageEnds) / 1000).toFixed(1)} s after the receiver came back`,
    );
  }, 300_000);
});
