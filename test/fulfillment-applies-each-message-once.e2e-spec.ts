import { randomUUID } from 'node:crypto';
import { Producer } from 'kafkajs';
import { DeadLetterHeaders, Headers, OrderEventTypes, Topics } from '@app/contracts';
import { RunningApp, startApp } from './support/apps';
import { FulfillmentDb } from './support/fulfillment-db';
import { ensureServiceTopics, produceOrderEvent, servicePartitionOf, skipConsumerBacklog, testKafka } from './support/kafka';
import { TopicReader } from './support/topic-reader';
import { POISON_ERROR, POISON_QUANTITY } from './support/fulfillment-consumer';

const FAST = {
  FULFILLMENT_MAX_ATTEMPTS: '3',
  FULFILLMENT_RETRY_MIN_MS: '50',
  FULFILLMENT_RETRY_MAX_MS: '200',
  KAFKA_SESSION_TIMEOUT_MS: '6000',
};

function placed(tenantId: string, orderId = randomUUID(), quantity = 2) {
  return {
    type: OrderEventTypes.placed,
    tenantId,
    key: orderId,
    payload: { orderId, tenantId, sku: 'SKU-1', quantity, customerRef: null, placedAt: new Date().toISOString() },
  };
}

async function metric(app: RunningApp, outcome: string): Promise<number> {
  const text = await (await fetch(`${app.managementUrl}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`fulfillment_messages_total{outcome="${outcome}"}`));
  return Number(line?.split(' ')[1] ?? 0);
}

describe('the fulfillment consumer', () => {
  const kafka = testKafka('fulfillment-e2e');
  const db = new FulfillmentDb();
  let producer: Producer;
  let app: RunningApp | undefined;

  beforeAll(async () => {
    await ensureServiceTopics(kafka);
    producer = kafka.producer();
    await producer.connect();
  });
  afterEach(async () => {
    await app?.stop();
    app = undefined;
  });
  afterAll(async () => {
    await producer.disconnect();
    await db.close();
  });

  /**
   * Starts the consumer at the topic's end (what other suites left there, replays included, would
   * count as duplicates here) and waits until its group is consuming.
   */
  async function startCaughtUp(env: Record<string, string> = {}): Promise<RunningApp> {
    await skipConsumerBacklog(kafka, ['fulfillment'], Topics.orderEvents);
    const started = await startApp('fulfillment', { ...FAST, ...env });
    const marker = placed(`t-sync-${randomUUID().slice(0, 8)}`);
    const id = await produceOrderEvent(producer, marker);
    await db.until(
      () => db.inbox(id),
      (rows) => rows.length === 1,
      90_000,
    );
    return started;
  }

  it('the same message-id three times — back to back, after a delay, concurrently — makes one shipment', async () => {
    app = await startCaughtUp();
    const tenantId = `t-${randomUUID().slice(0, 12)}`;
    const event = { ...placed(tenantId), messageId: randomUUID() };
    const duplicatesBefore = await metric(app, 'duplicate');

    await produceOrderEvent(producer, event);
    await produceOrderEvent(producer, event);
    await new Promise((resolve) => setTimeout(resolve, 500));
    await produceOrderEvent(producer, event);
    const others = await Promise.all([1, 2, 3].map(() => kafka.producer()));
    await Promise.all(others.map((p) => p.connect()));
    await Promise.all(others.map((p) => produceOrderEvent(p, event)));
    await Promise.all(others.map((p) => p.disconnect()));

    await db.until(
      async () => metric(app!, 'duplicate'),
      (n) => n >= duplicatesBefore + 5,
      30_000,
    );
    await db.until(
      () => db.shipments(tenantId),
      (rows) => rows.length > 0,
      30_000,
    );
    expect(await db.shipments(tenantId)).toEqual([{ order_id: event.key, status: 'pending', message_id: event.messageId, quantity: 2 }]);
    expect(await db.inbox(event.messageId)).toEqual([{ consumer: 'fulfillment', outcome: 'applied' }]);
  });

  it('killed after its database commit and before the offset commit: redelivered, skipped, one effect', async () => {
    app = await startCaughtUp();
    await app.stop();
    const crashing = await startApp('fulfillment', { ...FAST, CRASH_AFTER_DATABASE_COMMIT: 'true' });
    const tenantId = `t-${randomUUID().slice(0, 12)}`;
    const event = placed(tenantId);
    const messageId = await produceOrderEvent(producer, event);
    const exit = await new Promise<NodeJS.Signals | null>((resolve) => crashing.process.once('exit', (_, signal) => resolve(signal)));
    expect(exit).toBe('SIGKILL');
    expect(await db.shipments(tenantId)).toHaveLength(1); // committed before the kill

    app = await startApp('fulfillment', FAST);
    await db.until(
      async () => metric(app!, 'duplicate'),
      (n) => n >= 1,
      60_000,
    );
    expect(await db.shipments(tenantId)).toHaveLength(1);
    expect(await db.inbox(messageId)).toEqual([{ consumer: 'fulfillment', outcome: 'applied' }]);
  });

  it('a poison message is dead-lettered after the bounded attempts and the messages behind it are processed', async () => {
    app = await startCaughtUp();
    const tenantId = `t-${randomUUID().slice(0, 12)}`;
    const orderId = randomUUID();
    // A valid OrderPlaced that fails every time in the database: retried, then dead-lettered.
    const poisonId = await produceOrderEvent(producer, placed(tenantId, orderId, POISON_QUANTITY));
    const behind = placed(tenantId, orderId); // same key, so the same partition, right behind it
    const behindId = await produceOrderEvent(producer, { ...behind, payload: { ...behind.payload } });
    const malformedId = await produceOrderEvent(producer, { ...placed(tenantId), rawValue: '{not json' });

    const dlq = new TopicReader(kafka, tenantId, Topics.deadLetters);
    await dlq.start();
    try {
      const dead = await dlq.until((m) => m.length >= 2, 45_000);
      const poison = dead.find((m) => m.headers[Headers.messageId] === poisonId)!;
      expect(poison.headers).toMatchObject({
        [DeadLetterHeaders.consumer]: 'fulfillment',
        [DeadLetterHeaders.originalTopic]: Topics.orderEvents,
        // Where it came from: the partition its key hashes to (the offset is checked below).
        [DeadLetterHeaders.originalPartition]: String(servicePartitionOf(orderId)),
        [DeadLetterHeaders.attempts]: '3',
      });
      expect(poison.headers[DeadLetterHeaders.error]).toMatch(POISON_ERROR);
      expect(poison.headers[DeadLetterHeaders.originalOffset]).toMatch(/^\d+$/);
      expect(dead.find((m) => m.headers[Headers.messageId] === malformedId)?.headers[DeadLetterHeaders.attempts]).toBe('1');
    } finally {
      await dlq.stop();
    }
    expect(await db.deadLetters(poisonId)).toEqual([expect.objectContaining({ consumer: 'fulfillment', attempts: 3 })]);
    expect(await db.inbox(poisonId)).toEqual([{ consumer: 'fulfillment', outcome: 'dead-lettered' }]);
    const shipments = await db.until(
      () => db.shipments(tenantId),
      (rows) => rows.length === 1,
    );
    expect(shipments[0]).toMatchObject({ order_id: orderId, message_id: behindId, quantity: 2 });
  });

  it('skips event types and versions it does not know, and counts them', async () => {
    app = await startCaughtUp();
    const tenantId = `t-${randomUUID().slice(0, 12)}`;
    const future = await produceOrderEvent(producer, { ...placed(tenantId), version: 2 });
    const unknown = await produceOrderEvent(producer, { ...placed(tenantId), type: 'OrderGiftWrapped' });
    await db.until(
      () => db.inbox(unknown),
      (rows) => rows.length === 1,
    );
    expect(await db.inbox(future)).toEqual([{ consumer: 'fulfillment', outcome: 'skipped' }]);
    expect(await db.inbox(unknown)).toEqual([{ consumer: 'fulfillment', outcome: 'skipped' }]);
    expect(await db.shipments(tenantId)).toEqual([]);
  });
});
