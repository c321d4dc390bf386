import { randomBytes, randomUUID } from 'node:crypto';
import { Producer } from 'kafkajs';
import { Webhook } from 'standardwebhooks';
import { Headers, OrderCancelledV1, OrderEventTypes, OrderPlacedV1, Topics } from '@app/contracts';
import { RunningApp, startApp } from './support/apps';
import { readyForNotifiers, testKafka } from './support/kafka';
import { NotifierDb } from './support/notifier-db';
import { ReceivedWebhook, WebhookReceiver } from './support/webhook-receiver';

/**
 * The notifier's external effect: the consumer records one delivery per order event (OrderPlaced,
 * OrderCancelled) and the dispatcher POSTs it, signed per Standard Webhooks, `webhook-id` = the
 * message-id on every attempt, retried on the schedule, dead with its reason when refused or spent.
 * A real webhook receiver (node:http) in this process, real Kafka, real PostgreSQL (notifier_test),
 * the notifier as its own process.
 */

interface Produced {
  messageId: string;
  partition: number;
  offset: string;
}

interface OrderEvent {
  type: string;
  tenantId: string;
  key: string;
  payload: unknown;
  messageId: string;
}

function orderPlaced(tenantId: string, orderId = randomUUID()): OrderEvent {
  const payload: OrderPlacedV1 = { orderId, tenantId, sku: 'SKU-7', quantity: 3, customerRef: 'c-1', placedAt: new Date().toISOString() };
  return { type: OrderEventTypes.placed, tenantId, key: orderId, payload, messageId: randomUUID() };
}

function orderCancelled(tenantId: string, orderId: string): OrderEvent {
  const payload: OrderCancelledV1 = { orderId, tenantId, reason: 'changed my mind', cancelledAt: new Date().toISOString() };
  return { type: OrderEventTypes.cancelled, tenantId, key: orderId, payload, messageId: randomUUID() };
}

/** Produces as the relay does: key = order id, the relay's headers, the JSON payload; `events` in one request, in order. */
async function produce(producer: Producer, ...events: OrderEvent[]): Promise<Produced> {
  const [meta] = await producer.send({
    topic: Topics.orderEvents,
    acks: -1,
    messages: events.map((event) => ({
      key: event.key,
      value: JSON.stringify(event.payload),
      headers: {
        [Headers.messageId]: event.messageId,
        [Headers.eventType]: event.type,
        [Headers.eventVersion]: '1',
        [Headers.tenantId]: event.tenantId,
        [Headers.aggregateId]: event.key,
        [Headers.occurredAt]: '2026-12-04T10:00:00.000Z',
      },
    })),
  });
  return { messageId: events[0].messageId, partition: meta.partition, offset: meta.baseOffset! };
}

const tenant = () => `t-notifier-${randomUUID().slice(0, 8)}`;
const secret = `whsec_${randomBytes(32).toString('base64')}`;

/** What a receiver does first: the signature over the exact bytes, and the timestamp within tolerance. */
function verified(request: ReceivedWebhook): unknown {
  return new Webhook(secret).verify(request.raw, request.headers as Record<string, string>);
}

describe('the notifier delivers each order event as a signed webhook, once per message-id', () => {
  const kafka = testKafka('notifier-e2e');
  const db = new NotifierDb();
  const receiver = new WebhookReceiver();
  let producer: Producer;
  let app: RunningApp;

  async function metric(name: string, labels: string): Promise<number> {
    const text = await (await fetch(`${app.managementUrl}/metrics`)).text();
    const line = text.split('\n').find((l) => l.startsWith(`${name}{${labels}}`));
    return Number(line?.split(' ')[1] ?? 0);
  }

  beforeAll(async () => {
    producer = await readyForNotifiers(kafka);
    await receiver.start();
    app = await startApp('notifier', {
      WEBHOOK_URL: receiver.url,
      WEBHOOK_SECRET: secret,
      WEBHOOK_TIMEOUT_MS: '1000',
      WEBHOOK_RETRY_SCHEDULE: '100ms,100ms,100ms',
      WEBHOOK_POLL_INTERVAL_MS: '50',
      KAFKA_SESSION_TIMEOUT_MS: '6000',
    });
    // The group has joined and its partitions are assigned once this marker is delivered.
    const marker = await produce(producer, orderPlaced(tenant()));
    await db.until(
      () => db.delivery(marker.messageId),
      (rows) => rows[0]?.state === 'delivered',
      60_000,
    );
  }, 90_000);

  afterAll(async () => {
    const exit = await app?.stop();
    await producer?.disconnect();
    await receiver.stop();
    await db.close();
    // Nest re-raises SIGTERM after its shutdown hooks ran (the consumer left its group).
    expect(exit && (exit.signal === 'SIGTERM' || exit.code === 0)).toBe(true);
  });

  it('the same message-id produced 6 times — back to back, after a delay, concurrently — is POSTed once, signed, and recorded once', async () => {
    const tenantId = tenant();
    const event = orderPlaced(tenantId);
    const duplicatesBefore = await metric('notifier_messages_total', 'outcome="duplicate"');

    await produce(producer, event);
    await produce(producer, event);
    await new Promise((resolve) => setTimeout(resolve, 300));
    await produce(producer, event);
    const others = [1, 2, 3].map(() => kafka.producer());
    await Promise.all(others.map((p) => p.connect()));
    try {
      await Promise.all(others.map((p) => produce(p, event)));
    } finally {
      await Promise.all(others.map((p) => p.disconnect()));
    }

    // Six copies: one applied, five duplicates.
    await db.until(
      () => metric('notifier_messages_total', 'outcome="duplicate"'),
      (n) => n >= duplicatesBefore + 5,
    );
    await db.until(
      () => db.delivery(event.messageId),
      (rows) => rows[0]?.state === 'delivered',
    );
    const requests = receiver.forTenant(tenantId);
    expect(requests).toHaveLength(1);
    const [request] = requests;
    expect(request.method).toBe('POST');
    expect(request.path).toBe('/webhooks/orders');
    expect(request.headers['content-type']).toMatch(/^application\/json/);
    expect(request.headers).toMatchObject({ 'webhook-id': event.messageId, 'idempotency-key': event.messageId });
    expect(Math.abs(Number(request.headers['webhook-timestamp']) - Date.now() / 1000)).toBeLessThan(60);
    expect(verified(request)).toEqual({ type: 'order.placed', timestamp: '2026-12-04T10:00:00.000Z', data: event.payload });

    expect(await db.deliveries(tenantId)).toEqual([
      expect.objectContaining({
        message_id: event.messageId,
        order_id: event.key,
        url: receiver.url,
        state: 'delivered',
        status_code: 200,
        attempts: 1,
      }),
    ]);
    expect(await db.inbox(event.messageId)).toEqual([{ consumer: 'notifier', outcome: 'applied' }]);
  });

  it('503, 503, then 200: retried on the schedule with the same webhook-id, each attempt signed anew, delivered once', async () => {
    const tenantId = tenant();
    const event = orderPlaced(tenantId);
    receiver.script(event.messageId, [503, 503]);
    const failuresBefore = await metric('notifier_webhook_attempts_total', 'result="5xx"');

    await produce(producer, event);

    const [delivery] = await db.until(
      () => db.delivery(event.messageId),
      (rows) => rows[0]?.state === 'delivered',
    );
    expect(delivery).toMatchObject({ tenant_id: tenantId, order_id: event.key, status_code: 200, attempts: 3 });
    const requests = receiver.forTenant(tenantId);
    expect(requests.map((r) => [r.headers['webhook-id'], r.status])).toEqual([
      [event.messageId, 503],
      [event.messageId, 503],
      [event.messageId, 200],
    ]);
    for (const request of requests) expect(() => verified(request)).not.toThrow();
    expect(await metric('notifier_webhook_attempts_total', 'result="5xx"')).toBe(failuresBefore + 2);
  });

  it('a receiver that does not answer in time is retried with the same webhook-id (so it must deduplicate)', async () => {
    const tenantId = tenant();
    const event = orderPlaced(tenantId);
    receiver.script(event.messageId, [{ status: 200, delayMs: 1_500 }]); // past WEBHOOK_TIMEOUT_MS

    await produce(producer, event);

    const [delivery] = await db.until(
      () => db.delivery(event.messageId),
      (rows) => rows[0]?.state === 'delivered',
    );
    expect(delivery).toMatchObject({ status_code: 200, attempts: 2 });
    // The receiver got (and would have applied) both: only its dedupe by webhook-id makes this one effect.
    expect(receiver.forTenant(tenantId).map((r) => r.headers['webhook-id'])).toEqual([event.messageId, event.messageId]);
    expect(await metric('notifier_webhook_attempts_total', 'result="timeout"')).toBeGreaterThanOrEqual(1);
  });

  it("one order's webhooks arrive in the order of its events, even when the first needs retries", async () => {
    const tenantId = tenant();
    const orderId = randomUUID();
    const placed = orderPlaced(tenantId, orderId);
    const cancelled = orderCancelled(tenantId, orderId);
    receiver.script(placed.messageId, [500, 503]);

    await produce(producer, placed);
    await produce(producer, cancelled);

    await db.until(
      () => db.deliveries(tenantId),
      (rows) => rows.length === 2 && rows.every((r) => r.state === 'delivered'),
    );
    const requests = receiver.forTenant(tenantId);
    expect(requests.map((r) => [r.body.type, r.status])).toEqual([
      ['order.placed', 500],
      ['order.placed', 503],
      ['order.placed', 200],
      ['order.cancelled', 200],
    ]);
    expect(verified(requests[3])).toEqual({ type: 'order.cancelled', timestamp: '2026-12-04T10:00:00.000Z', data: cancelled.payload });
    expect(await db.inbox(cancelled.messageId)).toEqual([{ consumer: 'notifier', outcome: 'applied' }]);
  });

  it("one order's events handled in one batch get their webhooks in the order of the events", async () => {
    const tenantId = tenant();
    const orders = Array.from({ length: 5 }, () => randomUUID());
    // Each order's OrderPlaced and OrderCancelled in one request: they reach the notifier in one batch.
    await Promise.all(orders.map((orderId) => produce(producer, orderPlaced(tenantId, orderId), orderCancelled(tenantId, orderId))));

    await db.until(
      () => db.deliveries(tenantId),
      (rows) => rows.length === 2 * orders.length && rows.every((r) => r.state === 'delivered'),
    );
    const requests = receiver.forTenant(tenantId);
    for (const orderId of orders) {
      const types = requests.filter((r) => r.body.data.orderId === orderId).map((r) => r.body.type);
      expect({ orderId, types }).toEqual({ orderId, types: ['order.placed', 'order.cancelled'] });
    }
  });

  it('a 400 is dead at once with the reason; the next webhook of its order goes out after it', async () => {
    const tenantId = tenant();
    const orderId = randomUUID();
    const refused = orderPlaced(tenantId, orderId);
    const behind = orderCancelled(tenantId, orderId);
    receiver.script(refused.messageId, [400]);

    await produce(producer, refused);
    await produce(producer, behind);

    await db.until(
      () => db.deliveries(tenantId),
      (rows) => rows.length === 2 && rows.every((r) => r.state !== 'pending'),
    );
    expect(await db.delivery(refused.messageId)).toEqual([
      expect.objectContaining({ state: 'dead', attempts: 1, status_code: 400, last_error: 'receiver answered 400; not retried' }),
    ]);
    expect(await db.delivery(behind.messageId)).toEqual([expect.objectContaining({ state: 'delivered', attempts: 1 })]);
    expect(receiver.forTenant(tenantId).map((r) => [r.body.type, r.status])).toEqual([
      ['order.placed', 400],
      ['order.cancelled', 200],
    ]);
    // The consumer recorded both and moved on: nothing of it went to the Kafka dead letters.
    expect(await db.inbox(refused.messageId)).toEqual([{ consumer: 'notifier', outcome: 'applied' }]);
  });

  it('a delivery that fails on every attempt is dead once the schedule is spent, with the last error', async () => {
    const tenantId = tenant();
    const event = orderPlaced(tenantId);
    receiver.script(event.messageId, [502, 502, 502, 502, 502]);

    await produce(producer, event);

    const [dead] = await db.until(
      () => db.delivery(event.messageId),
      (rows) => rows[0]?.state === 'dead',
    );
    // The schedule has 3 waits: 4 attempts in all.
    expect(dead).toMatchObject({
      attempts: 4,
      status_code: 502,
      last_error: 'retry schedule spent after 4 attempts; last: receiver answered 502',
    });
    expect(receiver.forTenant(tenantId)).toHaveLength(4);
  });

  it('a delivery recorded for another URL goes to the configured one (the receiver moved while it waited)', async () => {
    const tenantId = tenant();
    const messageId = randomUUID();
    const orderId = randomUUID();
    const body = JSON.stringify({ type: 'order.placed', timestamp: '2026-12-04T10:00:00.000Z', data: { orderId, tenantId } });
    await db.pool.query(
      `INSERT INTO webhook_deliveries (message_id, tenant_id, order_id, event_type, url, payload, state, next_attempt_at)
       VALUES ($1, $2, $3, 'OrderPlaced', 'http://127.0.0.1:1/where-it-used-to-be', $4, 'pending', now())`,
      [messageId, tenantId, orderId, body],
    );

    const [delivered] = await db.until(
      () => db.delivery(messageId),
      (rows) => rows[0]?.state === 'delivered',
    );
    expect(delivered).toMatchObject({ url: receiver.url, attempts: 1, status_code: 200 });
    expect(receiver.forTenant(tenantId).map((r) => [r.headers['webhook-id'], r.raw])).toEqual([[messageId, body]]);
  });

  it('skips events it does not deliver (a newer version): inbox outcome skipped, no call', async () => {
    const tenantId = tenant();
    const event = orderPlaced(tenantId);
    const [meta] = await producer.send({
      topic: Topics.orderEvents,
      acks: -1,
      messages: [
        {
          key: event.key,
          value: JSON.stringify(event.payload),
          headers: {
            [Headers.messageId]: event.messageId,
            [Headers.eventType]: event.type,
            [Headers.eventVersion]: '2',
            [Headers.tenantId]: tenantId,
          },
        },
      ],
    });
    expect(meta.errorCode).toBe(0);

    await db.until(
      () => db.inbox(event.messageId),
      (rows) => rows.length === 1,
    );
    expect(await db.inbox(event.messageId)).toEqual([{ consumer: 'notifier', outcome: 'skipped' }]);
    expect(receiver.forTenant(tenantId)).toEqual([]);
    expect(await db.deliveries(tenantId)).toEqual([]);
  });
});
