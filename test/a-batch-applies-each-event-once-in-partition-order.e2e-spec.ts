import { randomUUID } from 'node:crypto';
import { DataSource } from 'typeorm';
import { Headers, orderEventContract, OrderEventTypes, Topics } from '@app/contracts';
import { contractHandler, InboxMessage, MalformedMessage, processOnce } from '@app/inbox';
import { postgresOptions } from '@app/platform';
import { ShipmentsHandler } from '../apps/fulfillment/src/shipments/fulfillment.handler';
import { FulfillmentDb } from './support/fulfillment-db';
import { testEnv } from './support/test-env';

/** Fulfillment's handler as its consumer runs it: behind the kit's reading of the order events. */
const handleOrderEvents = contractHandler(orderEventContract, new ShipmentsHandler());

/**
 * Fulfillment writes a batch's events in a few set-based statements (libs/inbox processOnce and its
 * handler). One transaction must still mean what the messages one by one would have meant: each
 * message-id once, even twice in the batch, and an order's events in partition order.
 */
describe('a batch of order events in one transaction', () => {
  const dataSource = new DataSource(postgresOptions({ url: testEnv.fulfillmentUrl, applicationName: 'e2e-batch', poolSize: 2 }));
  const db = new FulfillmentDb();
  let offset = 0;

  beforeAll(() => dataSource.initialize());
  afterAll(async () => {
    await dataSource.destroy();
    await db.close();
  });

  function message(tenantId: string, type: string, orderId: string, messageId = randomUUID()): InboxMessage {
    const payload =
      type === OrderEventTypes.cancelled
        ? { orderId, tenantId, reason: 'changed my mind', cancelledAt: new Date().toISOString() }
        : { orderId, tenantId, sku: 'SKU-1', quantity: 2, customerRef: null, placedAt: new Date().toISOString() };
    const headers = {
      [Headers.messageId]: messageId,
      [Headers.eventType]: type,
      [Headers.eventVersion]: '1',
      [Headers.tenantId]: tenantId,
    };
    return {
      topic: Topics.orderEvents,
      partition: 0,
      offset: String(offset++),
      key: orderId,
      headers,
      value: JSON.stringify(payload),
      messageId,
      eventType: type,
    };
  }

  it('applies each message-id once and each order in order: placed then cancelled, cancelled then placed, repeats', async () => {
    const tenantId = `t-${randomUUID().slice(0, 12)}`;
    const [a, b, c] = [randomUUID(), randomUUID(), randomUUID()];
    const placedA = message(tenantId, OrderEventTypes.placed, a);
    const batch = [
      placedA,
      { ...placedA, offset: String(offset++) }, // the relay published it twice, back to back
      message(tenantId, OrderEventTypes.cancelled, b), // ahead of its OrderPlaced (a re-drive comes later)
      message(tenantId, OrderEventTypes.placed, b),
      message(tenantId, OrderEventTypes.placed, c),
      message(tenantId, OrderEventTypes.cancelled, c),
      message(tenantId, 'OrderShipped', c),
      message(tenantId, OrderEventTypes.placed, a), // another OrderPlaced of an order it has: no second shipment
    ];

    const outcomes = await processOnce(dataSource, 'fulfillment', batch, handleOrderEvents);

    expect(outcomes).toEqual(['applied', 'duplicate', 'applied', 'applied', 'applied', 'applied', 'skipped', 'applied']);
    const shipments = await db.shipments(tenantId);
    expect(Object.fromEntries(shipments.map((s) => [s.order_id, s.status]))).toEqual({
      [a]: 'pending',
      [b]: 'cancelled',
      [c]: 'cancelled',
    });
    expect(shipments.find((s) => s.order_id === a)?.message_id).toBe(placedA.messageId);
    expect(await db.inbox(batch[6].messageId!)).toEqual([{ consumer: 'fulfillment', outcome: 'skipped' }]);
    expect(await db.inbox(placedA.messageId!)).toEqual([{ consumer: 'fulfillment', outcome: 'applied' }]);

    // Redelivered whole (a crash before the offset commit): nothing changes. What it skipped it looks at
    // again (it may understand it by now: a-skipped-event-is-applied-once-understood), and skips again.
    expect(await processOnce(dataSource, 'fulfillment', batch, handleOrderEvents)).toEqual(
      batch.map((m) => (m.eventType === 'OrderShipped' ? 'skipped' : 'duplicate')),
    );
    expect(await db.inbox(batch[6].messageId!)).toEqual([{ consumer: 'fulfillment', outcome: 'skipped' }]);
    const byOrder = (rows: typeof shipments) => [...rows].sort((x, y) => x.order_id.localeCompare(y.order_id));
    expect(byOrder(await db.shipments(tenantId))).toEqual(byOrder(shipments));
  });

  it('rolls the whole batch back when one message is malformed: no inbox row and no effect for any of them', async () => {
    const tenantId = `t-${randomUUID().slice(0, 12)}`;
    const good = message(tenantId, OrderEventTypes.placed, randomUUID());
    const bad = { ...message(tenantId, OrderEventTypes.placed, randomUUID()), value: '{"orderId": 42}' };

    await expect(processOnce(dataSource, 'fulfillment', [good, bad], handleOrderEvents)).rejects.toBeInstanceOf(MalformedMessage);

    expect(await db.shipments(tenantId)).toEqual([]);
    expect(await db.inbox(good.messageId!)).toEqual([]);
  });
});
