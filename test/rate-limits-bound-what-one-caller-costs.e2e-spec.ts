import { randomUUID } from 'node:crypto';
import { request } from 'node:http';
import { ApiClientSession } from './support/command-api';
import { RunningApp, startApp } from './support/apps';
import { OrdersDb } from './support/orders-db';
import { rawHttp } from './support/raw-http';
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

  it('behind a trusted proxy each caller has its own budget; an untrusted X-Forwarded-For buys none', async () => {
    /** A GET with a bearer key, as a proxy passes it on: the caller's address in X-Forwarded-For. */
    const from = async (api: RunningApp, caller: string, apiKey: string) =>
      (
        await fetch(`${api.url}/v1/orders/00000000-0000-4000-8000-000000000000`, {
          headers: { Authorization: `Bearer ${apiKey}`, 'X-Forwarded-For': caller },
        })
      ).status;
    const budget = { RATE_LIMIT_UNAUTHENTICATED_REQUESTS: '3', RATE_LIMIT_WINDOW_SECONDS: '60' };

    // The API behind a proxy on loopback (nginx, HAProxy, Envoy hashing the Idempotency-Key): one caller
    // sending made-up keys uses up its own budget, not everyone's.
    const proxied = await start({ ...budget, TRUSTED_PROXIES: 'loopback' });
    for (let i = 0; i < 3; i++) expect(await from(proxied, '198.51.100.7', unknownKey())).toBe(401);
    expect(await from(proxied, '198.51.100.7', unknownKey())).toBe(429);
    expect(await from(proxied, '198.51.100.8', unknownKey())).toBe(401);
    const { apiKey } = await db.tenant(); // a new client: its key is not in the API's memory yet
    expect(await from(proxied, '198.51.100.8', apiKey)).toBe(404);

    // Without TRUSTED_PROXIES the header is the caller's word: ignored, the TCP peer is the source.
    const direct = await start(budget);
    for (let i = 0; i < 3; i++) expect(await from(direct, `198.51.100.${10 + i}`, unknownKey())).toBe(401);
    expect(await from(direct, '198.51.100.20', unknownKey())).toBe(429);
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
  it('a request whose head or body arrives too slowly gets 408 within its bound, stores nothing and holds up no one', async () => {
    // Node's defaults would hold a half-sent head for 60 s and a half-sent body for 300 s, each on a connection
    // of its own: a few thousand slow clients would hold that many sockets for minutes.
    const api = await start({ HTTP_HEADERS_TIMEOUT_SECONDS: '1', HTTP_REQUEST_TIMEOUT_SECONDS: '2' });
    const { tenantId, apiKey } = await db.tenant();
    const client = new ApiClientSession(api.url, apiKey);
    const slowKey = `slow-${randomUUID()}`;
    const head = (key: string, length: number) =>
      `POST /v1/orders HTTP/1.1\r\nHost: api\r\nAuthorization: Bearer ${apiKey}\r\nIdempotency-Key: ${key}\r\n` +
      `Content-Type: application/json\r\nContent-Length: ${length}\r\n\r\n`;
    const body = JSON.stringify({ sku: 'A', quantity: 1 });

    const stalledHead = rawHttp(api.url, ['GET /v1/orders/x HTTP/1.1\r\nHost: api\r\n']);
    const stalledBody = rawHttp(api.url, [head(slowKey, body.length) + body.slice(0, 10)]);
    // Meanwhile a client that sends its request whole is served at once, and one that sends it in pieces
    // well within the bound is served too: the bound is on the request's arrival, not on each pause.
    const meanwhile = await client.createOrder(`meanwhile-${randomUUID()}`, { sku: 'A', quantity: 1 });
    expect(meanwhile.status).toBe(201);
    const pieces = head(`pieces-${randomUUID()}`, body.length) + body;
    const inPieces = await rawHttp(api.url, [pieces.slice(0, 40), pieces.slice(40, 200), pieces.slice(200)], { gapMs: 250 });
    expect(inPieces.status).toBe(201);

    for (const [what, answer, bound] of [
      ['head', await stalledHead, 1_000],
      ['body', await stalledBody, 2_000],
    ] as const) {
      try {
        expect(answer.status).toBe(408);
        expect(JSON.parse(answer.body)).toMatchObject({ type: '/problems/request-timeout', status: 408 });
        // Not before the bound; after it, within Node's check of its connections (every second) and a margin.
        expect(answer.ms).toBeGreaterThanOrEqual(bound - 50);
        expect(answer.ms).toBeLessThan(bound + 3_000);
      } catch (error) {
        throw new Error(`the stalled ${what}: ${(error as Error).message}`);
      }
    }
    expect((await client.get(`/v1/idempotency-receipts/orders.create/${slowKey}`)).status).toBe(404);
    expect(await db.counts(tenantId)).toEqual({ orders: 2, receipts: 2, outbox: 2 });
  });
});
