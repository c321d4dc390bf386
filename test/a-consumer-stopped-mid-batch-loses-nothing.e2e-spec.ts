import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import { Kafka, Producer } from 'kafkajs';
import pino from 'pino';
import { DataSource } from 'typeorm';
import { Headers } from '@app/contracts';
import { InboxConsumer } from '@app/inbox';
import { postgresOptions } from '@app/platform';
import { eventually } from './support/eventually';
import { FulfillmentDb } from './support/fulfillment-db';
import { testKafka, uniqueTopic } from './support/kafka';
import { searchSettings, searchTimeout } from './support/search';
import { testEnv } from './support/test-env';

/**
 * A consumer stopping in the middle of a batch (a deploy's SIGTERM) leaves the rest of the batch for
 * whoever consumes next: only offsets of messages whose transaction committed are resolved, so kafkajs'
 * commit on the way out covers no message that was not applied. Had kafkajs resolved the whole batch
 * when the handler returned early (eachBatchAutoResolve), the stop would commit past the messages it
 * never reached and no consumer would see them again. Searched: how big the backlog, how slow each
 * transaction, when the stop comes; a second consumer of the same group then drains the partition,
 * and every message must be in the inbox.
 */
describe('a consumer stopped in the middle of a batch loses nothing', () => {
  const kafka: Kafka = testKafka('mid-batch-e2e');
  const dataSource = new DataSource(postgresOptions({ url: testEnv.fulfillmentUrl, applicationName: 'e2e-mid-batch', poolSize: 3 }));
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

  /** A consumer of `topic` in group `name` recording inbox rows only, each transaction taking `delayMs` more. */
  function consumerOf(name: string, topic: string, delayMs: number, applied: Set<string>) {
    return new InboxConsumer({
      name,
      kafka,
      topics: [topic],
      dataSource,
      handler: async (_db, messages) => {
        await new Promise((resolve) => setTimeout(resolve, delayMs));
        return messages.map(() => 'applied' as const);
      },
      deadLetterTopic: `${topic}.dlq`,
      maxAttempts: 3,
      retryDelayMs: () => 50,
      logger: pino({ level: 'silent' }),
      sessionTimeoutMs: 6_000,
      retentionSeconds: 30 * 24 * 3_600,
      sweepIntervalSeconds: 0,
      onOutcome: (_outcome, message) => applied.add(message.messageId!),
    });
  }

  it(
    'a stop at any moment of a batch: the next consumer of the group applies every message the first did not',
    async () => {
      // Several transactions of at most 1,000 messages for one fetched batch. The stop comes once `stopAfter`
      // of them committed, `into` the next one (which takes at least delayMs and is a full one), after
      // which one more is left at least.
      const plans = fc
        .record({
          stopAfter: fc.integer({ min: 1, max: 2 }),
          extra: fc.integer({ min: 1, max: 1_000 }),
          delayMs: fc.integer({ min: 50, max: 300 }),
          into: fc.double({ min: 0, max: 0.5, noNaN: true }),
        })
        .map(({ stopAfter, extra, ...plan }) => ({ ...plan, stopAfter, count: (stopAfter + 1) * 1_000 + extra }));
      let stoppedEarly = 0;
      await fc.assert(
        fc.asyncProperty(plans, async ({ count, delayMs, stopAfter, into }) => {
          const name = `mid-batch-e2e-${randomUUID().slice(0, 8)}`;
          const topic = uniqueTopic('mid-batch');
          const admin = kafka.admin();
          await admin.connect();
          await admin.createTopics({ topics: [{ topic }, { topic: `${topic}.dlq` }], waitForLeaders: true });
          await admin.disconnect();
          const ids = Array.from({ length: count }, () => randomUUID());
          for (let i = 0; i < count; i += 500) {
            await producer.send({
              topic,
              acks: -1,
              messages: ids
                .slice(i, i + 500)
                .map((id) => ({ key: id, value: '{}', headers: { [Headers.messageId]: id, [Headers.eventType]: 'Test' } })),
            });
          }
          const firstApplied = new Set<string>();
          const first = consumerOf(name, topic, delayMs, firstApplied);
          const secondApplied = new Set<string>();
          const second = consumerOf(name, topic, delayMs, secondApplied);
          try {
            await first.run();
            await eventually(
              () => firstApplied.size,
              (n) => n >= stopAfter * 1_000,
              { timeoutMs: 30_000, intervalMs: 5, what: `the first consumer applying ${stopAfter} transaction(s)` },
            );
            await new Promise((resolve) => setTimeout(resolve, into * delayMs));
            await first.stop();
            const stoppedAt = firstApplied.size;
            if (stoppedAt < count) stoppedEarly++;
            await second.run();
            const inInbox = async () =>
              (await db.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM inbox_messages WHERE consumer = $1', [name])).rows[0].n;
            await eventually(inInbox, (n) => n === count, {
              timeoutMs: 60_000,
              what: `all ${count} messages in the inbox (the first consumer applied ${stoppedAt} before it stopped)`,
            });
            expect(new Set([...firstApplied, ...secondApplied])).toEqual(new Set(ids));
          } finally {
            await first.stop();
            await second.stop();
            // Nothing of it stays for the suites after: `outbox:replay`'s guard reads every consumer's retention.
            await db.pool.query('DELETE FROM inbox_consumers WHERE consumer = $1', [name]);
            await db.pool.query('DELETE FROM inbox_messages WHERE consumer = $1', [name]);
          }
        }),
        searchSettings({ fast: 4, long: 30 }),
      );
      // What the search is about: stops with messages left (a slow machine may let a few come late).
      expect(stoppedEarly).toBeGreaterThan(0);
    },
    searchTimeout(240_000),
  );
});
