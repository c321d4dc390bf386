import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import { Consumer, IHeaders, Producer } from 'kafkajs';
import { Headers, OrderEventTypes, Topics } from '@app/contracts';
import { RunningApp } from './support/apps';
import { eventually } from './support/eventually';
import { FulfillmentDb } from './support/fulfillment-db';
import { orderPlaced, startFulfillmentCaughtUp } from './support/fulfillment-consumer';
import { ensureServiceTopics, orderEventMessage, servicePartitionOf, testKafka } from './support/kafka';
import { json, ops } from './support/ops-cli';
import { searchSettings, searchTimeout } from './support/search';

/**
 * PostgreSQL refuses a NUL in text (22021) and `\u0000` in jsonb (22P05). A message on a consumed topic
 * with a NUL in its value, key, a header name or value, its event-type or its message-id is still
 * given up on and recorded — dead-lettered, or skipped when its event-type is one the consumer does not
 * know — and its partition moves on: the valid OrderPlaced right behind it on the same partition gets
 * its shipment. `ops dlq:list` shows the dead letters, and `ops dlq:redrive` publishes each one again
 * byte for byte as it came (key, value, every header), plus its redrive-id.
 */

const PLACES = ['value', 'key', 'header value', 'header name', 'event-type', 'message-id'] as const;
type Place = (typeof PLACES)[number];

/** Where the NULs go, and where in each string. */
const poisons = fc.record({
  places: fc.subarray([...PLACES], { minLength: 1 }),
  at: fc.nat(),
  nuls: fc.integer({ min: 1, max: 3 }),
});

function withNul(text: string, at: number, nuls: number): string {
  const i = at % (text.length + 1);
  return `${text.slice(0, i)}${'\u0000'.repeat(nuls)}${text.slice(i)}`;
}

interface Poison {
  places: Place[];
  messageId: string;
  key: string;
  value: string;
  headers: Record<string, string>;
  partition: number;
  offset: string;
}

/** What the consumer must make of it: no usable message-id or an unreadable payload is dead-lettered; an unknown event-type is skipped. */
function expectedOutcome(places: Place[]): 'dead-lettered' | 'skipped' {
  return places.includes('message-id') || !places.includes('event-type') ? 'dead-lettered' : 'skipped';
}

/** The consumer's last warning (a retry, a dead letter it could not record), to say why a partition stalled. */
function lastWarning(output: string): string {
  const warnings = output.split('\n').filter((line) => /"level":40/.test(line));
  return warnings.at(-1)?.slice(0, 600) ?? 'none';
}

/** Each place alone first (the value as '{"a":1}\u0000'), then the search. */
const SEARCH = {
  ...searchSettings<[{ places: Place[]; at: number; nuls: number }]>({ fast: 8, long: 40 }),
  examples: PLACES.map((place): [{ places: Place[]; at: number; nuls: number }] => [
    { places: [place], at: place === 'value' ? 7 : 3, nuls: 1 },
  ]),
};
const BOUND_MS = 30_000;

describe('a NUL in a message never stalls its partition', () => {
  const kafka = testKafka('nul-poison-e2e');
  const db = new FulfillmentDb();
  const tenantId = `t-nul-${randomUUID().slice(0, 8)}`;
  const since = new Date(Date.now() - 1_000).toISOString();
  const poisoned: Poison[] = [];
  let producer: Producer;
  let app: RunningApp | undefined;
  let reader: Consumer | undefined;

  beforeAll(async () => {
    await ensureServiceTopics(kafka);
    producer = kafka.producer({ idempotent: true });
    await producer.connect();
    app = await startFulfillmentCaughtUp(kafka, producer, db);
  }, 120_000);
  afterAll(async () => {
    await reader?.disconnect();
    await app?.stop();
    await producer?.disconnect();
    await db.close();
  });

  /** The poison, then a valid OrderPlaced on the same partition: both with the relay's headers. */
  async function produce(shape: { places: Place[]; at: number; nuls: number }) {
    const has = (place: Place) => shape.places.includes(place);
    const nul = (text: string, place: Place) => (has(place) ? withNul(text, shape.at, shape.nuls) : text);
    const behind = orderPlaced(tenantId);
    const partition = servicePartitionOf(behind.key);
    const messageId = randomUUID();
    const key = nul(randomUUID(), 'key');
    const poison = {
      messageId,
      key,
      // Not an OrderPlaced (no orderId, ...): a malformed message, dead-lettered at once, when its type is read.
      value: nul('{"a":1}', 'value'),
      headers: {
        [Headers.messageId]: nul(messageId, 'message-id'),
        [Headers.eventType]: nul(OrderEventTypes.placed, 'event-type'),
        [Headers.eventVersion]: '1',
        [Headers.tenantId]: tenantId,
        [Headers.aggregateId]: key,
        [Headers.occurredAt]: new Date().toISOString(),
        [nul('x-note', 'header name')]: nul('set by a careless producer', 'header value'),
      },
    };
    const [meta] = await producer.send({
      topic: Topics.orderEvents,
      acks: -1,
      messages: [
        { partition, key: poison.key, value: poison.value, headers: poison.headers },
        { partition, ...orderEventMessage(behind) },
      ],
    });
    return { poison: { ...poison, places: shape.places, partition, offset: meta.baseOffset! }, behind };
  }

  /** What the consumer recorded of the message at these coordinates (a message-id it cannot use is replaced by one made of them). */
  async function recorded(poison: Poison) {
    const { rows } = await db.pool.query(
      `SELECT i.message_id, i.outcome, i.event_type, d.attempts, d.error
       FROM inbox_messages i LEFT JOIN dead_letters d ON d.consumer = i.consumer AND d.message_id = i.message_id
       WHERE i.consumer = 'fulfillment' AND i.topic = $1 AND i.kafka_partition = $2 AND i.kafka_offset = $3`,
      [Topics.orderEvents, poison.partition, poison.offset],
    );
    return rows as { message_id: string; outcome: string; event_type: string | null; attempts: number | null; error: string | null }[];
  }

  it(
    'the message behind it on its partition is applied within a bound, and the poison is recorded',
    async () => {
      await fc.assert(
        fc.asyncProperty(poisons, async (shape) => {
          const { poison, behind } = await produce(shape);
          const shipments = await eventually(
            () => db.shipments(tenantId),
            (rows) => rows.some((row) => row.message_id === behind.messageId),
            { timeoutMs: BOUND_MS, what: `the shipment of the OrderPlaced behind a NUL in ${shape.places.join(', ')}` },
          ).catch((error: Error) => {
            throw new Error(`${error.message}\nthe consumer's last warning: ${lastWarning(app!.output())}`);
          });
          expect(shipments.find((row) => row.message_id === behind.messageId)).toMatchObject({ order_id: behind.key, status: 'pending' });

          const [row] = await eventually(
            () => recorded(poison),
            (rows) => rows.length === 1,
            { what: 'the poison recorded' },
          );
          const outcome = expectedOutcome(poison.places);
          expect(row.outcome).toBe(outcome);
          if (outcome === 'dead-lettered') expect(row).toMatchObject({ attempts: 1, error: expect.any(String) });
          else expect(row.attempts).toBeNull();
          if (!poison.places.includes('message-id')) expect(row.message_id).toBe(poison.messageId);
          // Diagnostic text only: a NUL in the event-type is stored as U+FFFD.
          expect(row.event_type).toBe(poison.headers[Headers.eventType].replaceAll('\u0000', '\ufffd'));
          poisoned.push({ ...poison, messageId: row.message_id });
        }),
        SEARCH,
      );
    },
    searchTimeout(240_000),
  );

  it(
    'ops dlq:list shows every dead-lettered poison with its coordinates',
    async () => {
      const deadLettered = poisoned.filter((p) => expectedOutcome(p.places) === 'dead-lettered');
      expect(deadLettered.length).toBeGreaterThan(0);
      const listed = json(await ops(['dlq:list', '--consumer', 'fulfillment', '--since', since, '--limit', '1000', '--json'])) as {
        messageId: string;
        hasMessageId: boolean;
        partition: number;
        offset: string;
        eventType: string | null;
      }[];
      for (const poison of deadLettered) {
        expect(listed.find((row) => row.messageId === poison.messageId)).toMatchObject({
          hasMessageId: !poison.places.includes('message-id'),
          partition: poison.partition,
          offset: poison.offset,
          eventType: poison.headers[Headers.eventType].replaceAll('\u0000', '\ufffd'),
        });
      }
    },
    searchTimeout(60_000),
  );

  it('ops dlq:redrive publishes each one again byte for byte as it came, plus its redrive-id', async () => {
    const redrivable = poisoned.filter((p) => expectedOutcome(p.places) === 'dead-lettered' && !p.places.includes('message-id'));
    expect(redrivable.length).toBeGreaterThan(0);
    const seen: { key: Buffer | null; value: Buffer | null; headers: IHeaders }[] = [];
    reader = kafka.consumer({ groupId: `e2e-nul-reader-${randomUUID()}`, allowAutoTopicCreation: false });
    await reader.connect();
    await reader.subscribe({ topic: Topics.orderEvents, fromBeginning: false });
    await reader.run({
      eachMessage: async ({ message }) => {
        if (message.headers?.[Headers.redriveId]) seen.push({ key: message.key, value: message.value, headers: message.headers });
      },
    });
    await eventually(
      () => reader!.describeGroup(),
      (group) => group.state === 'Stable' && group.members.length === 1,
      { what: 'the reader joined its group' },
    );

    const run = json(await ops(['dlq:redrive', ...redrivable.map((p) => p.messageId), '--json'])) as {
      redriveId: string;
      selected: { messageId: string; redrivenAt: string | null }[];
    };
    expect(run.selected.filter((s) => s.redrivenAt)).toHaveLength(redrivable.length);

    const republished = await eventually(
      () => seen.filter((m) => m.headers[Headers.redriveId]!.toString() === run.redriveId),
      (messages) => messages.length === redrivable.length,
      { what: 'the re-driven messages on the topic' },
    );
    const bytes = (message: { key: Buffer | null; value: Buffer | null; headers: IHeaders }) => ({
      key: message.key?.toString('hex') ?? null,
      value: message.value?.toString('hex') ?? null,
      headers: Object.fromEntries(
        Object.entries(message.headers)
          .filter(([name]) => name !== Headers.redriveId)
          .map(([name, value]) => [Buffer.from(name).toString('hex'), Buffer.from(value as Buffer | string).toString('hex')])
          .sort(([a], [b]) => a.localeCompare(b)),
      ),
    });
    for (const poison of redrivable) {
      const original = bytes({ key: Buffer.from(poison.key), value: Buffer.from(poison.value), headers: poison.headers });
      const again = republished
        .map(bytes)
        .find(
          (m) =>
            m.headers[Buffer.from(Headers.messageId).toString('hex')] === original.headers[Buffer.from(Headers.messageId).toString('hex')],
        );
      expect(again).toEqual(original);
    }
  }, 120_000);
});
