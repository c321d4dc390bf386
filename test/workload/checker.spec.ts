import { Attempt, History } from './history';
import { check, KafkaMessage, Snapshot } from './checker';

const A = '00000000-0000-4000-8000-00000000000a';
const B = '00000000-0000-4000-8000-00000000000b';
const PA = '00000000-0000-4000-8000-0000000000a1';
const PB = '00000000-0000-4000-8000-0000000000b1';
const CA = '00000000-0000-4000-8000-0000000000a2';

function attempt(over: Partial<Attempt>): Attempt {
  return { operation: 'orders.create', key: 'k1', intent: 'first', fields: {}, startedAt: 0, endedAt: 1, replayed: false, ...over };
}

/** Two orders, A cancelled; every table and the topic as a clean run leaves them. */
function cleanRun(): { history: History; snapshot: Snapshot; kafka: KafkaMessage[] } {
  const history: History = {
    tenantId: 't',
    attempts: [
      attempt({ key: 'k1', status: 201, orderId: A }),
      attempt({ key: 'k1', intent: 'retry', status: 201, orderId: A, replayed: true }),
      attempt({ key: 'k1', intent: 'changed', status: 422 }),
      attempt({ key: 'k2', error: 'TIMEOUT' }),
      attempt({ operation: 'orders.cancel', key: 'c1', status: 200, orderId: A }),
    ],
    resolutions: [{ operation: 'orders.create', key: 'k2', lookupStatus: 200, responseStatus: 201, effectId: B }],
  };
  const snapshot: Snapshot = {
    orders: [
      { id: A, status: 'cancelled' },
      { id: B, status: 'placed' },
    ],
    receipts: [
      { operation: 'orders.create', key: 'k1', responseStatus: 201, effectId: A },
      { operation: 'orders.create', key: 'k2', responseStatus: 201, effectId: B },
      { operation: 'orders.cancel', key: 'c1', responseStatus: 200, effectId: A },
    ],
    outbox: [
      { id: PA, sequence: 1, messageKey: A, eventType: 'OrderPlaced', published: true },
      { id: PB, sequence: 2, messageKey: B, eventType: 'OrderPlaced', published: true },
      { id: CA, sequence: 3, messageKey: A, eventType: 'OrderCancelled', published: true },
    ],
    shipments: [
      { orderId: A, status: 'cancelled', messageId: PA },
      { orderId: B, status: 'pending', messageId: PB },
    ],
    cancelledMarkers: [],
    inbox: [
      ...[PA, PB, CA].map((messageId) => ({ consumer: 'fulfillment', messageId, outcome: 'applied' })),
      { consumer: 'notifier', messageId: PA, outcome: 'applied' },
      { consumer: 'notifier', messageId: PB, outcome: 'applied' },
      { consumer: 'notifier', messageId: CA, outcome: 'applied' },
    ],
    webhookDeliveries: [
      { messageId: PA, orderId: A, state: 'delivered' },
      { messageId: PB, orderId: B, state: 'delivered' },
      { messageId: CA, orderId: A, state: 'delivered' },
    ],
    webhookPosts: [
      { messageId: PA, orderId: A, type: 'order.placed', status: 503 },
      { messageId: PA, orderId: A, type: 'order.placed', status: 200 },
      { messageId: PB, orderId: B, type: 'order.placed', status: 200 },
      { messageId: CA, orderId: A, type: 'order.cancelled', status: 200 },
      { messageId: PB, orderId: B, type: 'order.placed', status: 200 },
    ],
  };
  const kafka: KafkaMessage[] = [
    { partition: 1, offset: 0, key: A, messageId: PA, eventType: 'OrderPlaced' },
    { partition: 1, offset: 1, key: A, messageId: CA, eventType: 'OrderCancelled' },
    { partition: 1, offset: 2, key: A, messageId: PA, eventType: 'OrderPlaced' },
    { partition: 4, offset: 0, key: B, messageId: PB, eventType: 'OrderPlaced' },
  ];
  return { history, snapshot, kafka };
}

describe('the history checker', () => {
  it('counts a clean run as clean: replays, a resolved timeout, a republished message and a repeated POST are no problem', () => {
    const { history, snapshot, kafka } = cleanRun();
    const { counts, problems } = check(history, snapshot, kafka);
    expect(problems).toEqual([]);
    expect(counts).toMatchObject({
      commandsSent: 5,
      acknowledged: 3,
      resolvedByReceipt: 1,
      unknown: 0,
      rejectedChangedFields: 1,
      orders: 2,
      cancellations: 1,
      outboxRows: 3,
      kafkaMessageIds: 3,
      kafkaRedeliveries: 1,
      fulfillmentApplied: 3,
      notifierDelivered: 3,
      webhookRepeats: 1,
      lost: 0,
      duplicated: 0,
      outOfOrder: 0,
      serverErrors: 0,
    });
  });

  it('an unknown outcome may have no effect', () => {
    const run = cleanRun();
    run.history.attempts.push(attempt({ key: 'k9', error: 'ECONNRESET' }));
    const { counts, problems } = check(run.history, run.snapshot, run.kafka);
    expect(problems).toEqual([]);
    expect(counts.unknown).toBe(1);
  });

  it('counts an acknowledged order that is missing, and the effects behind it, as lost', () => {
    const run = cleanRun();
    run.snapshot.shipments = run.snapshot.shipments.filter((s) => s.orderId !== B);
    run.kafka = run.kafka.filter((m) => m.messageId !== PB);
    const { counts, problems } = check(run.history, run.snapshot, run.kafka);
    expect(counts.lost).toBe(2);
    expect(problems).toEqual([`lost: outbox row ${PB} (OrderPlaced, ${B}) is not on Kafka`, `lost: order ${B} has no shipment`]);
  });

  it('counts an effect without its receipt, a second event and a changed-fields 201 as duplicated', () => {
    const run = cleanRun();
    const C = '00000000-0000-4000-8000-00000000000c';
    run.snapshot.orders.push({ id: C, status: 'placed' });
    run.snapshot.outbox.push({
      id: '00000000-0000-4000-8000-0000000000b9',
      sequence: 4,
      messageKey: B,
      eventType: 'OrderPlaced',
      published: true,
    });
    run.history.attempts.push(attempt({ key: 'k2', intent: 'changed', status: 201, orderId: C }));
    const { counts, problems } = check(run.history, run.snapshot, run.kafka);
    expect(counts.duplicated).toBe(3);
    expect(problems).toEqual(
      expect.arrayContaining([
        'duplicated: orders.create k2 with changed fields answered 201, not 422',
        `duplicated: order ${C} is the effect of 0 create receipts`,
        `duplicated: order ${B} has 2 OrderPlaced rows`,
      ]),
    );
  });

  it('counts a cancellation before its order on Kafka or at fulfillment as out of order', () => {
    const run = cleanRun();
    run.kafka[0].offset = 5;
    run.snapshot.cancelledMarkers.push({ orderId: A });
    const { counts } = check(run.history, run.snapshot, run.kafka);
    expect(counts.outOfOrder).toBe(2);
  });

  it('counts a webhook that is not delivered as lost, and a cancellation POSTed before its order was accepted as out of order', () => {
    const run = cleanRun();
    run.snapshot.webhookDeliveries[1] = { messageId: PB, orderId: B, state: 'dead', lastError: 'receiver answered 400; not retried' };
    const cancelled = run.snapshot.webhookPosts.splice(3, 1)[0];
    run.snapshot.webhookPosts.unshift(cancelled);
    const { counts, problems } = check(run.history, run.snapshot, run.kafka);
    expect(problems).toEqual([
      `lost: webhook delivery ${PB} is dead: receiver answered 400; not retried`,
      `outOfOrder: the cancellation webhook of ${A} was POSTed before its order.placed was accepted`,
    ]);
    expect(counts).toMatchObject({ lost: 1, outOfOrder: 1, notifierDelivered: 2 });
  });

  it('counts every 5xx, and tells a 503 with Retry-After from the rest', () => {
    const run = cleanRun();
    run.history.attempts.push(attempt({ key: 'k1', intent: 'retry', status: 503, retryAfter: '1' }));
    run.history.attempts.push(attempt({ key: 'k1', intent: 'retry', status: 500 }));
    const { counts } = check(run.history, run.snapshot, run.kafka);
    expect(counts).toMatchObject({ serverErrors: 2, unavailable: 1 });
  });

  it('counts an acknowledgement without a receipt as lost and a 2xx receipt without its order', () => {
    const run = cleanRun();
    run.snapshot.receipts = run.snapshot.receipts.filter((r) => r.key !== 'k1');
    run.snapshot.receipts.push({
      operation: 'orders.create',
      key: 'k7',
      responseStatus: 201,
      effectId: '00000000-0000-4000-8000-0000000000ff',
    });
    const { problems } = check(run.history, run.snapshot, run.kafka);
    expect(problems).toEqual(
      expect.arrayContaining([
        'lost: orders.create k1 was acknowledged (201) but has no receipt',
        'receiptsWithoutEffects: orders.create k7 stores 201 for 00000000-0000-4000-8000-0000000000ff, which does not exist',
        `duplicated: order ${A} is the effect of 0 create receipts`,
      ]),
    );
  });

  // The detectors the clean and broken runs above never set off: each must fire on its own.
  it('counts a retry answered with another order than the first answer as duplicated', () => {
    const run = cleanRun();
    run.history.attempts.push(attempt({ key: 'k1', intent: 'retry', status: 201, orderId: B, replayed: true }));
    const { counts, problems } = check(run.history, run.snapshot, run.kafka);
    expect(counts.duplicated).toBe(1);
    expect(problems).toEqual([`duplicated: orders.create k1 was answered differently: 201 ${A} / 201 ${B}`]);
  });

  it("counts one order's events on two partitions as out of order", () => {
    const run = cleanRun();
    run.kafka[1] = { ...run.kafka[1], partition: 2, offset: 9 };
    const { counts, problems } = check(run.history, run.snapshot, run.kafka);
    expect(counts.outOfOrder).toBe(1);
    expect(problems).toEqual([`outOfOrder: the events of ${A} are on partitions 1, 2`]);
  });

  it('counts a webhook recorded as delivered that the receiver never accepted as lost', () => {
    const run = cleanRun();
    run.snapshot.webhookPosts = run.snapshot.webhookPosts.filter((post) => post.messageId !== PB);
    const { counts, problems } = check(run.history, run.snapshot, run.kafka);
    expect(counts.lost).toBe(1);
    expect(problems).toEqual([`lost: webhook delivery ${PB} recorded as delivered but never accepted`]);
  });
});
