import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import { Producer } from 'kafkajs';
import { RunningApp } from './support/apps';
import { FulfillmentDb } from './support/fulfillment-db';
import { appMetric, orderPlaced, startFulfillmentCaughtUp } from './support/fulfillment-consumer';
import { ensureServiceTopics, produceOrderEvent, testKafka } from './support/kafka';
import { searchSettings, searchTimeout } from './support/search';
import { TcpProxy } from './support/tcp-proxy';
import { testEnv } from './support/test-env';

/**
 * While its database is really unreachable — the network to PostgreSQL cut, or every session of the
 * consumer terminated as it connects — the consumer waits without counting attempts: nothing is
 * dead-lettered, and every message is applied once after the database returns. Each outage outlasts
 * what FULFILLMENT_MAX_ATTEMPTS (3) retries of 50–200 ms would take, so counted attempts would end in
 * dead letters.
 */

type Outage = { kind: 'cut' | 'terminate'; afterMs: number; forMs: number };

const outages = fc.array(
  fc.record({
    kind: fc.constantFrom<Outage['kind']>('cut', 'terminate'),
    afterMs: fc.integer({ min: 0, max: 1_000 }),
    forMs: fc.integer({ min: 1_500, max: 3_500 }),
  }),
  { minLength: 1, maxLength: 2 },
);

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('a database outage under a consumer', () => {
  const kafka = testKafka('consumer-outage-e2e');
  const db = new FulfillmentDb();
  let producer: Producer;
  let proxy: TcpProxy;
  let app: RunningApp;

  beforeAll(async () => {
    await ensureServiceTopics(kafka);
    producer = kafka.producer({ idempotent: true });
    await producer.connect();
    const url = new URL(testEnv.fulfillmentUrl);
    proxy = await TcpProxy.start({ host: url.hostname, port: Number(url.port || 5432) });
    url.port = String(proxy.port);
    app = await startFulfillmentCaughtUp(kafka, producer, db, { FULFILLMENT_DATABASE_URL: url.toString() });
  }, 120_000);
  afterAll(async () => {
    await app?.stop();
    await proxy?.cut();
    await producer?.disconnect();
    await db.close();
  });

  /** Terminates the consumer's sessions (57P01) as fast as they come back, for `forMs`. */
  async function terminateSessions(forMs: number): Promise<void> {
    const database = new URL(testEnv.fulfillmentUrl).pathname.slice(1);
    const until = Date.now() + forMs;
    while (Date.now() < until) {
      await db.pool.query(
        `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'fulfillment' AND datname = $1`,
        [database],
      );
      await pause(20);
    }
  }

  async function outage({ kind, afterMs, forMs }: Outage): Promise<void> {
    await pause(afterMs);
    if (kind === 'terminate') return terminateSessions(forMs);
    await proxy.cut();
    await pause(forMs);
    await proxy.restore();
  }

  it(
    'nothing is dead-lettered and every message is applied once, whenever the outages strike',
    async () => {
      await fc.assert(
        fc.asyncProperty(outages, fc.integer({ min: 10, max: 30 }), async (schedule, count) => {
          const tenantId = `t-outage-${randomUUID().slice(0, 8)}`;
          const events = Array.from({ length: count }, () => orderPlaced(tenantId));
          const deadBefore = await appMetric(app, 'fulfillment_messages_total', 'outcome="dead-lettered"');

          const producing = (async () => {
            for (const event of events) {
              await produceOrderEvent(producer, event);
              await pause(100);
            }
          })();
          for (const o of schedule) await outage(o);
          await producing;

          const ids = events.map((e) => e.messageId);
          const settled = await db.until(
            async () =>
              (await db.pool.query(`SELECT message_id, outcome FROM inbox_messages WHERE message_id = ANY($1::uuid[])`, [ids])).rows,
            (rows) => rows.length === ids.length,
            60_000,
          );
          expect(settled.every((row) => row.outcome === 'applied')).toBe(true);
          const { rows } = await db.pool.query(`SELECT count(*)::int AS n FROM dead_letters WHERE message_id = ANY($1::uuid[])`, [ids]);
          expect(rows[0].n).toBe(0);
          expect((await db.shipments(tenantId)).map((s) => s.message_id).sort()).toEqual([...ids].sort());
          expect(await appMetric(app, 'fulfillment_messages_total', 'outcome="dead-lettered"')).toBe(deadBefore);
        }),
        searchSettings({ fast: 3, long: 25 }),
      );
    },
    searchTimeout(300_000),
  );
});
