import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import { Headers, OrderEventTypes } from '@app/contracts';
import { RunningApp, startApp } from './support/apps';
import { ApiClientSession, commandApiFixture } from './support/command-api';
import { ensureServiceTopics, testKafka } from './support/kafka';
import { json, ops } from './support/ops-cli';
import { ReadMessage, TopicReader } from './support/topic-reader';
import { eventually } from './support/eventually';
import { searchSettings, searchTimeout } from './support/search';

/**
 * How a client may spell one hex digit or hyphen of an order id in a path: as it is, in the other
 * case, or percent-encoded (the router decodes `%41` to `A` before the id pipe sees it).
 */
type Spelling = 'as-is' | 'other-case' | 'encoded' | 'encoded-other-case';
const spelling = fc.array(fc.constantFrom<Spelling>('as-is', 'other-case', 'encoded', 'encoded-other-case'), {
  minLength: 36,
  maxLength: 36,
});

function spell(id: string, marks: Spelling[]): string {
  return [...id]
    .map((char, i) => {
      const cased = marks[i].includes('other-case') ? (char === char.toLowerCase() ? char.toUpperCase() : char.toLowerCase()) : char;
      if (!marks[i].startsWith('encoded')) return cased;
      const hex = cased.charCodeAt(0).toString(16);
      return `%${i % 2 ? hex.toUpperCase() : hex}`;
    })
    .join('');
}

const upper = (marks: number) => Array.from<Spelling>({ length: 36 }).fill(marks ? 'other-case' : 'as-is');
const everyOther: Spelling[] = Array.from({ length: 36 }, (_, i) => (i % 2 ? 'other-case' : 'as-is'));

/** The search's settings (support/search.ts), with spellings every run tries first. */
const settings = (examples: [Spelling[], Spelling[]][]): fc.Parameters<[Spelling[], Spelling[]]> => ({
  ...searchSettings({ fast: 10, long: 80 }),
  examples,
});

/**
 * One order is one aggregate with one id, whatever spelling of it a client sent: the API answers
 * with the canonical (lower-case) id, stores and fingerprints that, and every event of the order
 * carries it as its Kafka key, so all of them land on one partition in the order they committed.
 */
describe('one order, one Kafka key, whatever spelling of its id the client used', () => {
  const suite = commandApiFixture();
  const kafka = testKafka('e2e-spelling');
  let relay: RunningApp;

  beforeAll(async () => {
    await ensureServiceTopics(kafka);
    relay = await startApp('outbox-relay', { RELAY_POLL_INTERVAL_MS: '200' });
  });
  afterAll(async () => {
    await relay?.stop();
  });

  const outboxRows = async (orderId: string) =>
    (
      await suite.db.pool.query(
        `SELECT id, message_key, event_type, payload, published_at FROM outbox_messages WHERE lower(message_key) = $1 ORDER BY sequence`,
        [orderId],
      )
    ).rows;

  it(
    'cancelled through any accepted spelling: the canonical id in every answer, and one key and one partition on Kafka',
    async () => {
      const { tenantId, apiKey } = await suite.db.tenant();
      const client = new ApiClientSession(suite.api.url, apiKey);
      const reader = new TopicReader(kafka, tenantId);
      await reader.start();
      const cancels: { id: string; key: string }[] = [];
      try {
        await fc.assert(
          fc.asyncProperty(spelling, spelling, async (cancelWith, readWith) => {
            const placed = await client.createOrder(`place-${randomUUID()}`, { sku: 'SKU-1', quantity: 1 });
            expect(placed.status).toBe(201);
            const id: string = placed.body.id;
            expect(placed.headers.location).toBe(`/v1/orders/${id}`);

            const key = `cancel-${randomUUID()}`;
            const cancelled = await client.cancelOrder(spell(id, cancelWith), key, { reason: 'spelling' });
            expect({ status: cancelled.status, id: cancelled.body.id }).toEqual({ status: 200, id });
            const read = await client.get(`/v1/orders/${spell(id, readWith)}`);
            expect({ status: read.status, id: read.body.id, state: read.body.status }).toEqual({ status: 200, id, state: 'cancelled' });
            cancels.push({ id, key });
          }),
          settings([
            [upper(1), upper(1)],
            [everyOther, upper(0)],
          ]),
        );

        const ofOrder = (messages: ReadMessage[], id: string) =>
          messages.filter((m) => m.headers[Headers.aggregateId]?.toLowerCase() === id || m.value?.orderId?.toLowerCase() === id);
        const read = await reader.until((messages) => cancels.every(({ id }) => ofOrder(messages, id).length >= 2), 90_000);
        for (const { id, key } of cancels) {
          const events = ofOrder(read, id);
          expect(events.map((m) => [m.headers[Headers.eventType], m.key, m.headers[Headers.aggregateId], m.value.orderId])).toEqual([
            [OrderEventTypes.placed, id, id, id],
            [OrderEventTypes.cancelled, id, id, id],
          ]);
          // One partition, so every consumer sees OrderCancelled behind OrderPlaced.
          expect(new Set(events.map((m) => m.partition)).size).toBe(1);
          expect(BigInt(events[0].offset) < BigInt(events[1].offset)).toBe(true);

          const rows = await outboxRows(id);
          expect(rows.map((row) => [row.event_type, row.message_key, row.payload.orderId])).toEqual([
            [OrderEventTypes.placed, id, id],
            [OrderEventTypes.cancelled, id, id],
          ]);
          const receipt = await client.get(`/v1/idempotency-receipts/orders.cancel/${key}`);
          expect(receipt.body.effect).toEqual({ type: 'order', id });
        }
      } finally {
        await reader.stop();
      }
    },
    searchTimeout(240_000),
  );

  it(
    'a cancel retried with its order id spelt another way is the same request: replayed, never 422',
    async () => {
      const { tenantId, apiKey } = await suite.db.tenant();
      const client = new ApiClientSession(suite.api.url, apiKey);
      await fc.assert(
        fc.asyncProperty(spelling, spelling, async (firstWith, retryWith) => {
          const id: string = (await client.createOrder(`place-${randomUUID()}`, { sku: 'SKU-1', quantity: 1 })).body.id;
          const key = `cancel-${randomUUID()}`;
          const first = await client.cancelOrder(spell(id, firstWith), key, { reason: 'retry' });
          expect(first.status).toBe(200);
          const retried = await client.cancelOrder(spell(id, retryWith), key, { reason: 'retry' });
          expect({ status: retried.status, replayed: retried.headers['idempotent-replayed'] }).toEqual({ status: 200, replayed: 'true' });
          expect(retried.text).toBe(first.text);
        }),
        settings([
          [upper(1), upper(0)],
          [everyOther, upper(1)],
        ]),
      );
      const { rows } = await suite.db.pool.query(
        `SELECT count(*)::int AS n FROM outbox_messages WHERE tenant_id = $1 AND event_type = $2`,
        [tenantId, OrderEventTypes.cancelled],
      );
      expect(rows[0].n).toBeGreaterThanOrEqual(2);
      expect(rows[0].n).toBe(
        (await suite.db.pool.query(`SELECT count(*)::int AS n FROM orders WHERE tenant_id = $1`, [tenantId])).rows[0].n,
      );
    },
    searchTimeout(120_000),
  );

  it('a cancel of an unknown order named in upper case answers with the canonical id, and a retry in lower case replays it', async () => {
    const { apiKey } = await suite.db.tenant();
    const client = new ApiClientSession(suite.api.url, apiKey);
    const unknown = randomUUID();
    const missing = await client.cancelOrder(unknown.toUpperCase(), 'cancel-unknown', { reason: 'none' });
    expect(missing.status).toBe(404);
    expect(missing.body.detail).toBe(`No order ${unknown}.`);
    const retried = await client.cancelOrder(unknown, 'cancel-unknown', { reason: 'none' });
    expect({ status: retried.status, replayed: retried.headers['idempotent-replayed'] }).toEqual({ status: 404, replayed: 'true' });
  });

  it('only the 8-4-4-4-12 hex form is an order id: braces, urn:uuid:, no hyphens, padding are 400 and store nothing', async () => {
    const { tenantId, apiKey } = await suite.db.tenant();
    const client = new ApiClientSession(suite.api.url, apiKey);
    const id: string = (await client.createOrder('place', { sku: 'SKU-1', quantity: 1 })).body.id;
    // PostgreSQL's uuid input would take several of these; the API does not, so no second spelling gets in.
    const refused = [`%7B${id}%7D`, `urn:uuid:${id}`, id.replace(/-/g, ''), `%20${id}`, `${id}%0A`, `${id.slice(0, 35)}g`, `${id}0`];
    for (const [i, text] of refused.entries()) {
      const answer = await client.cancelOrder(text, `cancel-${i}`, { reason: 'bad id' });
      expect({ text, status: answer.status, type: answer.body?.type }).toEqual({ text, status: 400, type: '/problems/invalid-request' });
      expect((await client.get(`/v1/orders/${text}`)).status).toBe(400);
    }
    expect(await suite.db.counts(tenantId)).toEqual({ orders: 1, receipts: 1, outbox: 1 });
  });

  it('outbox:replay --aggregate with the order id in upper case selects both events of the order', async () => {
    const { tenantId, apiKey } = await suite.db.tenant();
    const client = new ApiClientSession(suite.api.url, apiKey);
    const id: string = (await client.createOrder('place', { sku: 'SKU-1', quantity: 1 })).body.id;
    expect((await client.cancelOrder(id.toUpperCase(), 'cancel', { reason: 'replay' })).status).toBe(200);
    await eventually(
      () => outboxRows(id),
      (rows) => rows.filter((row) => row.published_at).length === 2,
      { timeoutMs: 60_000, intervalMs: 200, what: `the relay publishing both events of ${id}` },
    );

    const dryRun = json(
      await ops(['outbox:replay', '--from', '0', '--tenant', tenantId, '--aggregate', id.toUpperCase(), '--dry-run', '--force', '--json']),
    );
    // --force: a dry run publishes nothing, and the consumers' dedupe window is not what this test is about.
    expect(dryRun).toMatchObject({ dryRun: true, selected: 2, byTenant: { [tenantId]: 2 } });
  }, 120_000);
});
