import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import { Message, Producer } from 'kafkajs';
import { Headers, Topics } from '@app/contracts';
import { RunningApp } from './support/apps';
import { eventually } from './support/eventually';
import { FulfillmentDb } from './support/fulfillment-db';
import { orderPlaced, startFulfillmentCaughtUp } from './support/fulfillment-consumer';
import { ensureServiceTopics, orderEventMessage, servicePartitionOf, testKafka } from './support/kafka';
import { searchSettings, searchTimeout } from './support/search';

/**
 * Kafka lets a record header have no value (length -1: Java's `new RecordHeader("x", null)`), and
 * kafkajs reads one as `null`. A message carrying one, on any header, is handled like any other (a
 * header without a value reads as absent: no `message-id` is a malformed message, dead-lettered) and
 * the consumer goes on: the OrderPlaced behind it on its partition and one on another partition get
 * their shipments. It once crashed the consumer for good on every partition it held (kafkajs does not
 * restart after a TypeError) while the process stayed up and ready.
 */

const HEADERS = [
  'x-note',
  Headers.messageId,
  Headers.eventType,
  Headers.eventVersion,
  Headers.tenantId,
  Headers.aggregateId,
  Headers.occurredAt,
];
const BOUND_MS = 20_000;

/**
 * kafkajs encodes a null header value as length -1 (its encoder's `writeVarIntBytes`), but its size
 * computation calls `Buffer.byteLength(null)`, which throws: sized as 0 while this producer sends.
 */
async function sendWithNullHeaders(producer: Producer, messages: Message[]) {
  const byteLength = Buffer.byteLength;
  Buffer.byteLength = ((value: unknown, ...rest: unknown[]) =>
    value === null ? 0 : (byteLength as (...args: unknown[]) => number)(value, ...rest)) as typeof Buffer.byteLength;
  try {
    return await producer.send({ topic: Topics.orderEvents, acks: -1, messages });
  } finally {
    Buffer.byteLength = byteLength;
  }
}

describe('a header without a value never stops a consumer', () => {
  const kafka = testKafka('null-header-e2e');
  const db = new FulfillmentDb();
  const tenantId = `t-nullh-${randomUUID().slice(0, 8)}`;
  let producer: Producer;
  let app: RunningApp | undefined;

  beforeAll(async () => {
    await ensureServiceTopics(kafka);
    producer = kafka.producer({ idempotent: true });
    await producer.connect();
    app = await startFulfillmentCaughtUp(kafka, producer, db);
  }, 120_000);
  afterAll(async () => {
    await app?.stop();
    await producer?.disconnect();
    await db.close();
  });

  async function inboxAt(partition: number, offset: string) {
    const { rows } = await db.pool.query(
      `SELECT outcome FROM inbox_messages WHERE consumer = 'fulfillment' AND topic = $1 AND kafka_partition = $2 AND kafka_offset = $3`,
      [Topics.orderEvents, partition, offset],
    );
    return rows as { outcome: string }[];
  }

  it(
    'the message is recorded and the messages behind it are applied, on its partition and another',
    async () => {
      await fc.assert(
        fc.asyncProperty(fc.subarray(HEADERS, { minLength: 1 }), async (nulled) => {
          const event = orderPlaced(tenantId);
          const message = orderEventMessage(event);
          for (const name of nulled) message.headers![name] = null as unknown as string;
          const partition = servicePartitionOf(event.key);
          const behind = orderPlaced(tenantId);
          let elsewhere = orderPlaced(tenantId);
          while (servicePartitionOf(elsewhere.key) === partition) elsewhere = orderPlaced(tenantId);
          const metas = await sendWithNullHeaders(producer, [
            { partition, ...message },
            { partition, ...orderEventMessage(behind) },
            { partition: servicePartitionOf(elsewhere.key), ...orderEventMessage(elsewhere) },
          ]);

          const shipments = await eventually(
            () => db.shipments(tenantId),
            (rows) => [behind, elsewhere].every((e) => rows.some((row) => row.message_id === e.messageId)),
            { timeoutMs: BOUND_MS, what: `the shipments of the OrderPlaced events behind a null ${nulled.join(', ')}` },
          ).catch((error: Error) => {
            const crash = app!.output().match(/Crash: [^\n]{0,300}/)?.[0] ?? 'no crash logged';
            throw new Error(`${error.message}\nfulfillment: ${crash}`);
          });
          const [row] = await eventually(
            () => inboxAt(partition, metas.find((meta) => meta.partition === partition)!.baseOffset!),
            (rows) => rows.length === 1,
            { what: 'the message with null headers recorded' },
          );
          // Only what the consumer reads decides: without a message-id it is malformed; an extra header changes nothing.
          if (nulled.includes(Headers.messageId)) expect(row.outcome).toBe('dead-lettered');
          if (nulled.every((name) => name === 'x-note' || name === Headers.aggregateId || name === Headers.occurredAt)) {
            expect(row.outcome).toBe('applied');
            expect(shipments.some((s) => s.message_id === event.messageId)).toBe(true);
          }
        }),
        {
          ...searchSettings<[string[]]>({ fast: 8, long: 40 }),
          examples: [[['x-note']], [[Headers.messageId]]],
        },
      );
    },
    searchTimeout(240_000),
  );
});
