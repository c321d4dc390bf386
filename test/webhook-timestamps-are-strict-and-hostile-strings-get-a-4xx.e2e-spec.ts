import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import { Producer } from 'kafkajs';
import { OrderEventTypes, OrderPlacedV1 } from '@app/contracts';
import { RunningApp, startApp } from './support/apps';
import { eventually } from './support/eventually';
import { HttpResult } from './support/http';
import { produceOrderEvent, readyForNotifiers, testKafka } from './support/kafka';
import { searchSettings, searchTimeout } from './support/search';
import { newSecret, orderPlacedDelivery, postWebhook, ReceiverDb, signedHeaders } from './support/signed-webhooks';

/**
 * Timestamps in a webhook body (`timestamp`, `data.placedAt`, `data.cancelledAt`) are RFC 3339 date-times
 * (the ISO 8601 profile, `2026-12-04T10:00:00.000Z`), not whatever Date.parse forgives: Date.parse takes
 * "2024-01-01\u0000", which then reached the receiver's jsonb insert and got a 500. A correctly signed
 * body with a NUL, another control character or any other hostile string in any string field is a 4xx
 * problem that stores nothing, never a 5xx. And the notifier never forwards an `occurred-at` header it
 * cannot vouch for: a webhook built from a message with a hostile one still reaches the receiver, with
 * the event's own time.
 */

const PROBLEM_JSON = /^application\/problem\+json/;

type Fields = Record<string, unknown> & { data: Record<string, unknown> };

function placedBody(): Fields {
  return JSON.parse(orderPlacedDelivery().body);
}

function cancelledBody(): Fields {
  const at = new Date().toISOString();
  return {
    type: 'order.cancelled',
    timestamp: at,
    data: { orderId: randomUUID(), tenantId: `t-${randomUUID()}`, reason: 'changed my mind', cancelledAt: at },
  };
}

/** `body` with `path` (`timestamp`, `data.sku`, …) set to `value`. */
function withField(body: Fields, path: string, value: unknown): Fields {
  const [head, tail] = path.split('.');
  return tail ? { ...body, data: { ...body.data, [tail]: value } } : { ...body, [head]: value };
}

const at = '2024-01-01T00:00:00.000Z';
const HOSTILE_TIMESTAMPS = [
  '2024-01-01\u0000',
  `${at}\u0000`,
  `\u0000${at}`,
  '2024-01-01\u0001',
  `${at}\n`,
  `${at}\u007f`,
  `${at}\u001b[31m`,
  `2024-01-01T00:00:00\u0000.000Z`,
  `${at}\ud800`,
  'Mon, 01 Jan 2024 00:00:00 GMT',
  '1',
  '2024-01-01',
  '2024-02-30T00:00:00Z',
  '2024-01-01T24:00:00Z',
  '2024-01-01T00:00:00', // no offset: whose local time?
  '',
];

/** Strings a careless or hostile sender might put anywhere: control characters, lone surrogates, anything. */
const hostileStrings = fc.oneof(
  fc.string({ unit: 'binary', maxLength: 40 }),
  fc.string({ unit: fc.constantFrom('\u0000', '\u0001', '\u001f', '\u007f', '\ud800', '\udc00', '\ufffe', 'a', '-', ':', 'T', 'Z', '0') }),
  fc.tuple(fc.nat(), fc.constantFrom('\u0000', '\u0008', '\r\n', '\ud800', '\udfff', '\u2028')).map(([i, bad]) => {
    const valid = new Date().toISOString();
    const cut = i % (valid.length + 1);
    return `${valid.slice(0, cut)}${bad}${valid.slice(cut)}`;
  }),
);

describe('the webhook receiver holds every string field to its rule: a 4xx, never a 5xx', () => {
  const secret = newSecret();
  const db = new ReceiverDb();
  let receiver: RunningApp;

  beforeAll(async () => {
    receiver = await startApp('webhook-receiver', { WEBHOOK_RECEIVER_SECRETS: secret });
  });
  afterAll(async () => {
    await receiver?.stop();
    await db.close();
  });

  function post(body: Fields): Promise<HttpResult> {
    const text = JSON.stringify(body);
    return postWebhook(receiver.url, signedHeaders({ id: randomUUID(), at: new Date(), body: text }, [secret]), text);
  }

  const timestampFields: [string, () => Fields][] = [
    ['timestamp', placedBody],
    ['data.placedAt', placedBody],
    ['timestamp', cancelledBody],
    ['data.cancelledAt', cancelledBody],
  ];
  const cases = timestampFields.flatMap(([path, base]) =>
    HOSTILE_TIMESTAMPS.map((value): [string, string, string, () => Fields] => [path, String(base().type), JSON.stringify(value), base]),
  );

  it.each(cases)('%s of an %s webhook set to %s: 400 problem, nothing stored', async (path, _type, value, base) => {
    const before = await db.total();
    const result = await post(withField(base(), path, JSON.parse(value)));
    expect({ status: result.status, contentType: result.headers['content-type'] }).toEqual({
      status: 400,
      contentType: expect.stringMatching(PROBLEM_JSON),
    });
    expect(result.body).toMatchObject({ code: 'WEBHOOK.INVALID', detail: expect.stringContaining(path) });
    expect(await db.total()).toBe(before);
  });

  it.each([
    ['2024-01-01T00:00:00Z', placedBody],
    ['2024-01-01T01:30:00.123456+01:30', placedBody],
    ['2024-02-29T23:59:59.9-00:00', cancelledBody],
  ])('a timestamp of %s is one: 204, stored', async (value, base) => {
    const body = withField(base(), 'timestamp', value);
    expect((await post(body)).status).toBe(204);
    expect(await db.rowsForOrder(body.data.orderId as string)).toHaveLength(1);
  });

  it(
    'any string in any string field of a signed body: never a 5xx; a refusal is a problem that stores nothing',
    async () => {
      const bases = { 'order.placed': placedBody, 'order.cancelled': cancelledBody };
      const fields = fc.oneof(
        fc.record({
          type: fc.constant('order.placed' as const),
          path: fc.constantFrom('type', 'timestamp', 'data.orderId', 'data.tenantId', 'data.sku', 'data.customerRef', 'data.placedAt'),
        }),
        fc.record({
          type: fc.constant('order.cancelled' as const),
          path: fc.constantFrom('type', 'timestamp', 'data.orderId', 'data.tenantId', 'data.reason', 'data.cancelledAt'),
        }),
      );
      await fc.assert(
        fc.asyncProperty(fields, hostileStrings, async ({ type, path }, value) => {
          const before = await db.total();
          const body = withField(bases[type](), path, value);
          const result = await post(body);
          expect(result.status).toBeLessThan(500);
          if (result.status >= 400) {
            expect(result.headers['content-type']).toMatch(PROBLEM_JSON);
            expect(await db.total()).toBe(before);
          }
        }),
        searchSettings({ fast: 150, long: 2_000 }),
      );
    },
    searchTimeout(120_000),
  );

  // The id is the receiver's dedupe key, stored in a unique index (whose entries PostgreSQL caps at
  // about 2.7 kB): a signed id of any length must be a 4xx or a delivery, never a 5xx.
  it(
    'a signed webhook-id of any length: up to 256 characters stored once, longer refused with a problem that stores nothing',
    async () => {
      // Short ids repeat across runs (one character, one length): a repeat is the same delivery again.
      const ids = fc
        .tuple(fc.integer({ min: 1, max: 8_000 }), fc.constantFrom('a', 'Z', '9', '_', '-', '.', '~'))
        .map(([length, char]) => `${randomUUID()}${char.repeat(length)}`.slice(0, length));
      const stored = new Set<string>();
      await fc.assert(
        fc.asyncProperty(ids, async (id) => {
          const before = await db.total();
          const text = JSON.stringify(placedBody());
          const result = await postWebhook(receiver.url, signedHeaders({ id, at: new Date(), body: text }, [secret]), text);
          if (id.length <= 256) {
            const again = stored.has(id);
            stored.add(id);
            expect({ length: id.length, status: result.status, replayed: result.headers['idempotent-replayed'] }).toEqual({
              length: id.length,
              status: 204,
              replayed: again ? 'true' : undefined,
            });
            expect(await db.total()).toBe(again ? before : before + 1);
          } else {
            expect({ length: id.length, status: result.status, type: result.headers['content-type'] }).toEqual({
              length: id.length,
              status: 401,
              type: expect.stringMatching(PROBLEM_JSON),
            });
            expect(await db.total()).toBe(before);
          }
        }),
        {
          ...searchSettings({ fast: 30, long: 300 }),
          examples: [[randomUUID().padEnd(256, 'x')], [randomUUID().padEnd(257, 'x')], [randomUUID().padEnd(3_000, 'x')]],
        },
      );
    },
    searchTimeout(60_000),
  );
});

describe('the notifier sends only a timestamp it can vouch for', () => {
  const secret = newSecret();
  const kafka = testKafka('webhook-timestamps-e2e');
  const db = new ReceiverDb();
  let producer: Producer;
  let receiver: RunningApp;
  let notifier: RunningApp;

  beforeAll(async () => {
    producer = await readyForNotifiers(kafka);
    receiver = await startApp('webhook-receiver', { WEBHOOK_RECEIVER_SECRETS: secret });
    notifier = await startApp('notifier', {
      WEBHOOK_URL: `${receiver.url}/webhooks/orders`,
      WEBHOOK_SECRET: secret,
      WEBHOOK_TIMEOUT_MS: '5000',
      WEBHOOK_RETRY_SCHEDULE: '100ms,100ms,100ms',
      WEBHOOK_POLL_INTERVAL_MS: '50',
      KAFKA_SESSION_TIMEOUT_MS: '6000',
    });
  }, 120_000);
  afterAll(async () => {
    await notifier?.stop();
    await receiver?.stop();
    await producer?.disconnect();
    await db.close();
  });

  async function produce(occurredAt: string): Promise<OrderPlacedV1> {
    const tenantId = `t-occurred-${randomUUID().slice(0, 8)}`;
    const payload: OrderPlacedV1 = {
      orderId: randomUUID(),
      tenantId,
      sku: 'SKU-1',
      quantity: 1,
      customerRef: null,
      placedAt: '2026-12-04T10:00:00.000Z',
    };
    await produceOrderEvent(producer, { type: OrderEventTypes.placed, tenantId, key: payload.orderId, payload, occurredAt });
    return payload;
  }

  it.each([
    ['2026-12-04T09:00:00.000Z', '2026-12-04T09:00:00.000Z'],
    ['2026-12-04T11:00:00+02:00', '2026-12-04T09:00:00.000Z'],
    ['2026-12-04T09:00:00.000Z\u0000', 'placedAt'],
    ['2024-01-01\u0000', 'placedAt'],
    ['2026-12-04T09:00:00.000Z\n', 'placedAt'],
    ['Mon, 01 Jan 2024 00:00:00 GMT', 'placedAt'],
    ['yesterday', 'placedAt'],
    ['', 'placedAt'],
  ])('occurred-at %j: the receiver stores the webhook with timestamp %s', async (occurredAt, expected) => {
    const event = await produce(occurredAt);
    const [row] = await eventually(
      () => db.rowsForOrder(event.orderId),
      (rows) => rows.length === 1,
      { timeoutMs: 30_000, what: `the webhook of an OrderPlaced with occurred-at ${JSON.stringify(occurredAt)} at the receiver` },
    );
    expect(row.payload).toEqual({ type: 'order.placed', timestamp: expected === 'placedAt' ? event.placedAt : expected, data: event });
  });
});
