import { randomUUID } from 'node:crypto';
import { Producer } from 'kafkajs';
import { Pool } from 'pg';
import { DataSource } from 'typeorm';
import { OrderEventTypes } from '@app/contracts';
import { RunningApp, startApp } from './support/apps';
import { deliveriesOfTheirOwn } from './support/deliveries-of-their-own';
import { eventually } from './support/eventually';
import { produceOrderEvent, readyForNotifiers, testKafka } from './support/kafka';
import { deadToEverySnapshot } from './support/snapshots';
import { WebhookReceiver } from './support/webhook-receiver';
import { mulberry32 } from './workload/driver';

const DELIVERED_BEFORE = 100_000;
const LIVE = 200;

/** `count` pending deliveries of orders of their own, due since `dueSql` (an SQL timestamptz expression); their message ids. */
async function recordPending(db: DataSource, count: number, dueSql = 'now()'): Promise<string[]> {
  const rows: { message_id: string }[] = await db.query(
    /* sql */ `
    INSERT INTO webhook_deliveries (message_id, tenant_id, order_id, url, event_type, payload, state, next_attempt_at)
    SELECT gen_random_uuid(), 't', gen_random_uuid(), 'http://127.0.0.1:1/hook', 'OrderPlaced', '{}', 'pending', ${dueSql}
    FROM generate_series(1, $1)
    RETURNING message_id`,
    [count],
  );
  return rows.map((row) => row.message_id);
}

/** Blocks read from the index of pending deliveries, by every session so far (the statistics flushed). */
async function dueIndexBlocks(db: DataSource): Promise<number> {
  const [{ blocks }] = await db.query(/* sql */ `
    SELECT (idx_blks_hit + idx_blks_read)::int AS blocks FROM pg_statio_user_indexes WHERE indexrelname = 'webhook_deliveries_due_idx'`);
  return blocks;
}

/**
 * Each claim of the dispatcher reads the index of pending deliveries in due order. A delivered row's
 * entry stays in that index until a vacuum, and on a table keeping two weeks of deliveries autovacuum
 * comes after a fifth of its rows changed: millions of deliveries apart at a few hundred events/s.
 * Claims that start at the index's beginning step over every one of those entries, about once per
 * event. The dispatcher's claims start at a floor instead (the lowest pending delivery, or a margin
 * before now), which it looks for every few seconds; the entries below it are read by that look alone.
 */
describe('the dispatcher claims from a floor, not from the first delivery since the last vacuum', () => {
  const db = deliveriesOfTheirOwn('wqfloor');
  const kafka = testKafka('webhook-floor');
  const receiver = new WebhookReceiver();
  let notifier: RunningApp | undefined;
  let producer: Producer;

  beforeAll(async () => {
    producer = await readyForNotifiers(kafka);
    await receiver.start();
  }, 90_000);
  afterAll(async () => {
    await notifier?.stop();
    await producer?.disconnect();
    await receiver.stop();
  });

  async function startNotifier(): Promise<RunningApp> {
    const url = (db().options as { url: string }).url;
    notifier = await startApp('notifier', { NOTIFIER_DATABASE_URL: url, WEBHOOK_URL: receiver.url, WEBHOOK_TIMEOUT_MS: '2000' });
    return notifier;
  }

  const delivered = async (messageIds: string[]) =>
    (
      await db().query(
        /* sql */ `SELECT count(*)::int AS n FROM webhook_deliveries WHERE message_id = ANY($1::uuid[]) AND state = 'delivered'`,
        [messageIds],
      )
    )[0].n as number;

  it(`${LIVE} deliveries after ${DELIVERED_BEFORE.toLocaleString('en')} not yet vacuumed away: the claims do not read those again`, async () => {
    const dataSource = db();
    await dataSource.query(/* sql */ `TRUNCATE webhook_deliveries`);
    // What the dispatcher delivered since the last vacuum: their entries stay in the index of pending rows.
    await recordPending(dataSource, DELIVERED_BEFORE, `now() - interval '10 minutes'`);
    await deadToEverySnapshot(dataSource, (manager) =>
      manager.query(/* sql */ `UPDATE webhook_deliveries SET state = 'delivered', delivered_at = now(), attempts = 1, status_code = 204`),
    );
    const before = await dueIndexBlocks(dataSource);

    // Orders' events, one at a time as they come at a trickle: the notifier records each and wakes its dispatcher.
    const app = await startNotifier();
    const tenantId = `t-floor-${randomUUID().slice(0, 8)}`;
    const live: string[] = [];
    for (let i = 0; i < LIVE; i++) {
      const orderId = randomUUID();
      live.push(
        await produceOrderEvent(producer, {
          type: OrderEventTypes.placed,
          tenantId,
          key: orderId,
          payload: { orderId, tenantId, sku: `SKU-${i}`, quantity: 1, customerRef: null, placedAt: new Date().toISOString() },
        }),
      );
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    await eventually(
      () => delivered(live),
      (n) => n === LIVE,
      { timeoutMs: 60_000, what: 'every live delivery to be delivered' },
    );
    await app.stop();
    notifier = undefined;

    // The notifier's sessions have ended (their statistics flushed as they did): count what they read.
    const after = await eventually(
      async () => [await dueIndexBlocks(dataSource), await dueIndexBlocks(dataSource)],
      ([a, b]) => a === b && a > before,
      { intervalMs: 300, what: 'the statistics of the index to settle' },
    );
    const perDelivery = (after[0] - before) / LIVE;
    console.log(
      `dispatcher after ${DELIVERED_BEFORE} delivered rows not vacuumed: ${after[0] - before} blocks of the pending index ` +
        `for ${LIVE} deliveries (${perDelivery.toFixed(1)} per delivery)`,
    );
    // 100,000 dead entries fill ~300 pages of the index: a claim from its beginning reads them all.
    expect(perDelivery).toBeLessThan(30);
    expect(new Set(receiver.requests.map((r) => r.idempotencyKey)).size).toBe(LIVE);
  }, 180_000);

  it('a delivery committed below the floor (its transaction began long before) is still delivered, within seconds', async () => {
    const dataSource = db();
    await startNotifier();
    // The floor has risen past the deliveries of the test before: a claim has taken a new one.
    const first = await recordPending(dataSource, 1);
    await eventually(
      () => delivered(first),
      (n) => n === 1,
      { timeoutMs: 30_000, what: 'a first delivery' },
    );
    // A delivery's due time is its recording transaction's start (now()): one that began an hour ago
    // commits a row due an hour ago, below the floor.
    const recordedAt = Date.now();
    const late = await recordPending(dataSource, 1, `now() - interval '1 hour'`);
    await eventually(
      () => delivered(late),
      (n) => n === 1,
      { timeoutMs: 30_000, what: 'the delivery below the floor' },
    );
    console.log(`a delivery committed below the floor was delivered ${Date.now() - recordedAt} ms after it was recorded`);
  }, 90_000);

  it('deliveries recorded by transactions held open at random, some past the margin: each is delivered at most one look after its commit', async () => {
    const url = (db().options as { url: string }).url;
    if (!notifier) await startNotifier();
    const seed = Number(process.env.SEED ?? Date.now() % 1_000_000);
    const random = mulberry32(seed);
    // Twelve recording transactions begin at random moments; every other one stays open more than
    // 15 s, past the floor's 10 s margin and one look (every 5 s) more, before it commits: a look has
    // raised the floor past its due time while it was invisible, and its rows land below the floor.
    const plans = Array.from({ length: 12 }, (_, i) => ({
      beginInMs: random() * 3_000,
      holdMs: i % 2 ? random() * 3_000 : 15_500 + random() * 4_000,
    }));
    const pool = new Pool({ connectionString: url, max: plans.length });
    try {
      const recorded = await Promise.all(
        plans.map(async ({ beginInMs, holdMs }) => {
          await new Promise((resolve) => setTimeout(resolve, beginInMs));
          const client = await pool.connect();
          try {
            await client.query('BEGIN');
            await client.query('SELECT now()'); // its due time: this transaction's start
            await new Promise((resolve) => setTimeout(resolve, holdMs));
            const { rows } = await client.query<{ message_id: string }>(/* sql */ `
              INSERT INTO webhook_deliveries (message_id, tenant_id, order_id, url, event_type, payload, state, next_attempt_at)
              SELECT gen_random_uuid(), 't', gen_random_uuid(), 'http://127.0.0.1:1/hook', 'OrderPlaced', '{}', 'pending', now()
              FROM generate_series(1, 5)
              RETURNING message_id`);
            const { rows: at } = await client.query<{ committing: Date }>(/* sql */ `SELECT clock_timestamp() AS committing`);
            await client.query('COMMIT');
            return { holdMs, messageIds: rows.map((row) => row.message_id), committing: at[0].committing };
          } finally {
            client.release();
          }
        }),
      );
      const messageIds = recorded.flatMap((r) => r.messageIds);
      await eventually(
        () => delivered(messageIds),
        (n) => n === messageIds.length,
        { timeoutMs: 30_000, what: `all ${messageIds.length} deliveries to be delivered (seed ${seed})` },
      );
      const { rows } = await pool.query<{ message_id: string; delivered_at: Date }>(
        /* sql */ `SELECT message_id, delivered_at FROM webhook_deliveries WHERE message_id = ANY($1::uuid[])`,
        [messageIds],
      );
      const deliveredAt = new Map(rows.map((row) => [row.message_id, row.delivered_at.getTime()]));
      const lateness = recorded.map(({ holdMs, messageIds: ids, committing }) => ({
        heldPastMargin: holdMs > 15_000,
        ms: Math.max(...ids.map((id) => deliveredAt.get(id)! - committing.getTime())),
      }));
      const worst = (pastMargin: boolean) => Math.max(...lateness.filter((l) => l.heldPastMargin === pastMargin).map((l) => l.ms));
      console.log(
        `floor under held transactions (seed ${seed}): delivered at most ${worst(false)} ms after commit when held under the margin, ` +
          `${worst(true)} ms when held past it`,
      );
      // The next look (every 5 s) lowers the floor to a delivery below it; the next poll (500 ms) claims it.
      expect(worst(true)).toBeLessThan(9_000);
      expect(worst(false)).toBeLessThan(9_000);
    } finally {
      await pool.end();
    }
  }, 90_000);
});
