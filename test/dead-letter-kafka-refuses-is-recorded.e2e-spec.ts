import { randomUUID } from 'node:crypto';
import { Consumer, Kafka, Producer } from 'kafkajs';
import { DeadLetterHeaders, Headers, Topics } from '@app/contracts';
import { createKafka } from '@app/platform';
import { RunningApp } from './support/apps';
import { FulfillmentDb } from './support/fulfillment-db';
import { appMetric, orderPlaced, POISON_ERROR, POISON_QUANTITY, startFulfillmentCaughtUp } from './support/fulfillment-consumer';
import { produceOrderEvent } from './support/kafka';
import { TestBroker } from './support/test-broker';
import { eventually } from './support/eventually';

/**
 * The dead-letter topic refuses a dead letter for its own sake (larger than its max.message.bytes).
 * The consumer records the message in dead_letters with both errors, counts it, and moves on; it does
 * not loop on it. Its dead-letter producer is replaced after the failed send (kafkajs rolled back its
 * idempotent sequence numbers): later dead letters arrive once each, from a new producer id.
 * A private broker, so the dead-letter topic can be created small.
 */

const DEAD_LETTER_MAX_BYTES = 4_096;

interface DeadLetterSeen {
  messageId: string;
  producerId: string;
  headers: Record<string, string>;
}

/** Reads the dead-letter topic from the start, with the producer id of each record's batch. */
async function readDeadLetters(kafka: Kafka, seen: DeadLetterSeen[]): Promise<Consumer> {
  const consumer = kafka.consumer({ groupId: `e2e-dlq-${randomUUID()}`, allowAutoTopicCreation: false });
  await consumer.connect();
  await consumer.subscribe({ topic: Topics.deadLetters, fromBeginning: true });
  await consumer.run({
    eachMessage: async ({ message }) => {
      const headers = Object.fromEntries(Object.entries(message.headers ?? {}).map(([k, v]) => [k, v?.toString() ?? '']));
      // kafkajs keeps each record's batch header (producer id, epoch, sequence) on the record, untyped.
      const producerId = String((message as unknown as { batchContext: { producerId: string } }).batchContext.producerId);
      seen.push({ messageId: headers[Headers.messageId], producerId, headers });
    },
  });
  return consumer;
}

describe('a dead letter Kafka refuses', () => {
  const broker = new TestBroker(29_640);
  const db = new FulfillmentDb();
  let kafka: Kafka;
  let producer: Producer;
  let app: RunningApp | undefined;
  let reader: Consumer | undefined;

  beforeAll(async () => {
    await broker.start();
    kafka = createKafka({ brokers: [broker.brokers], clientId: 'dlq-refused-e2e' });
    const admin = kafka.admin();
    await admin.connect();
    try {
      await admin.createTopics({
        waitForLeaders: true,
        topics: [
          { topic: Topics.orderEvents, numPartitions: 6 },
          {
            topic: Topics.deadLetters,
            numPartitions: 3,
            configEntries: [{ name: 'max.message.bytes', value: String(DEAD_LETTER_MAX_BYTES) }],
          },
        ],
      });
    } finally {
      await admin.disconnect();
    }
    producer = kafka.producer({ idempotent: true });
    await producer.connect();
  }, 120_000);
  afterAll(async () => {
    await reader?.disconnect();
    await app?.stop();
    await producer?.disconnect();
    await broker.destroy();
    await db.close();
  });

  it('is recorded with the refusal and counted, its partition moves on, and later dead letters arrive once from a new producer', async () => {
    app = await startFulfillmentCaughtUp(kafka, producer, db, { KAFKA_BROKERS: broker.brokers });
    const seen: DeadLetterSeen[] = [];
    reader = await readDeadLetters(kafka, seen);
    const tenantId = `t-dlq-refused-${randomUUID().slice(0, 8)}`;
    const once = (id: string) => seen.filter((s) => s.messageId === id).length === 1;

    // Fails every time (POISON_QUANTITY); its dead letter is small and goes out with the first producer.
    const first = orderPlaced(tenantId, { quantity: POISON_QUANTITY });
    await produceOrderEvent(producer, first);
    await db.until(
      async () => seen,
      () => once(first.messageId),
      45_000,
    );

    const orderId = randomUUID();
    const refused = orderPlaced(tenantId, { orderId, quantity: POISON_QUANTITY, paddingBytes: 2 * DEAD_LETTER_MAX_BYTES });
    const behind = orderPlaced(tenantId, { orderId }); // same key: right behind it on its partition
    const laterSameKey = { ...orderPlaced(tenantId, { orderId }), rawValue: '{not json' };
    const laterOtherKey = { ...orderPlaced(tenantId), rawValue: '{not json' };
    for (const event of [refused, behind, laterSameKey, laterOtherKey]) await produceOrderEvent(producer, event);

    await db.until(
      async () => seen,
      () => once(laterSameKey.messageId) && once(laterOtherKey.messageId),
      60_000,
    );
    const [recorded] = await db.until(
      () => db.deadLetters(refused.messageId),
      (rows) => rows.length === 1,
      30_000,
    );
    expect(recorded).toMatchObject({ consumer: 'fulfillment', attempts: 3 });
    expect(recorded.error).toMatch(POISON_ERROR);
    expect(recorded.error).toMatch(/refused by orders\.dead-letters\.v1: .*(MESSAGE_TOO_LARGE|larger than)/i);
    expect(await db.inbox(refused.messageId)).toEqual([{ consumer: 'fulfillment', outcome: 'dead-lettered' }]);
    const shipments = await db.until(
      () => db.shipments(tenantId),
      (rows) => rows.length === 1,
      30_000,
    );
    expect(shipments[0]).toMatchObject({ order_id: orderId, message_id: behind.messageId });
    expect(await appMetric(app, 'fulfillment_messages_total', 'outcome="dead-letter-refused"')).toBe(1);

    // Every partition's committed offset is at its end: nothing is retried in a loop.
    await expectGroupCaughtUp(kafka);
    expect(seen.filter((s) => s.messageId === refused.messageId)).toEqual([]);
    for (const id of [first.messageId, laterSameKey.messageId, laterOtherKey.messageId]) expect(once(id)).toBe(true);
    const producerOf = (id: string) => seen.find((s) => s.messageId === id)!.producerId;
    expect(producerOf(laterSameKey.messageId)).not.toBe(producerOf(first.messageId));
    expect(producerOf(laterOtherKey.messageId)).toBe(producerOf(laterSameKey.messageId));
    expect(seen.find((s) => s.messageId === laterSameKey.messageId)!.headers[DeadLetterHeaders.attempts]).toBe('1');
  }, 180_000);
});

async function expectGroupCaughtUp(kafka: Kafka): Promise<void> {
  const admin = kafka.admin();
  await admin.connect();
  try {
    const behind = async () => {
      const ends = await admin.fetchTopicOffsets(Topics.orderEvents);
      const [committed] = await admin.fetchOffsets({ groupId: 'fulfillment', topics: [Topics.orderEvents] });
      return ends.filter(({ partition, high }) => committed.partitions.find((p) => p.partition === partition)?.offset !== high);
    };
    await eventually(behind, (partitions) => partitions.length === 0, { intervalMs: 200, what: 'every partition consumed to its end' });
  } finally {
    await admin.disconnect();
  }
}
