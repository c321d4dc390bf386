import { randomUUID } from 'node:crypto';
import { Kafka, Producer } from 'kafkajs';
import pino from 'pino';
import { DataSource } from 'typeorm';
import { InboxConsumer, InboxConsumerOptions } from '@app/inbox';
import { postgresOptions } from '@app/platform';
import { FulfillmentDb } from './fulfillment-db';
import { testKafka, uniqueTopic } from './kafka';
import { testEnv } from './test-env';

/**
 * For suites that run the library's InboxConsumer itself (not an app) on the real broker and the
 * fulfillment test database: a consumer per run, on a topic of its own, recording inbox rows only
 * unless told otherwise. Registers its own beforeAll/afterAll.
 */
export function inboxConsumersOfTheirOwn(purpose: string) {
  const kafka: Kafka = testKafka(`${purpose}-e2e`);
  const dataSource = new DataSource(postgresOptions({ url: testEnv.fulfillmentUrl, applicationName: `e2e-${purpose}`, poolSize: 3 }));
  const db = new FulfillmentDb();
  let producer: Producer | undefined;

  beforeAll(async () => {
    await dataSource.initialize();
    producer = kafka.producer({ idempotent: true });
    await producer.connect();
  });
  afterAll(async () => {
    await producer?.disconnect();
    await dataSource.destroy();
    await db.close();
  });

  return {
    kafka,
    db,
    producer: (): Producer => producer!,
    /** A fresh topic, with its dead-letter topic, and a fresh consumer name (its group). */
    async topicAndName(): Promise<{ topic: string; name: string }> {
      const topic = uniqueTopic(purpose);
      const admin = kafka.admin();
      await admin.connect();
      await admin.createTopics({ topics: [{ topic }, { topic: `${topic}.dlq` }], waitForLeaders: true });
      await admin.disconnect();
      return { topic, name: `${purpose}-e2e-${randomUUID().slice(0, 8)}` };
    },
    /** A consumer of `topic` in group `name`: every message applied (no effect), quick retries, silent. */
    consumer(name: string, topic: string, options: Partial<InboxConsumerOptions> = {}): InboxConsumer {
      return new InboxConsumer({
        name,
        kafka,
        topics: [topic],
        dataSource,
        handler: async (_db, messages) => messages.map(() => 'applied' as const),
        deadLetterTopic: `${topic}.dlq`,
        maxAttempts: 3,
        retryDelayMs: () => 50,
        logger: pino({ level: 'silent' }),
        sessionTimeoutMs: 6_000,
        retentionSeconds: 30 * 24 * 3_600,
        sweepIntervalSeconds: 0,
        ...options,
      });
    },
    /** Nothing of consumer `name` stays for the suites after: `outbox:replay`'s guard reads every consumer's retention. */
    async forget(name: string): Promise<void> {
      await db.pool.query('DELETE FROM inbox_consumers WHERE consumer = $1', [name]);
      await db.pool.query('DELETE FROM inbox_messages WHERE consumer = $1', [name]);
    },
  };
}
