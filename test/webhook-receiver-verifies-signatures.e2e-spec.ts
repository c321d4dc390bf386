import { spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import { WebhookHeaders } from '@app/contracts';
import { entryArgs, RunningApp, startApp } from './support/apps';
import { HttpResult } from './support/http';
import { searchSettings } from './support/search';
import { Delivery, newSecret, orderPlacedDelivery, postWebhook, ReceiverDb, signedHeaders } from './support/signed-webhooks';

/**
 * The reference receiver (apps/webhook-receiver) takes a delivery only when it is signed with one of
 * its secrets over exactly the bytes received, and signed within 5 minutes of its clock; it stores
 * each webhook-id once and acknowledges a duplicate with 204 so the sender stops. Everything else is
 * a 4xx problem that stores nothing. The receiver runs as its own process on real PostgreSQL
 * (webhook_receiver_test), configured with two secrets as during a rotation.
 *
 * The search: 40 mutated deliveries in `npm test`, 600 in `npm run test:faults`.
 * Reproduce a failure with the seed and path fast-check prints: FC_SEED=… FC_PATH=… npx jest test/webhook-receiver-verifies
 */

const PROBLEM_JSON = /^application\/problem\+json/;
const TOLERANCE_SECONDS = 5 * 60;

describe('the webhook receiver verifies signatures', () => {
  const previous = newSecret();
  const current = newSecret();
  let receiver: RunningApp;
  const db = new ReceiverDb();

  beforeAll(async () => {
    receiver = await startApp('webhook-receiver', { WEBHOOK_RECEIVER_SECRETS: `${previous}, ${current}` });
  });

  afterAll(async () => {
    await receiver?.stop();
    await db.close();
  });

  const post = (headers: Record<string, string>, body: string | Buffer) => postWebhook(receiver.url, headers, body);

  function expectProblem(result: HttpResult, status: number) {
    expect({ status: result.status, contentType: result.headers['content-type'] }).toEqual({
      status,
      contentType: expect.stringMatching(PROBLEM_JSON),
    });
  }

  function secondsFromNow(seconds: number): Date {
    return new Date(Date.now() + seconds * 1000);
  }

  it('stores a valid delivery once and answers 204', async () => {
    const delivery = orderPlacedDelivery();
    const result = await post(signedHeaders(delivery, [current]), delivery.body);
    expect(result.status).toBe(204);
    expect(result.headers['idempotent-replayed']).toBeUndefined();
    const rows = await db.rowsForOrder(delivery.orderId);
    expect(rows).toEqual([
      {
        webhook_id: delivery.id,
        event_type: 'order.placed',
        tenant_id: delivery.tenantId,
        payload: JSON.parse(delivery.body),
        signed_at: new Date(Math.floor(delivery.at.getTime() / 1000) * 1000),
      },
    ]);
  });

  it('acknowledges the same delivery again (same or fresh signature) with 204 and stores nothing more', async () => {
    const delivery = orderPlacedDelivery();
    const first = signedHeaders(delivery, [current]);
    expect((await post(first, delivery.body)).status).toBe(204);

    const same = await post(first, delivery.body);
    const retried = await post(signedHeaders({ ...delivery, at: secondsFromNow(1) }, [current]), delivery.body);
    for (const result of [same, retried]) {
      expect(result.status).toBe(204);
      expect(result.headers['idempotent-replayed']).toBe('true');
    }
    expect(await db.rowsForOrder(delivery.orderId)).toHaveLength(1);
  });

  // The webhook-id is the event's identity: a second body under it, however validly signed, is not a
  // correction to apply but the same event again (Standard Webhooks). The first one stands.
  it('acknowledges another body under a webhook-id it already stored as that delivery again, and keeps the first', async () => {
    const delivery = orderPlacedDelivery();
    expect((await post(signedHeaders(delivery, [current]), delivery.body)).status).toBe(204);
    const changed = JSON.stringify({ ...JSON.parse(delivery.body), data: { ...JSON.parse(delivery.body).data, quantity: 99 } });
    const again = await post(signedHeaders({ ...delivery, body: changed }, [current]), changed);
    expect({ status: again.status, replayed: again.headers['idempotent-replayed'] }).toEqual({ status: 204, replayed: 'true' });
    expect((await db.rowsForOrder(delivery.orderId)).map((row) => row.payload)).toEqual([JSON.parse(delivery.body)]);
  });

  it('stores one row when the same delivery arrives many times at once', async () => {
    const delivery = orderPlacedDelivery();
    const results = await Promise.all(Array.from({ length: 8 }, () => post(signedHeaders(delivery, [current]), delivery.body)));
    expect(results.map((r) => r.status)).toEqual(Array(8).fill(204));
    expect(results.filter((r) => r.headers['idempotent-replayed'] === undefined)).toHaveLength(1);
    expect(await db.rowsForOrder(delivery.orderId)).toHaveLength(1);
  });

  describe('refuses with 401 and stores nothing', () => {
    const cases: [string, () => { headers: Record<string, string>; body: string | Buffer; orderId: string }][] = [
      [
        'a signature made with another secret (forged)',
        () => {
          const d = orderPlacedDelivery();
          return { headers: signedHeaders(d, [newSecret()]), body: d.body, orderId: d.orderId };
        },
      ],
      [
        'a body changed after signing',
        () => {
          const d = orderPlacedDelivery();
          return { headers: signedHeaders(d, [current]), body: d.body.replace('"quantity":3', '"quantity":300'), orderId: d.orderId };
        },
      ],
      [
        'a delivery signed 6 minutes ago (stale, or replayed)',
        () => {
          const d = orderPlacedDelivery(secondsFromNow(-6 * 60));
          return { headers: signedHeaders(d, [current]), body: d.body, orderId: d.orderId };
        },
      ],
      [
        'a delivery signed 6 minutes in the future',
        () => {
          const d = orderPlacedDelivery(secondsFromNow(6 * 60));
          return { headers: signedHeaders(d, [current]), body: d.body, orderId: d.orderId };
        },
      ],
      [
        'a timestamp that is not plain unix seconds',
        () => {
          const d = orderPlacedDelivery();
          const headers = signedHeaders(d, [current]);
          return {
            headers: { ...headers, [WebhookHeaders.timestamp]: `${headers[WebhookHeaders.timestamp]}abc` },
            body: d.body,
            orderId: d.orderId,
          };
        },
      ],
      ...[WebhookHeaders.id, WebhookHeaders.timestamp, WebhookHeaders.signature].map(
        (header): [string, () => { headers: Record<string, string>; body: string; orderId: string }] => [
          `no ${header} header`,
          () => {
            const d = orderPlacedDelivery();
            const { [header]: _dropped, ...headers } = signedHeaders(d, [current]);
            return { headers, body: d.body, orderId: d.orderId };
          },
        ],
      ),
      [
        'no webhook headers at all',
        () => {
          const d = orderPlacedDelivery();
          return { headers: { 'content-type': 'application/json' }, body: d.body, orderId: d.orderId };
        },
      ],
    ];

    it.each(cases)('%s', async (_name, request) => {
      const before = await db.total();
      const { headers, body, orderId } = request();
      const result = await post(headers, body);
      expectProblem(result, 401);
      expect(result.body).toMatchObject({ type: '/problems/webhook-unverified', code: 'WEBHOOK.UNVERIFIED' });
      expect(await db.rowsForOrder(orderId)).toEqual([]);
      expect(await db.total()).toBe(before);
    });
  });

  describe('accepts either secret during a rotation', () => {
    it.each([
      ['only the previous secret', () => [previous]],
      ['only the current secret', () => [current]],
      ['both secrets', () => [previous, current]],
    ])('a delivery signed with %s', async (_name, secrets) => {
      const delivery = orderPlacedDelivery();
      expect((await post(signedHeaders(delivery, secrets()), delivery.body)).status).toBe(204);
      expect(await db.rowsForOrder(delivery.orderId)).toHaveLength(1);
    });

    it('a header carrying a bad signature and a good one', async () => {
      const delivery = orderPlacedDelivery();
      const bad = signedHeaders(delivery, [newSecret()])[WebhookHeaders.signature];
      const good = signedHeaders(delivery, [current])[WebhookHeaders.signature];
      const headers = { ...signedHeaders(delivery, [current]), [WebhookHeaders.signature]: `${bad} ${good}` };
      expect((await post(headers, delivery.body)).status).toBe(204);
      expect(await db.rowsForOrder(delivery.orderId)).toHaveLength(1);
    });
  });

  describe('refuses a signed body it does not understand with 400 and stores nothing', () => {
    const placed = (data: Record<string, unknown>) => {
      const base = JSON.parse(orderPlacedDelivery().body);
      return JSON.stringify({ ...base, data: { ...base.data, ...data } });
    };
    it.each([
      ['not JSON', () => '{"type":"order.placed",'],
      ['an empty body', () => ''],
      ['no type', () => JSON.stringify({ ...JSON.parse(orderPlacedDelivery().body), type: undefined })],
      ['an array', () => '[]'],
      ['an order id that is not a UUID', () => placed({ orderId: 'order-1' })],
      ['a missing tenant', () => placed({ tenantId: undefined })],
      ['a NUL in the sku', () => placed({ sku: 'SKU\u0000' })],
      ['a lone surrogate in the customer reference', () => placed({ customerRef: 'ref-\ud800' })],
    ])('%s', async (_name, body) => {
      const before = await db.total();
      const text = body();
      const result = await post(signedHeaders({ id: randomUUID(), at: new Date(), body: text }, [current]), text);
      expectProblem(result, 400);
      expect(result.body).toMatchObject({ type: '/problems/webhook-invalid', code: 'WEBHOOK.INVALID' });
      expect(await db.total()).toBe(before);
    });
  });

  it('acknowledges a type it does not handle with 204 and stores nothing (the sender may add types)', async () => {
    const before = await db.total();
    const delivery = orderPlacedDelivery();
    const body = JSON.stringify({ ...JSON.parse(delivery.body), type: 'order.shipped' });
    const result = await post(signedHeaders({ ...delivery, body }, [current]), body);
    expect(result.status).toBe(204);
    expect(await db.total()).toBe(before);
  });

  it('refuses a body over 64 KiB with 413', async () => {
    const delivery = orderPlacedDelivery();
    const body = delivery.body.replace('"sku":"SKU-7"', `"sku":"${'x'.repeat(64 * 1024)}"`);
    const result = await post(signedHeaders({ ...delivery, body }, [current]), body);
    expectProblem(result, 413);
    expect(await db.rowsForOrder(delivery.orderId)).toEqual([]);
  });

  describe('a mutated delivery is refused, the original accepted', () => {
    type Mutation =
      | { kind: 'flip-body-bit'; index: number; bit: number }
      | { kind: 'other-id' }
      | { kind: 'shift-timestamp-header'; seconds: number }
      | { kind: 'signed-outside-tolerance'; seconds: number }
      | { kind: 'truncate-signature'; keep: number }
      | { kind: 'garble-signature'; index: number; shift: number }
      | { kind: 'other-secret' }
      | { kind: 'drop-header'; header: string }
      | { kind: 'signed-unexpected-body'; body: string };

    const beyondTolerance = fc.integer({ min: TOLERANCE_SECONDS + 10, max: 10 ** 9 });
    const mutations: fc.Arbitrary<Mutation> = fc.oneof(
      fc.record({ kind: fc.constant('flip-body-bit' as const), index: fc.nat(), bit: fc.integer({ min: 0, max: 7 }) }),
      fc.record({ kind: fc.constant('other-id' as const) }),
      fc.record({
        kind: fc.constant('shift-timestamp-header' as const),
        seconds: fc.integer({ min: -TOLERANCE_SECONDS + 10, max: TOLERANCE_SECONDS - 10 }).filter((s) => s !== 0),
      }),
      fc.record({
        kind: fc.constant('signed-outside-tolerance' as const),
        seconds: fc.oneof(
          beyondTolerance,
          beyondTolerance.map((s) => -s),
        ),
      }),
      fc.record({ kind: fc.constant('truncate-signature' as const), keep: fc.nat() }),
      fc.record({ kind: fc.constant('garble-signature' as const), index: fc.nat(), shift: fc.integer({ min: 1, max: 63 }) }),
      fc.record({ kind: fc.constant('other-secret' as const) }),
      fc.record({
        kind: fc.constant('drop-header' as const),
        header: fc.constantFrom(WebhookHeaders.id, WebhookHeaders.timestamp, WebhookHeaders.signature),
      }),
      fc.record({
        kind: fc.constant('signed-unexpected-body' as const),
        // Not a body with a string `type`: an unhandled type is acknowledged (204), as the test above shows.
        body: fc.oneof(fc.json(), fc.string(), fc.constant('')).filter((body) => !/"type"\s*:\s*"/.test(body)),
      }),
    );

    const BASE64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';

    /** The request `mutation` makes of a valid delivery, and the status it must get. */
    function mutate(delivery: Delivery, mutation: Mutation): { headers: Record<string, string>; body: string | Buffer; status: 400 | 401 } {
      const headers = signedHeaders(delivery, [current]);
      const signature = headers[WebhookHeaders.signature];
      switch (mutation.kind) {
        case 'flip-body-bit': {
          const bytes = Buffer.from(delivery.body);
          bytes[mutation.index % bytes.length] ^= 1 << mutation.bit;
          return { headers, body: bytes, status: 401 };
        }
        case 'other-id':
          return { headers: { ...headers, [WebhookHeaders.id]: randomUUID() }, body: delivery.body, status: 401 };
        case 'shift-timestamp-header': {
          const shifted = String(Number(headers[WebhookHeaders.timestamp]) + mutation.seconds);
          return { headers: { ...headers, [WebhookHeaders.timestamp]: shifted }, body: delivery.body, status: 401 };
        }
        case 'signed-outside-tolerance':
          return {
            headers: signedHeaders({ ...delivery, at: secondsFromNow(mutation.seconds) }, [current]),
            body: delivery.body,
            status: 401,
          };
        case 'truncate-signature':
          return {
            headers: { ...headers, [WebhookHeaders.signature]: signature.slice(0, mutation.keep % signature.length) },
            body: delivery.body,
            status: 401,
          };
        case 'garble-signature': {
          // Only the base64 part after "v1,": a different character at one position.
          const at = 3 + (mutation.index % (signature.length - 3));
          const replaced = signature[at] === '=' ? 'A' : BASE64[(BASE64.indexOf(signature[at]) + mutation.shift) % 64];
          const garbled = signature.slice(0, at) + replaced + signature.slice(at + 1);
          return { headers: { ...headers, [WebhookHeaders.signature]: garbled }, body: delivery.body, status: 401 };
        }
        case 'other-secret':
          return { headers: signedHeaders(delivery, [newSecret()]), body: delivery.body, status: 401 };
        case 'drop-header': {
          const { [mutation.header]: _dropped, ...rest } = headers;
          return { headers: rest, body: delivery.body, status: 401 };
        }
        case 'signed-unexpected-body':
          return { headers: signedHeaders({ ...delivery, body: mutation.body }, [current]), body: mutation.body, status: 400 };
      }
    }

    it('for every mutation: a 401 or 400 problem, nothing stored; then the original: 204, stored once', async () => {
      await fc.assert(
        fc.asyncProperty(mutations, async (mutation) => {
          const delivery = orderPlacedDelivery();
          const before = await db.total();

          const mutated = mutate(delivery, mutation);
          const refused = await post(mutated.headers, mutated.body);
          expectProblem(refused, mutated.status);
          expect(await db.total()).toBe(before);

          const accepted = await post(signedHeaders(delivery, [current]), delivery.body);
          expect(accepted.status).toBe(204);
          expect(await db.rowsForOrder(delivery.orderId)).toHaveLength(1);
          expect(await db.total()).toBe(before + 1);
        }),
        searchSettings({ fast: 40, long: 600 }),
      );
    });
  });
});

describe('the webhook receiver refuses to boot in production without its own secrets', () => {
  function boot(env: Record<string, string>) {
    const { WEBHOOK_RECEIVER_SECRETS: _unset, ...inherited } = process.env;
    return spawnSync(process.execPath, entryArgs('apps/webhook-receiver/src/main.ts'), {
      env: { ...inherited, ...env },
      encoding: 'utf8',
      timeout: 30_000,
    });
  }

  it.each([
    ['no secrets', {}, 'WEBHOOK_RECEIVER_SECRETS: is required in production'],
    [
      'the published development secret',
      { WEBHOOK_RECEIVER_SECRETS: 'whsec_ZGV2ZWxvcG1lbnQtb25seS13ZWJob29rLXNlY3JldCE=' },
      'must not include the development secret',
    ],
  ])('%s: exits 1 with one line naming the variable', (_name, env: Record<string, string>, message) => {
    const result = boot({ NODE_ENV: 'production', ...env });
    expect(result.status).toBe(1);
    expect(result.stderr.trim().split('\n')).toEqual([expect.stringContaining(message)]);
  });
});
