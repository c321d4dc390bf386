import { Client } from 'pg';
import { fingerprint } from '@app/idempotency';
import { ApiClientSession, commandApiFixture } from './support/command-api';
import { startApp } from './support/apps';
import { logLine } from './support/observe';
import { OrdersDb } from './support/orders-db';
import { TcpProxy } from './support/tcp-proxy';
import { testEnv } from './support/test-env';

/** A second session on orders_test that holds locks the way a concurrent request would. */
async function session(): Promise<Client> {
  const client = new Client({ connectionString: testEnv.ordersUrl });
  await client.connect();
  return client;
}

describe('when the database cannot answer', () => {
  const db = new OrdersDb();
  afterAll(() => db.close());

  it('answers 503 with Retry-After, executes nothing, and the retry executes once', async () => {
    const url = new URL(testEnv.ordersUrl);
    const proxy = await TcpProxy.start({ host: url.hostname, port: Number(url.port || 5432) });
    url.port = String(proxy.port);
    const api = await startApp('command-api', { ORDERS_DATABASE_URL: url.toString() });
    try {
      const { tenantId, apiKey } = await db.tenant();
      const client = new ApiClientSession(api.url, apiKey);
      expect((await client.createOrder('before', { sku: 'A', quantity: 1 })).status).toBe(201);

      await proxy.cut();
      const during = await client.createOrder('during', { sku: 'A', quantity: 1 });
      expect(during.status).toBe(503);
      expect(during.headers['content-type']).toMatch(/^application\/problem\+json/);
      expect(during.headers['retry-after']).toBeDefined();
      expect(during.body.type).toBe('/problems/service-unavailable');
      // An outage is not "unknown key": authentication failing on the database is a 503 too, never a 401.
      expect((await new ApiClientSession(api.url, 'ik_' + 'x'.repeat(43)).createOrder('k', { sku: 'A', quantity: 1 })).status).toBe(503);
      expect((await client.get('/v1/idempotency-receipts/orders.create/before')).status).toBe(503);
      expect(await db.counts(tenantId)).toEqual({ orders: 1, receipts: 1, outbox: 1 });

      await proxy.restore();
      const retried = await client.createOrder('during', { sku: 'A', quantity: 1 });
      expect(retried.status).toBe(201);
      expect(retried.headers['idempotent-replayed']).toBeUndefined();
      expect(await db.counts(tenantId)).toEqual({ orders: 2, receipts: 2, outbox: 2 });
    } finally {
      await api.stop();
      await proxy.cut();
    }
  });
});

describe('when the same scope is held by a transaction still in flight', () => {
  const suite = commandApiFixture({ IDEMPOTENCY_LOCK_TIMEOUT_MS: '500' });
  const { db } = suite;

  it('a duplicate waits the bounded time, then gets 409 in-progress with Retry-After and changes nothing', async () => {
    const { tenantId, apiKey } = await db.tenant();
    const holder = await session();
    try {
      await holder.query('BEGIN');
      await holder.query(
        /* sql */ `INSERT INTO idempotency_receipts (tenant_id, operation, idempotency_key, fingerprint, fingerprint_version, region, expires_at)
                   VALUES ($1, 'orders.create', 'held', 'f', 1, 'local', now() + interval '1 hour')`,
        [tenantId],
      );
      const started = Date.now();
      const waiting = await new ApiClientSession(suite.api.url, apiKey).createOrder('held', { sku: 'A', quantity: 1 });
      expect(Date.now() - started).toBeGreaterThanOrEqual(450);
      expect(waiting.status).toBe(409);
      expect(waiting.headers['retry-after']).toBe('1');
      expect(waiting.body).toMatchObject({ type: '/problems/idempotency-request-in-progress', code: 'IDEMPOTENCY.IN_PROGRESS' });
    } finally {
      await holder.query('ROLLBACK');
      await holder.end();
    }
    expect(await db.counts(tenantId)).toEqual({ orders: 0, receipts: 0, outbox: 0 });
    // The holder rolled back: the scope was never used, so the retry executes.
    expect((await new ApiClientSession(suite.api.url, apiKey).createOrder('held', { sku: 'A', quantity: 1 })).status).toBe(201);
  });

  it('a duplicate that is waiting when the holder commits replays the committed response', async () => {
    const { tenantId, apiKey } = await db.tenant();
    const client = new ApiClientSession(suite.api.url, apiKey);
    const holder = await session();
    try {
      await holder.query('BEGIN');
      await holder.query(
        /* sql */ `INSERT INTO idempotency_receipts (tenant_id, operation, idempotency_key, fingerprint, fingerprint_version, region,
                     response_status, response_headers, response_body, expires_at)
                   VALUES ($1, 'orders.create', 'handed-over', $2, 1, 'local', 201, '{"Location":"/v1/orders/x"}', '{"held":true}',
                     now() + interval '1 hour')`,
        [tenantId, fingerprint({ sku: 'A', quantity: 1, customerRef: null }).value],
      );
      const waiting = client.createOrder('handed-over', { sku: 'A', quantity: 1 });
      await new Promise((resolve) => setTimeout(resolve, 150));
      await holder.query('COMMIT');
      const replay = await waiting;
      expect(replay.status).toBe(201);
      expect(replay.headers['idempotent-replayed']).toBe('true');
      expect(replay.body).toEqual({ held: true });
      expect(await db.counts(tenantId)).toEqual({ orders: 0, receipts: 1, outbox: 0 });
    } finally {
      await holder.end();
    }
  });

  // The outage above fails authentication first (the key cache stops trusting itself when its listener is cut):
  // here only the read's own statement cannot run, with the client authenticated from the cache.
  it('a read whose table is locked is a 503 to retry, never a 404: a receipt and an order', async () => {
    const { apiKey } = await db.tenant();
    const client = new ApiClientSession(suite.api.url, apiKey);
    const order = (await client.createOrder('read-me', { sku: 'A', quantity: 1 })).body;
    const holder = await session();
    try {
      await holder.query('BEGIN');
      await holder.query('LOCK TABLE idempotency_receipts, orders IN ACCESS EXCLUSIVE MODE');
      for (const path of ['/v1/idempotency-receipts/orders.create/read-me', `/v1/orders/${order.id}`]) {
        const blocked = await client.get(path);
        expect({ path, status: blocked.status, type: blocked.body?.type }).toEqual({
          path,
          status: 503,
          type: '/problems/service-unavailable',
        });
      }
    } finally {
      await holder.query('ROLLBACK');
      await holder.end();
    }
    expect((await client.get('/v1/idempotency-receipts/orders.create/read-me')).status).toBe(200);
    expect((await client.get(`/v1/orders/${order.id}`)).status).toBe(200);
  });

  it('a lock wait on the order itself is a 503 to retry, not an in-progress duplicate', async () => {
    const { tenantId, apiKey } = await db.tenant();
    const client = new ApiClientSession(suite.api.url, apiKey);
    const order = (await client.createOrder('place', { sku: 'A', quantity: 1 })).body;
    const holder = await session();
    try {
      await holder.query('BEGIN');
      await holder.query('SELECT 1 FROM orders WHERE id = $1 FOR UPDATE', [order.id]);
      const blocked = await client.cancelOrder(order.id, 'cancel-key-in-no-log', { reason: 'reason-in-no-log' });
      expect(blocked.status).toBe(503);
      expect(blocked.body.type).toBe('/problems/service-unavailable');
      // The 503 is logged with the database's diagnosis, never with the statement's values.
      const logged = await logLine(suite.api, (line) => line.level === 50 && line.requestId === blocked.headers['x-request-id']);
      expect(logged).toMatchObject({
        problem: '/problems/service-unavailable',
        err: { message: expect.stringMatching(/lock timeout/) },
        context: 'ProblemDetailsFilter',
        requestId: blocked.headers['x-request-id'],
      });
      expect(JSON.stringify(logged)).not.toMatch(new RegExp(`${tenantId}|cancel-key-in-no-log|reason-in-no-log|"parameters"`));
    } finally {
      await holder.query('ROLLBACK');
      await holder.end();
    }
    expect(await db.counts(tenantId)).toEqual({ orders: 1, receipts: 1, outbox: 1 });
    expect((await client.cancelOrder(order.id, 'cancel-key-in-no-log', { reason: 'reason-in-no-log' })).status).toBe(200);
  });
});
