import { randomUUID } from 'node:crypto';
import { DataSource } from 'typeorm';
import { EachBatchPayload } from 'kafkajs';
import { postgresOptions } from '@app/platform';
import { Order } from '../apps/command-api/src/orders/order.entity';
import { testKafka, uniqueTopic } from './support/kafka';
import { testEnv } from './support/test-env';

describe('the platform talks to real PostgreSQL and real Kafka', () => {
  it('writes an order through TypeORM into the migrated orders_test database and reads it back', async () => {
    const db = new DataSource(postgresOptions({ url: testEnv.ordersUrl, applicationName: 'e2e', entities: [Order] }));
    await db.initialize();
    try {
      const id = randomUUID();
      await db.getRepository(Order).insert({ id, tenantId: 't-1', sku: 'SKU-1', quantity: 2, customerRef: null, status: 'placed' });
      const stored = await db.getRepository(Order).findOneByOrFail({ id });
      expect(stored).toMatchObject({ id, tenantId: 't-1', sku: 'SKU-1', quantity: 2, status: 'placed', customerRef: null });
      expect(stored.createdAt).toBeInstanceOf(Date);
      await expect(
        db.getRepository(Order).insert({ id: randomUUID(), tenantId: 't-1', sku: 'SKU-1', quantity: 0, status: 'placed' }),
      ).rejects.toThrow(/check constraint/);
    } finally {
      await db.destroy();
    }
  });

  it('creates a topic, produces keyed messages with headers and consumes them with a group and manual offset commits', async () => {
    const kafka = testKafka();
    const topic = uniqueTopic('platform');
    const groupId = `${topic}.group`;
    const admin = kafka.admin();
    await admin.connect();
    const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
    const consumer = kafka.consumer({ groupId, allowAutoTopicCreation: false });
    try {
      expect(await admin.createTopics({ topics: [{ topic, numPartitions: 3 }], waitForLeaders: true })).toBe(true);
      await producer.connect();
      const sent = Array.from({ length: 6 }, (_, i) => ({
        key: `order-${i % 2}`,
        value: JSON.stringify({ n: i }),
        headers: { 'message-id': randomUUID(), 'event-type': 'Probe' },
      }));
      await producer.send({ topic, acks: -1, messages: sent });

      const received: { key: string; value: string; messageId: string; partition: number }[] = [];
      await consumer.connect();
      await consumer.subscribe({ topic, fromBeginning: true });
      const done = new Promise<void>((resolve) => {
        void consumer.run({
          autoCommit: false,
          eachBatchAutoResolve: false,
          eachBatch: async ({ batch, resolveOffset }: EachBatchPayload) => {
            for (const message of batch.messages) {
              received.push({
                key: message.key!.toString(),
                value: message.value!.toString(),
                messageId: message.headers!['message-id']!.toString(),
                partition: batch.partition,
              });
              resolveOffset(message.offset);
            }
            // With autoCommit off, kafkajs commits nothing by itself: the next offset is committed explicitly.
            const next = (BigInt(batch.lastOffset()) + 1n).toString();
            await consumer.commitOffsets([{ topic, partition: batch.partition, offset: next }]);
            if (received.length === sent.length) resolve();
          },
        });
      });
      await done;

      expect(received.map((m) => m.messageId).sort()).toEqual(sent.map((m) => m.headers['message-id']).sort());
      const byKey = (key: string) => received.filter((m) => m.key === key);
      for (const key of ['order-0', 'order-1']) {
        expect(new Set(byKey(key).map((m) => m.partition)).size).toBe(1);
        expect(byKey(key).map((m) => JSON.parse(m.value).n)).toEqual(sent.filter((m) => m.key === key).map((m) => JSON.parse(m.value).n));
      }
      await consumer.stop();
      const [committed] = await admin.fetchOffsets({ groupId, topics: [topic] });
      const total = committed.partitions.reduce((sum, p) => sum + Math.max(Number(p.offset), 0), 0);
      expect(total).toBe(sent.length);
    } finally {
      await consumer.disconnect();
      await producer.disconnect();
      await admin.deleteTopics({ topics: [topic] }).catch(() => undefined);
      await admin.disconnect();
    }
  });
});
