import { randomUUID } from 'node:crypto';
import { Client } from 'pg';
import { fingerprint } from '@app/idempotency';
import { ApiClientSession, commandApiFixture } from './support/command-api';
import { startApp } from './support/apps';
import { OrdersDb } from './support/orders-db';
import { eventually } from './support/eventually';
import { HttpResult } from './support/http';
import { testEnv } from './support/test-env';

const RETENTION_SECONDS = 2;

/** Waits until the scope's receipt has expired, using its exact expiresAt (the HTTP header has whole seconds). */
async function waitForExpiry(client: ApiClientSession, key: string): Promise<void> {
  const receipt = await client.get(`/v1/idempotency-receipts/orders.create/${key}`);
  const wait = Date.parse(receipt.body.expiresAt) - Date.now();
  // The receipt expires on the database clock; a little slack covers the distance between the two clocks.
  await new Promise((resolve) => setTimeout(resolve, Math.max(0, wait) + 200));
}

describe('the retention window is the boundary of "the same action"', () => {
  const suite = commandApiFixture({
    IDEMPOTENCY_RETENTION_SECONDS: String(RETENTION_SECONDS),
    RECEIPT_SWEEP_INTERVAL_SECONDS: '0',
  });
  const { db } = suite;

  it('replays before expiry; at or after it the same key creates a new order and replaces the receipt', async () => {
    const { tenantId, apiKey } = await db.tenant();
    const client = new ApiClientSession(suite.api.url, apiKey);
    const body = { sku: 'SKU-1', quantity: 2 };

    const first = await client.createOrder('intent-a', body);
    expect(first.status).toBe(201);
    const expiresAt = Date.parse(first.headers['idempotency-expires'] as string);
    expect(Math.abs(expiresAt - Date.parse(first.body.createdAt) - RETENTION_SECONDS * 1000)).toBeLessThan(1000);

    const beforeExpiry = await client.createOrder('intent-a', body);
    expect(beforeExpiry.headers['idempotent-replayed']).toBe('true');
    expect(beforeExpiry.body.id).toBe(first.body.id);

    await waitForExpiry(client, 'intent-a');
    const receipt = await client.get('/v1/idempotency-receipts/orders.create/intent-a');
    expect(receipt.body.status).toBe('expired');

    const afterExpiry = await client.createOrder('intent-a', body);
    expect(afterExpiry.status).toBe(201);
    expect(afterExpiry.headers['idempotent-replayed']).toBeUndefined();
    expect(afterExpiry.body.id).not.toBe(first.body.id);
    expect(await db.counts(tenantId)).toEqual({ orders: 2, receipts: 1, outbox: 2 });
  });

  it('after expiry a changed request is a new request, not a conflict; racing re-executions still make one', async () => {
    const { tenantId, apiKey } = await db.tenant();
    const client = new ApiClientSession(suite.api.url, apiKey);
    expect((await client.createOrder('intent-b', { sku: 'SKU-1', quantity: 2 })).status).toBe(201);
    expect((await client.createOrder('intent-b', { sku: 'SKU-1', quantity: 3 })).status).toBe(422);

    await waitForExpiry(client, 'intent-b');
    const racing = await Promise.all(Array.from({ length: 8 }, () => client.createOrder('intent-b', { sku: 'SKU-1', quantity: 3 })));
    expect(racing.map((r) => r.status)).toEqual(Array(8).fill(201));
    expect(racing.filter((r) => r.headers['idempotent-replayed'] === undefined)).toHaveLength(1);
    expect(new Set(racing.map((r) => r.body.id)).size).toBe(1);
    expect(racing[0].body.quantity).toBe(3);
    expect(await db.counts(tenantId)).toEqual({ orders: 2, receipts: 1, outbox: 2 });
  });

  /**
   * The race the conditional replacement of an expired receipt is there for: several re-executions read
   * the expired receipt, then all try to replace it. A session holding the receipt FOR SHARE lines them up
   * at that UPDATE (as a burst of them does now and then by itself); the first to get the row replaces
   * it, and each one after it, seeing a receipt that no longer expired, must replay that execution.
   */
  it('re-executions after expiry that all reached the replacement make one order', async () => {
    const { tenantId, apiKey } = await db.tenant();
    const client = new ApiClientSession(suite.api.url, apiKey);
    expect((await client.createOrder('intent-c', { sku: 'SKU-1', quantity: 1 })).status).toBe(201);
    await waitForExpiry(client, 'intent-c');

    const holder = new Client({ connectionString: testEnv.ordersUrl });
    await holder.connect();
    let racing: HttpResult[];
    try {
      await holder.query('BEGIN');
      await holder.query(
        `SELECT 1 FROM idempotency_receipts WHERE tenant_id = $1 AND operation = 'orders.create' AND idempotency_key = 'intent-c' FOR SHARE`,
        [tenantId],
      );
      const sent = Promise.all(Array.from({ length: 6 }, () => client.createOrder('intent-c', { sku: 'SKU-1', quantity: 1 })));
      // Every one of them has read the expired receipt and waits at its replacement.
      // (Looked at from another session: the holder's transaction would see one snapshot of the activity.)
      await eventually(
        async () =>
          (
            await db.pool.query(
              `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%UPDATE idempotency_receipts%'`,
            )
          ).rows[0].n,
        (waiting) => waiting >= 6,
        { what: 'six re-executions waiting at the replacement' },
      );
      await holder.query('COMMIT');
      racing = await sent;
    } finally {
      await holder.end();
    }
    expect(racing.map((r) => r.status)).toEqual(Array(6).fill(201));
    expect(racing.filter((r) => r.headers['idempotent-replayed'] === undefined)).toHaveLength(1);
    expect(new Set(racing.map((r) => r.body.id)).size).toBe(1);
    expect(await db.counts(tenantId)).toEqual({ orders: 2, receipts: 1, outbox: 2 });
  });

  /**
   * The sweep compacts a receipt once it expired on the sweep's clock (its response goes; status, effect
   * and times stay), and a claim whose transaction began a moment earlier still sees it before its
   * expiry. A compacted receipt has no response left to replay: until it expires on the claim's clock
   * too the key is busy (409, retry), and then a new action.
   */
  it("a receipt the sweep compacted is never replayed, even before its expiry on the claim's clock", async () => {
    const { tenantId, apiKey } = await db.tenant();
    const client = new ApiClientSession(suite.api.url, apiKey);
    const earlier = randomUUID();
    await db.pool.query(
      `INSERT INTO idempotency_receipts (tenant_id, operation, idempotency_key, fingerprint, fingerprint_version, region, response_status,
                                         effect_type, effect_id, created_at, completed_at, expires_at, compacted_at)
       VALUES ($1, 'orders.create', 'intent-compacted', $2, 1, 'local', 201, 'order', $3, now() - interval '1 hour', now() - interval '1 hour',
               now() + interval '1.5 seconds', now())`,
      [tenantId, fingerprint({ sku: 'SKU-1', quantity: 1, customerRef: null }).value, earlier],
    );
    const busy = await client.createOrder('intent-compacted', { sku: 'SKU-1', quantity: 1 });
    expect({ status: busy.status, code: busy.body.code, retryAfter: busy.headers['retry-after'] }).toEqual({
      status: 409,
      code: 'IDEMPOTENCY.IN_PROGRESS',
      retryAfter: '1',
    });
    await waitForExpiry(client, 'intent-compacted');
    const again = await client.createOrder('intent-compacted', { sku: 'SKU-1', quantity: 1 });
    expect({ status: again.status, replayed: again.headers['idempotent-replayed'] }).toEqual({ status: 201, replayed: undefined });
    expect(again.body.id).not.toBe(earlier);
    expect(await db.counts(tenantId)).toEqual({ orders: 1, receipts: 1, outbox: 1 });
  });

  it('the business rule outlives the receipt: customerRef stays unique after the receipt expired', async () => {
    const { apiKey } = await db.tenant();
    const client = new ApiClientSession(suite.api.url, apiKey);
    const first = await client.createOrder('ref-1', { sku: 'SKU-1', quantity: 1, customerRef: 'po-77' });
    await waitForExpiry(client, 'ref-1');

    const again = await client.createOrder('ref-1', { sku: 'SKU-1', quantity: 1, customerRef: 'po-77' });
    expect(again.status).toBe(409);
    expect(again.body).toMatchObject({ type: '/problems/customer-ref-already-used', orderId: first.body.id });
  });
});

describe('the receipt sweeper', () => {
  const db = new OrdersDb();
  afterAll(() => db.close());

  it('deletes expired receipts in the background without touching live ones or the orders', async () => {
    const api = await startApp('command-api', {
      IDEMPOTENCY_RETENTION_SECONDS_ORDERS_CREATE: '1',
      IDEMPOTENCY_RETENTION_SECONDS_ORDERS_CANCEL: '3600',
      RECEIPT_SWEEP_INTERVAL_SECONDS: '1',
      RECEIPT_SWEEP_BATCH_SIZE: '2',
    });
    try {
      const { tenantId, apiKey } = await db.tenant();
      const client = new ApiClientSession(api.url, apiKey);
      const orders = await Promise.all([1, 2, 3, 4, 5].map((n) => client.createOrder(`k${n}`, { sku: 'S', quantity: n })));
      await client.cancelOrder(orders[0].body.id, 'cancel-1', { reason: 'test' });
      expect(await db.counts(tenantId)).toMatchObject({ orders: 5, receipts: 6 });

      await eventually(
        () => db.counts(tenantId),
        (counts) => counts.receipts <= 1,
        {
          timeoutMs: 10_000,
          intervalMs: 200,
          what: 'the sweeper deleting the expired receipts',
        },
      );
      expect(await db.counts(tenantId)).toEqual({ orders: 5, receipts: 1, outbox: 6 });
      const { rows } = await db.pool.query('SELECT operation FROM idempotency_receipts WHERE tenant_id = $1', [tenantId]);
      expect(rows).toEqual([{ operation: 'orders.cancel' }]);
    } finally {
      await api.stop();
    }
  });
});
