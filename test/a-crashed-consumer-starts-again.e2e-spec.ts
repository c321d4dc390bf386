import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import { Kafka, Producer } from 'kafkajs';
import pino from 'pino';
import { DataSource } from 'typeorm';
import { Headers } from '@app/contracts';
import { ConsumerOutcome, InboxConsumer } from '@app/inbox';
import { postgresOptions } from '@app/platform';
import { eventually } from './support/eventually';
import { FulfillmentDb } from './support/fulfillment-db';
import { testKafka, uniqueTopic } from './support/kafka';
import { searchSettings, searchTimeout } from './support/search';
import { testEnv } from './support/test-env';

/**
 * kafkajs restarts a consumer after a retriable crash only. After any other — a TypeError in the
 * consumer's own code, such as its lag callback (metrics) — it leaves the group for good while the
 * process stays up: every partition it held stopped until someone restarted the process. libs/inbox
 * starts such a consumer again (with a backoff while crashes follow each other). Searched: how many
 * messages, and how many crashes in a row, on a consumer of the real broker and database; each message
 * must still be applied exactly once, and consuming go on after the crashes.
 */
describe('a consumer that crashes starts again', () => {
  const kafka: Kafka = testKafka('crash-e2e');
  const dataSource = new DataSource(postgresOptions({ url: testEnv.fulfillmentUrl, applicationName: 'e2e-crash', poolSize: 3 }));
  const db = new FulfillmentDb();
  let producer: Producer;

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

  /** A consumer of a topic of its own, recording inbox rows only; its first `crashes` lag reports throw. */
  async function crashingConsumer(crashes: number) {
    const name = `crash-e2e-${randomUUID().slice(0, 8)}`;
    const topic = uniqueTopic('crash');
    const admin = kafka.admin();
    await admin.connect();
    await admin.createTopics({ topics: [{ topic }, { topic: `${topic}.dlq` }], waitForLeaders: true });
    await admin.disconnect();
    const seen = { reported: new Map<string, ConsumerOutcome>(), lagReports: 0 };
    const consumer = new InboxConsumer({
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
      onOutcome: (outcome, message) => {
        if (!seen.reported.has(message.messageId!)) seen.reported.set(message.messageId!, outcome);
      },
      // A bug in the consumer's own code after a batch: a TypeError, which kafkajs does not retry.
      onLag: () => {
        if (++seen.lagReports <= crashes) (undefined as unknown as { set(): void }).set();
      },
    });
    return { name, topic, consumer, seen };
  }

  it(
    'every message is applied once and reported, however many crashes come first',
    async () => {
      // More messages than crashes: each is first handled in a batch of its own, so consuming goes on after the last crash.
      const plans = fc
        .integer({ min: 1, max: 3 })
        .chain((crashes) => fc.tuple(fc.integer({ min: crashes + 1, max: 8 }), fc.constant(crashes)));
      await fc.assert(
        fc.asyncProperty(plans, async ([count, crashes]) => {
          const { name, topic, consumer, seen } = await crashingConsumer(crashes);
          const ids = Array.from({ length: count }, () => randomUUID());
          try {
            await consumer.run();
            for (const [i, id] of ids.entries()) {
              // Each once the one before was reported: a batch each, so crashes land between messages.
              await producer.send({
                topic,
                acks: -1,
                messages: [{ key: id, value: '{}', headers: { [Headers.messageId]: id, [Headers.eventType]: 'Test' } }],
              });
              await eventually(
                () => seen.reported.has(id),
                (reported) => reported,
                {
                  timeoutMs: 30_000,
                  what: `message ${i + 1} of ${count} reported (the first ${crashes} lag reports throwing, ${seen.lagReports} made)`,
                },
              );
            }
            const { rows } = await db.pool.query('SELECT message_id, outcome FROM inbox_messages WHERE consumer = $1', [name]);
            expect(rows.map((row: { message_id: string }) => row.message_id).sort()).toEqual([...ids].sort());
            expect(rows.every((row: { outcome: string }) => row.outcome === 'applied')).toBe(true);
            expect([...seen.reported.values()].every((outcome) => outcome === 'applied')).toBe(true);
            // The last batch's lag report comes after its messages' outcomes.
            await eventually(
              () => seen.lagReports,
              (reports) => reports > crashes,
              { what: `a batch ending well after the ${crashes} crashes` },
            );
          } finally {
            await consumer.stop();
            // Nothing of it stays for the suites after: `outbox:replay`'s guard reads every consumer's retention.
            await db.pool.query('DELETE FROM inbox_consumers WHERE consumer = $1', [name]);
            await db.pool.query('DELETE FROM inbox_messages WHERE consumer = $1', [name]);
          }
        }),
        searchSettings({ fast: 3, long: 20 }),
      );
    },
    searchTimeout(180_000),
  );
});
