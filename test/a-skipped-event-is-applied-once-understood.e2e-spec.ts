import { randomUUID } from 'node:crypto';
import { Producer } from 'kafkajs';
import { Topics } from '@app/contracts';
import { RunningApp } from './support/apps';
import { FulfillmentDb } from './support/fulfillment-db';
import { appMetric, orderPlaced, POISON_QUANTITY, startFulfillmentCaughtUp } from './support/fulfillment-consumer';
import { ensureServiceTopics, produceOrderEvent, testKafka } from './support/kafka';
import { eventually } from './support/eventually';

/**
 * A consumer skips what it does not understand (an unknown event type, a newer version) and keeps an
 * inbox row for it, `skipped`. Once it understands such events (it was upgraded) an operator replays
 * them; the inbox must not take the replay for a duplicate of something applied, or the events are
 * lost for good. The skipped row here is the one a consumer that did not know OrderPlaced yet left.
 */
describe('an event a consumer skipped', () => {
  const kafka = testKafka('e2e-skipped-events');
  const db = new FulfillmentDb();
  let producer: Producer;
  let fulfillment: RunningApp;

  beforeAll(async () => {
    await ensureServiceTopics(kafka);
    producer = kafka.producer();
    await producer.connect();
    fulfillment = await startFulfillmentCaughtUp(kafka, producer, db);
  }, 120_000);
  afterAll(async () => {
    await fulfillment?.stop();
    await producer?.disconnect();
    await db.pool.end();
  });

  /** The inbox row a consumer that did not know OrderPlaced yet left for `messageId`, an hour ago. */
  const skippedEarlier = (messageId: string) =>
    db.pool.query(
      `INSERT INTO inbox_messages (consumer, message_id, topic, kafka_partition, kafka_offset, event_type, outcome, received_at)
       VALUES ('fulfillment', $1, $2, 0, 0, 'OrderPlaced', 'skipped', now() - interval '1 hour')`,
      [messageId, Topics.orderEvents],
    );
  const counted = (outcome: string) => appMetric(fulfillment, 'fulfillment_messages_total', `outcome="${outcome}"`);

  it('is applied when it comes back once understood, once: a later copy is a duplicate', async () => {
    const tenantId = `t-skipped-${randomUUID().slice(0, 8)}`;
    const event = orderPlaced(tenantId);
    await skippedEarlier(event.messageId);

    await produceOrderEvent(producer, event);
    const [shipment] = await db.until(
      () => db.shipments(tenantId),
      (rows) => rows.length === 1,
    );
    expect(shipment).toMatchObject({ order_id: event.key, message_id: event.messageId });
    expect(await db.inbox(event.messageId)).toEqual([{ consumer: 'fulfillment', outcome: 'applied' }]);
    const [{ recent }] = (
      await db.pool.query(`SELECT received_at > now() - interval '1 minute' AS recent FROM inbox_messages WHERE message_id = $1`, [
        event.messageId,
      ])
    ).rows;
    expect(recent).toBe(true); // remembered from this delivery on, for the whole retention

    const duplicates = await counted('duplicate');
    await produceOrderEvent(producer, event);
    await eventually(
      () => counted('duplicate'),
      (n) => n === duplicates + 1,
      { what: 'the second copy counted a duplicate' },
    );
    expect(await db.shipments(tenantId)).toHaveLength(1);
  });

  it('is dead-lettered, and re-drivable, when it comes back understood and fails every time', async () => {
    const tenantId = `t-skipped-${randomUUID().slice(0, 8)}`;
    const event = orderPlaced(tenantId, { quantity: POISON_QUANTITY });
    await skippedEarlier(event.messageId);

    await produceOrderEvent(producer, event);
    const [letter] = await db.until(
      () => db.deadLetters(event.messageId),
      (rows) => rows.length === 1,
    );
    expect(letter.consumer).toBe('fulfillment');
    // dlq:redrive forgets only a dead-lettered inbox row: a row left `skipped` would keep it from the consumer.
    expect(await db.inbox(event.messageId)).toEqual([{ consumer: 'fulfillment', outcome: 'dead-lettered' }]);
  });

  it('stays skipped, changing nothing, while the consumer still does not understand it', async () => {
    const tenantId = `t-skipped-${randomUUID().slice(0, 8)}`;
    const event = { ...orderPlaced(tenantId), version: 99 };
    const seen = async () => (await counted('skipped')) + (await counted('duplicate'));
    const before = await seen();

    await produceOrderEvent(producer, event);
    await produceOrderEvent(producer, event);
    await eventually(seen, (n) => n === before + 2, { what: 'both copies consumed' });
    expect(await db.inbox(event.messageId)).toEqual([{ consumer: 'fulfillment', outcome: 'skipped' }]);
    expect(await db.shipments(tenantId)).toEqual([]);
  });
});
