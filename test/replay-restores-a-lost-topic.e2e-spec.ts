import { Kafka } from 'kafkajs';
import { Headers, Topics } from '@app/contracts';
import { createKafka, ensureTopics } from '@app/platform';
import { RunningApp, startApp } from './support/apps';
import { ApiClientSession, commandApiFixture } from './support/command-api';
import { FulfillmentDb } from './support/fulfillment-db';
import { NotifierDb } from './support/notifier-db';
import { json, ops } from './support/ops-cli';
import { TestBroker } from './support/test-broker';
import { TopicReader, waitForTopic } from './support/topic-reader';
import { WebhookReceiver } from './support/webhook-receiver';
import { eventually } from './support/eventually';

/**
 * The operator's replay after a broker lost the order-events topic, against the whole chain on a broker
 * of this suite's own (it deletes the service topic): every event comes back with its original
 * message-id, the consumers absorb every copy as a duplicate (same shipments, same deliveries, no
 * second webhook POST), and the relay and consumers carry on on the recreated topic.
 */
describe('outbox:replay after the broker lost the topic', () => {
  const broker = new TestBroker(29_400);
  const env = { KAFKA_BROKERS: broker.brokers, KAFKA_SESSION_TIMEOUT_MS: '6000' };
  const suite = commandApiFixture(env);
  const fulfillment = new FulfillmentDb();
  const notifier = new NotifierDb();
  const receiver = new WebhookReceiver();
  const apps: Record<string, RunningApp> = {};
  let kafka: Kafka;

  async function duplicates(app: 'fulfillment' | 'notifier'): Promise<number> {
    const text = await (await fetch(`${apps[app].managementUrl}/metrics`)).text();
    const line = text.split('\n').find((l) => l.startsWith(`${app}_messages_total{outcome="duplicate"}`));
    return Number(line?.split(' ')[1] ?? 0);
  }

  beforeAll(async () => {
    await broker.start();
    kafka = createKafka({ brokers: [broker.brokers], clientId: 'e2e-replay' });
    await receiver.start();
    apps['outbox-relay'] = await startApp('outbox-relay', { ...env, RELAY_POLL_INTERVAL_MS: '200' });
    apps.fulfillment = await startApp('fulfillment', env);
    apps.notifier = await startApp('notifier', {
      ...env,
      WEBHOOK_URL: receiver.url,
      NOTIFIER_RETRY_MIN_MS: '50',
      NOTIFIER_RETRY_MAX_MS: '200',
    });
  }, 240_000);
  afterAll(async () => {
    await Promise.all(Object.values(apps).map((app) => app.stop()));
    await receiver.stop();
    await fulfillment.close();
    await notifier.close();
    await broker.destroy();
  }, 120_000);

  it('republishes every event with its original message-id; the consumers change nothing and carry on', async () => {
    const {
      rows: [{ now: before }],
    } = await suite.db.pool.query('SELECT now() AS now');
    const { tenantId, apiKey } = await suite.db.tenant();
    const client = new ApiClientSession(suite.api.url, apiKey);
    const orders: string[] = [];
    for (let i = 1; i <= 4; i++) {
      const created = await client.createOrder(`replay-${i}`, { sku: `SKU-${i}`, quantity: i });
      expect(created.status).toBe(201);
      orders.push(created.body.id);
    }
    expect((await client.cancelOrder(orders[0], 'replay-cancel', { reason: 'changed' })).status).toBe(200);

    const shipments = await fulfillment.until(
      () => fulfillment.shipments(tenantId),
      (rows) => rows.length === 4 && rows.some((row) => row.status === 'cancelled'),
      120_000,
    );
    // Five events, five webhooks (four order.placed, one order.cancelled), all delivered.
    const deliveries = await notifier.until(
      () => notifier.deliveries(tenantId),
      (rows) => rows.length === 5 && rows.every((row) => row.state === 'delivered'),
      120_000,
    );
    const posts = receiver.forTenant(tenantId).length;
    const { rows: outbox } = await suite.db.pool.query(
      `SELECT id, sequence, message_key, event_type, headers, created_at FROM outbox_messages WHERE tenant_id = $1 ORDER BY sequence`,
      [tenantId],
    );
    expect(outbox).toHaveLength(5);
    const duplicatesBefore = { fulfillment: await duplicates('fulfillment'), notifier: await duplicates('notifier') };

    // The broker loses the topic; it comes back empty.
    const admin = kafka.admin();
    await admin.connect();
    try {
      await admin.deleteTopics({ topics: [Topics.orderEvents], timeout: 30_000 });
      await eventually(
        () => admin.listTopics(),
        (topics) => !topics.includes(Topics.orderEvents),
        {
          intervalMs: 200,
          what: 'the topic deleted',
        },
      );
    } finally {
      await admin.disconnect();
    }
    // It comes back empty, as the relay would create it (ensureTopics waits out the moment right after a
    // deletion when the broker still answers "does not host this topic-partition").
    await ensureTopics(kafka, [Topics.orderEvents], 6);
    await waitForTopic(kafka, Topics.orderEvents); // led, even if the relay created it first

    const replay = json(await ops(['outbox:replay', '--from', before.toISOString(), '--topic', Topics.orderEvents, '--json'], env));
    expect(replay).toMatchObject({ dryRun: false, forced: false, finished: true, byTopic: { [Topics.orderEvents]: replay.published } });
    expect(replay.byTenant[tenantId]).toBe(5);

    // Every event is on the topic again: original message-id and headers, the replay's id, per-key order.
    const reader = new TopicReader(kafka, tenantId);
    await reader.start();
    try {
      const read = await reader.until((messages) => messages.length >= 5);
      // Nothing more than once: the recreated topic holds exactly what the replay says it published
      // (it had finished before the reader started), so this tenant's 5 are all of its messages.
      const admin = kafka.admin();
      await admin.connect();
      try {
        const ends = await admin.fetchTopicOffsets(Topics.orderEvents);
        expect(ends.reduce((sum, { high }) => sum + Number(high), 0)).toBe(replay.published);
      } finally {
        await admin.disconnect();
      }
      expect(reader.messages).toHaveLength(5);
      for (const row of outbox) {
        const message = read.find((m) => m.headers[Headers.messageId] === row.id)!;
        expect(message).toBeDefined();
        expect(message.key).toBe(row.message_key);
        expect(message.headers).toMatchObject({
          ...row.headers,
          [Headers.eventType]: row.event_type,
          [Headers.tenantId]: tenantId,
          [Headers.aggregateId]: row.message_key,
          [Headers.occurredAt]: row.created_at.toISOString(),
          [Headers.replayId]: replay.replayId,
        });
      }
      const cancelled = read.filter((m) => m.key === orders[0]).map((m) => m.headers[Headers.eventType]);
      expect(cancelled).toEqual(['OrderPlaced', 'OrderCancelled']);
    } finally {
      await reader.stop();
    }

    // The consumers read the recreated topic and took every copy as a duplicate: no effect changed.
    await fulfillment.until(
      () => duplicates('fulfillment'),
      (n) => n >= duplicatesBefore.fulfillment + 5,
      120_000,
    );
    await notifier.until(
      () => duplicates('notifier'),
      (n) => n >= duplicatesBefore.notifier + 5,
      120_000,
    );
    expect(await fulfillment.shipments(tenantId)).toEqual(shipments);
    expect(await notifier.deliveries(tenantId)).toEqual(deliveries);
    expect(receiver.forTenant(tenantId)).toHaveLength(posts);
    for (const row of outbox) {
      expect(await fulfillment.inbox(row.id)).toEqual([{ consumer: 'fulfillment', outcome: 'applied' }]);
      expect((await notifier.inbox(row.id)).map((r) => r.consumer)).toEqual(['notifier']);
    }
    const {
      rows: [stored],
    } = await suite.db.pool.query('SELECT * FROM outbox_replays WHERE id = $1', [replay.replayId]);
    expect(stored).toMatchObject({ forced: false, topic: Topics.orderEvents, published: replay.published });
    expect(stored.finished_at).not.toBeNull();

    // The relay publishes to the recreated topic and both consumers apply the new event.
    const later = await client.createOrder('replay-later', { sku: 'SKU-9', quantity: 9 });
    expect(later.status).toBe(201);
    await fulfillment.until(
      () => fulfillment.shipments(tenantId),
      (rows) => rows.length === 5,
      120_000,
    );
    await notifier.until(
      () => notifier.deliveries(tenantId),
      (rows) => rows.length === 6 && rows.every((row) => row.state === 'delivered'),
      120_000,
    );
    expect(receiver.forTenant(tenantId).filter((post) => post.body?.data?.orderId === later.body.id)).toHaveLength(1);
  }, 420_000);
});
