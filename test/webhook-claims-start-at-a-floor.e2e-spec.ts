import { randomUUID } from 'node:crypto';
import { Producer } from 'kafkajs';
import { DataSource } from 'typeorm';
import { OrderEventTypes } from '@app/contracts';
import { RunningApp, startApp } from './support/apps';
import { deliveriesOfTheirOwn } from './support/deliveries-of-their-own';
import { eventually } from './support/eventually';
import { produceOrderEvent, readyForNotifiers, testKafka } from './support/kafka';
import { deadToEverySnapshot } from './support/snapshots';
import { WebhookReceiver } from './support/webhook-receiver';

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
});
