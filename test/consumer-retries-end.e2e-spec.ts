import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import { Producer } from 'kafkajs';
import { Client } from 'pg';
import { RunningApp } from './support/apps';
import { eventually } from './support/eventually';
import { FulfillmentDb } from './support/fulfillment-db';
import { orderPlaced, startFulfillmentCaughtUp } from './support/fulfillment-consumer';
import { ensureServiceTopics, OrderEventInput, produceOrderEvent, testKafka } from './support/kafka';
import { searchSettings, searchTimeout } from './support/search';
import { testEnv } from './support/test-env';

/**
 * Failures of one message while PostgreSQL answers — a statement timeout, a deadlock — are counted:
 * a message that always fails ends in a dead letter after FULFILLMENT_MAX_ATTEMPTS (3 here) and its
 * partition moves on; one that fails once is applied on its next attempt. The faults are PostgreSQL's
 * own: a trigger that sleeps past a real statement_timeout, two sessions that really deadlock.
 */

const STATEMENT_TIMEOUT_MS = 1_000;

/** pg reads `statement_timeout` from the URL over the app's own 30 s: the consumer's sessions get this one. */
function withStatementTimeout(url: string, ms: number): string {
  const target = new URL(url);
  target.searchParams.set('statement_timeout', String(ms));
  return target.toString();
}

const INSTALL_FAULTS = /* sql */ `
  CREATE OR REPLACE FUNCTION e2e_slow_shipment() RETURNS trigger LANGUAGE plpgsql AS $$
  BEGIN
    IF NEW.sku = 'SLOW' THEN PERFORM pg_sleep(${(2 * STATEMENT_TIMEOUT_MS) / 1000}); END IF; -- past the statement_timeout
    RETURN NEW;
  END $$;
  DROP TRIGGER IF EXISTS e2e_slow_shipment ON shipments;
  CREATE TRIGGER e2e_slow_shipment BEFORE INSERT ON shipments FOR EACH ROW EXECUTE FUNCTION e2e_slow_shipment();

  -- nextval is not rolled back with the failed transaction: it counts attempts.
  CREATE SEQUENCE IF NOT EXISTS e2e_deadlock_attempts;
  -- On its first attempt only, a DEADLOCK shipment takes advisory lock 4201, waits until the test's
  -- session queues for it, then asks for 4202, which that session holds: a real lock cycle. Its short
  -- deadlock_timeout makes the consumer's transaction the one PostgreSQL cancels (40P01).
  CREATE OR REPLACE FUNCTION e2e_deadlock_once() RETURNS trigger LANGUAGE plpgsql SET deadlock_timeout = '50ms' AS $$
  BEGIN
    IF NEW.sku = 'DEADLOCK' AND nextval('e2e_deadlock_attempts') = 1 THEN
      PERFORM pg_advisory_xact_lock(4201);
      WHILE NOT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND objid = 4201 AND NOT granted) LOOP
        PERFORM pg_sleep(0.02);
      END LOOP;
      PERFORM pg_advisory_xact_lock(4202);
    END IF;
    RETURN NEW;
  END $$;
  DROP TRIGGER IF EXISTS e2e_deadlock_once ON shipments;
  CREATE TRIGGER e2e_deadlock_once BEFORE INSERT ON shipments FOR EACH ROW EXECUTE FUNCTION e2e_deadlock_once();`;

const REMOVE_FAULTS = /* sql */ `
  DROP TRIGGER IF EXISTS e2e_slow_shipment ON shipments;
  DROP TRIGGER IF EXISTS e2e_deadlock_once ON shipments;
  DROP FUNCTION IF EXISTS e2e_slow_shipment();
  DROP FUNCTION IF EXISTS e2e_deadlock_once();
  DROP SEQUENCE IF EXISTS e2e_deadlock_attempts;`;

/** A stream around one marked message: others on its key (so behind it on its partition) and on other keys. */
const streams = fc.record({
  before: fc.nat({ max: 3 }),
  /** true: an OrderPlaced of the marked order (same key, so behind it on its partition). */
  after: fc.array(fc.boolean(), { minLength: 1, maxLength: 4 }),
});

function stream(tenantId: string, sku: string, shape: { before: number; after: boolean[] }) {
  const marked = orderPlaced(tenantId, { sku });
  const before = Array.from({ length: shape.before }, () => orderPlaced(tenantId));
  const after = shape.after.map((sameKey) => orderPlaced(tenantId, sameKey ? { orderId: marked.key } : {}));
  return { marked, others: [...before, ...after], all: [...before, marked, ...after] };
}

const SEARCH = searchSettings({ fast: 3, long: 20 });
const TIMEOUT_MS = searchTimeout(240_000);

describe('retries that end', () => {
  const kafka = testKafka('consumer-retries-e2e');
  const db = new FulfillmentDb();
  let producer: Producer;
  let app: RunningApp | undefined;

  beforeAll(async () => {
    await ensureServiceTopics(kafka);
    await db.pool.query(INSTALL_FAULTS);
    producer = kafka.producer({ idempotent: true });
    await producer.connect();
  });
  afterEach(async () => {
    await app?.stop();
    app = undefined;
  });
  afterAll(async () => {
    await producer?.disconnect();
    await db.pool.query(REMOVE_FAULTS);
    await db.close();
  });

  async function produceAll(events: OrderEventInput[]): Promise<void> {
    for (const event of events) await produceOrderEvent(producer, event);
  }

  /** message-id -> inbox outcome, for those of `ids` the consumer has settled. */
  async function outcomes(ids: string[]): Promise<Record<string, string>> {
    const { rows } = await db.pool.query(
      `SELECT message_id, outcome FROM inbox_messages WHERE consumer = 'fulfillment' AND message_id = ANY($1::uuid[])`,
      [ids],
    );
    return Object.fromEntries(rows.map((row) => [row.message_id, row.outcome]));
  }

  it(
    'a message that always hits the statement timeout is dead-lettered after the bounded attempts; its partition moves on',
    async () => {
      app = await startFulfillmentCaughtUp(kafka, producer, db, {
        FULFILLMENT_DATABASE_URL: withStatementTimeout(testEnv.fulfillmentUrl, STATEMENT_TIMEOUT_MS),
      });
      await fc.assert(
        fc.asyncProperty(streams, async (shape) => {
          const tenantId = `t-timeout-${randomUUID().slice(0, 8)}`;
          const { marked, others, all } = stream(tenantId, 'SLOW', shape);
          await produceAll(all);

          const settled = await db.until(
            () => outcomes(all.map((e) => e.messageId)),
            (seen) => Object.keys(seen).length === all.length,
            45_000,
          );
          expect(settled[marked.messageId]).toBe('dead-lettered');
          const [dead] = await db.deadLetters(marked.messageId);
          expect(dead).toMatchObject({ consumer: 'fulfillment', attempts: 3 });
          expect(dead.error).toMatch(/statement timeout/);
          for (const event of others) expect(settled[event.messageId]).toBe('applied');
          const shipments = await db.shipments(tenantId);
          expect(shipments.map((s) => s.message_id).sort()).toEqual(
            others
              .map((e) => e.messageId)
              .filter(firstPerOrder(others))
              .sort(),
          );
        }),
        SEARCH,
      );
    },
    TIMEOUT_MS,
  );

  it(
    'a message that deadlocks on its first attempt only is applied once, not dead-lettered',
    async () => {
      // At debug, the consumer logs a failed chunk's error too, not only a failed lone message's.
      app = await startFulfillmentCaughtUp(kafka, producer, db, { LOG_LEVEL: 'debug' });
      const holder = new Client({ connectionString: testEnv.fulfillmentUrl });
      await holder.connect();
      // Long enough that PostgreSQL always picks the consumer's side of the cycle, never this session.
      await holder.query(`SET deadlock_timeout = '10s'`);
      try {
        await fc.assert(
          fc.asyncProperty(streams, async (shape) => {
            await db.pool.query(`ALTER SEQUENCE e2e_deadlock_attempts RESTART`);
            await holder.query(`SELECT pg_advisory_lock(4202)`);
            const tenantId = `t-deadlock-${randomUUID().slice(0, 8)}`;
            const { marked, others, all } = stream(tenantId, 'DEADLOCK', shape);
            const deadlocksBefore = loggedFailures(app!, DEADLOCK_DETECTED);
            await produceAll(all);

            // Queue for the lock the consumer holds: the cycle closes and PostgreSQL cancels the consumer.
            await db.until(
              () => lockHeldByAnother(holder, 4201),
              (held) => held,
              30_000,
            );
            await holder.query(`SELECT pg_advisory_lock(4201)`);
            await holder.query(`SELECT pg_advisory_unlock_all()`);

            const settled = await db.until(
              () => outcomes(all.map((e) => e.messageId)),
              (seen) => Object.keys(seen).length === all.length,
              30_000,
            );
            for (const event of all) expect(settled[event.messageId]).toBe('applied');
            expect(await db.deadLetters(marked.messageId)).toEqual([]);
            const shipments = await db.shipments(tenantId);
            expect(shipments.filter((s) => s.order_id === marked.key)).toEqual([
              expect.objectContaining({ message_id: marked.messageId, status: 'pending' }),
            ]);
            expect(shipments).toHaveLength(1 + others.filter((e) => e.key !== marked.key).length);
            const { rows } = await db.pool.query(`SELECT last_value::int AS attempts FROM e2e_deadlock_attempts`);
            expect(rows[0].attempts).toBeGreaterThanOrEqual(2); // it did fail once, and ran again
            // PostgreSQL did detect it: an attempt failed with its deadlock_detected, as the consumer
            // logged it (pg_stat_database.deadlocks says so too, but only ~10 s later, when the consumer's
            // idle session flushes its statistics).
            await eventually(
              () => loggedFailures(app!, DEADLOCK_DETECTED),
              (n) => n > deadlocksBefore,
              { what: `a logged attempt failing with ${DEADLOCK_DETECTED}` },
            );
          }),
          SEARCH,
        );
      } finally {
        await holder.end();
      }
    },
    TIMEOUT_MS,
  );
});

const DEADLOCK_DETECTED = '40P01';

/** How many failed attempts (a lone message's or a chunk's) the consumer logged with SQLSTATE `code`. */
function loggedFailures(app: RunningApp, code: string): number {
  return app
    .output()
    .split('\n')
    .slice(0, -1) // complete lines only
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as { msg?: string; err?: { code?: string } })
    .filter((entry) => FAILED_ATTEMPT.includes(entry.msg ?? '') && entry.err?.code === code).length;
}

const FAILED_ATTEMPT = ['message failed; retrying', 'batch failed; going one message at a time'];

/** Whether another session holds advisory lock `key` in this database. */
async function lockHeldByAnother(session: Client, key: number): Promise<boolean> {
  const { rows } = await session.query(
    `SELECT 1 FROM pg_locks
     WHERE locktype = 'advisory' AND objid = $1 AND granted AND pid <> pg_backend_pid()
       AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`,
    [key],
  );
  return rows.length > 0;
}

/** Later OrderPlaced events of an order already placed change nothing (the shipment is unique per order). */
function firstPerOrder(events: OrderEventInput[]) {
  return (messageId: string) => {
    const event = events.find((e) => e.messageId === messageId)!;
    return events.find((e) => e.key === event.key) === event;
  };
}
