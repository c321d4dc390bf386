import { randomUUID } from 'node:crypto';
import { Producer } from 'kafkajs';
import { Client } from 'pg';
import { CANONICAL_UUID_PATTERN, DeadLetterHeaders, Headers, OrderEventTypes, OrderPlacedV1, Topics } from '@app/contracts';
import { RunningApp, startApp } from './support/apps';
import { ensureServiceTopics, testKafka } from './support/kafka';
import { NotifierDb } from './support/notifier-db';
import { json, ops, OpsRun } from './support/ops-cli';
import { ReadMessage, TopicReader } from './support/topic-reader';
import { WebhookReceiver } from './support/webhook-receiver';
import { eventually } from './support/eventually';
import { testEnv } from './support/test-env';

/**
 * dlq:list and dlq:redrive against the real notifier (its own process), a real webhook receiver, real
 * Kafka and the notifier's real database. The notifier cannot record one OrderPlaced (its database
 * refuses the row: a check constraint this suite adds for that one order, as a bad deploy would), so
 * after its attempts it is dead-lettered; re-driven while the constraint is still there it is
 * dead-lettered again, listed again; once the constraint is gone a re-drive records it and the
 * webhook goes out once, with the message-id as its webhook-id, and re-driving it again is refused.
 */

const tenantId = `t-dlq-${randomUUID().slice(0, 8)}`;

function orderPlaced(orderId = randomUUID()) {
  const payload: OrderPlacedV1 = { orderId, tenantId, sku: 'SKU-9', quantity: 1, customerRef: null, placedAt: new Date().toISOString() };
  return { messageId: randomUUID(), orderId, payload };
}

/** The headers the relay gives an OrderPlaced. */
function relayHeaders(event: ReturnType<typeof orderPlaced>): Record<string, string> {
  return {
    [Headers.messageId]: event.messageId,
    [Headers.eventType]: OrderEventTypes.placed,
    [Headers.eventVersion]: '1',
    [Headers.tenantId]: tenantId,
    [Headers.aggregateId]: event.orderId,
    [Headers.occurredAt]: new Date().toISOString(),
  };
}

/** Produces as the relay does: key = order id, the relay's headers (unless `headers` replaces them). */
async function produce(producer: Producer, event: ReturnType<typeof orderPlaced>, headers?: Record<string, string>) {
  const [meta] = await producer.send({
    topic: Topics.orderEvents,
    acks: -1,
    messages: [
      {
        key: event.orderId,
        value: JSON.stringify(event.payload),
        headers: headers ?? relayHeaders(event),
      },
    ],
  });
  return { partition: meta.partition, offset: meta.baseOffset! };
}

function oneLine(run: OpsRun): string {
  const lines = run.stderr.split('\n').filter(Boolean);
  expect(lines).toHaveLength(1);
  return lines[0];
}

describe('dead letters are listed and re-driven to the consumer that gave up on them', () => {
  const kafka = testKafka('dlq-e2e');
  const db = new NotifierDb();
  const receiver = new WebhookReceiver();
  const guardConsumer = `h1-guard-${randomUUID().slice(0, 6)}`;
  /** The OrderPlaced this suite dead-letters and re-drives. */
  const event = orderPlaced();
  const forgottenId = randomUUID();
  /** The dead letters of this suite (the notifier's database also holds other suites'). */
  const mine = new Set<string>([event.messageId, forgottenId]);
  let producer: Producer;
  let notifier: RunningApp;

  const requests = () => receiver.requests.filter((r) => r.idempotencyKey === event.messageId);
  const constraint = `refuse_${event.orderId.replace(/-/g, '_')}`;
  const refuseTheOrder = () =>
    db.pool.query(`ALTER TABLE webhook_deliveries ADD CONSTRAINT ${constraint} CHECK (order_id <> '${event.orderId}'::uuid) NOT VALID`);
  const acceptTheOrder = () => db.pool.query(`ALTER TABLE webhook_deliveries DROP CONSTRAINT IF EXISTS ${constraint}`);
  const deadLetter = async (messageId: string) =>
    (
      await db.pool.query('SELECT error, attempts, redriven_at FROM dead_letters WHERE consumer = $1 AND message_id = $2', [
        'notifier',
        messageId,
      ])
    ).rows;
  const listed = async (...flags: string[]) =>
    (
      json(await ops(['dlq:list', '--consumer', 'notifier', '--json', ...flags])) as {
        messageId: string;
        hasMessageId: boolean;
        redrivenAt: string | null;
      }[]
    ).filter((row) => mine.has(row.messageId));

  beforeAll(async () => {
    await ensureServiceTopics(kafka);
    await receiver.start();
    producer = kafka.producer({ idempotent: true });
    await producer.connect();
    notifier = await startApp('notifier', {
      WEBHOOK_URL: receiver.url,
      // The receiver runs in this test's process, which a loaded machine can stall past a second: the default bound.
      WEBHOOK_TIMEOUT_MS: '5000',
      NOTIFIER_MAX_ATTEMPTS: '3',
      NOTIFIER_RETRY_MIN_MS: '50',
      NOTIFIER_RETRY_MAX_MS: '200',
      KAFKA_SESSION_TIMEOUT_MS: '6000',
    });
    // Caught up: the group has joined and consumed whatever earlier runs left on the topic.
    const marker = orderPlaced();
    await produce(producer, marker);
    await db.until(
      () => db.delivery(marker.messageId),
      (rows) => rows[0]?.state === 'delivered',
      90_000,
    );
  }, 120_000);

  afterAll(async () => {
    await acceptTheOrder();
    await notifier?.stop();
    await producer?.disconnect();
    await receiver.stop();
    await db.pool.query('DELETE FROM dead_letters WHERE message_id = $1', [forgottenId]);
    await db.pool.query('DELETE FROM inbox_consumers WHERE consumer = $1', [guardConsumer]);
    await db.close();
  });

  it('an OrderPlaced the notifier cannot record is dead-lettered after its attempts and listed with its coordinates and error', async () => {
    const since = new Date(Date.now() - 1_000).toISOString();
    await refuseTheOrder();
    const at = await produce(producer, event);

    await db.until(
      () => deadLetter(event.messageId),
      (rows) => rows.length === 1,
    );
    expect(await db.inbox(event.messageId)).toEqual([{ consumer: 'notifier', outcome: 'dead-lettered' }]);

    const [row] = await listed('--since', since);
    expect(row).toEqual({
      consumer: 'notifier',
      messageId: event.messageId,
      hasMessageId: true,
      eventType: 'OrderPlaced',
      topic: Topics.orderEvents,
      partition: at.partition,
      offset: at.offset,
      attempts: 3,
      error: expect.stringContaining(`violates check constraint "${constraint}"`),
      deadLetteredAt: expect.any(String),
      redrivenAt: null,
    });
    expect(await listed('--since', new Date(Date.now() + 60_000).toISOString())).toEqual([]);
  });

  it('a dry run and a re-drive while Kafka is unreachable change nothing: the dead letter stays re-drivable', async () => {
    const dry = json(await ops(['dlq:redrive', event.messageId, '--dry-run', '--json']));
    expect(dry).toEqual({
      redriveId: null,
      dryRun: true,
      selected: [
        { consumer: 'notifier', messageId: event.messageId, eventType: 'OrderPlaced', topic: Topics.orderEvents, redrivenAt: null },
      ],
      skipped: [],
    });

    const failed = await ops(['dlq:redrive', event.messageId], { KAFKA_BROKERS: '127.0.0.1:1' });
    expect(failed.status).toBe(1);
    expect(oneLine(failed)).toMatch(new RegExp(`^ops: re-driving ${event.messageId} \\(notifier\\) failed, it stays re-drivable: .*Kafka`));

    expect(await deadLetter(event.messageId)).toEqual([expect.objectContaining({ redriven_at: null, attempts: 3 })]);
    expect(await db.inbox(event.messageId)).toEqual([{ consumer: 'notifier', outcome: 'dead-lettered' }]);
    expect(await db.delivery(event.messageId)).toEqual([]);
    expect(requests()).toEqual([]);
  });

  it('re-driven while the notifier still cannot record it, it is dead-lettered again and listed again', async () => {
    const lastDeadLettered = async () =>
      (
        await db.pool.query('SELECT dead_lettered_at, redriven_at FROM dead_letters WHERE consumer = $1 AND message_id = $2', [
          'notifier',
          event.messageId,
        ])
      ).rows;
    // Read before the re-drive: the notifier may dead-letter it again before the command has even exited.
    const before = (await lastDeadLettered())[0].dead_lettered_at as Date;
    const first = json(await ops(['dlq:redrive', event.messageId, '--json']));
    expect(first).toEqual({
      redriveId: expect.stringMatching(CANONICAL_UUID_PATTERN),
      dryRun: false,
      selected: [
        {
          consumer: 'notifier',
          messageId: event.messageId,
          eventType: 'OrderPlaced',
          topic: Topics.orderEvents,
          redrivenAt: expect.any(String),
        },
      ],
      skipped: [],
    });

    const [again] = await db.until(lastDeadLettered, (rows) => rows[0]?.dead_lettered_at > before && rows[0]?.redriven_at === null);
    expect(again.redriven_at).toBeNull();
    expect(await listed()).toEqual([expect.objectContaining({ messageId: event.messageId, redrivenAt: null, attempts: 3 })]);
    expect(requests()).toEqual([]);
  });

  it('re-driven once the notifier can record it: one delivery keyed by the message-id; not listed any more; a second re-drive is refused', async () => {
    await acceptTheOrder();
    const topic = new TopicReader(kafka, tenantId);
    await topic.start();
    try {
      const run = await ops(['dlq:redrive', event.messageId]);
      expect(run.status).toBe(0);
      expect(run.stdout).toMatch(
        new RegExp(
          `^Re-drove 1 dead letter\\(s\\) \\(redrive-id [0-9a-f-]{36}\\):\\n  notifier  ${event.messageId}  -> ${Topics.orderEvents}\\n$`,
        ),
      );

      const [delivery] = await db.until(
        () => db.delivery(event.messageId),
        (rows) => rows[0]?.state === 'delivered',
      );
      expect(delivery).toMatchObject({ tenant_id: tenantId, order_id: event.orderId, status_code: 200, attempts: 1 });
      expect(await db.inbox(event.messageId)).toEqual([{ consumer: 'notifier', outcome: 'applied' }]);

      // Every copy on the topic: the original and two re-drives, each with the same message-id and key,
      // the re-drives with a redrive-id of their own and none of the dead-letter headers.
      const copiesOf = (messages: ReadMessage[]) => messages.filter((m) => m.headers[Headers.messageId] === event.messageId);
      const copies = copiesOf(await topic.until((messages) => copiesOf(messages).length === 3));
      for (const copy of copies) {
        expect(copy).toMatchObject({ key: event.orderId, value: event.payload });
        expect(Object.keys(copy.headers).filter((name) => name.startsWith('dlq-'))).toEqual([]);
      }
      const redriveIds = copies.map((copy) => copy.headers[Headers.redriveId]);
      expect(redriveIds[0]).toBeUndefined();
      expect(new Set(redriveIds.slice(1)).size).toBe(2);
      expect(Object.values(DeadLetterHeaders).some((name) => name in copies[2].headers)).toBe(false);
    } finally {
      await topic.stop();
    }

    const second = await ops(['dlq:redrive', event.messageId, '--json']);
    expect({ status: second.status, stdout: second.stdout }).toEqual({ status: 1, stdout: '' });
    expect(oneLine(second)).toMatch(
      new RegExp(`^ops: refused, nothing re-driven: ${event.messageId} \\(notifier\\): already re-driven at `),
    );

    expect(await listed()).toEqual([]);
    expect(await listed('--include-redriven')).toEqual([
      expect.objectContaining({ messageId: event.messageId, redrivenAt: expect.any(String) }),
    ]);
    // One webhook, after the one re-drive that could be recorded. The sentinel, the order's
    // OrderCancelled, comes after every copy on the order's partition, and one order's webhooks go out
    // in order: once it is delivered, a second OrderPlaced webhook would have been too.
    const sentinelId = randomUUID();
    await producer.send({
      topic: Topics.orderEvents,
      acks: -1,
      messages: [
        {
          key: event.orderId,
          value: JSON.stringify({ orderId: event.orderId, tenantId, reason: 'sentinel', cancelledAt: new Date().toISOString() }),
          headers: {
            [Headers.messageId]: sentinelId,
            [Headers.eventType]: OrderEventTypes.cancelled,
            [Headers.eventVersion]: '1',
            [Headers.tenantId]: tenantId,
            [Headers.aggregateId]: event.orderId,
          },
        },
      ],
    });
    await eventually(
      () => receiver.requests.filter((r) => r.idempotencyKey === sentinelId && r.status === 200),
      (delivered) => delivered.length > 0,
      { what: "the sentinel OrderCancelled's webhook" },
    );
    expect(requests().map((r) => [r.headers['webhook-id'], r.status])).toEqual([[event.messageId, 200]]);
    expect(await db.delivery(event.messageId)).toHaveLength(1);
  });

  it('refuses what cannot be re-driven safely: no message-id, older than another consumer remembers, an unknown id', async () => {
    // A message without a message-id: dead-lettered under an id made from its coordinates.
    const anonymous = orderPlaced();
    const at = await produce(producer, anonymous, { [Headers.eventType]: OrderEventTypes.placed, [Headers.tenantId]: tenantId });
    const [coordinates] = await db.until(
      async () =>
        (
          await db.pool.query('SELECT message_id, kafka_partition, kafka_offset FROM dead_letters WHERE message_key = $1', [
            anonymous.orderId,
          ])
        ).rows,
      (rows) => rows.length === 1,
    );
    expect([coordinates.kafka_partition, coordinates.kafka_offset]).toEqual([at.partition, at.offset]);
    mine.add(coordinates.message_id);
    // First seen 30 days ago (its occurred-at) and dead-lettered only yesterday, after a long run of retries or
    // a re-drive, while another consumer remembers message-ids for 14 days only: that consumer saw it a month ago.
    await db.pool.query('INSERT INTO inbox_consumers (consumer, retention_seconds) VALUES ($1, $2)', [guardConsumer, 14 * 24 * 3600]);
    const longAgo = new Date(Date.now() - 30 * 24 * 3600 * 1000);
    const yesterday = new Date(Date.now() - 24 * 3600 * 1000);
    await db.pool.query(
      `INSERT INTO dead_letters (consumer, message_id, topic, kafka_partition, kafka_offset, message_key, event_type, headers, payload, error, attempts, dead_lettered_at)
       VALUES ('notifier', $1, $2, 0, 0, $3, 'OrderPlaced', $4, '{}', 'webhook answered 400; not retried', 1, $5)`,
      [
        forgottenId,
        Topics.orderEvents,
        randomUUID(),
        { [Headers.messageId]: forgottenId, [Headers.occurredAt]: longAgo.toISOString() },
        yesterday,
      ],
    );

    const [noId, tooOld, unknown, all] = await Promise.all([
      ops(['dlq:redrive', coordinates.message_id]),
      ops(['dlq:redrive', forgottenId]),
      ops(['dlq:redrive', event.messageId, '00000000-0000-4000-8000-000000000000', '--consumer', 'notifier']),
      ops(['dlq:redrive', '--all', '--consumer', 'notifier', '--dry-run', '--json']),
    ]);
    expect([noId.status, tooOld.status, unknown.status]).toEqual([1, 1, 1]);
    expect(oneLine(noId)).toMatch(/without a usable message-id/);
    // Other suites' consumers (fulfillment) may be registered in the shared test database too.
    expect(oneLine(tooOld)).toMatch(new RegExp(`beyond the inbox retention of (.+, )?${guardConsumer} \\(14d\\)`));
    expect(oneLine(unknown)).toBe('ops: no dead letter 00000000-0000-4000-8000-000000000000 of consumer notifier (see dlq:list)');

    const plan = json(all);
    expect(plan.skipped).toEqual(
      expect.arrayContaining([
        { consumer: 'notifier', messageId: coordinates.message_id, reason: expect.stringMatching(/without a usable message-id/) },
        { consumer: 'notifier', messageId: forgottenId, reason: expect.stringMatching(/beyond the inbox retention/) },
      ]),
    );
    expect(plan.selected.map((s: { messageId: string }) => s.messageId)).not.toContain(event.messageId);
    expect((await listed()).find((row) => row.messageId === coordinates.message_id)).toMatchObject({
      hasMessageId: false,
      redrivenAt: null,
    });
    expect((await deadLetter(forgottenId))[0].redriven_at).toBeNull();
  });

  /**
   * Two operators (or a script run twice) re-driving one dead letter at once: each read it as re-drivable,
   * and the re-drive locks it before it publishes. Only the first publishes; the others, let in after
   * its commit, find it re-driven and say so. A session holding the dead letter lines them up at that lock.
   */
  it('re-drives run at once publish a dead letter once; the others say another run re-drove it', async () => {
    const racing = orderPlaced();
    mine.add(racing.messageId);
    await db.pool.query(
      `INSERT INTO dead_letters (consumer, message_id, topic, kafka_partition, kafka_offset, message_key, event_type, headers, payload, error, attempts)
       VALUES ('notifier', $1, $2, 0, 0, $3, 'OrderPlaced', $4, $5, 'webhook answered 400; not retried', 1)`,
      [racing.messageId, Topics.orderEvents, racing.orderId, relayHeaders(racing), JSON.stringify(racing.payload)],
    );
    const topic = new TopicReader(kafka, tenantId);
    await topic.start();
    const holder = new Client({ connectionString: testEnv.notifierUrl });
    await holder.connect();
    try {
      await holder.query('BEGIN');
      await holder.query(`SELECT 1 FROM dead_letters WHERE consumer = 'notifier' AND message_id = $1 FOR UPDATE`, [racing.messageId]);
      const runs = Promise.all([0, 1, 2].map(() => ops(['dlq:redrive', racing.messageId])));
      await eventually(
        async () =>
          (
            await db.pool.query(
              `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'ops' AND wait_event_type = 'Lock'`,
            )
          ).rows[0].n,
        (waiting) => waiting === 3,
        { timeoutMs: 60_000, what: 'three re-drives waiting on the dead letter' },
      );
      await holder.query('COMMIT');
      const done = await runs;
      expect(done.map((run) => run.status).sort()).toEqual([0, 1, 1]);
      for (const refused of done.filter((run) => run.status === 1)) {
        expect(oneLine(refused)).toMatch(
          new RegExp(`re-driving ${racing.messageId} \\(notifier\\) was re-driven meanwhile by another run`),
        );
      }
      // Every run has exited, so whatever it sent is on the topic.
      const copiesOf = (messages: ReadMessage[]) => messages.filter((m) => m.headers[Headers.messageId] === racing.messageId);
      await topic.until((messages) => copiesOf(messages).length >= 1);
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      expect(copiesOf(topic.messages)).toHaveLength(1);
    } finally {
      await holder.end();
      await topic.stop();
    }
  }, 120_000);
});
