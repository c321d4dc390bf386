import { randomUUID } from 'node:crypto';
import { Producer } from 'kafkajs';
import { DeadLetterHeaders, Headers, OrderCancelledV1, OrderEventTypes, OrderPlacedV1, Topics } from '@app/contracts';
import { RunningApp, startApp } from './support/apps';
import { ensureServiceTopics, skipConsumerBacklog, testKafka } from './support/kafka';
import { NotifierDb } from './support/notifier-db';
import { TopicReader } from './support/topic-reader';
import { WebhookReceiver } from './support/webhook-receiver';

/**
 * The notifier's external effect: one webhook POST per OrderPlaced, keyed by the message-id, with
 * the delivery recorded once. A real webhook receiver (node:http) in this process, real Kafka,
 * real PostgreSQL (notifier_test), the notifier as its own process.
 */

interface Produced {
  messageId: string;
  partition: number;
  offset: string;
}

function orderPlaced(tenantId: string, orderId = randomUUID()) {
  const payload: OrderPlacedV1 = { orderId, tenantId, sku: 'SKU-7', quantity: 3, customerRef: 'c-1', placedAt: new Date().toISOString() };
  return { type: OrderEventTypes.placed as string, tenantId, key: orderId, payload: payload as unknown, messageId: randomUUID() };
}
type OrderEvent = ReturnType<typeof orderPlaced>;

/** Produces as the relay does: key = order id, the relay's headers, the JSON payload. */
async function produce(producer: Producer, event: OrderEvent): Promise<Produced> {
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
          [Headers.eventVersion]: '1',
          [Headers.tenantId]: event.tenantId,
          [Headers.aggregateId]: event.key,
          [Headers.occurredAt]: new Date().toISOString(),
        },
      },
    ],
  });
  return { messageId: event.messageId, partition: meta.partition, offset: meta.baseOffset! };
}

const tenant = () => `t-notifier-${randomUUID().slice(0, 8)}`;

describe('the notifier delivers each OrderPlaced webhook once per message-id', () => {
  const kafka = testKafka('notifier-e2e');
  const db = new NotifierDb();
  const receiver = new WebhookReceiver();
  let producer: Producer;
  let app: RunningApp;

  async function metric(name: string, labels: string): Promise<number> {
    const text = await (await fetch(`${app.url}/metrics`)).text();
    const line = text.split('\n').find((l) => l.startsWith(`${name}{${labels}}`));
    return Number(line?.split(' ')[1] ?? 0);
  }

  beforeAll(async () => {
    // The relay creates the topics at its start; without a relay here, create them as it would.
    await ensureServiceTopics(kafka);
    // What other suites left on the shared topic is not this suite's business: start at its end.
    await skipConsumerBacklog(kafka, ['notifier'], Topics.orderEvents);
    await receiver.start();
    producer = kafka.producer({ idempotent: true });
    await producer.connect();
    app = await startApp('notifier', {
      WEBHOOK_URL: receiver.url,
      WEBHOOK_TIMEOUT_MS: '1000',
      NOTIFIER_MAX_ATTEMPTS: '5',
      NOTIFIER_RETRY_MIN_MS: '50',
      NOTIFIER_RETRY_MAX_MS: '200',
      KAFKA_SESSION_TIMEOUT_MS: '6000',
    });
    // The group has joined and its partitions are assigned once this marker is delivered.
    const marker = await produce(producer, orderPlaced(tenant()));
    await db.until(() => db.delivery(marker.messageId), (rows) => rows.length === 1, 60_000);
  }, 90_000);

  afterAll(async () => {
    const exit = await app?.stop();
    await producer?.disconnect();
    await receiver.stop();
    await db.close();
    // Nest re-raises SIGTERM after its shutdown hooks ran (the consumer left its group).
    expect(exit && (exit.signal === 'SIGTERM' || exit.code === 0)).toBe(true);
  });

  it('the same message-id produced 3 times — back to back, after a delay, concurrently — is POSTed once and recorded once', async () => {
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
    await db.until(() => metric('notifier_messages_total', 'outcome="duplicate"'), (n) => n >= duplicatesBefore + 5);
    const requests = receiver.forTenant(tenantId);
    expect(requests).toHaveLength(1);
    expect(requests.every((r) => r.idempotencyKey === event.messageId)).toBe(true);
    const [request] = requests;
    expect(request.method).toBe('POST');
    expect(request.path).toBe('/webhooks/orders');
    expect(request.headers['content-type']).toMatch(/^application\/json/);
    expect(request.body).toEqual({ ...(event.payload as object), eventType: 'OrderPlaced', messageId: event.messageId });

    expect(await db.deliveries(tenantId)).toEqual([
      { message_id: event.messageId, tenant_id: tenantId, order_id: event.key, url: receiver.url, status_code: 200, attempts: 1 },
    ]);
    expect(await db.inbox(event.messageId)).toEqual([{ consumer: 'notifier', outcome: 'applied' }]);
  });

  it('503, 503, then 200: retried with the same Idempotency-Key, recorded once after the 2xx', async () => {
    const tenantId = tenant();
    const event = orderPlaced(tenantId);
    receiver.script(event.messageId, [503, 503]);
    const failuresBefore = await metric('notifier_webhook_attempts_total', 'result="5xx"');

    await produce(producer, event);

    const [delivery] = await db.until(() => db.delivery(event.messageId), (rows) => rows.length === 1);
    expect(delivery).toMatchObject({ tenant_id: tenantId, order_id: event.key, status_code: 200, attempts: 3 });
    const requests = receiver.forTenant(tenantId);
    expect(requests.map((r) => [r.idempotencyKey, r.status])).toEqual([
      [event.messageId, 503],
      [event.messageId, 503],
      [event.messageId, 200],
    ]);
    expect(await metric('notifier_webhook_attempts_total', 'result="5xx"')).toBe(failuresBefore + 2);
    expect(await db.inbox(event.messageId)).toEqual([{ consumer: 'notifier', outcome: 'applied' }]);
  });

  it('a receiver that does not answer in time is retried with the same key (so it must deduplicate)', async () => {
    const tenantId = tenant();
    const event = orderPlaced(tenantId);
    receiver.script(event.messageId, [{ status: 200, delayMs: 1_500 }]); // past WEBHOOK_TIMEOUT_MS

    await produce(producer, event);

    const [delivery] = await db.until(() => db.delivery(event.messageId), (rows) => rows.length === 1);
    expect(delivery).toMatchObject({ status_code: 200, attempts: 2 });
    // The receiver got (and would have applied) both: only its dedupe by Idempotency-Key makes this one effect.
    expect(receiver.forTenant(tenantId).map((r) => r.idempotencyKey)).toEqual([event.messageId, event.messageId]);
    expect(await metric('notifier_webhook_attempts_total', 'result="timeout"')).toBeGreaterThanOrEqual(1);
  });

  it('a 400 is dead-lettered at once with its coordinates, and the partition moves on', async () => {
    const tenantId = tenant();
    const orderId = randomUUID();
    const refused = orderPlaced(tenantId, orderId);
    const behind = orderPlaced(tenantId, orderId); // same key: same partition, right behind it
    receiver.script(refused.messageId, [400]);
    const deadBefore = await metric('notifier_messages_total', 'outcome="dead-lettered"');

    const bad = await produce(producer, refused);
    const good = await produce(producer, behind);
    expect(good.partition).toBe(bad.partition);

    const dlq = new TopicReader(kafka, tenantId, Topics.deadLetters);
    await dlq.start();
    try {
      const [dead] = await dlq.until((m) => m.some((x) => x.headers[Headers.messageId] === bad.messageId), 30_000);
      const mine = dlq.messages.filter((m) => m.headers[Headers.messageId] === bad.messageId);
      expect(mine).toHaveLength(1);
      expect(dead.headers).toMatchObject({
        [DeadLetterHeaders.consumer]: 'notifier',
        [DeadLetterHeaders.originalTopic]: Topics.orderEvents,
        [DeadLetterHeaders.originalPartition]: String(bad.partition),
        [DeadLetterHeaders.originalOffset]: bad.offset,
        [DeadLetterHeaders.attempts]: '1',
      });
      expect(dead.headers[DeadLetterHeaders.error]).toMatch(/400/);
      expect(dead.value).toEqual(refused.payload);
    } finally {
      await dlq.stop();
    }
    expect(await db.deadLetters(bad.messageId)).toEqual([
      expect.objectContaining({ consumer: 'notifier', attempts: 1, kafka_partition: bad.partition, kafka_offset: bad.offset }),
    ]);
    expect(await db.inbox(bad.messageId)).toEqual([{ consumer: 'notifier', outcome: 'dead-lettered' }]);
    expect(await db.delivery(bad.messageId)).toEqual([]);

    const deliveries = await db.until(() => db.deliveries(tenantId), (rows) => rows.length === 1);
    expect(deliveries).toEqual([expect.objectContaining({ message_id: good.messageId, order_id: orderId, attempts: 1 })]);
    expect(receiver.forTenant(tenantId).map((r) => [r.idempotencyKey, r.status])).toEqual([
      [bad.messageId, 400],
      [good.messageId, 200],
    ]);
    expect(await metric('notifier_messages_total', 'outcome="dead-lettered"')).toBe(deadBefore + 1);
  });

  it('skips an OrderCancelled: inbox outcome skipped, no webhook call', async () => {
    const tenantId = tenant();
    const orderId = randomUUID();
    const payload: OrderCancelledV1 = { orderId, tenantId, reason: 'changed my mind', cancelledAt: new Date().toISOString() };
    const cancelled = { type: OrderEventTypes.cancelled, tenantId, key: orderId, payload, messageId: randomUUID() };

    await produce(producer, cancelled);

    await db.until(() => db.inbox(cancelled.messageId), (rows) => rows.length === 1);
    expect(await db.inbox(cancelled.messageId)).toEqual([{ consumer: 'notifier', outcome: 'skipped' }]);
    expect(receiver.forTenant(tenantId)).toEqual([]);
    expect(await db.deliveries(tenantId)).toEqual([]);
  });
});
