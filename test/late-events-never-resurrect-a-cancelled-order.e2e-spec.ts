import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import { Producer } from 'kafkajs';
import { OrderEventTypes, Topics } from '@app/contracts';
import { RunningApp, startApp } from './support/apps';
import { FulfillmentDb } from './support/fulfillment-db';
import { ensureServiceTopics, OrderEventInput, produceOrderEvent, skipConsumerBacklog, testKafka } from './support/kafka';
import { ops } from './support/ops-cli';
import { searchSettings, searchTimeout } from './support/search';

const FAST = {
  FULFILLMENT_MAX_ATTEMPTS: '3',
  FULFILLMENT_RETRY_MIN_MS: '50',
  FULFILLMENT_RETRY_MAX_MS: '200',
  KAFKA_SESSION_TIMEOUT_MS: '6000',
};

const placed = (tenantId: string, orderId: string, messageId = randomUUID()): OrderEventInput => ({
  messageId,
  type: OrderEventTypes.placed,
  tenantId,
  key: orderId,
  payload: { orderId, tenantId, sku: 'SKU-1', quantity: 2, customerRef: null, placedAt: new Date().toISOString() },
});

const cancelled = (tenantId: string, orderId: string, messageId = randomUUID()): OrderEventInput => ({
  messageId,
  type: OrderEventTypes.cancelled,
  tenantId,
  key: orderId,
  payload: { orderId, tenantId, reason: 'changed', cancelledAt: new Date().toISOString() },
});

/** An event type fulfillment skips: behind everything else of its key, so its inbox row says the key is done. */
const sentinel = (tenantId: string, orderId: string): OrderEventInput => ({
  type: 'OrderGiftWrapped',
  tenantId,
  key: orderId,
  payload: { orderId, tenantId },
});

/**
 * Per-key order holds only for events that flow normally. An OrderPlaced that was dead-lettered and
 * re-driven, or one that comes late for any reason, arrives after its OrderCancelled: fulfillment
 * must decide from what it knows of the order, and never hold a pending shipment for a cancelled one.
 */
describe('late events and re-drives never resurrect a cancelled order in fulfillment', () => {
  const kafka = testKafka('late-events-e2e');
  const db = new FulfillmentDb();
  let producer: Producer;
  let app: RunningApp;

  const outcome = async (messageId: string) => (await db.inbox(messageId))[0]?.outcome;
  const applied = (messageId: string) =>
    db.until(
      () => outcome(messageId),
      (found) => found === 'applied',
      60_000,
    );

  beforeAll(async () => {
    await ensureServiceTopics(kafka);
    producer = kafka.producer({ idempotent: true });
    await producer.connect();
    await skipConsumerBacklog(kafka, ['fulfillment'], Topics.orderEvents);
    app = await startApp('fulfillment', FAST);
    // Caught up: the group has joined and is consuming.
    const marker = await produceOrderEvent(producer, placed(`t-sync-${randomUUID().slice(0, 8)}`, randomUUID()));
    await db.until(
      () => db.inbox(marker),
      (rows) => rows.length === 1,
      90_000,
    );
  }, 120_000);
  afterAll(async () => {
    await app?.stop();
    await producer?.disconnect();
    await db.close();
  });

  it('an OrderCancelled consumed before its OrderPlaced: the late OrderPlaced leaves a cancelled shipment, not a pending one', async () => {
    const tenantId = `t-${randomUUID().slice(0, 12)}`;
    const orderId = randomUUID();
    const cancelId = await produceOrderEvent(producer, cancelled(tenantId, orderId));
    await applied(cancelId);
    expect(await db.shipments(tenantId)).toEqual([]);

    const placedId = await produceOrderEvent(producer, placed(tenantId, orderId));
    await applied(placedId);
    expect(await db.shipments(tenantId)).toEqual([{ order_id: orderId, status: 'cancelled', message_id: placedId, quantity: 2 }]);
  });

  it('an OrderPlaced dead-lettered, its OrderCancelled applied, then `dlq:redrive` of the OrderPlaced: still no pending shipment', async () => {
    const tenantId = `t-${randomUUID().slice(0, 12)}`;
    const orderId = randomUUID();
    // A fault of fulfillment's own that an operator later fixes: its database refuses this one order for now.
    const refusal = `e2e_refuse_${orderId.replace(/-/g, '')}`;
    await db.pool.query(`ALTER TABLE shipments ADD CONSTRAINT ${refusal} CHECK (order_id <> '${orderId}') NOT VALID`);
    let placedId: string;
    try {
      placedId = await produceOrderEvent(producer, placed(tenantId, orderId));
      await db.until(
        () => outcome(placedId),
        (found) => found === 'dead-lettered',
        60_000,
      );
      expect(await db.deadLetters(placedId)).toEqual([expect.objectContaining({ consumer: 'fulfillment', attempts: 3 })]);
    } finally {
      await db.pool.query(`ALTER TABLE shipments DROP CONSTRAINT IF EXISTS ${refusal}`);
    }

    const cancelId = await produceOrderEvent(producer, cancelled(tenantId, orderId));
    await applied(cancelId);
    expect(await db.shipments(tenantId)).toEqual([]);

    const redrive = await ops(['dlq:redrive', placedId!, '--consumer', 'fulfillment']);
    expect({ status: redrive.status, stderr: redrive.stderr }).toEqual({ status: 0, stderr: '' });
    await applied(placedId!);
    expect(await db.shipments(tenantId)).toEqual([{ order_id: orderId, status: 'cancelled', message_id: placedId!, quantity: 2 }]);
  }, 120_000);

  /**
   * Several orders; each has zero to two copies of its OrderPlaced (one message-id: a redelivery or a
   * replay) and zero to two of its OrderCancelled, in any order. The final state depends only on
   * which events exist: a cancelled shipment if the order was both placed and cancelled, a pending
   * one if it was only placed, none if it was never placed.
   */
  it(
    'any order of placed, cancelled and redelivered events ends in the state the events describe',
    async () => {
      const order = fc
        .record({ placedCopies: fc.integer({ min: 0, max: 2 }), cancelledCopies: fc.integer({ min: 0, max: 2 }) })
        .filter(({ placedCopies, cancelledCopies }) => placedCopies + cancelledCopies > 0);
      const scenario = fc.array(order, { minLength: 1, maxLength: 4 }).chain((orders) => {
        const copies = orders.flatMap(({ placedCopies, cancelledCopies }, i) => [
          ...Array.from({ length: placedCopies }, () => ({ order: i, type: OrderEventTypes.placed })),
          ...Array.from({ length: cancelledCopies }, () => ({ order: i, type: OrderEventTypes.cancelled })),
        ]);
        return fc.record({ orders: fc.constant(orders), sequence: fc.shuffledSubarray(copies, { minLength: copies.length }) });
      });

      await fc.assert(
        fc.asyncProperty(scenario, async ({ orders, sequence }) => {
          const tenantId = `t-${randomUUID().slice(0, 12)}`;
          const ids = orders.map(() => ({ orderId: randomUUID(), placedId: randomUUID(), cancelledId: randomUUID() }));
          for (const { order, type } of sequence) {
            const { orderId, placedId, cancelledId } = ids[order];
            await produceOrderEvent(
              producer,
              type === OrderEventTypes.placed ? placed(tenantId, orderId, placedId) : cancelled(tenantId, orderId, cancelledId),
            );
          }
          const done = await Promise.all(ids.map(({ orderId }) => produceOrderEvent(producer, sentinel(tenantId, orderId))));
          await Promise.all(
            done.map((id) =>
              db.until(
                () => outcome(id),
                (found) => found === 'skipped',
                60_000,
              ),
            ),
          );

          const expected = orders.flatMap(({ placedCopies, cancelledCopies }, i) =>
            placedCopies
              ? [{ order_id: ids[i].orderId, status: cancelledCopies ? 'cancelled' : 'pending', message_id: ids[i].placedId, quantity: 2 }]
              : [],
          );
          const byOrder = (a: { order_id: string }, b: { order_id: string }) => a.order_id.localeCompare(b.order_id);
          expect((await db.shipments(tenantId)).sort(byOrder)).toEqual(expected.sort(byOrder));
        }),
        searchSettings({ fast: 25, long: 150 }),
      );
    },
    searchTimeout(300_000),
  );
});
