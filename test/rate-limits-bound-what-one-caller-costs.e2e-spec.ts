import { randomUUID } from 'node:crypto';
import { request } from 'node:http';
import { ApiClientSession } from './support/command-api';
import { RunningApp, startApp } from './support/apps';
import { OrdersDb } from './support/orders-db';
import { TcpProxy } from './support/tcp-proxy';
import { testEnv } from './support/test-env';

/** GET `url` with a bearer key from a given local address, so the API sees another source address. */
function statusFrom(localAddress: string, url: string, apiKey: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(url, { localAddress, headers: { Authorization: `Bearer ${apiKey}` } }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', reject);
    req.end();
  });
}

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const unknownKey = () => `ik_${randomUUID().replace(/-/g, '')}${'x'.repeat(11)}`;

/** Issue 13 (1): what one client, one address or one kind of request can make the service spend. */
describe('rate limits', () => {
  const db = new OrdersDb();
  const running: RunningApp[] = [];
  afterEach(async () => {
    await Promise.all(running.splice(0).map((app) => app.stop()));
  });
  afterAll(() => db.close());

  async function start(env: Record<string, string>, url = testEnv.ordersUrl): Promise<RunningApp> {
    const app = await startApp('command-api', { ORDERS_DATABASE_URL: url, ...env });
    running.push(app);
    return app;
  }

  it('a client over its budget gets 429 with Retry-After and the IETF RateLimit headers, changes nothing, and costs no other client anything', async () => {
    const api = await start({ RATE_LIMIT_CLIENT_REQUESTS: '5', RATE_LIMIT_WINDOW_SECONDS: '3' });
    const { tenantId, apiKey } = await db.tenant();
    const client = new ApiClientSession(api.url, apiKey);
    const other = new ApiClientSession(api.url, (await db.client(tenantId)).apiKey);

    const remaining: string[] = [];
    for (let i = 0; i < 5; i++) {
      const placed = await client.createOrder(`k-${i}`, { sku: 'A', quantity: 1 });
      expect(placed.status).toBe(201);
      expect(placed.headers['ratelimit-policy']).toBe('"client";q=5;w=3');
      remaining.push(String(placed.headers.ratelimit).replace(/;t=\d+$/, ''));
    }
    expect(remaining).toEqual([4, 3, 2, 1, 0].map((r) => `"client";r=${r}`));

    const refused = await client.createOrder('k-over', { sku: 'A', quantity: 1 });
    expect(refused.status).toBe(429);
    expect(refused.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(refused.body).toMatchObject({ type: '/problems/rate-limited', code: 'REQUEST.RATE_LIMITED', status: 429 });
    const retryAfter = Number(refused.headers['retry-after']);
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(3);
    expect(refused.headers.ratelimit).toBe(`"client";r=0;t=${retryAfter}`);
    expect(await db.counts(tenantId)).toEqual({ orders: 5, receipts: 5, outbox: 5 }); // nothing stored for k-over

    expect((await other.createOrder('other-1', { sku: 'A', quantity: 1 })).status).toBe(201);
    await pause(retryAfter * 1000 + 100);
    expect((await client.createOrder('k-over', { sku: 'A', quantity: 1 })).status).toBe(201);
  });

  it('an address sending made-up keys is refused before any lookup once over its budget; a key already known still works', async () => {
    const url = new URL(testEnv.ordersUrl);
    const proxy = await TcpProxy.start({ host: url.hostname, port: Number(url.port || 5432) });
    url.port = String(proxy.port);
    try {
      const api = await start({ RATE_LIMIT_UNAUTHENTICATED_REQUESTS: '3', RATE_LIMIT_WINDOW_SECONDS: '60' }, url.toString());
      const { apiKey } = await db.tenant();
      const known = new ApiClientSession(api.url, apiKey);
      expect((await known.get('/v1/orders/00000000-0000-4000-8000-000000000000')).status).toBe(404); // now in the key cache

      for (let i = 0; i < 3; i++) expect((await new ApiClientSession(api.url, unknownKey()).get('/v1/orders/x')).status).toBe(401);
      expect((await new ApiClientSession(api.url, unknownKey()).get('/v1/orders/x')).status).toBe(429);
      // The client whose key the API already holds is not one of the made-up keys: it needs no lookup.
      expect((await known.get('/v1/orders/00000000-0000-4000-8000-000000000000')).status).toBe(404);
      // With the database unreachable, a lookup would answer 503: 429 says no lookup was tried.
      await proxy.cut();
      const refused = await new ApiClientSession(api.url, unknownKey()).createOrder('k', { sku: 'A', quantity: 1 });
      expect(refused).toMatchObject({ status: 429, body: { code: 'REQUEST.RATE_LIMITED' } });
      expect(refused.headers['retry-after']).toMatch(/^\d+$/);
      const noKey = await new ApiClientSession(api.url, '').get('/v1/orders/x');
      expect(noKey.status).toBe(429);
      await proxy.restore();
      // The budget is the address's: another address (127.0.0.2 is loopback too) still gets its keys looked up.
      expect(await statusFrom('127.0.0.2', `${api.url}/v1/orders/x`, unknownKey())).toBe(401);
      expect(await statusFrom('127.0.0.1', `${api.url}/v1/orders/x`, unknownKey())).toBe(429);
    } finally {
      await proxy.cut();
    }
  });

  it('a cancel of an order that does not exist is remembered for a minute, not for the retention window', async () => {
    const api = await start({});
    const { tenantId, apiKey } = await db.tenant();
    const client = new ApiClientSession(api.url, apiKey);
    const missing = randomUUID();
    const answer = await client.cancelOrder(missing, 'cancel-missing', { reason: 'r' });
    expect(answer).toMatchObject({ status: 404, body: { code: 'ORDER.NOT_FOUND' } });
    const expires = Date.parse(String(answer.headers['idempotency-expires']));
    expect(expires - Date.now()).toBeLessThanOrEqual(61_000);
    const replay = await client.cancelOrder(missing, 'cancel-missing', { reason: 'r' });
    expect(replay).toMatchObject({ status: 404, headers: { 'idempotent-replayed': 'true' } });
    const { rows } = await db.pool.query(
      `SELECT extract(epoch FROM expires_at - created_at)::int AS seconds FROM idempotency_receipts WHERE tenant_id = $1`,
      [tenantId],
    );
    expect(rows).toEqual([{ seconds: 60 }]);
    // A command that did something keeps the operation's retention (24 h by default).
    const order = (await client.createOrder('place', { sku: 'A', quantity: 1 })).body;
    expect(
      Date.parse(String((await client.cancelOrder(order.id, 'cancel-real', { reason: 'r' })).headers['idempotency-expires'])) - Date.now(),
    ).toBeGreaterThan(23 * 3600_000);
  });
});
